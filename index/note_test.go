package index_test

import (
	"testing"
	"time"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/owner"
)

// The namespace's calls note a write under an owner at most once a
// second, but always the first under an owner, always one under an owner
// not seen yet, and always the next after its job record was deleted: no
// owner's state goes without the records the collector judges it by.
func TestNamespaceNotesOnceASecond(t *testing.T) {
	db := openDB(t)
	chk := owner.Owner{Level: owner.LevelCheckpoint, Executor: "tm-1", Job: jobA, Checkpoint: "1"}
	last := func() int64 {
		t.Helper()
		j, err := readJob(db, jobA)
		if err != nil {
			t.Fatalf("job record: %v", err)
		}
		return j.LastWrite
	}
	n, err := db.NewInode(fileMode, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	update(t, db, func(tx *index.Tx) error { return tx.CreateOwned(index.RootIno, "f", n, chk) })
	t0 := inode(t, db, n.Ino).Ctime
	if got := last(); got != t0 {
		t.Fatalf("the first create noted %d, want its ctime %d", got, t0)
	}
	note := func(o owner.Owner, at time.Duration) {
		t.Helper()
		if err := db.NoteWrite(o, t0+int64(at)); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		what string
		o    owner.Owner
		at   time.Duration
		want time.Duration
	}{
		{"a close within the second", chk, 500 * time.Millisecond, 0},
		{"a close a second later", chk, 1100 * time.Millisecond, 1100 * time.Millisecond},
		{"a close under a new checkpoint", owner.Owner{Level: owner.LevelCheckpoint, Executor: "tm-1", Job: jobA, Checkpoint: "2"}, 1200 * time.Millisecond, 1200 * time.Millisecond},
		{"a close within the second again", chk, 1300 * time.Millisecond, 1200 * time.Millisecond},
	} {
		note(step.o, step.at)
		if got := last(); got != t0+int64(step.want) {
			t.Errorf("after %s: last write +%v, want +%v", step.what, time.Duration(got-t0), step.want)
		}
	}
	update(t, db, func(tx *index.Tx) error { return tx.DeleteJob(jobA) })
	note(chk, 1400*time.Millisecond)
	if got := last(); got != t0+int64(1400*time.Millisecond) {
		t.Errorf("the first close after the record was deleted: last write +%v, want +1.4s", time.Duration(got-t0))
	}
	// A link notes its new name's owner as a create does.
	other := owner.Owner{Level: owner.LevelJob, Executor: "tm-1", Job: jobB}
	update(t, db, func(tx *index.Tx) error {
		_, err := tx.LinkOwned(index.RootIno, "g", n.Ino, other)
		return err
	})
	if j, err := readJob(db, jobB); err != nil || j.LastWrite == 0 {
		t.Errorf("a link noted no write of its owner's job: %+v, %v", j, err)
	}
}
