package cas

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

var (
	// ErrNotFound means there is no chunk with the hash asked for.
	ErrNotFound = errors.New("chunk not found")
	// ErrCorrupt means a chunk file is damaged: a bad header, a truncated or
	// undecodable payload, or bytes that do not match the hash (DESIGN invariant 5).
	ErrCorrupt = errors.New("chunk corrupt")
	// ErrReadOnly is a write asked of Chunks opened read-only.
	ErrReadOnly = errors.New("chunk store opened read-only")
)

// tempPrefix starts the name of every temporary file; no chunk name has it.
const tempPrefix = ".tmp-"

// Chunks holds immutable chunk files under one directory (layout and crash
// safety are described in the package documentation). Its methods are safe
// for concurrent use. Errors from the operating system are wrapped, so
// errors.Is(err, syscall.ENOSPC) and the like work.
type Chunks struct {
	dir      string
	cache    *readCache
	readOnly bool
}

// Open opens the chunk directory dir, creating it and its fan-out
// subdirectories if needed, and removes the temporary files a crash left
// behind.
func Open(dir string) (*Chunks, error) {
	if err := mkdirDurable(dir); err != nil {
		return nil, fmt.Errorf("cas: open %s: %w", dir, err)
	}
	created := false
	for i := range 256 {
		sub := filepath.Join(dir, fmt.Sprintf("%02x", i))
		switch err := os.Mkdir(sub, 0o700); {
		case err == nil:
			created = true
		case errors.Is(err, fs.ErrExist):
			// Chunks are written and temporary files removed in here: never
			// through a symlink to outside the chunk directory.
			if fi, err := os.Lstat(sub); err != nil {
				return nil, fmt.Errorf("cas: open %s: %w", dir, err)
			} else if !fi.IsDir() {
				return nil, fmt.Errorf("cas: open %s: %s is not a directory (%v)", dir, sub, fi.Mode().Type())
			}
			if err := removeTemps(sub); err != nil {
				return nil, fmt.Errorf("cas: open %s: %w", dir, err)
			}
		default:
			return nil, fmt.Errorf("cas: open %s: %w", dir, err)
		}
	}
	if created {
		if err := syncDir(dir); err != nil {
			return nil, fmt.Errorf("cas: open %s: %w", dir, err)
		}
	}
	return &Chunks{dir: dir, cache: newReadCache(DefaultReadCache)}, nil
}

// OpenReadOnly opens the chunk directory dir for reading: it creates,
// removes and changes nothing there, and Put, Remove and Upgrade fail with ErrReadOnly.
func OpenReadOnly(dir string) (*Chunks, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("cas: open %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("cas: open %s: not a directory", dir)
	}
	return &Chunks{dir: dir, cache: newReadCache(DefaultReadCache), readOnly: true}, nil
}

// writable fails a write to a chunk directory opened read-only.
func (s *Chunks) writable(op string, h Hash) error {
	if s.readOnly {
		return fmt.Errorf("cas: %s %s: %w", op, h, ErrReadOnly)
	}
	return nil
}

// mkdirDurable creates dir (private: chunk files hold every user's data, and
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

func removeTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// path returns the name of chunk h's file.
func (s *Chunks) path(h Hash) string {
	name := h.String()
	return s.dir + string(filepath.Separator) + name[:2] + string(filepath.Separator) + name
}

