package cas

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// fanout is a directory of content-addressed files, chunks or objects,
// spread over 256 subdirectories by the first byte of the hash: a file
// named by hash ab… lives at <dir>/ab/ab… (64 hex digits). Temporary files
// start with tempPrefix, which no hash has.
type fanout struct {
	dir      string
	kind     string // "chunk" or "object", for error messages
	readOnly bool
}

// openFanout creates dir and those of its subdirectories that are missing,
// from one listing of dir, and refuses a subdirectory that is not one:
// files are written and removed in there, never through a symlink to
// outside it. It reads no subdirectory, so that opening costs the same
// however many files the store holds; the temporary files a crash left in
// them are RemoveStaleTemps's.
func openFanout(dir, kind string) (fanout, error) {
	if err := mkdirDurable(dir); err != nil {
		return fanout{}, fmt.Errorf("cas: open %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fanout{}, fmt.Errorf("cas: open %s: %w", dir, err)
	}
	var listed [256]bool
	for _, e := range entries {
		i, err := strconv.ParseUint(e.Name(), 16, 8)
		if err != nil || e.Name() != subdir(int(i)) {
			continue
		}
		if !e.IsDir() {
			return fanout{}, fmt.Errorf("cas: open %s: %s is not a directory (%v)", dir, filepath.Join(dir, e.Name()), e.Type())
		}
		listed[i] = true
	}
	created := false
	for i := range 256 {
		if listed[i] {
			continue
		}
		sub := filepath.Join(dir, subdir(i))
		switch err := os.Mkdir(sub, 0o700); {
		case err == nil:
			created = true
		case errors.Is(err, fs.ErrExist): // made since the listing
			if fi, err := os.Lstat(sub); err != nil {
				return fanout{}, fmt.Errorf("cas: open %s: %w", dir, err)
			} else if !fi.IsDir() {
				return fanout{}, fmt.Errorf("cas: open %s: %s is not a directory (%v)", dir, sub, fi.Mode().Type())
			}
		default:
			return fanout{}, fmt.Errorf("cas: open %s: %w", dir, err)
		}
	}
	if created {
		if err := syncDir(dir); err != nil {
			return fanout{}, fmt.Errorf("cas: open %s: %w", dir, err)
		}
	}
	return fanout{dir: dir, kind: kind}, nil
}

// openFanoutReadOnly opens an existing dir for reading only: nothing is
// created, removed or changed. A missing object directory (a store of a
// version before objects, not yet upgraded) reads as empty.
func openFanoutReadOnly(dir, kind string) (fanout, error) {
	if fi, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) && kind == "object" {
		return fanout{dir: dir, kind: kind, readOnly: true}, nil
	} else if err != nil {
		return fanout{}, fmt.Errorf("cas: open %s: %w", dir, err)
	} else if !fi.IsDir() {
		return fanout{}, fmt.Errorf("cas: open %s: not a directory", dir)
	}
	return fanout{dir: dir, kind: kind, readOnly: true}, nil
}

// writable fails a change to a directory opened read-only.
func (s *fanout) writable(op string, h Hash) error {
	if s.readOnly {
		return fmt.Errorf("cas: %s %s: %w", op, h, ErrReadOnly)
	}
	return nil
}

// mkdirDurable creates dir (private: its files hold every user's data, and
// only the filesystem daemon may decide who reads it) and syncs its parent.
func mkdirDurable(dir string) error {
	if _, err := os.Stat(dir); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

// subdir is the name of fan-out subdirectory i.
func subdir(i int) string { return fmt.Sprintf("%02x", i) }

// RemoveStaleTemps removes from every subdirectory the temporary files that
// other processes made, which a crash left behind: this process's own
// (ownTemps) may be in the middle of a write.
func (s *fanout) RemoveStaleTemps() error {
	if s.readOnly {
		return fmt.Errorf("cas: remove temporary files in %s: %w", s.dir, ErrReadOnly)
	}
	for i := range 256 {
		sub := filepath.Join(s.dir, subdir(i))
		entries, err := os.ReadDir(sub)
		if err != nil {
			return fmt.Errorf("cas: remove temporary files: %w", err)
		}
		for _, e := range entries {
			if name := e.Name(); strings.HasPrefix(name, tempPrefix) && !strings.HasPrefix(name, ownTemps) {
				if err := os.Remove(filepath.Join(sub, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("cas: remove temporary files: %w", err)
				}
			}
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// path returns the name of h's file.
func (s *fanout) path(h Hash) string {
	name := h.String()
	return s.dir + string(filepath.Separator) + name[:2] + string(filepath.Separator) + name
}

// open opens h's file for reading.
func (s *fanout) open(h Hash) (*os.File, error) {
	f, err := os.OpenFile(s.path(h), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, ErrNotFound
	case errors.Is(err, syscall.ELOOP):
		return nil, fmt.Errorf("%w: a symlink, not a %s file", ErrCorrupt, s.kind)
	}
	return f, err
}

// Has reports whether h is in the directory.
func (s *fanout) Has(h Hash) (bool, error) {
	_, err := os.Lstat(s.path(h))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cas: has %s %s: %w", s.kind, h, err)
	}
	return true, nil
}

// Size returns the number of bytes h's file takes on disk: its length, or
// for a sparse object the bytes of its allocated blocks.
func (s *fanout) Size(h Hash) (int64, error) {
	fi, err := os.Lstat(s.path(h))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("cas: size %s %s: %w", s.kind, h, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("cas: size %s %s: %w", s.kind, h, err)
	}
	return diskSize(fi), nil
}

// diskSize is the smaller of a file's length and its allocated bytes.
func diskSize(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return min(fi.Size(), st.Blocks*512)
	}
	return fi.Size()
}

// Remove deletes h's file; a missing file is not an error. The removal is
// not synced: if a crash undoes it, the file is merely garbage again.
func (s *fanout) Remove(h Hash) error {
	if err := s.writable("remove", h); err != nil {
		return err
	}
	if err := os.Remove(s.path(h)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cas: remove %s %s: %w", s.kind, h, err)
	}
	return nil
}

// Hashes calls fn for every file on disk, as Walk does, without reading
// each file's size.
func (s *fanout) Hashes(fn func(h Hash) error) error {
	return s.entries(func(h Hash, _ fs.DirEntry) error { return fn(h) })
}

// Walk calls fn for every file on disk with its size on disk, in no
// particular order, and stops at the first error fn returns, returning it
// unchanged. Files that are not named by a hash (temporary files, foreign
// names) are skipped. Files added or removed during the walk may or may not
// be seen.
func (s *fanout) Walk(fn func(h Hash, size int64) error) error {
	return s.entries(func(h Hash, e fs.DirEntry) error {
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since it was listed
		}
		if err != nil {
			return fmt.Errorf("cas: walk: %w", err)
		}
		return fn(h, diskSize(fi))
	})
}

// entries calls fn for every regular file named by a hash.
func (s *fanout) entries(fn func(h Hash, e fs.DirEntry) error) error {
	for i := range 256 {
		sub := filepath.Join(s.dir, fmt.Sprintf("%02x", i))
		entries, err := os.ReadDir(sub)
		if errors.Is(err, fs.ErrNotExist) && s.readOnly {
			continue // a directory OpenObjectsReadOnly found missing
		}
		if err != nil {
			return fmt.Errorf("cas: walk: %w", err)
		}
		for _, e := range entries {
			h, err := ParseHash(e.Name())
			if err != nil || h[0] != byte(i) || !e.Type().IsRegular() {
				continue
			}
			if err := fn(h, e); err != nil {
				return err
			}
		}
	}
	return nil
}
