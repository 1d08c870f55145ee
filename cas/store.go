package cas

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

var (
	// ErrNotFound means there is no chunk (or object) with the hash asked for.
	ErrNotFound = errors.New("not found")
	// ErrCorrupt means a chunk or object file is damaged: a bad header, a
	// truncated or undecodable payload, or bytes that do not match the hash
	// (DESIGN invariant 5).
	ErrCorrupt = errors.New("corrupt")
	// ErrReadOnly is a change asked of a chunk or object directory opened
	// read-only.
	ErrReadOnly = errors.New("opened read-only")
)

// tempPrefix starts the name of every temporary file; no chunk name has it.
const tempPrefix = ".tmp-"

// ownTemps starts the name of every temporary file this process makes:
// tempPrefix and a token of the process's own, so that RemoveStaleTemps
// tells a file an earlier process left (a crash) from one this process is
// writing, without reading a clock.
var ownTemps = tempPrefix + processToken() + "-"

// processToken is 8 random hex digits.
func processToken() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("cas: no randomness for temporary names: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// Chunks holds immutable chunk files under one directory (layout and crash
// safety are described in the package documentation). Its methods are safe
// for concurrent use. Errors from the operating system are wrapped, so
// errors.Is(err, syscall.ENOSPC) and the like work.
type Chunks struct {
	fanout
	cache *readCache
}

// Open opens the chunk directory dir, creating it and its fan-out
// subdirectories if needed; the temporary files a crash left behind are
// RemoveStaleTemps's.
func Open(dir string) (*Chunks, error) {
	f, err := openFanout(dir, "chunk")
	if err != nil {
		return nil, err
	}
	return &Chunks{fanout: f, cache: newReadCache(DefaultReadCache)}, nil
}

// OpenReadOnly opens the chunk directory dir for reading: it creates,
// removes and changes nothing there, and Put, Remove and Upgrade fail with ErrReadOnly.
func OpenReadOnly(dir string) (*Chunks, error) {
	f, err := openFanoutReadOnly(dir, "chunk")
	if err != nil {
		return nil, err
	}
	return &Chunks{fanout: f, cache: newReadCache(DefaultReadCache)}, nil
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
	f, err := os.CreateTemp(dir, ownTemps+"*")
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
