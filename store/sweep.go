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

// Swept is what a sweep removed, or would remove (Unreferenced).
type Swept struct {
	Chunks  int   `json:"chunks"`
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
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
func (s *Store) Sweep() (Swept, error) {
	s.sweeping.Lock()
	defer s.sweeping.Unlock()
	var chunks, objects []cas.Hash
	err := s.Index.View(func(tx *index.Tx) (err error) {
		chunks, objects, err = s.unreferenced(tx)
		return err
	})
	if err != nil {
		return Swept{}, fmt.Errorf("sweeping: %w", err)
	}
	var swept Swept
	for len(chunks) > 0 {
		n := min(len(chunks), sweepBatch)
		if err := s.sweepBatch(contentFiles{dir: s.chunks, guard: &s.guard}, chunks[:n], &swept); err != nil {
			return swept, fmt.Errorf("sweeping chunks: %w", err)
		}
		chunks = chunks[n:]
	}
	for len(objects) > 0 {
		n := min(len(objects), sweepBatch)
		if err := s.sweepBatch(contentFiles{s.objects, &s.objectGuard, true}, objects[:n], &swept); err != nil {
			return swept, fmt.Errorf("sweeping objects: %w", err)
		}
		objects = objects[n:]
	}
	crashpoint.Hit(crashpoint.SweepBeforeForget)
	if err := s.Index.ForgetGarbage(); err != nil {
		return swept, err
	}
	// Collections delete manifests; the large ones live in badger's value
	// log, which keeps their space until it is collected too.
	return swept, s.Index.RunValueLogGC()
}

// Unreferenced is what a sweep would free now, as tx sees the references:
// the chunk and object files no manifest refers to. It changes nothing.
func (s *Store) Unreferenced(tx *index.Tx) (Swept, error) {
	var u Swept
	chunks, objects, err := s.unreferenced(tx)
	for _, h := range chunks {
		if size, err := s.chunks.Size(h); err == nil {
			u.Chunks++
			u.Bytes += size
		}
	}
	for _, h := range objects {
		if size, err := s.objects.Size(h); err == nil {
			u.Objects++
			u.Bytes += size
		}
	}
	return u, err
}

// unreferenced lists the chunk and object files whose reference count in
// tx is zero.
func (s *Store) unreferenced(tx *index.Tx) (chunks, objects []cas.Hash, err error) {
	err = s.chunks.Hashes(func(h cas.Hash) error {
		refs, err := tx.ChunkRefs(h)
		if err == nil && refs == 0 {
			chunks = append(chunks, h)
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	err = s.objects.Hashes(func(h cas.Hash) error {
		refs, err := tx.ObjectRefs(h)
		if err == nil && refs == 0 {
			objects = append(objects, h)
		}
		return err
	})
	return chunks, objects, err
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

// sweepBatch removes the candidates that are still unreferenced and
// unpinned; seals that want one of them wait until it is removed.
func (s *Store) sweepBatch(files contentFiles, candidates []cas.Hash, swept *Swept) error {
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
			if err := files.dir.Remove(h); err != nil {
				return err
			}
			crashpoint.Hit(crashpoint.SweepChunkRemoved)
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