// Put stores data under h, which the caller computed as Sum(data), unless a
// chunk with that hash is already there. stored is the size of the new chunk
// file, 0 if the chunk existed (or a concurrent Put of the same hash wrote it).
// When Put returns nil the chunk is durable. A failed Put leaves neither a
// temporary file nor a partial chunk. data is at most MaxChunk bytes: Get
// refuses longer chunks as damaged.
func (s *Chunks) Put(h Hash, data []byte) (stored int64, err error) {
	if err := s.writable("put", h); err != nil {
		return 0, err
	}
	if len(data) > MaxChunk {
		return 0, fmt.Errorf("cas: put %s: %d bytes, more than a chunk's %d", h, len(data), MaxChunk)
	}
	path := s.path(h)
	switch _, err := os.Lstat(path); {
	case err == nil:
		// The chunk may come from a concurrent Put that has linked it but not
		// yet synced the directory; the caller is about to rely on it.
		if err := syncDir(filepath.Dir(path)); err != nil {
			return 0, fmt.Errorf("cas: put %s: %w", h, err)
		}
		return 0, nil
	case !errors.Is(err, fs.ErrNotExist):
		return 0, fmt.Errorf("cas: put %s: %w", h, err)
	}

	bp := scratch.Get().(*[]byte)
	defer scratch.Put(bp)
	content, err := encode(h, data, bp)
	if err == nil {
		stored, err = writeChunk(path, content...)
	}
	if err != nil {
		return 0, fmt.Errorf("cas: put %s: %w", h, err)
	}
	return stored, nil
}

// writeChunk writes content to a temporary file beside path, syncs it, links
// it to path and syncs the directory. If path already exists it writes
// nothing there and returns 0.
func writeChunk(path string, content ...[]byte) (int64, error) {
	dir := filepath.Dir(path)
	tmp, n, err := writeTemp(dir, true, content)
	if err != nil {
		return 0, err
	}
	switch err := os.Link(tmp, path); {
	case errors.Is(err, fs.ErrExist):
		n = 0 // a concurrent Put of the same chunk won
	case err != nil:
		os.Remove(tmp)
		return 0, err
	}
	if err := os.Remove(tmp); err != nil {
		return 0, err
	}
	if err := syncDir(dir); err != nil {
		return 0, err
	}
	return n, nil
}

// writeTemp writes content to a new temporary file in dir, synced if sync
// is set, and returns its path and length; on an error it leaves no file.
func writeTemp(dir string, sync bool, content [][]byte) (string, int64, error) {
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return "", 0, err
	}
	var n int64
	for _, p := range content {
		m, werr := f.Write(p)
		n += int64(m)
		if err = werr; err != nil {
			break
		}
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", 0, err
	}
	return f.Name(), n, nil
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

// Has reports whether chunk h is in the chunk directory.
func (s *Chunks) Has(h Hash) (bool, error) {
	_, err := os.Lstat(s.path(h))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cas: has %s: %w", h, err)
	}
	return true, nil
}

// Size returns the number of bytes chunk h takes on disk.
func (s *Chunks) Size(h Hash) (int64, error) {
	fi, err := os.Lstat(s.path(h))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("cas: size %s: %w", h, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("cas: size %s: %w", h, err)
	}
	return fi.Size(), nil
}

// Remove deletes chunk h; a missing chunk is not an error. The removal is not
// synced: if a crash undoes it, the chunk is merely garbage again.
func (s *Chunks) Remove(h Hash) error {
	if err := s.writable("remove", h); err != nil {
		return err
	}
	if err := os.Remove(s.path(h)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cas: remove %s: %w", h, err)
	}
	return nil
}

// Hashes calls fn for every chunk on disk, as Walk does, without reading
// each chunk's size.
func (s *Chunks) Hashes(fn func(h Hash) error) error {
	return s.entries(func(h Hash, _ fs.DirEntry) error { return fn(h) })
}

// Walk calls fn for every chunk on disk with its size on disk, in no
// particular order, and stops at the first error fn returns, returning it
// unchanged. Files that are not chunks (temporary files, foreign names) are
// skipped. Chunks Put or removed during the walk may or may not be seen.
func (s *Chunks) Walk(fn func(h Hash, size int64) error) error {
	return s.entries(func(h Hash, e fs.DirEntry) error {
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since it was listed
		}
		if err != nil {
			return fmt.Errorf("cas: walk: %w", err)
		}
		return fn(h, fi.Size())
	})
}

// entries calls fn for every chunk file's directory entry.
func (s *Chunks) entries(fn func(h Hash, e fs.DirEntry) error) error {
	for i := range 256 {
		sub := filepath.Join(s.dir, fmt.Sprintf("%02x", i))
		entries, err := os.ReadDir(sub)
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
