package store

import (
	"sync"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
)

// contentGuard keeps Sweep from removing a chunk (or, the store's second
// guard, an object) between the moment a seal finds or stores it and the
// commit that makes the seal's reference to it visible in the index (DESIGN
// invariant 3), hash by hash: a seal pins
// each chunk before it puts it and unpins them all after its commit (or
// when it is dropped); Sweep dooms, under the same lock, only candidates
// that are unreferenced and unpinned, and removes them. A seal that wants a
// doomed chunk waits until the sweep has removed it, then stores it anew.
// Neither holds the other off longer than that: a long seal does not stall
// a sweep, and a sweep stalls only the seals that want the chunks it is
// removing at that moment.
type contentGuard struct {
	// refs is the index's reference count of a hash: ChunkRefs or
	// ObjectRefs.
	refs func(tx *index.Tx, h cas.Hash) (uint64, error)
	// mu guards pins and doomed. doom holds it across a read transaction of
	// the index, which takes no lock of ours; nothing else is taken while
	// it is held. fs may hold a file's mu when a seal unpins (its commit or
	// drop); pins are taken without it.
	mu sync.Mutex
	// removed is broadcast when a sweep has removed the chunks it doomed.
	removed sync.Cond
	pins    map[cas.Hash]int
	doomed  map[cas.Hash]bool
}

// init readies a zero contentGuard; the caller holds mu.
func (g *contentGuard) init() {
	if g.pins == nil {
		g.pins, g.doomed = map[cas.Hash]int{}, map[cas.Hash]bool{}
		g.removed.L = &g.mu
	}
}

// pin keeps chunk h from being swept until unpin; it waits while a sweep
// is removing h.
func (g *contentGuard) pin(h cas.Hash) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.init()
	for g.doomed[h] {
		g.removed.Wait()
	}
	g.pins[h]++
}

// unpin ends pins taken with pin, once the references that needed them are
// committed or given up.
func (g *contentGuard) unpin(hs []cas.Hash) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.init()
	for _, h := range hs {
		if g.pins[h]--; g.pins[h] <= 0 {
			delete(g.pins, h)
		}
	}
}

// doom returns the candidates that the index says are unreferenced and no
// seal pins, and marks them so that no seal pins them until release. The
// index is asked under the guard's lock: a seal unpins only after its
// commit, so a chunk it referred to is either pinned or referenced then.
func (g *contentGuard) doom(db *index.DB, candidates []cas.Hash) ([]cas.Hash, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.init()
	var doomed []cas.Hash
	err := db.View(func(tx *index.Tx) error {
		for _, h := range candidates {
			// A hash another sweep (or the freeing of a dropped object)
			// has doomed is that one's to remove.
			if g.pins[h] > 0 || g.doomed[h] {
				continue
			}
			refs, err := g.refs(tx, h)
			if err != nil {
				return err
			}
			if refs == 0 {
				doomed = append(doomed, h)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, h := range doomed {
		g.doomed[h] = true
	}
	return doomed, nil
}

// release lets seals pin the chunks doom returned again, now removed.
func (g *contentGuard) release(doomed []cas.Hash) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.init()
	for _, h := range doomed {
		delete(g.doomed, h)
	}
	g.removed.Broadcast()
}
