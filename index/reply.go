package index

import (
	"encoding/binary"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// A reply record says that the kernel's request of a unique id changed
// the index, in the transaction that applied it, and what that request is
// to be answered with. A server that dies after the commit and before its
// answer leaves the request to the kernel, which sends it again to the
// next server of the connection (FUSE_NOTIFY_RESEND); that server answers
// it from the record instead of applying it twice (DESIGN.md, "Exactly
// once"). Only requests that committed are recorded, so the answer's errno
// is always 0.

// ReplyKeep is how long a reply record is kept at least. A request sent
// again is one a dead server had read and not answered: its record is as
// old as the time the keeper takes to start the next server and the next
// server to take the connection over, under a second, or the keeper gives
// the connection up first (a crash loop). A minute leaves room for a slow
// disk and a large index to open, and bounds the records to the mutating
// requests of that minute.
const ReplyKeep = time.Minute

// ReplyPruneSlack is how much older than ReplyKeep the oldest record gets
// before records are pruned again. Pruning walks an iterator, which costs
// a put more than the record itself: with a record pruned as soon as it is
// older than ReplyKeep, every put under a steady stream of requests would
// walk one. So pruning comes in spells: once the oldest record is older
// than ReplyKeep and ReplyPruneSlack, the puts that follow delete the
// records older than ReplyKeep, replyPruneBatch at a time, down to the
// first younger one, and the next spell is ReplyPruneSlack later. A record
// is kept at least ReplyKeep still (invariant 8).
const ReplyPruneSlack = ReplyKeep / 2

// replyPruneBatch is how many records older than ReplyKeep a PutReply
// deletes at most: many more than the one it adds, so that a spell (or a
// backlog: records of a server that stopped writing for a while) drains
// in a small share of the puts, and few enough that no transaction grows
// by more than a few dozen keys.
const replyPruneBatch = 16

// replyLen is the length of an encoded Reply: At and Ino.
const replyLen = 16

// Reply is what a committed request answers with, beside its errno of 0.
type Reply struct {
	At  int64  // when it committed, ns since the epoch
	Ino uint64 // the inode a request that answers an entry answered; 0 for the others
}

func encodeReply(r Reply) []byte {
	b := make([]byte, replyLen)
	binary.BigEndian.PutUint64(b, uint64(r.At))
	binary.BigEndian.PutUint64(b[8:], r.Ino)
	return b
}

func decodeReply(v []byte) (Reply, error) {
	if len(v) != replyLen {
		return Reply{}, fmt.Errorf("reply record of %d bytes, want %d", len(v), replyLen)
	}
	return Reply{At: int64(binary.BigEndian.Uint64(v)), Ino: binary.BigEndian.Uint64(v[8:])}, nil
}

// PutReply records that the kernel's request unique committed in this
// transaction, and deletes up to replyPruneBatch of the oldest records
// that are older than ReplyKeep at r.At, in a spell of pruning
// (ReplyPruneSlack).
func (tx *Tx) PutReply(unique uint64, r Reply) error {
	if err := tx.pruneReplies(r.At); err != nil {
		return err
	}
	return tx.set(replyKey(unique), encodeReply(r))
}

// Reply is the reply record of the kernel's request unique; ErrNotFound if
// it has none.
func (tx *Tx) Reply(unique uint64) (*Reply, error) {
	v, err := tx.get(replyKey(unique))
	if err != nil {
		return nil, err
	}
	r, err := decodeReply(v)
	if err != nil {
		return nil, fmt.Errorf("request %d: %w", unique, err)
	}
	return &r, nil
}

// pruneReplies deletes, for a record put at time now, the oldest reply
// records made more than ReplyKeep before, up to replyPruneBatch of them:
// from the first record in key order (the kernel's order) to the first
// young one. One that does not decode answers nothing and goes too.
//
// It costs a put nothing until the first record is older than ReplyKeep
// and ReplyPruneSlack (the DB's replyOldest says when it was made; 0, for
// unknown, while a spell goes on), and the walk starts at the DB's
// replyFloor, past the records earlier transactions deleted, whose
// tombstones the index keeps until it compacts. Both are noted when the
// transaction commits.
func (tx *Tx) pruneReplies(now int64) error {
	before := now - int64(ReplyKeep)
	if oldest := tx.db.replyOldest.Load(); oldest != 0 && before-int64(ReplyPruneSlack) <= oldest {
		return nil
	}
	prefix := kindPrefix(prefixReply)
	it := tx.txn.NewIterator(badger.IteratorOptions{Prefix: prefix}) // no values fetched ahead
	defer it.Close()
	var old [][]byte
	first := int64(0) // when the first record that stays was made; 0 for unknown
	for it.Seek(replyKey(tx.db.replyFloor.Load())); it.ValidForPrefix(prefix); it.Next() {
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			return err
		}
		if r, err := decodeReply(v); err == nil && r.At >= before {
			first = r.At
			break
		}
		if len(old) == replyPruneBatch {
			break // more old records: first unknown
		}
		old = append(old, it.Item().KeyCopy(nil))
	}
	if !it.ValidForPrefix(prefix) {
		first = now // none stays: the record put is the first
	}
	for _, k := range old {
		if err := tx.del(k); err != nil {
			return err
		}
	}
	floor := uint64(0)
	if len(old) > 0 {
		floor, _ = keyReply(old[len(old)-1])
		floor++
	}
	tx.OnCommit(func() {
		tx.db.raiseReplyFloor(floor)
		tx.db.replyOldest.Store(first)
	})
	return nil
}

// raiseReplyFloor moves the start of pruneReplies' walk up to floor, never
// down: transactions' OnCommit functions may run out of order.
func (db *DB) raiseReplyFloor(floor uint64) {
	for {
		cur := db.replyFloor.Load()
		if floor <= cur || db.replyFloor.CompareAndSwap(cur, floor) {
			return
		}
	}
}
