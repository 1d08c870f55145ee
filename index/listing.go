package index

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// listingBudget is how many directory entries, over all directories, the
// listings cache holds: some 20 MiB of names.
const listingBudget = 1 << 18

// listings caches the entries of recently listed directories as the latest
// commit left them. Badger keeps every version of a key, and a removed
// key's tombstone, until its memtable is flushed and a compaction drops
// them; a directory whose names come and go (RocksDB's, where every flush
// and compaction makes and removes files) would cost a scan of its whole
// history at each listing, growing with the daemon's life. From the cache
// a listing costs its live names.
//
// Commits keep it exact: a transaction notes each name it sets or deletes
// (Tx.set, Tx.del), and the commit applies them under writeMu, before
// Update returns, so that whatever follows a change sees it. A directory
// is read into the cache under writeMu too, so no commit falls between the
// read and the insertion. A commit that fails empties the cache.
type listings struct {
	mu      sync.Mutex
	dirs    *simplelru.LRU[uint64, *listing]
	entries int // held over all directories
	budget  int
}

// listing is one directory's entries, sorted by name.
type listing struct{ ents []Dirent }

// direntChange is one name a transaction set (d is its entry) or deleted
// (d is nil); or, with corrupt, set to a record that does not decode, so
// that the directory is read anew (and fails as the index does).
type direntChange struct {
	dir     uint64
	name    string
	d       *Dirent
	corrupt bool
}

func newListings(budget int) *listings {
	l := &listings{budget: budget}
	// The LRU's own bound is the number of directories; the budget of
	// entries is what evicts.
	l.dirs, _ = simplelru.NewLRU[uint64, *listing](budget, func(_ uint64, v *listing) { l.entries -= len(v.ents) })
	return l
}

// get returns up to limit (0: all) of directory dir's entries from the
// first name not before from, and whether the directory is cached.
func (l *listings) get(dir uint64, from string, limit int) ([]Dirent, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.dirs.Get(dir)
	if !ok {
		return nil, false
	}
	i, _ := slices.BinarySearchFunc(v.ents, from, byName)
	ents := v.ents[i:]
	if limit > 0 && len(ents) > limit {
		ents = ents[:limit]
	}
	return slices.Clone(ents), true
}

// put caches directory dir's entries, sorted by name.
func (l *listings) put(dir uint64, ents []Dirent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(ents) > l.budget/4 {
		return // a directory this large would push most others out
	}
	l.dirs.Remove(dir)
	l.dirs.Add(dir, &listing{ents: ents})
	l.entries += len(ents)
	l.shrink()
}

// apply brings the cached directories up to a commit's changes, in the
// order the transaction made them.
func (l *listings) apply(changes []direntChange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range changes {
		v, ok := l.dirs.Peek(c.dir)
		if !ok {
			continue
		}
		if c.corrupt {
			l.dirs.Remove(c.dir)
			continue
		}
		i, found := slices.BinarySearchFunc(v.ents, c.name, byName)
		switch {
		case c.d != nil && found:
			v.ents[i] = *c.d
		case c.d != nil:
			v.ents = slices.Insert(v.ents, i, *c.d)
			l.entries++
		case found:
			v.ents = slices.Delete(v.ents, i, i+1)
			l.entries--
		}
	}
	l.shrink()
}

// reset forgets every directory.
func (l *listings) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dirs.Purge()
}

// shrink evicts the least recently listed directories until the entries
// fit the budget; l.mu is held.
func (l *listings) shrink() {
	for l.entries > l.budget && l.dirs.Len() > 0 {
		l.dirs.RemoveOldest()
	}
}

func byName(d Dirent, name string) int { return strings.Compare(d.Name, name) }

// noteDirent records, for the listings cache, a set (value non-nil) or a
// delete of key, if it is a directory entry's.
func (tx *Tx) noteDirent(key, value []byte) {
	if tx.db.listings == nil || len(key) == 0 || key[0] != prefixDirent {
		return
	}
	dir, name, ok := keyInoName(key)
	if !ok {
		return
	}
	c := direntChange{dir: dir, name: name}
	if value != nil {
		d, err := decodeDirent(c.name, value)
		c.d, c.corrupt = &d, err != nil
	}
	tx.dirents = append(tx.dirents, c)
}

// Listing returns up to limit (0: all) of directory dir's entries from the
// first name not before from, in the names' byte order, as the latest
// commit left them: a listing served to the kernel, which is stale as soon
// as it is sent anyway. It may be newer than a View begun before it, so
// code that needs one snapshot of the namespace (Check, walks) reads the
// directory in its transaction (Tx.ReadDir) instead. A directory not
// cached is read under writeMu, so Listing is never called from an
// Update's function.
func (db *DB) Listing(dir uint64, from string, limit int) ([]Dirent, error) {
	if db.listings == nil {
		return db.scanListing(dir, from, limit)
	}
	if ents, ok := db.listings.get(dir, from, limit); ok {
		return ents, nil
	}
	if from != "" || limit > 0 {
		// Part of a directory not cached (too large to keep, or pushed
		// out since it was listed whole): that part alone.
		return db.scanListing(dir, from, limit)
	}
	// Read it under writeMu: no commit can fall between this snapshot and
	// the insertion.
	db.writeMu.Lock()
	ents, err := db.scanListing(dir, "", 0)
	if err == nil {
		db.listings.put(dir, ents)
	}
	db.writeMu.Unlock()
	if err != nil {
		return nil, err
	}
	return slices.Clone(ents), nil
}

// scanListing reads a listing from the index itself.
func (db *DB) scanListing(dir uint64, from string, limit int) ([]Dirent, error) {
	var ents []Dirent
	err := db.View(func(tx *Tx) error {
		return tx.ReadDirFrom(dir, from, func(d Dirent) bool {
			ents = append(ents, d)
			return limit <= 0 || len(ents) < limit
		})
	})
	return ents, err
}

// problemListing is a cached listing that is not the index's, which only
// DB.Strict looks for.
const problemListing = "listing"

// checkListings compares every cached listing with the index; for
// DB.Strict, with writeMu held.
func (db *DB) checkListings() []Problem {
	if db.listings == nil {
		return nil
	}
	db.listings.mu.Lock()
	cached := make(map[uint64][]Dirent, db.listings.dirs.Len())
	for _, dir := range db.listings.dirs.Keys() {
		v, _ := db.listings.dirs.Peek(dir)
		cached[dir] = slices.Clone(v.ents)
	}
	db.listings.mu.Unlock()
	var problems []Problem
	for dir, ents := range cached {
		want, err := db.scanListing(dir, "", 0)
		if err != nil {
			return append(problems, Problem{Kind: problemListing, Detail: fmt.Sprintf("directory %d: %v", dir, err)})
		}
		if !slices.Equal(ents, want) {
			problems = append(problems, Problem{Kind: problemListing,
				Detail: fmt.Sprintf("directory %d: cached listing %v, index %v", dir, ents, want)})
		}
	}
	return problems
}
