package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
)

// Repaired is what Repair changed: the files that lost ranges, and the
// damaged chunk and object files it removed.
type Repaired struct {
	Files          []index.DamagedFile
	RemovedChunks  []cas.Hash
	RemovedObjects []cas.Hash
}

// Repair makes the store readable again after chunks were lost (DESIGN
// invariant 5 keeps it from serving their bytes): it reads every chunk a
// manifest uses, as Check(true) does, and in each file that uses a lost
// one it turns the lost ranges into holes (index.DB.DropLost): the
// file keeps its names, size, mode and owner, and reads as zeros where the
// bytes are gone, as e2fsck leaves a file whose blocks it cleared. Then it
// removes the damaged chunk files, so that content written again later is
// stored afresh instead of deduplicated against them. It repairs nothing
// else: Check's other problems stay for the operator. The store must not be
// in use (OpenForRepair); only `statefs fsck --repair` calls it.
func (s *Store) Repair() (Repaired, error) {
	var r Repaired
	used, err := s.Index.UsedChunks()
	if err != nil {
		return r, err
	}
	files, err := s.chunkFiles()
	if err != nil {
		return r, err
	}
	lostSet, _ := s.lostChunks(context.Background(), used, files, true, nil)
	usedObjects, objectFiles, err := s.objectSet()
	if err != nil {
		return r, err
	}
	lostObjects, err := s.lostObjects(context.Background(), usedObjects, objectFiles, true, nil, nil)
	if err != nil {
		return r, err
	}
	if len(lostSet) == 0 && len(lostObjects) == 0 {
		return r, nil
	}
	lost, lostObject := isIn(lostSet), isIn(lostObjects)
	damaged, err := s.Index.DamagedFiles(lost, lostObject)
	if err != nil {
		return r, err
	}
	for _, d := range damaged {
		dropped, object, err := s.Index.DropLost(d.Ino, lost, lostObject)
		if err != nil {
			return r, err
		}
		if len(dropped) > 0 || object != nil {
			d.Lost = dropped
			r.Files = append(r.Files, d)
		}
	}
	if err := s.Index.Sync(); err != nil {
		return r, err
	}
	for _, h := range sortedHashes(lostSet) {
		if err := s.removeLost(h); err != nil {
			return r, err
		}
		r.RemovedChunks = append(r.RemovedChunks, h)
	}
	for _, h := range sortedHashes(lostObjects) {
		// The last file that was the object freed it (DB.OnObjectDropped);
		// one no file was is garbage that reads badly.
		if err := s.objects.Remove(h); err != nil {
			return r, fmt.Errorf("removing damaged object: %w", err)
		}
		r.RemovedObjects = append(r.RemovedObjects, h)
	}
	return r, nil
}

// removeLost removes damaged chunk h once no manifest uses it; whatever
// stands at its name (a file, an empty directory) goes.
func (s *Store) removeLost(h cas.Hash) error {
	var refs uint64
	err := s.Index.View(func(tx *index.Tx) (err error) {
		refs, err = tx.ChunkRefs(h)
		return err
	})
	if err != nil {
		return err
	}
	if refs > 0 {
		return fmt.Errorf("chunk %s is lost but still has %d references", h, refs)
	}
	if err := s.chunks.Remove(h); err != nil && !errors.Is(err, cas.ErrNotFound) {
		return fmt.Errorf("removing damaged chunk: %w", err)
	}
	return nil
}

func sortedHashes[V any](m map[cas.Hash]V) []cas.Hash {
	hs := make([]cas.Hash, 0, len(m))
	for h := range m {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, compareHash)
	return hs
}
