package index_test

import (
	"errors"
	"testing"

	"github.com/statefs/statefs/index"
)

// replies reads the reply records of uniques 1 to n and returns the ones
// that have one.
func replies(t *testing.T, db *index.DB, n uint64) map[uint64]index.Reply {
	t.Helper()
	got := map[uint64]index.Reply{}
	err := db.View(func(tx *index.Tx) error {
		for u := uint64(1); u <= n; u++ {
			r, err := tx.Reply(u)
			if errors.Is(err, index.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			got[u] = *r
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading reply records: %v", err)
	}
	return got
}

// A reply record reads back as it was put, and a request without one is
// ErrNotFound.
func TestReplyRecord(t *testing.T) {
	db := openDB(t)
	update(t, db, func(tx *index.Tx) error { return tx.PutReply(7, index.Reply{At: index.Now(), Ino: 42}) })
	err := db.View(func(tx *index.Tx) error {
		if r, err := tx.Reply(7); err != nil || r.Ino != 42 {
			t.Errorf("Reply(7) = %+v, %v; want inode 42", r, err)
		}
		if _, err := tx.Reply(9); !errors.Is(err, index.ErrNotFound) {
			t.Errorf("Reply(9) = %v, want ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A reply record is kept for ReplyKeep after it was made, however many
// come after it; once older than that and ReplyPruneSlack, the records that
// come after it delete it, the oldest first, many with each, so what is
// kept stays bounded by the requests of the last ReplyKeep and
// ReplyPruneSlack, and puts walk no records between spells of pruning.
func TestReplyRecordsKeptForReplyKeep(t *testing.T) {
	db := openDB(t)
	const old = 20
	t0 := index.Now()
	for u := uint64(1); u <= old; u++ {
		update(t, db, func(tx *index.Tx) error { return tx.PutReply(u, index.Reply{At: t0, Ino: u}) })
	}
	// Within ReplyKeep of the old records: every one stays.
	young := t0 + int64(index.ReplyKeep)
	u := uint64(old)
	for range old {
		u++
		update(t, db, func(tx *index.Tx) error { return tx.PutReply(u, index.Reply{At: young}) })
	}
	if got := replies(t, db, u); len(got) != int(u) {
		t.Fatalf("%d of %d records younger than ReplyKeep kept", len(got), u)
	}
	// Past it, but within ReplyPruneSlack: no put prunes.
	for _, at := range []int64{young + 1, young + int64(index.ReplyPruneSlack)} {
		u++
		update(t, db, func(tx *index.Tx) error { return tx.PutReply(u, index.Reply{At: at}) })
	}
	if got := replies(t, db, u); len(got) != int(u) {
		t.Fatalf("%d of %d records kept, with none older than ReplyKeep and ReplyPruneSlack", len(got), u)
	}
	// Past both: the records that come next delete the old ones, not the
	// young; each deletes more than it adds, so they are gone before as
	// many new records come.
	later := young + int64(index.ReplyPruneSlack) + 1
	for range old {
		u++
		update(t, db, func(tx *index.Tx) error { return tx.PutReply(u, index.Reply{At: later}) })
	}
	got := replies(t, db, u)
	for v := uint64(1); v <= u; v++ {
		_, kept := got[v]
		if want := v > old; kept != want {
			t.Errorf("record %d kept %v, want %v (records 1-%d are older than ReplyKeep)", v, kept, want, old)
		}
	}
}
