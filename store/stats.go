package store

import (
	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
)

// Stats is the store's use of its disk, as .statefs/stats.json shows it.
type Stats struct {
	index.Usage
	ChunkFiles    int     `json:"chunk_files"`
	ChunkBytes    int64   `json:"chunk_bytes"` // on disk, compressed
	ObjectFiles   int     `json:"object_files"`
	ObjectBytes   int64   `json:"object_bytes"`  // on disk
	StagingFiles  int     `json:"staging_files"` // includes files open for writing
	StagingBytes  int64   `json:"staging_bytes"`
	LogicalBytes  int64   `json:"logical_bytes"`  // sealed + staging
	PhysicalBytes int64   `json:"physical_bytes"` // chunks + objects + staging (the index aside)
	SavedRatio    float64 `json:"saved_ratio"`    // logical / physical: dedup and compression together
}

// Stats scans the index, the chunk store and the staging directory. It
// reads every name once: cheap for a person's cat, not for a hot loop.
func (s *Store) Stats() (Stats, error) {
	var st Stats
	err := s.Index.View(func(tx *index.Tx) (err error) {
		st.Usage, err = tx.Usage()
		return err
	})
	if err != nil {
		return st, err
	}
	err = s.chunks.Walk(func(_ cas.Hash, size int64) error {
		st.ChunkFiles++
		st.ChunkBytes += size
		return nil
	})
	if err != nil {
		return st, err
	}
	err = s.objects.Walk(func(_ cas.Hash, size int64) error {
		st.ObjectFiles++
		st.ObjectBytes += size
		return nil
	})
	if err != nil {
		return st, err
	}
	err = s.walkStaging(func(f stagingFile) error {
		if info, err := f.info.Info(); err == nil && f.ok {
			st.StagingFiles++
			st.StagingBytes += info.Size()
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	st.LogicalBytes = st.SealedBytes + st.StagingBytes
	st.PhysicalBytes = st.ChunkBytes + st.ObjectBytes + st.StagingBytes
	if st.PhysicalBytes > 0 {
		st.SavedRatio = float64(st.LogicalBytes) / float64(st.PhysicalBytes)
	}
	return st, nil
}

// ChunkSize is the size on disk of chunk h; cas.ErrNotFound if the store
// has no such chunk.
func (s *Store) ChunkSize(h cas.Hash) (int64, error) { return s.chunks.Size(h) }

// ObjectSize is the size on disk of object h; cas.ErrNotFound if the store
// has no such object.
func (s *Store) ObjectSize(h cas.Hash) (int64, error) { return s.objects.Size(h) }

// WalkChunks calls fn with the hash and the size on disk of every chunk.
func (s *Store) WalkChunks(fn func(h cas.Hash, size int64) error) error { return s.chunks.Walk(fn) }
