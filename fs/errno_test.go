package fs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/store"
)

// White-box: errno is the one place an error of the layers below becomes
// the errno a caller sees (DESIGN invariant 7), however deep it is wrapped.
func TestErrno(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("inode 7: %w", err) }
	for _, c := range []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"no error is 0", nil, 0},
		{"not found is ENOENT", wrap(index.ErrNotFound), syscall.ENOENT},
		{"exists is EEXIST", wrap(index.ErrExists), syscall.EEXIST},
		{"a full directory is ENOTEMPTY", wrap(index.ErrNotEmpty), syscall.ENOTEMPTY},
		{"not a directory is ENOTDIR", wrap(index.ErrNotDir), syscall.ENOTDIR},
		{"a directory is EISDIR", wrap(index.ErrIsDir), syscall.EISDIR},
		{"an invalid operation is EINVAL", wrap(index.ErrInvalid), syscall.EINVAL},
		{"a corrupt chunk is EIO", wrap(cas.ErrCorrupt), syscall.EIO},
		{"a missing chunk is EIO", wrap(cas.ErrNotFound), syscall.EIO},
		{"a corrupt manifest is EIO", wrap(manifest.ErrCorrupt), syscall.EIO},
		{"a chunk error is EIO", &store.ChunkError{Ino: 7, Err: cas.ErrCorrupt}, syscall.EIO},
		{"a chunk error is EIO whatever errno caused it", &store.ChunkError{Ino: 7, Err: syscall.EISDIR}, syscall.EIO},
		{"an errno is itself", syscall.ENOSPC, syscall.ENOSPC},
		{"a wrapped errno is itself", wrap(syscall.EROFS), syscall.EROFS},
		{"a path error is its errno", &fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, syscall.EACCES},
		{"a missing file on disk is ENOENT", func() error { _, err := os.Stat("/nonexistent/statefs"); return err }(), syscall.ENOENT},
		{"an errno wins over an index error wrapped with it", fmt.Errorf("%w: %w", index.ErrNotFound, syscall.EPERM), syscall.EPERM},
		{"a stale seal is unexpected: EIO", wrap(index.ErrStale), syscall.EIO},
		{"too large for a transaction is unexpected: EIO", wrap(index.ErrTooLarge), syscall.EIO},
		{"a read-only index is unexpected: EIO", wrap(index.ErrReadOnly), syscall.EIO},
		{"anything else is EIO", errors.New("disk on fire"), syscall.EIO},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := errno(c.err); got != c.want {
				t.Errorf("errno(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

// White-box: a missing extended attribute is ENODATA, not ENOENT; every
// other error maps as errno maps it.
func TestXattrErrno(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"no error is 0", nil, 0},
		{"a missing attribute is ENODATA", fmt.Errorf("xattr user.a: %w", index.ErrNotFound), syscall.ENODATA},
		{"an errno is itself", syscall.EEXIST, syscall.EEXIST},
		{"another index error maps as errno maps it", index.ErrIsDir, syscall.EISDIR},
		{"anything else is EIO", errors.New("disk on fire"), syscall.EIO},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := xattrErrno(c.err); got != c.want {
				t.Errorf("xattrErrno(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}
