package store

import (
	"fmt"
	"syscall"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/manifest"
)

// chunkCacheEntries bounds the decoded chunks kept in memory: a sequential
// reader asks for one chunk in many kernel-sized pieces.
const chunkCacheEntries = 16

// reader serves reads of sealed content from verified chunks.
type reader struct {
	chunks *cas.Store
	cache  *lru.Cache[cas.Hash, []byte]
	loads  singleflight.Group
}

func newReader(chunks *cas.Store) *reader {
	cache, _ := lru.New[cas.Hash, []byte](chunkCacheEntries)
	return &reader{chunks: chunks, cache: cache}
}

// chunk returns the verified bytes of chunk h; concurrent callers for the
// same chunk share one load.
func (r *reader) chunk(h cas.Hash) ([]byte, error) {
	if b, ok := r.cache.Get(h); ok {
		return b, nil
	}
	v, err, _ := r.loads.Do(string(h[:]), func() (any, error) {
		b, err := r.chunks.Get(h, nil)
		if err != nil {
			return nil, err
		}
		r.cache.Add(h, b)
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

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
// that is missing or fails its hash fails the read with a *ChunkError
// (DESIGN invariant 5): never wrong bytes.
func (s *Store) ReadAt(ino uint64, m *manifest.Manifest, dst []byte, off int64) (int, error) {
	if off < 0 || uint64(off) >= m.Size {
		return 0, nil
	}
	n := int(min(uint64(len(dst)), m.Size-uint64(off)))
	dst = dst[:n]
	if m.Inline != nil {
		return copy(dst, m.Inline[off:]), nil
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
		b, err := s.reader.chunk(e.Hash)
		if err != nil {
			return 0, &ChunkError{Ino: ino, Off: e.Off, Hash: e.Hash, Err: err}
		}
		if len(b) != int(e.Len) {
			return 0, &ChunkError{Ino: ino, Off: e.Off, Hash: e.Hash,
				Err: fmt.Errorf("%w: %d bytes, manifest says %d", cas.ErrCorrupt, len(b), e.Len)}
		}
		pos += uint64(copy(dst[pos-uint64(off):], b[pos-e.Off:]))
	}
	return n, nil
}
