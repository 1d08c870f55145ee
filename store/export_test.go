package store

import "github.com/statefs/statefs/cas"

// SetBeforeRemove makes Sweep call fn when it has found chunk h still
// unreferenced, right before it removes it.
func SetBeforeRemove(s *Store, fn func(h cas.Hash)) { s.beforeRemove = fn }

// Chunks is the store's chunk store, for tests that put, read or remove
// chunks behind the store's back.
func Chunks(s *Store) *cas.Chunks { return s.chunks }
