package store

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/crashpoint"
)

// Swept is what a sweep removed (or, dry, would remove).
type Swept struct {
	Chunks  int
	Objects int
	Bytes   int64
}

// Sweep removes every chunk file whose reference count in the index is
// zero: chunks whose last reference went, and those a crash left behind
// between writing a chunk and committing its manifest. It walks the chunk
// files, not the index's garbage marks, which it forgets at the end. Then
// it does the same for objects: an object no file is was freed when its
// last reference went, so the sweep finds only what a crash left (an
// object linked by a seal that did not commit, or not yet freed).
//
// A seal that found a chunk already stored must not lose it to a sweep that
// saw it unreferenced (DESIGN invariant 3). Sweep finds its candidates
// without any lock (the walk of every chunk is the long part, and seals go
// on meanwhile), then, a batch at a time, asks the index again whether each
// is unreferenced and removes those that are and that no seal has pinned
// (chunkGuard): a seal pins each chunk before it puts it and unpins after
// its commit, so a reference it took is pinned or in the index. Staging
// files and open readers hold no chunk references, and sealed content is
// read only through manifests, which hold them.
func (s *Store) Sweep(dryRun bool) (Swept, error) {
	s.sweeping.Lock()
	defer s.sweeping.Unlock()
	var candidates []cas.Hash
	err := s.Index.View(func(tx *index.Tx) error {
		return s.chunks.Hashes(func(h cas.Hash) error {
			refs, err := tx.ChunkRefs(h)
			if err == nil && refs == 0 {
				candidates = append(candidates, h)
			}
			return err
		})
	})
	if err != nil {
		return Swept{}, fmt.Errorf("sweeping chunks: %w", err)
	}
	var swept Swept
	for len(candidates) > 0 {
		n := min(len(candidates), sweepBatch)
		if err := s.sweepBatch(contentFiles{dir: s.chunks, guard: &s.guard}, candidates[:n], dryRun, &swept); err != nil {
			return swept, fmt.Errorf("sweeping chunks: %w", err)
		}
		candidates = candidates[n:]
	}
	if err := s.sweepObjects(dryRun, &swept); err != nil {
		return swept, fmt.Errorf("sweeping objects: %w", err)
	}
	if !dryRun {
		crashpoint.Hit(crashpoint.SweepBeforeForget)
		err = s.Index.ForgetGarbage()
	}
	if err == nil && !dryRun {
		// Collections delete manifests; the large ones live in badger's
		// value log, which keeps their space until it is collected too.
		err = s.Index.RunValueLogGC()
	}
	return swept, err
}

// sweepBatch is how many chunks Sweep dooms and removes at once.
const sweepBatch = 1024

// contentFiles are the files of chunks or of objects, with the guard that
// keeps seals and sweeps apart over them.
type contentFiles struct {
	dir interface {
		Size(h cas.Hash) (int64, error)
		Remove(h cas.Hash) error
	}
	guard  *contentGuard
	object bool
}

// sweepObjects removes the objects no file is.
func (s *Store) sweepObjects(dryRun bool, swept *Swept) error {
	var candidates []cas.Hash
	err := s.Index.View(func(tx *index.Tx) error {
		return s.objects.Hashes(func(h cas.Hash) error {
			refs, err := tx.ObjectRefs(h)
			if err == nil && refs == 0 {
				candidates = append(candidates, h)
			}
			return err
		})
	})
	for err == nil && len(candidates) > 0 {
		n := min(len(candidates), sweepBatch)
		err = s.sweepBatch(contentFiles{s.objects, &s.objectGuard, true}, candidates[:n], dryRun, swept)
		candidates = candidates[n:]
	}
	return err
}

// sweepBatch removes the candidates that are still unreferenced and
// unpinned; seals that want one of them wait until it is removed.
func (s *Store) sweepBatch(files contentFiles, candidates []cas.Hash, dryRun bool, swept *Swept) error {
	doomed, err := files.guard.doom(s.Index, candidates)
	if err != nil {
		return err
	}
	defer files.guard.release(doomed)
	// Removing files is the filesystem's work, and one at a time leaves
	// the disk and the cores idle between unlinks: a few at once keep them
	// busy.
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(sweepRemovers)
	for _, h := range doomed {
		g.Go(func() error {
			if s.beforeRemove != nil {
				s.beforeRemove(h)
			}
			size, err := files.dir.Size(h)
			if errors.Is(err, cas.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			if !dryRun {
				if err := files.dir.Remove(h); err != nil {
					return err
				}
				crashpoint.Hit(crashpoint.SweepChunkRemoved)
			}
			mu.Lock()
			if files.object {
				swept.Objects++
			} else {
				swept.Chunks++
			}
			swept.Bytes += size
			mu.Unlock()
			return nil
		})
	}
	return g.Wait()
}

// sweepRemovers is how many chunks Sweep removes at once.
const sweepRemovers = 4
