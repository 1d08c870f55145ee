package index

import (
	"sync"
	"time"

	"github.com/statefs/statefs/owner"
)

// noteEvery is how often a write under one owner is noted in its job and
// executor records at most. A checkpoint creates, links and closes
// thousands of files a second under a handful of owners; the records'
// last-write times need no finer grain. They lag the last write by less
// than noteEvery, and the collector keeps any inode written after its
// cutoff by the inode's own times whatever the records say; its cutoff is
// the grace period, minutes, before now.
const noteEvery = time.Second

// notes remembers when a write under each owner was last noted, so that
// the namespace's calls (noteWrite, DB.NoteWrite) can skip the records'
// update within noteEvery of it. A record that is deleted (DeleteJob,
// DeleteExecutor) forgets them all: the next write under any owner writes
// its records again, so that no owner has state without them.
type notes struct {
	// mu guards last and gen; it is a leaf: nothing is locked under it.
	mu   sync.Mutex
	last map[owner.Owner]int64
	// gen counts forgets: a note whose transaction began before a forget
	// is not remembered when it commits after it.
	gen uint64
}

// due says whether a write under o at now is to be noted, and the
// generation to hand to noted once it is.
func (n *notes) due(o owner.Owner, now int64) (bool, uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	last, ok := n.last[o]
	return !ok || now-last >= int64(noteEvery) || now < last, n.gen
}

// noted remembers that a write under o at now is in the records, unless
// they were deleted since gen.
func (n *notes) noted(o owner.Owner, now int64, gen uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if gen != n.gen {
		return
	}
	if n.last == nil || len(n.last) >= 4096 {
		n.last = map[owner.Owner]int64{} // owners are many only over time: start again
	}
	n.last[o] = now
}

// forget makes every next write note its owner's records.
func (n *notes) forget() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.gen++
	clear(n.last)
}

// noteWrite is NoteWrite for the namespace's own calls (CreateOwned,
// LinkOwned, DB.NoteWrite): it records nothing within noteEvery of the
// last write it noted under o.
func (tx *Tx) noteWrite(o owner.Owner, now int64) error {
	due, gen := tx.db.notes.due(o, now)
	if !due {
		return nil
	}
	tx.OnCommit(func() { tx.db.notes.noted(o, now, gen) })
	return tx.NoteWrite(o, now)
}

// NoteWrite notes a write under o at now, a writer's close, in o's job and
// executor records in a transaction of its own, unless one under o was
// noted less than noteEvery before: then it costs no transaction.
func (db *DB) NoteWrite(o owner.Owner, now int64) error {
	if o.Executor == "" && o.Job == "" {
		return nil
	}
	if due, _ := db.notes.due(o, now); !due {
		return nil
	}
	return db.Update(func(tx *Tx) error { return tx.noteWrite(o, now) })
}
