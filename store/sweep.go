package store

import (
	"errors"
	"fmt"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
)

// Swept is what a sweep removed (or, dry, would remove).
type Swept struct {
	Chunks int
	Bytes  int64
}

// Sweep removes every chunk that no manifest refers to: those whose last
// reference went (the index's garbage list) and those a crash left behind
// between writing a chunk and committing its manifest. It runs while no seal
// is between its first chunk and its commit (DESIGN invariant 3: a seal that
// found a chunk already stored must not lose it to a sweep that saw it
// unreferenced); staging files and open readers hold no chunk references,
// and sealed content is read only through manifests, which hold them.
func (s *Store) Sweep(dryRun bool) (Swept, error) {
	s.sweep.Lock()
	defer s.sweep.Unlock()
	var doomed []cas.Hash
	err := s.Index.View(func(tx *index.Tx) error {
		return s.Chunks.Walk(func(h cas.Hash, size int64) error {
			refs, err := tx.ChunkRefs(h)
			if err != nil || refs > 0 {
				return err
			}
			doomed = append(doomed, h)
			return nil
		})
	})
	if err != nil {
		return Swept{}, fmt.Errorf("sweeping chunks: %w", err)
	}
	var swept Swept
	for _, h := range doomed {
		size, err := s.Chunks.Size(h)
		if errors.Is(err, cas.ErrNotFound) {
			continue
		}
		if err != nil {
			return swept, err
		}
		if !dryRun {
			if err := s.Chunks.Remove(h); err != nil {
				return swept, err
			}
		}
		swept.Chunks++
		swept.Bytes += size
	}
	if !dryRun {
		err = s.Index.Update(func(tx *index.Tx) error { return tx.ForgetGarbage() })
	}
	return swept, err
}
