package index_test

import (
	"path"
	"testing"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/owner"
)

// born is when the name p (with flinkid's {X}) was made, as its dirent says.
func born(t *testing.T, db *index.DB, p string) int64 {
	t.Helper()
	return dirent(t, db, fl(p)).Born
}

func dirent(t *testing.T, db *index.DB, p string) index.Dirent {
	t.Helper()
	var d index.Dirent
	err := db.View(func(tx *index.Tx) error {
		parent, err := tx.Resolve(path.Dir(p))
		if err != nil {
			return err
		}
		d, err = tx.Lookup(parent.Ino, path.Base(p))
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return d
}

// The executor's link and rename make names born when they are made; the
// collector judges a name by it (DESIGN invariant 4).
func TestNamesAreBornWhenTheExecutorMakesThem(t *testing.T) {
	db := openDB(t)
	tr := storetest.Build(t, db, "d/", "d/f", "e/")
	made := born(t, db, "d/f")
	if made == 0 || made != inode(t, db, tr.Ino(t, "d/f")).Ctime {
		t.Fatalf("d/f made at %d, want its creation time", made)
	}
	update(t, db, func(tx *index.Tx) error {
		_, err := tx.Link(tr.Ino(t, "e"), "g", tr.Ino(t, "d/f"))
		return err
	})
	linked := born(t, db, "e/g")
	if linked <= made {
		t.Errorf("e/g linked at %d, not after d/f was made at %d", linked, made)
	}
	if got := born(t, db, "d/f"); got != made {
		t.Errorf("linking moved d/f's birth from %d to %d", made, got)
	}
	update(t, db, func(tx *index.Tx) error {
		_, err := tx.Rename(tr.Ino(t, "d"), "f", tr.Ino(t, "e"), "h", 0)
		return err
	})
	renamed := born(t, db, "e/h")
	if renamed <= linked {
		t.Errorf("e/h renamed at %d, not after e/g was linked at %d", renamed, linked)
	}
	update(t, db, func(tx *index.Tx) error {
		_, err := tx.Rename(index.RootIno, "d", index.RootIno, "e", index.RenameExchange)
		return err
	})
	if got := born(t, db, "d"); got <= renamed || got != born(t, db, "e") {
		t.Errorf("exchanged names made at %d and %d, want both at the exchange", got, born(t, db, "e"))
	}
}

// A made pending name is born when it was made pending: the holder removes pending
// files by it, and other names of the same file must not move it. Holding
// the pending tree and restoring it keep it.
func TestNamesMadePendingAreBornThen(t *testing.T) {
	const id = "h1"
	db := openDB(t)
	storetest.Build(t, db, atticTree...)
	paths := []string{atticJidA, atticChk, atticFile, atticChk + "/db/000001.sst"}
	made := map[string]int64{}
	for _, p := range paths {
		made[p] = born(t, db, p)
	}
	rmrf(t, db, atticAid)
	pended := map[string]int64{}
	for _, p := range paths {
		pended[p] = atticBorn(t, db, index.AtticPending, p)
		if pended[p] <= made[p] {
			t.Errorf("%s made at %d, pended at %d: not after", p, made[p], pended[p])
		}
	}
	// Another name of a pending file made and removed: the pending name
	// keeps when it was made pending, whatever the inode's ctime does.
	update(t, db, func(tx *index.Tx) error {
		_, err := tx.Link(index.RootIno, "other", mustAtticLookup(t, db, index.AtticPending, atticFile))
		return err
	})
	update(t, db, func(tx *index.Tx) error { _, err := tx.Unlink(index.RootIno, "other"); return err })
	if got := atticBorn(t, db, index.AtticPending, atticFile); got != pended[atticFile] {
		t.Errorf("pending %s born at %d, at %d once another name came and went", atticFile, pended[atticFile], got)
	}
	if _, err := holdPending(db, atticAid, id); err != nil {
		t.Fatal(err)
	}
	update(t, db, func(tx *index.Tx) error {
		_, _, err := tx.RestoreTo(id, fl(atticAid), owner.FlinkRules())
		return err
	})
	for _, p := range paths {
		if got := born(t, db, p); got != pended[p] {
			t.Errorf("%s pended at %d, born at %d once held and restored", p, pended[p], got)
		}
	}
}

// atticBorn is when the name p (with flinkid's {X}) below attic directory name
// was born.
func atticBorn(t *testing.T, db *index.DB, name, p string) int64 {
	t.Helper()
	dir := mustAtticLookup(t, db, name, path.Dir(fl(p)))
	var d index.Dirent
	err := db.View(func(tx *index.Tx) (err error) {
		d, err = tx.Lookup(dir, path.Base(fl(p)))
		return err
	})
	if err != nil {
		t.Fatalf("%s/%s: %v", name, p, err)
	}
	return d.Born
}
