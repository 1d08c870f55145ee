package store

import "github.com/statefs/statefs/cas"

// ChunkSize is the size on disk of chunk h; cas.ErrNotFound if the store
// has no such chunk.
func (s *Store) ChunkSize(h cas.Hash) (int64, error) { return s.chunks.Size(h) }

// ObjectSize is the size on disk of object h; cas.ErrNotFound if the store
// has no such object.
func (s *Store) ObjectSize(h cas.Hash) (int64, error) { return s.objects.Size(h) }

// WalkChunks calls fn with the hash and the size on disk of every chunk.
func (s *Store) WalkChunks(fn func(h cas.Hash, size int64) error) error { return s.chunks.Walk(fn) }
