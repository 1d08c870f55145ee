package index_test

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
)

func reopen(t *testing.T, db *index.DB, dir string) *index.DB {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	db, err := index.Open(dir)
	if err != nil {
		t.Fatalf("Open again: %v", err)
	}
	return db
}

func TestInodeRoundTrip(t *testing.T) {
	dir := t.TempDir()
	db, err := index.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	inodes := []index.Inode{
		{Ino: 100, Mode: syscall.S_IFREG | 0o4755, Uid: 1000, Gid: 2000, Nlink: 3, Rdev: 7, Size: 1 << 40,
			Atime: 1, Mtime: math.MaxInt64, Ctime: -1_000_000_001, Parent: 5, Staging: 42},
		{Ino: 101, Mode: syscall.S_IFLNK | 0o777, Uid: math.MaxUint32, Gid: math.MaxUint32, Nlink: 1,
			Atime: math.MinInt64, Mtime: 0, Ctime: 1_700_000_000_999_999_999, Target: "../" + strings.Repeat("x", 4000)},
		{Ino: 102, Mode: syscall.S_IFCHR | 0o600, Rdev: math.MaxUint32, Nlink: 1},
		{Ino: math.MaxUint64, Mode: syscall.S_IFDIR | 0o700, Nlink: 2, Size: 4096, Parent: index.RootIno},
		{Ino: 103, Mode: syscall.S_IFLNK | 0o777, Nlink: 1, Target: "ünïcödé target"},
	}
	update(t, db, func(tx *index.Tx) error {
		for i := range inodes {
			if err := tx.PutInode(&inodes[i]); err != nil {
				return err
			}
		}
		return nil
	})
	check := func(when string) {
		for _, want := range inodes {
			if got := inode(t, db, want.Ino); !reflect.DeepEqual(*got, want) {
				t.Errorf("%s: Inode(%d) = %+v, want %+v", when, want.Ino, *got, want)
			}
		}
	}
	check("before Close")
	db = reopen(t, db, dir)
	check("after Close and Open")
}

func TestNamespacePersists(t *testing.T) {
	dir := t.TempDir()
	storetest.CheckAtEnd(t, dir)
	db, err := index.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	storetest.Build(t, db, "a/", "a/b/", "a/f", "g=a/f")
	update(t, db, func(tx *index.Tx) error { return tx.SetXattr(index.RootIno, "user.x", []byte("y")) })
	before := walk(t, db)
	db = reopen(t, db, dir)
	if after := walk(t, db); !reflect.DeepEqual(after, before) {
		t.Errorf("tree after reopening = %v, want %v", after, before)
	}
	if v, err := getXattr(db, index.RootIno, "user.x"); err != nil || string(v) != "y" {
		t.Errorf("xattr after reopening = %q, %v", v, err)
	}
}

// Inode numbers and staging ids are never handed out twice, across Close
// and Open too: a kernel that still caches an old inode number must never
// see it name another file, and a staging file name is never reused.
func TestNumbersNeverRepeat(t *testing.T) {
	dir := t.TempDir()
	storetest.CheckAtEnd(t, dir)
	db, err := index.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	seenIno := map[uint64]bool{index.RootIno: true}
	seenStaging := map[uint64]bool{0: true}
	for round := range 3 {
		for range 2000 { // more than one lease of the sequence
			ino, err := db.NewIno()
			if err != nil {
				t.Fatal(err)
			}
			id, err := db.NewStagingID()
			if err != nil {
				t.Fatal(err)
			}
			if seenIno[ino] || seenStaging[id] {
				t.Fatalf("round %d: ino %d (seen %v), staging id %d (seen %v) handed out before", round, ino, seenIno[ino], id, seenStaging[id])
			}
			seenIno[ino], seenStaging[id] = true, true
		}
		db = reopen(t, db, dir)
	}
}

