package index_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
)

func xattrNames(t *testing.T, db *index.DB, ino uint64) []string {
	t.Helper()
	var ns []string
	if err := db.View(func(tx *index.Tx) error { return tx.Xattrs(ino, func(n string) { ns = append(ns, n) }) }); err != nil {
		t.Fatalf("Xattrs: %v", err)
	}
	return ns
}

func getXattr(db *index.DB, ino uint64, name string) (v []byte, err error) {
	err = db.View(func(tx *index.Tx) (err error) { v, err = tx.Xattr(ino, name); return err })
	return v, err
}

func TestXattrs(t *testing.T) {
	db := openDB(t)
	tr := storetest.Build(t, db, "f", "g")
	f, g := tr["f"], tr["g"]
	set := map[string]string{"user.b": "2", "user.a": "1", "security.capability": "\x00\x01", "user.empty": ""}
	update(t, db, func(tx *index.Tx) error {
		for k, v := range set {
			if err := tx.SetXattr(f, k, []byte(v)); err != nil {
				return err
			}
		}
		return tx.SetXattr(g, "user.other", []byte("g"))
	})
	for k, v := range set {
		if got, err := getXattr(db, f, k); err != nil || string(got) != v {
			t.Errorf("Xattr(%q) = %q, %v; want %q", k, got, err, v)
		}
	}
	if got, want := xattrNames(t, db, f), []string{"security.capability", "user.a", "user.b", "user.empty"}; !slices.Equal(got, want) {
		t.Errorf("Xattrs(f) = %q, want %q", got, want)
	}
	if got := xattrNames(t, db, g); !slices.Equal(got, []string{"user.other"}) {
		t.Errorf("Xattrs(g) = %q, want only its own", got)
	}

	update(t, db, func(tx *index.Tx) error { return tx.SetXattr(f, "user.a", []byte("replaced")) })
	if got, _ := getXattr(db, f, "user.a"); string(got) != "replaced" {
		t.Errorf("Xattr after replacing = %q", got)
	}

	update(t, db, func(tx *index.Tx) error { return tx.RemoveXattr(f, "user.a") })
	if _, err := getXattr(db, f, "user.a"); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("Xattr after remove: %v, want ErrNotFound", err)
	}
	if err := db.Update(func(tx *index.Tx) error { return tx.RemoveXattr(f, "user.a") }); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("removing a removed xattr: %v, want ErrNotFound", err)
	}
	if _, err := getXattr(db, f, "user.never"); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("Xattr of an unset name: %v, want ErrNotFound", err)
	}

	update(t, db, func(tx *index.Tx) error {
		if _, err := tx.Unlink(index.RootIno, "f"); err != nil {
			return err
		}
		_, err := tx.Reap(f)
		return err
	})
	if got := xattrNames(t, db, f); len(got) != 0 {
		t.Errorf("Xattrs of a reaped inode = %q, want none", got)
	}
	if got := xattrNames(t, db, g); !slices.Equal(got, []string{"user.other"}) {
		t.Errorf("reaping f changed g's xattrs to %q", got)
	}
}

// MayHaveXattrs is false only for an inode that has no extended
// attribute, as set now or when the index was opened; a read-only index
// cannot tell.
func TestMayHaveXattrs(t *testing.T) {
	dir := t.TempDir()
	storetest.CheckAtEnd(t, dir)
	db, err := index.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tr := storetest.Build(t, db, "with", "without")
	with, without := tr["with"], tr["without"]
	check := func(when string, db *index.DB, wantWith, wantWithout bool) {
		t.Helper()
		if got := db.MayHaveXattrs(with); got != wantWith {
			t.Errorf("%s: MayHaveXattrs of a file with one %v, want %v", when, got, wantWith)
		}
		if got := db.MayHaveXattrs(without); got != wantWithout {
			t.Errorf("%s: MayHaveXattrs of a file without %v, want %v", when, got, wantWithout)
		}
	}
	check("before any was set", db, false, false)
	update(t, db, func(tx *index.Tx) error { return tx.SetXattr(with, "user.flink", []byte("x")) })
	check("once set", db, true, false)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = index.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	check("reopened", db, true, false)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := index.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	check("read-only", ro, true, true)
}
