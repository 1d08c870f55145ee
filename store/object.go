package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/crashpoint"
	"github.com/statefs/statefs/manifest"
)

// ObjectError is an open or read of a file that is object Hash which
// failed: the object is missing, quarantined, or its bytes are not its
// hash's. It is an EIO whatever the cause, and it still matches
// cas.ErrNotFound or cas.ErrCorrupt with errors.Is.
type ObjectError struct {
	Ino  uint64
	Hash cas.Hash
	Err  error
}

func (e *ObjectError) Error() string {
	return fmt.Sprintf("inode %d: object %s: %v", e.Ino, e.Hash, e.Err)
}

func (e *ObjectError) Unwrap() []error { return []error{syscall.EIO, e.Err} }

// ErrQuarantined is the error of an open of a quarantined object.
var ErrQuarantined = errors.New("quarantined")

// linkObject makes x's staging file its object, or finds the object there
// already; a quarantined object of the same hash is replaced by the
// staging file, whose bytes x hashed.
func (s *Store) linkObject(x *PreparedSeal) error {
	h, path := *x.Manifest.Object, s.StagingPath(x.Staging)
	linked, err := s.objects.Link(h, path)
	if err != nil {
		return err
	}
	x.linked = linked
	if !linked {
		var q *index.Quarantine
		if err := s.Index.View(func(tx *index.Tx) (err error) { q, err = tx.Quarantined(h); return err }); err != nil {
			return err
		}
		if q != nil {
			if err := s.objects.Replace(h, path); err != nil {
				return err
			}
			x.healed = true
			slog.Info("a seal of the same bytes replaced a quarantined object", "inode", x.Ino, "object", h.String())
		}
	}
	crashpoint.Hit(crashpoint.SealObjectLinked)
	return nil
}

// unshare gives staging file id an inode of its own, with the same bytes
// and times, if it shares one with an object: a seal linked it and did not
// commit (a failed commit, or a crash before it). The staging file is
// written again later; the object must not change with it.
func (s *Store) unshare(id uint64) error {
	path := s.StagingPath(id)
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil || st.Nlink <= 1 {
		return err
	}
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := path + ".unshare"
	os.Remove(tmp)
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if err == nil {
		err = dst.Truncate(st.Size) // a hole at the end is not copied
	}
	if err == nil {
		times := []syscall.Timespec{st.Atim, st.Mtim}
		err = syscall.UtimesNano(tmp, times)
	}
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("giving staging file %016x an inode of its own: %w", id, err)
	}
	slog.Info("gave a staging file linked by an uncommitted seal an inode of its own", "id", fmt.Sprintf("%016x", id))
	return syncDir(filepath.Dir(path))
}

// freeObject removes object h, whose last reference a commit dropped,
// unless a seal has found it since or a sweep is removing it.
func (s *Store) freeObject(h cas.Hash) {
	doomed, err := s.objectGuard.doom(s.Index, []cas.Hash{h})
	if err != nil {
		slog.Error("freeing an object no file is", "object", h.String(), "err", err)
		return
	}
	defer s.objectGuard.release(doomed)
	for _, h := range doomed {
		size, _ := s.objects.Size(h)
		if err := s.objects.Remove(h); err != nil {
			slog.Error("freeing an object no file is", "object", h.String(), "err", err)
			continue
		}
		s.freed.objects.Add(1)
		s.freed.bytes.Add(size)
	}
}

// Freed is how many objects, and bytes on disk, were freed since the store
// was opened as their last file went (the sweep's aside).
func (s *Store) Freed() (objects int, bytes int64) {
	return int(s.freed.objects.Load()), s.freed.bytes.Load()
}

// ObjectFile is an open object, the content of a sealed file.
type ObjectFile struct {
	*os.File
	Ino  uint64
	Hash cas.Hash
	// tree verifies every read when set (OpenObject with verify).
	tree []byte
}

// OpenObject opens the object that is inode ino's content (manifest m).
// A quarantined or missing object gives an *ObjectError. With verify, every
// ReadAt of it is checked against its hash.
func (s *Store) OpenObject(ino uint64, m *manifest.Manifest, verify bool) (*ObjectFile, error) {
	h := *m.Object
	var q *index.Quarantine
	var tree []byte
	err := s.Index.View(func(tx *index.Tx) (err error) {
		if q, err = tx.Quarantined(h); err != nil || !verify {
			return err
		}
		tree, err = tx.ObjectTree(h)
		return err
	})
	if err != nil {
		return nil, &ObjectError{Ino: ino, Hash: h, Err: err}
	}
	if q != nil {
		return nil, &ObjectError{Ino: ino, Hash: h, Err: fmt.Errorf("%w since %s: %s", ErrQuarantined, time.Unix(0, q.At).UTC().Format(time.RFC3339), q.Why)}
	}
	f, err := s.objects.Open(h)
	if err != nil {
		return nil, &ObjectError{Ino: ino, Hash: h, Err: err}
	}
	return &ObjectFile{File: f, Ino: ino, Hash: h, tree: tree}, nil
}

