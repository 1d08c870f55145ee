package index_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
)

// A kill while badger creates a memtable file leaves it empty; the index
// must still open, with everything committed before.
func TestOpenAfterKillLeftAnEmptyMemtable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "index")
	storetest.CheckAtEnd(t, dir)
	db, err := index.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ino, err := db.NewIno()
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *index.Tx) error {
		now := index.Now()
		return tx.Create(index.RootIno, "kept", &index.Inode{Ino: ino, Mode: 0o100644, Mtime: now, Ctime: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00099.mem"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err = index.Open(dir)
	if err != nil {
		t.Fatalf("opening after a kill left an empty memtable file: %v", err)
	}
	defer db.Close()
	err = db.View(func(tx *index.Tx) error {
		_, err := tx.Lookup(index.RootIno, "kept")
		return err
	})
	if err != nil {
		t.Fatalf("what was committed before is gone: %v", err)
	}
}
