package index

// White-box: the test writes a format 1 index itself.

import (
	"errors"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

// A format 1 index (dirents without when their names were made) opens as
// format 2: its names read as made at 0, before any verdict, and a move
// keeps that. An index of a newer format is refused and left as it was.
func TestOpenUpgradesFormat1(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := &Inode{Ino: RootIno + 1, Mode: modeReg | 0o644, Nlink: 1, Ctime: 1}
	err = db.Update(func(tx *Tx) error {
		if err := tx.PutInode(n); err != nil {
			return err
		}
		v1 := encodeDirent(Dirent{Ino: n.Ino, Mode: n.Mode})[:direntV1Len]
		if err := tx.set(inoNameKey(prefixDirent, RootIno, "old"), v1); err != nil {
			return err
		}
		return tx.set(versionKey(), []byte{formatV1})
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}

	if db, err = Open(dir); err != nil {
		t.Fatalf("Open of a format 1 index: %v", err)
	}
	err = db.Update(func(tx *Tx) error {
		if v, err := tx.get(versionKey()); err != nil || len(v) != 1 || v[0] != FormatVersion {
			t.Errorf("version after the upgrade %v, %v; want %d", v, err, FormatVersion)
		}
		d, err := tx.Lookup(RootIno, "old")
		if err != nil || d.Ino != n.Ino || d.Born != 0 {
			t.Errorf("format 1 dirent reads %+v, %v; want inode %d made at 0", d, err, n.Ino)
		}
		if _, err := tx.move(RootIno, "old", RootIno, "moved", 0); err != nil {
			return err
		}
		d, err = tx.Lookup(RootIno, "moved")
		if err != nil || d.Born != 0 {
			t.Errorf("moved format 1 dirent reads %+v, %v; want made at 0", d, err)
		}
		return nil
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}

	bdb, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(txn *badger.Txn) error { return txn.Set(versionKey(), []byte{FormatVersion + 1}) })
	if err := errors.Join(err, bdb.Close()); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir); !errors.Is(err, ErrFormat) {
		if err == nil {
			db.Close()
		}
		t.Fatalf("Open of format %d = %v, want ErrFormat", FormatVersion+1, err)
	}
}
