package index_test

import (
	"errors"
	"path"
	"syscall"
	"testing"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
)

const (
	fileMode = syscall.S_IFREG | 0o644
	dirMode  = syscall.S_IFDIR | 0o755
)

// openDB opens a new index in a temporary directory, closed at the end of
// the test, that checks itself after every commit (DB.Strict) and once
// more, reopened, when the test ends (storetest.CheckAtEnd).
func openDB(t *testing.T) *index.DB {
	t.Helper()
	dir := t.TempDir()
	storetest.CheckAtEnd(t, dir)
	db, err := index.Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	db.Strict = storetest.Strict(t)
	t.Cleanup(func() { db.Close() })
	return db
}

func update(t *testing.T, db *index.DB, fn func(tx *index.Tx) error) {
	t.Helper()
	if err := db.Update(fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func newIno(t *testing.T, db *index.DB) uint64 {
	t.Helper()
	ino, err := db.NewIno()
	if err != nil {
		t.Fatalf("NewIno: %v", err)
	}
	return ino
}

// create makes a new inode of the given mode called name in parent.
func create(t *testing.T, db *index.DB, parent uint64, name string, mode uint32) uint64 {
	t.Helper()
	ino := newIno(t, db)
	now := index.Now()
	update(t, db, func(tx *index.Tx) error {
		return tx.Create(parent, name, &index.Inode{Ino: ino, Mode: mode, Atime: now, Mtime: now, Ctime: now})
	})
	return ino
}

// inode reads inode ino, failing the test if it is not there.
func inode(t *testing.T, db *index.DB, ino uint64) *index.Inode {
	t.Helper()
	n, err := tryInode(db, ino)
	if err != nil {
		t.Fatalf("Inode(%d): %v", ino, err)
	}
	return n
}

func tryInode(db *index.DB, ino uint64) (n *index.Inode, err error) {
	err = db.View(func(tx *index.Tx) error {
		n, err = tx.Inode(ino)
		return err
	})
	return n, err
}

func nlink(t *testing.T, db *index.DB, ino uint64) uint32 {
	t.Helper()
	return inode(t, db, ino).Nlink
}

// names lists directory dir in the order ReadDir gives.
func names(t *testing.T, db *index.DB, dir uint64) []string {
	t.Helper()
	var ns []string
	err := db.View(func(tx *index.Tx) error {
		return tx.ReadDir(dir, func(d index.Dirent) bool {
			ns = append(ns, d.Name)
			return true
		})
	})
	if err != nil {
		t.Fatalf("ReadDir(%d): %v", dir, err)
	}
	return ns
}

func orphans(t *testing.T, db *index.DB) []uint64 {
	t.Helper()
	var inos []uint64
	err := db.View(func(tx *index.Tx) (err error) {
		inos, err = tx.Orphans()
		return err
	})
	if err != nil {
		t.Fatalf("Orphans: %v", err)
	}
	return inos
}

// walk lists every path below the root with its inode and link count, as
// the index has them now.
func walk(t *testing.T, db *index.DB) map[string][2]uint64 {
	t.Helper()
	all := map[string][2]uint64{"": {index.RootIno, uint64(nlink(t, db, index.RootIno))}}
	var visit func(dir uint64, prefix string)
	visit = func(dir uint64, prefix string) {
		var ds []index.Dirent
		err := db.View(func(tx *index.Tx) error {
			return tx.ReadDir(dir, func(d index.Dirent) bool { ds = append(ds, d); return true })
		})
		if err != nil {
			t.Fatalf("ReadDir: %v", err)
		}
		for _, d := range ds {
			p := path.Join(prefix, d.Name)
			all[p] = [2]uint64{d.Ino, uint64(nlink(t, db, d.Ino))}
			if d.Mode&syscall.S_IFMT == syscall.S_IFDIR {
				visit(d.Ino, p)
			}
		}
	}
	visit(index.RootIno, "")
	return all
}

// lookup resolves a slash-separated path; ErrNotFound if a name is missing.
func lookup(db *index.DB, p string) (ino uint64, err error) {
	err = db.View(func(tx *index.Tx) error {
		n, err := tx.Resolve(p)
		if err == nil {
			ino = n.Ino
		}
		return err
	})
	return ino, err
}

func mustLookup(t *testing.T, db *index.DB, p string) uint64 {
	t.Helper()
	ino, err := lookup(db, p)
	if err != nil {
		t.Fatalf("lookup %q: %v", p, err)
	}
	return ino
}

func mustNotExist(t *testing.T, db *index.DB, p string) {
	t.Helper()
	if ino, err := lookup(db, p); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("lookup %q = %d, %v; want ErrNotFound", p, ino, err)
	}
}