func TestOpenRefusesOtherFormat(t *testing.T) {
	dir := t.TempDir()
	storetest.CheckAtEnd(t, dir)
	db, err := index.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := create(t, db, index.RootIno, "f", fileMode)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// The format version is the value of the one-byte key "v"; this is the
	// one place the test knows the index's key layout.
	bdb, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(txn *badger.Txn) error { return txn.Set([]byte("v"), []byte{index.FormatVersion + 1}) })
	if err := errors.Join(err, bdb.Close()); err != nil {
		t.Fatal(err)
	}

	db, err = index.Open(dir)
	if err == nil {
		db.Close()
		t.Fatal("Open of an index with another format version succeeded")
	}
	if !errors.Is(err, index.ErrFormat) {
		t.Errorf("Open = %v, want ErrFormat", err)
	}

	// Nothing was rewritten: putting the version back opens the old index.
	bdb, err = badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(txn *badger.Txn) error { return txn.Set([]byte("v"), []byte{index.FormatVersion}) })
	if err := errors.Join(err, bdb.Close()); err != nil {
		t.Fatal(err)
	}
	db, err = index.Open(dir)
	if err != nil {
		t.Fatalf("Open with the right version again: %v", err)
	}
	defer db.Close()
	if got := mustLookup(t, db, "f"); got != f {
		t.Errorf("f is inode %d after the refused Open, want %d", got, f)
	}
	if got := names(t, db, index.RootIno); !slices.Equal(got, []string{"f"}) {
		t.Errorf("root lists %q, want [f]", got)
	}
}

// STATEFS_INDEX_MEMTABLE_MIB, the crash campaign's knob, makes badger's
// memtables that many MiB: 4 MiB of changes flush a 1 MiB memtable into a
// table on disk, and not the default 16 MiB one. A bad value is refused
// with one line naming it.
func TestMemTableKnob(t *testing.T) {
	t.Setenv("STATEFS_INDEX_MEMTABLE_MIB", "lots")
	if _, err := index.Open(t.TempDir()); err == nil || !strings.Contains(err.Error(), "STATEFS_INDEX_MEMTABLE_MIB") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Open with STATEFS_INDEX_MEMTABLE_MIB=lots: %v, want one line naming it", err)
	}
	for _, c := range []struct {
		mib    string
		tables bool
	}{{"", false}, {"1", true}} {
		t.Setenv("STATEFS_INDEX_MEMTABLE_MIB", c.mib)
		dir := t.TempDir()
		db, err := index.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		value := make([]byte, 60<<10)
		for i := range 70 {
			value[0] = byte(i)
			if err := db.Update(func(tx *index.Tx) error { return tx.SetXattr(100, fmt.Sprint("user.a", i), value) }); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		tables := func() bool {
			names, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
			return len(names) > 0
		}
		for c.tables && !tables() && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if tables() != c.tables {
			t.Errorf("STATEFS_INDEX_MEMTABLE_MIB=%q: 4 MiB of changes left tables on disk: %v, want %v", c.mib, tables(), c.tables)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// OnCommit functions run after the commit, in the order registered, and
// never for a transaction that fails; a dropped staging reference reaches
// OnStagingDropped the same way.
func TestOnCommit(t *testing.T) {
	db := openDB(t)
	var got []string
	db.OnStagingDropped(func(id uint64) { got = append(got, fmt.Sprint("dropped ", id)) })
	f := create(t, db, index.RootIno, "f", fileMode)
	update(t, db, func(tx *index.Tx) error {
		n, err := tx.Inode(f)
		if err != nil {
			return err
		}
		_, err = tx.SetStaging(n, 7)
		return err
	})
	if len(got) != 0 {
		t.Fatalf("a first staging file dropped %v", got)
	}
	failed := errors.New("no")
	err := db.Update(func(tx *index.Tx) error {
		tx.OnCommit(func() { got = append(got, "failed transaction") })
		n, err := tx.Inode(f)
		if err != nil {
			return err
		}
		if _, err := tx.SetStaging(n, 8); err != nil {
			return err
		}
		return failed
	})
	if !errors.Is(err, failed) || len(got) != 0 {
		t.Fatalf("a failed transaction: %v, ran %v", err, got)
	}
	update(t, db, func(tx *index.Tx) error {
		tx.OnCommit(func() {
			var n int
			db.View(func(tx *index.Tx) error { n, _ = tx.CountStaging(); return nil })
			got = append(got, fmt.Sprint("first, ", n, " staging"))
		})
		n, err := tx.Inode(f)
		if err != nil {
			return err
		}
		_, err = tx.SetStaging(n, 9)
		tx.OnCommit(func() { got = append(got, "last") })
		return err
	})
	if want := []string{"first, 1 staging", "dropped 7", "last"}; !slices.Equal(got, want) {
		t.Errorf("ran %q, want %q", got, want)
	}
}