// ReadAt reads the object's bytes at off, verified against its hash if it
// was opened with verify; a failure is an *ObjectError.
func (o *ObjectFile) ReadAt(p []byte, off int64) (int, error) {
	var n int
	var err error
	if o.tree != nil {
		n, err = cas.ReadVerified(o.File, o.tree, o.Hash, p, off)
	} else if n, err = o.File.ReadAt(p, off); err == io.EOF {
		err = nil
	}
	if err != nil {
		return 0, &ObjectError{Ino: o.Ino, Hash: o.Hash, Err: err}
	}
	return n, nil
}

// copyObject writes the first size bytes of inode ino's object (manifest
// m) to dst, reading the object whole and checking its hash: an unseal
// moves only verified bytes.
func (s *Store) copyObject(ino uint64, m *manifest.Manifest, dst *os.File, size uint64) error {
	o, err := s.OpenObject(ino, m, false)
	if err != nil {
		return err
	}
	defer o.Close()
	if err := cas.CopyVerified(dst, o.File, o.Hash, int64(size)); err != nil {
		return &ObjectError{Ino: ino, Hash: o.Hash, Err: err}
	}
	return nil
}

// objectSet lists the objects manifests are and the object files, each
// sorted.
func (s *Store) objectSet() (used, files []cas.Hash, err error) {
	if used, err = s.Index.UsedObjects(); err != nil {
		return nil, nil, err
	}
	err = s.objects.Hashes(func(h cas.Hash) error { files = append(files, h); return nil })
	slices.SortFunc(files, compareHash)
	return used, files, err
}

// lostObjects finds which of the objects in hs are lost: missing, not a
// regular file (files lists those that are, sorted), quarantined, or (with
// verify) not reading back as their hash. read, if set, is called with the
// length of each piece read (it may wait, and an error from it stops the
// search); done, if set, after each object. It stops early, with what it
// found so far and ctx's error, when ctx is done.
func (s *Store) lostObjects(ctx context.Context, hs, files []cas.Hash, verify bool, read func(n int) error, done func()) (map[cas.Hash]lostChunk, error) {
	lost := map[cas.Hash]lostChunk{}
	var marked []cas.Hash
	err := s.Index.View(func(tx *index.Tx) (err error) {
		marked, err = tx.QuarantinedObjects()
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, h := range marked {
		lost[h] = lostChunk{ProblemQuarantined, "quarantined: opens of its files fail"}
	}
	for _, h := range hs {
		if err := ctx.Err(); err != nil {
			return lost, err
		}
		if _, ok := lost[h]; ok {
			continue
		}
		if _, regular := slices.BinarySearchFunc(files, h, compareHash); !regular {
			switch ok, err := s.objects.Has(h); {
			case err != nil:
				lost[h] = lostChunk{ProblemCorruptObject, err.Error()}
			case ok:
				lost[h] = lostChunk{ProblemCorruptObject, "not a regular file"}
			default:
				lost[h] = lostChunk{ProblemMissingObject, "missing from the object store"}
			}
		} else if verify {
			_, err := s.objects.Verify(h, read)
			switch {
			case ctx.Err() != nil:
				return lost, ctx.Err()
			case errors.Is(err, cas.ErrNotFound):
				lost[h] = lostChunk{ProblemMissingObject, "missing from the object store"}
			case err != nil:
				lost[h] = lostChunk{ProblemCorruptObject, err.Error()}
			}
		}
		if done != nil {
			done()
		}
	}
	return lost, nil
}

// Adopt makes the inode of o, the open object that is inode n's content,
// a new staging file, and gives the object's name a verified copy of its
// bytes (cas.Objects.Detach), so that the file can be written in place:
// the kernel's passthrough readers of the object read that inode, and must
// see the writer's bytes. It returns the staging file's id and the file
// open for reading and writing; the caller makes the inode refer to it
// (index.Tx.SetStaging). The caller keeps every other file that is the
// same object from opening it meanwhile: their readers would see the
// writes too.
func (s *Store) Adopt(n *index.Inode, o *ObjectFile) (uint64, *os.File, error) {
	id, err := s.Index.NewStagingID()
	if err != nil {
		return 0, nil, err
	}
	path := s.StagingPath(id)
	fail := func(err error) (uint64, *os.File, error) {
		os.Remove(path)
		return 0, nil, &ObjectError{Ino: n.Ino, Hash: o.Hash, Err: fmt.Errorf("adopting it as staging file %016x: %w", id, err)}
	}
	// The open file, not the name: a seal may have replaced the name.
	if err := unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", o.Fd()), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW); err != nil {
		return fail(err)
	}
	if err := s.objects.Detach(o.Hash, o.File); err != nil {
		return fail(err)
	}
	// The content moved, it did not change: the file keeps its times.
	times := []unix.Timespec{unix.NsecToTimespec(n.Atime), unix.NsecToTimespec(n.Mtime)}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, times, 0); err != nil {
		return fail(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fail(err)
	}
	return id, f, nil
}
