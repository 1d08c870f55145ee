package store

import (
	"fmt"
	"syscall"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/manifest"
)

// ChunkError is a read of sealed content that failed because chunk Hash,
// used at offset Off of inode Ino, is missing, damaged or unreadable. It
// is an EIO whatever the cause (a chunk file replaced by a directory fails
// with EISDIR, which the reader must not see), and it still matches
// cas.ErrNotFound or cas.ErrCorrupt with errors.Is.
type ChunkError struct {
	Ino  uint64
	Off  uint64
	Hash cas.Hash
	Err  error
}

func (e *ChunkError) Error() string {
	return fmt.Sprintf("inode %d at offset %d: chunk %s: %v", e.Ino, e.Off, e.Hash, e.Err)
}

func (e *ChunkError) Unwrap() []error { return []error{syscall.EIO, e.Err} }

// ReadAt fills dst with the content of m at off and returns how many bytes
// it filled (fewer at the end of the file). Holes read as zeros. A chunk
// that is missing or fails its hash fails the read with a *ChunkError, an
// object with an *ObjectError (DESIGN invariant 5): never wrong bytes. Only the groups of each chunk
// that hold the bytes asked for are read and verified.
func (s *Store) ReadAt(ino uint64, m *manifest.Manifest, dst []byte, off int64) (int, error) {
	if off < 0 || uint64(off) >= m.Size {
		return 0, nil
	}
	n := int(min(uint64(len(dst)), m.Size-uint64(off)))
	dst = dst[:n]
	if m.Inline != nil {
		return copy(dst, m.Inline[off:]), nil
	}
	if m.Object != nil {
		// Verified, as every read here: fs reads the objects it keeps open
		// itself (ObjectFile), by passthrough or not.
		o, err := s.OpenObject(ino, m, true)
		if err != nil {
			return 0, err
		}
		defer o.Close()
		return o.ReadAt(dst, off)
	}
	pos := uint64(off)
	end := pos + uint64(n)
	for i := m.Find(pos); pos < end; i++ {
		if i >= len(m.Extents) || m.Extents[i].Off >= end {
			clear(dst[pos-uint64(off):])
			break
		}
		e := m.Extents[i]
		if e.Off > pos {
			clear(dst[pos-uint64(off) : e.Off-uint64(off)])
			pos = e.Off
		}
		want := min(end, e.Off+uint64(e.Len)) - pos
		got, err := s.chunks.ReadAt(e.Hash, dst[pos-uint64(off):][:want], int64(pos-e.Off))
		if err == nil && uint64(got) != want {
			err = fmt.Errorf("%w: chunk ends %d bytes before the manifest says", cas.ErrCorrupt, want-uint64(got))
		}
		if err != nil {
			return 0, &ChunkError{Ino: ino, Off: pos, Hash: e.Hash, Err: err}
		}
		pos += want
	}
	return n, nil
}

// SetReadCache bounds the memory that reads of sealed content keep
// (layouts of chunks and verified groups) to max bytes; 0 keeps nothing.
func (s *Store) SetReadCache(max int64) { s.chunks.SetReadCache(max) }
