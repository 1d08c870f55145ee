package storetest

import (
	"hash/fnv"
	"math/rand/v2"
	"path"
	"strings"
	"syscall"
	"testing"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/flinkid"
	"github.com/statefs/statefs/owner"
)

// A Tree is a namespace that Build made: each path, its {X} expanded and
// without a trailing "/", and its inode; "" is the root.
type Tree map[string]uint64

// Ino is the inode of p (with flinkid's {X}), which the tree must have.
func (tr Tree) Ino(t testing.TB, p string) uint64 {
	t.Helper()
	ino, ok := tr[strings.Trim(flinkid.Expand(p), "/")]
	if !ok {
		t.Fatalf("no %q in the test tree", p)
	}
	return ino
}

// Build makes the namespace that paths name in db, in order, each in one
// transaction as the fs layer makes it (Tx.CreateOwned, Tx.LinkOwned):
// every name belongs to the owner FlinkRules gives its path, whose job and
// executor note the write. A path may hold flinkid's {X}; parents come
// before their children, and:
//
//	"d/"    is a directory;
//	"x=y"   makes x another name of the file y;
//	"f"     is a file, empty (Fixture.Build gives it content).
func Build(t testing.TB, db *index.DB, paths ...string) Tree {
	t.Helper()
	return build(t, db, Tree{"": index.RootIno}, paths, nil)
}

// Build is storetest.Build in the fixture's store, where each file's
// content is Content of its path, sealed, unless the path starts with "~":
// then the content waits in staging. It adds to the names the fixture
// already has.
func (f *Fixture) Build(paths ...string) Tree {
	f.T.Helper()
	tr := Tree{"": index.RootIno}
	return build(f.T, f.S.Index, tr, paths, func(p string, sealed bool) {
		f.Write(p, Content(p), 0, sealed)
	})
}

// build is Build, calling write, if set, for each file once it exists.
func build(t testing.TB, db *index.DB, tr Tree, paths []string, write func(p string, sealed bool)) Tree {
	t.Helper()
	for _, p := range paths {
		p, target, isLink := strings.Cut(flinkid.Expand(p), "=")
		p, staged := strings.CutPrefix(p, "~")
		isDir := strings.HasSuffix(p, "/")
		p = strings.TrimSuffix(p, "/")
		dir, name := path.Split(p)
		parent := parentIno(t, db, tr, dir)
		o := owner.FlinkRules().Owner(p)
		if isLink {
			ino := parentIno(t, db, tr, target)
			err := db.Update(func(tx *index.Tx) error {
				_, err := tx.LinkOwned(parent, name, ino, o)
				return err
			})
			if err != nil {
				t.Fatalf("linking %s to %s: %v", p, target, err)
			}
			tr[p] = ino
			continue
		}
		mode := uint32(syscall.S_IFREG | 0o644)
		if isDir {
			mode = syscall.S_IFDIR | 0o755
		}
		n, err := db.NewInode(mode, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *index.Tx) error { return tx.CreateOwned(parent, name, n, o) }); err != nil {
			t.Fatalf("creating %s: %v", p, err)
		}
		tr[p] = n.Ino
		if !isDir && write != nil {
			write(p, !staged)
		}
	}
	return tr
}

// parentIno is the inode of p from tr, or resolved in db if tr lacks it
// (a tree built onto one made before).
func parentIno(t testing.TB, db *index.DB, tr Tree, p string) uint64 {
	t.Helper()
	p = strings.Trim(p, "/")
	if ino, ok := tr[p]; ok {
		return ino
	}
	var ino uint64
	err := db.View(func(tx *index.Tx) error {
		n, err := tx.Resolve(p)
		if err == nil {
			ino = n.Ino
		}
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	tr[p] = ino
	return ino
}

// Content is 40 to 100 KiB that do not compress, different for every
// path p: more than the store keeps inline, so each file has a chunk.
func Content(p string) []byte {
	h := fnv.New64a()
	h.Write([]byte(p))
	seed := h.Sum64()
	b := make([]byte, 40<<10+int(seed%(60<<10)))
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)}).Read(b)
	return b
}
