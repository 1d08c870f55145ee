package store

import "github.com/statefs/statefs/cas"

// SetBeforeRemove makes Sweep call fn when it has found chunk h still
// unreferenced, right before it removes it.
func SetBeforeRemove(s *Store, fn func(h cas.Hash)) { s.beforeRemove = fn }

// ChunkCached reports whether the read path holds chunk h decoded.
func ChunkCached(s *Store, h cas.Hash) bool { return s.reader.cache.Contains(h) }
