package index_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/owner"
)

func TestNewIndexHasRoot(t *testing.T) {
	db := openDB(t)
	root := inode(t, db, index.RootIno)
	if !root.IsDir() || root.Nlink != 2 || root.Parent != index.RootIno {
		t.Errorf("root = %+v, want a directory with nlink 2 that is its own parent", root)
	}
	if ns := names(t, db, index.RootIno); len(ns) != 0 {
		t.Errorf("new root lists %q, want nothing", ns)
	}
}

func TestCreateLookupReadDir(t *testing.T) {
	db := openDB(t)
	before := inode(t, db, index.RootIno)
	b := create(t, db, index.RootIno, "b", fileMode)
	a := create(t, db, index.RootIno, "a", syscall.S_IFLNK|0o777)
	d := create(t, db, index.RootIno, "d", dirMode)
	c := create(t, db, index.RootIno, "c", fileMode)

	if got, want := names(t, db, index.RootIno), []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Errorf("ReadDir = %q, want name order %q", got, want)
	}
	for _, tc := range []struct {
		name string
		ino  uint64
		typ  uint32
	}{{"a", a, syscall.S_IFLNK}, {"b", b, syscall.S_IFREG}, {"c", c, syscall.S_IFREG}, {"d", d, syscall.S_IFDIR}} {
		var got index.Dirent
		err := db.View(func(tx *index.Tx) (err error) { got, err = tx.Lookup(index.RootIno, tc.name); return err })
		born := got.Born
		got.Born = 0
		if err != nil || got != (index.Dirent{Name: tc.name, Ino: tc.ino, Mode: tc.typ}) {
			t.Errorf("Lookup(%q) = %+v, %v; want ino %d, type %o", tc.name, got, err, tc.ino, tc.typ)
		}
		if ctime := inode(t, db, tc.ino).Ctime; born != ctime {
			t.Errorf("Lookup(%q) made at %d, want the new inode's ctime %d", tc.name, born, ctime)
		}
	}
	if n := inode(t, db, b); n.Nlink != 1 || !n.IsRegular() {
		t.Errorf("new file = %+v, want a regular file with nlink 1", n)
	}
	if n := inode(t, db, d); n.Nlink != 2 || n.Parent != index.RootIno || !n.IsDir() {
		t.Errorf("new directory = %+v, want nlink 2 and parent %d", n, index.RootIno)
	}
	if root := inode(t, db, index.RootIno); root.Mtime <= before.Mtime || root.Ctime <= before.Ctime {
		t.Errorf("root times %d/%d not advanced from %d/%d by Create", root.Mtime, root.Ctime, before.Mtime, before.Ctime)
	}

	var first []string
	err := db.View(func(tx *index.Tx) error {
		return tx.ReadDir(index.RootIno, func(d index.Dirent) bool { first = append(first, d.Name); return len(first) < 2 })
	})
	if err != nil || !slices.Equal(first, []string{"a", "b"}) {
		t.Errorf("ReadDir stopping after two = %q, %v; want [a b]", first, err)
	}
	if ns := names(t, db, d); len(ns) != 0 {
		t.Errorf("new directory lists %q, want nothing", ns)
	}
}

func TestCreateRefuses(t *testing.T) {
	db := openDB(t)
	tr := storetest.Build(t, db, "f", "d/")
	for _, tc := range []struct {
		name   string
		parent uint64
		child  string
		mode   uint32
		want   error
	}{
		{"existing file name", index.RootIno, "f", fileMode, index.ErrExists},
		{"existing directory name", index.RootIno, "d", dirMode, index.ErrExists},
		{"parent is a file", tr["f"], "x", fileMode, index.ErrNotDir},
		{"parent does not exist", 9999, "x", fileMode, index.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := walk(t, db)
			ino := newIno(t, db)
			err := db.Update(func(tx *index.Tx) error {
				return tx.Create(tc.parent, tc.child, &index.Inode{Ino: ino, Mode: tc.mode})
			})
			if !errors.Is(err, tc.want) {
				t.Errorf("Create = %v, want %v", err, tc.want)
			}
			if after := walk(t, db); !maps.Equal(after, before) {
				t.Errorf("failed Create changed the tree from %v to %v", before, after)
			}
			if _, err := tryInode(db, ino); !errors.Is(err, index.ErrNotFound) {
				t.Errorf("failed Create left inode %d: %v", ino, err)
			}
		})
	}
}

// A directory's link count is 2 (its entry in the parent and its own ".")
// plus one ".." per subdirectory.
func TestDirectoryNlinkCountsSubdirectories(t *testing.T) {
	db := openDB(t)
	tr := storetest.Build(t, db, "a/", "b/", "a/x/", "a/y/", "a/f")
	root, a, b := tr[""], tr["a"], tr["b"]
	steps := []struct {
		what       string
		do         func(tx *index.Tx) error
		root, a, b uint32
	}{
		{"after mkdir", nil, 4, 4, 2},
		{"rename a/x to b/x", func(tx *index.Tx) error { _, err := tx.Rename(a, "x", b, "x", 0); return err }, 4, 3, 3},
		{"rename a/y to a/z", func(tx *index.Tx) error { _, err := tx.Rename(a, "y", a, "z", 0); return err }, 4, 3, 3},
		{"rename file a/f to b/f", func(tx *index.Tx) error { _, err := tx.Rename(a, "f", b, "f", 0); return err }, 4, 3, 3},
		{"rmdir b/x", func(tx *index.Tx) error { return tx.Rmdir(b, "x") }, 4, 3, 2},
		{"rename b to a/b", func(tx *index.Tx) error { _, err := tx.Rename(root, "b", a, "b", 0); return err }, 3, 4, 2},
		{"rmdir a/z", func(tx *index.Tx) error { return tx.Rmdir(a, "z") }, 3, 3, 2},
	}
	for _, s := range steps {
		if s.do != nil {
			update(t, db, s.do)
		}
		got := []uint32{nlink(t, db, root), nlink(t, db, a), nlink(t, db, b)}
		if want := []uint32{s.root, s.a, s.b}; !slices.Equal(got, want) {
			t.Errorf("%s: nlink of root, a, b = %v, want %v", s.what, got, want)
		}
	}
	if n := inode(t, db, b); n.Parent != a {
		t.Errorf("b's parent after moving it into a = %d, want %d", n.Parent, a)
	}
}

func TestLink(t *testing.T) {
	db := openDB(t)
	tr := storetest.Build(t, db, "f", "d/", "g")
	f, d := tr["f"], tr["d"]
	link := func(parent uint64, name string, ino uint64) (n *index.Inode, err error) {
		err = db.Update(func(tx *index.Tx) (err error) { n, err = tx.Link(parent, name, ino); return err })
		return n, err
	}
	if n, err := link(index.RootIno, "f2", f); err != nil || n.Nlink != 2 {
		t.Fatalf("Link f2 = %+v, %v; want nlink 2", n, err)
	}
	if n, err := link(d, "f3", f); err != nil || n.Nlink != 3 {
		t.Fatalf("Link d/f3 = %+v, %v; want nlink 3", n, err)
	}
	if got := nlink(t, db, f); got != 3 {
		t.Errorf("stored nlink = %d, want 3", got)
	}
	if got := mustLookup(t, db, "d/f3"); got != f {
		t.Errorf("d/f3 is inode %d, want %d", got, f)
	}
	if got := nlink(t, db, d); got != 2 {
		t.Errorf("a file link changed the directory's nlink to %d", got)
	}

	orphan := create(t, db, index.RootIno, "gone", fileMode)
	update(t, db, func(tx *index.Tx) error { _, err := tx.Unlink(index.RootIno, "gone"); return err })
	for _, tc := range []struct {
		name   string
		parent uint64
		child  string
		ino    uint64
		want   error
	}{
		{"a directory", index.RootIno, "d2", d, index.ErrIsDir},
		{"onto an existing name", index.RootIno, "g", f, index.ErrExists},
		{"onto its own name", index.RootIno, "f", f, index.ErrExists},
		{"into a file", f, "x", f, index.ErrNotDir},
		{"a missing inode", index.RootIno, "x", 9999, index.ErrNotFound},
		{"an unlinked inode", index.RootIno, "x", orphan, index.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := walk(t, db)
			if _, err := link(tc.parent, tc.child, tc.ino); !errors.Is(err, tc.want) {
				t.Errorf("Link = %v, want %v", err, tc.want)
			}
			if after := walk(t, db); !maps.Equal(after, before) {
				t.Errorf("failed Link changed the tree from %v to %v", before, after)
			}
		})
	}
}

func TestUnlinkOrphansAndReap(t *testing.T) {
	db := openDB(t)
	tr := storetest.Build(t, db, "f", "d/", "d/g=f")
	f := tr["f"]
	unlink := func(parent uint64, name string) (n *index.Inode, err error) {
		err = db.Update(func(tx *index.Tx) (err error) { n, err = tx.Unlink(parent, name); return err })
		return n, err
	}

	if n, err := unlink(index.RootIno, "f"); err != nil || n.Nlink != 1 {
		t.Fatalf("Unlink f = %+v, %v; want nlink 1", n, err)
	}
	mustNotExist(t, db, "f")
	if o := orphans(t, db); len(o) != 0 {
		t.Errorf("Orphans = %v with a name left, want none", o)
	}
	if n, err := unlink(tr["d"], "g"); err != nil || n.Nlink != 0 {
		t.Fatalf("Unlink d/g = %+v, %v; want nlink 0", n, err)
	}
	if o := orphans(t, db); !slices.Equal(o, []uint64{f}) {
		t.Errorf("Orphans = %v, want [%d]", o, f)
	}
	if n := inode(t, db, f); n.Nlink != 0 {
		t.Errorf("unlinked inode = %+v, want it kept with nlink 0 until reaped", n)
	}

	update(t, db, func(tx *index.Tx) error { _, err := tx.Reap(f); return err })
	if o := orphans(t, db); len(o) != 0 {
		t.Errorf("Orphans after Reap = %v, want none", o)
	}
	if _, err := tryInode(db, f); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("Inode after Reap: %v, want ErrNotFound", err)
	}
	update(t, db, func(tx *index.Tx) error { _, err := tx.Reap(f); return err }) // reaping twice is harmless

	for _, tc := range []struct {
		name   string
		parent uint64
		child  string
		want   error
	}{
		{"a directory", index.RootIno, "d", index.ErrIsDir},
		{"a missing name", index.RootIno, "f", index.ErrNotFound},
		{"in a missing directory", 9999, "f", index.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := unlink(tc.parent, tc.child); !errors.Is(err, tc.want) {
				t.Errorf("Unlink = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRmdir(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree []string
		dir  string // parent of the removed name
		rm   string
		want error
	}{
		{"empty directory", []string{"d/"}, "", "d", nil},
		{"nested empty directory", []string{"d/", "d/e/"}, "d", "e", nil},
		{"directory with a file", []string{"d/", "d/f"}, "", "d", index.ErrNotEmpty},
		{"directory with a directory", []string{"d/", "d/e/"}, "", "d", index.ErrNotEmpty},
		{"a file", []string{"f"}, "", "f", index.ErrNotDir},
		{"a missing name", nil, "", "d", index.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			tr := storetest.Build(t, db, tc.tree...)
			parent := tr.Ino(t, tc.dir)
			victim, hadVictim := tr[tc.rm]
			if tc.dir != "" {
				victim, hadVictim = tr[tc.dir+"/"+tc.rm]
			}
			before := walk(t, db)
			err := db.Update(func(tx *index.Tx) error { return tx.Rmdir(parent, tc.rm) })
			if !errors.Is(err, tc.want) {
				t.Fatalf("Rmdir = %v, want %v", err, tc.want)
			}
			if tc.want != nil {
				if after := walk(t, db); !maps.Equal(after, before) {
					t.Errorf("failed Rmdir changed the tree from %v to %v", before, after)
				}
				return
			}
			if got := nlink(t, db, parent); uint64(got) != before[tc.dir][1]-1 {
				t.Errorf("parent nlink = %d, want %d", got, before[tc.dir][1]-1)
			}
			if _, err := tryInode(db, victim); hadVictim && !errors.Is(err, index.ErrNotFound) {
				t.Errorf("removed directory's inode: %v, want ErrNotFound", err)
			}
			if o := orphans(t, db); len(o) != 0 {
				t.Errorf("Orphans = %v: a removed directory is gone at once", o)
			}
		})
	}
}

// TestRenameRefuses covers every way rename(2) fails; a failed rename
// changes nothing.
func TestRenameRefuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tree     []string
		from, to string
		flags    uint32
		want     error
	}{
		{"missing source", []string{"d/"}, "f", "d/f", 0, index.ErrNotFound},
		{"target directory missing", []string{"f"}, "f", "d/f", 0, index.ErrNotFound},
		{"target parent a file", []string{"f", "g"}, "f", "g/f", 0, index.ErrNotDir},
		{"NOREPLACE onto a file", []string{"f", "g"}, "f", "g", index.RenameNoReplace, index.ErrExists},
		{"NOREPLACE onto a directory", []string{"d/", "e/"}, "d", "e", index.RenameNoReplace, index.ErrExists},
		{"EXCHANGE with a missing name", []string{"f"}, "f", "g", index.RenameExchange, index.ErrNotFound},
		{"NOREPLACE and EXCHANGE", []string{"f", "g"}, "f", "g", index.RenameNoReplace | index.RenameExchange, index.ErrInvalid},
		{"unknown flag", []string{"f"}, "f", "g", 1 << 2, index.ErrInvalid},
		{"directory over a non-empty directory", []string{"d/", "e/", "e/f"}, "d", "e", 0, index.ErrNotEmpty},
		{"directory over a directory holding a directory", []string{"d/", "e/", "e/x/"}, "d", "e", 0, index.ErrNotEmpty},
		{"file over a directory", []string{"f", "d/"}, "f", "d", 0, index.ErrIsDir},
		{"directory over a file", []string{"d/", "f"}, "d", "f", 0, index.ErrNotDir},
		{"directory into itself", []string{"d/"}, "d", "d/x", 0, index.ErrInvalid},
		{"directory into its subdirectory", []string{"d/", "d/e/", "d/e/f/"}, "d", "d/e/f/x", 0, index.ErrInvalid},
		{"directory exchanged with a name below it", []string{"d/", "d/e/", "d/e/f"}, "d", "d/e/f", index.RenameExchange, index.ErrInvalid},
		{"name exchanged with its ancestor", []string{"d/", "d/e/", "d/e/f"}, "d/e/f", "d", index.RenameExchange, index.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			tr := storetest.Build(t, db, tc.tree...)
			from, to := splitPath(t, tr, tc.from), splitPath(t, tr, tc.to)
			before := walk(t, db)
			err := db.Update(func(tx *index.Tx) error {
				_, err := tx.Rename(from.dir, from.name, to.dir, to.name, tc.flags)
				return err
			})
			if !errors.Is(err, tc.want) {
				t.Errorf("Rename(%s, %s, %#x) = %v, want %v", tc.from, tc.to, tc.flags, err, tc.want)
			}
			if after := walk(t, db); !maps.Equal(after, before) {
				t.Errorf("failed Rename changed the tree from %v to %v", before, after)
			}
		})
	}
}

type dirName struct {
	dir  uint64
	name string
}

// splitPath resolves the directory of p in tr; a missing directory gets a
// number no inode has.
func splitPath(t *testing.T, tr storetest.Tree, p string) dirName {
	dir, name := "", p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dir, name = p[:i], p[i+1:]
	}
	ino, ok := tr[dir]
	if !ok {
		ino = 1 << 40
	}
	return dirName{ino, name}
}

func TestRename(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tree     []string
		from, to string
		flags    uint32
		// want is the tree afterwards: path -> path in the tree before
		// whose inode it now names ("" for the root). Paths not listed
		// must not exist.
		want map[string]string
		// victim is the path whose inode lost a link, "" for none, with
		// the link count it has left.
		victim      string
		victimNlink uint32
		// nlinks are directory link counts afterwards, by path before.
		nlinks map[string]uint32
	}{
		{
			name: "file to a new name", tree: []string{"f"}, from: "f", to: "g",
			want: map[string]string{"g": "f"},
		},
		{
			name: "file to another directory", tree: []string{"a/", "b/", "a/f"}, from: "a/f", to: "b/g",
			want:   map[string]string{"a": "a", "b": "b", "b/g": "a/f"},
			nlinks: map[string]uint32{"": 4, "a": 2, "b": 2},
		},
		{
			name: "file over a file", tree: []string{"f", "g"}, from: "f", to: "g",
			want:   map[string]string{"g": "f"},
			victim: "g", victimNlink: 0,
		},
		{
			name: "file over a file with another name", tree: []string{"f", "g", "h=g"}, from: "f", to: "g",
			want:   map[string]string{"g": "f", "h": "g"},
			victim: "g", victimNlink: 1,
		},
		{
			name: "NOREPLACE to a new name", tree: []string{"f"}, from: "f", to: "g", flags: index.RenameNoReplace,
			want: map[string]string{"g": "f"},
		},
		{
			name: "directory over an empty directory elsewhere", tree: []string{"a/", "b/", "a/d/", "a/d/f", "b/e/"}, from: "a/d", to: "b/e",
			want:   map[string]string{"a": "a", "b": "b", "b/e": "a/d", "b/e/f": "a/d/f"},
			nlinks: map[string]uint32{"": 4, "a": 2, "b": 3, "a/d": 2},
		},
		{
			name: "directory over an empty directory beside it", tree: []string{"d/", "d/x/", "e/"}, from: "d", to: "e",
			want:   map[string]string{"e": "d", "e/x": "d/x"},
			nlinks: map[string]uint32{"": 3, "d": 3},
		},
		{
			name: "directory with contents to a new parent", tree: []string{"a/", "b/", "a/d/", "a/d/x/", "a/d/f"}, from: "a/d", to: "b/d",
			want:   map[string]string{"a": "a", "b": "b", "b/d": "a/d", "b/d/x": "a/d/x", "b/d/f": "a/d/f"},
			nlinks: map[string]uint32{"": 4, "a": 2, "b": 3, "a/d": 3},
		},
		{
			name: "directory up to the root", tree: []string{"a/", "a/d/"}, from: "a/d", to: "d",
			want:   map[string]string{"a": "a", "d": "a/d"},
			nlinks: map[string]uint32{"": 4, "a": 2},
		},
		{
			name: "EXCHANGE two files", tree: []string{"f", "g"}, from: "f", to: "g", flags: index.RenameExchange,
			want: map[string]string{"f": "g", "g": "f"},
		},
		{
			name: "EXCHANGE a directory and a file across parents", tree: []string{"a/", "b/", "a/d/", "b/f"}, from: "a/d", to: "b/f", flags: index.RenameExchange,
			want:   map[string]string{"a": "a", "b": "b", "b/f": "a/d", "a/d": "b/f"},
			nlinks: map[string]uint32{"": 4, "a": 2, "b": 3},
		},
		{
			name: "EXCHANGE two directories across parents", tree: []string{"a/", "b/", "a/d/", "a/d/x/", "b/e/"}, from: "a/d", to: "b/e", flags: index.RenameExchange,
			want:   map[string]string{"a": "a", "b": "b", "b/e": "a/d", "b/e/x": "a/d/x", "a/d": "b/e"},
			nlinks: map[string]uint32{"": 4, "a": 3, "b": 3, "a/d": 3, "b/e": 2},
		},
		{
			name: "EXCHANGE a non-empty directory with an empty one", tree: []string{"d/", "d/f", "e/"}, from: "d", to: "e", flags: index.RenameExchange,
			want: map[string]string{"d": "e", "e": "d", "e/f": "d/f"},
		},
		{
			name: "onto another name of the same inode does nothing", tree: []string{"f", "g=f"}, from: "f", to: "g",
			want: map[string]string{"f": "f", "g": "f"},
		},
		{
			name: "onto another name of the same inode elsewhere does nothing", tree: []string{"a/", "b/", "a/f", "b/g=a/f"}, from: "a/f", to: "b/g",
			want: map[string]string{"a": "a", "b": "b", "a/f": "a/f", "b/g": "a/f"},
		},
		{
			name: "onto itself does nothing", tree: []string{"d/"}, from: "d", to: "d",
			want:   map[string]string{"d": "d"},
			nlinks: map[string]uint32{"": 3, "d": 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			tr := storetest.Build(t, db, tc.tree...)
			from, to := splitPath(t, tr, tc.from), splitPath(t, tr, tc.to)
			var victim *index.Inode
			update(t, db, func(tx *index.Tx) (err error) {
				victim, err = tx.Rename(from.dir, from.name, to.dir, to.name, tc.flags)
				return err
			})

			switch {
			case tc.victim == "" && victim != nil:
				t.Errorf("Rename returned victim %+v, want none", victim)
			case tc.victim != "" && (victim == nil || victim.Ino != tr[tc.victim] || victim.Nlink != tc.victimNlink):
				t.Errorf("Rename returned victim %+v, want inode %d with nlink %d", victim, tr[tc.victim], tc.victimNlink)
			}
			got := walk(t, db)
			delete(got, "")
			want := map[string]uint64{}
			for p, old := range tc.want {
				want[p] = tr[old]
			}
			for p, e := range got {
				if w, ok := want[p]; !ok || w != e[0] {
					t.Errorf("after Rename %s is inode %d, want %d (listed: %v)", p, e[0], w, ok)
				}
			}
			for p := range want {
				if _, ok := got[p]; !ok {
					t.Errorf("after Rename %s is missing", p)
				}
			}
			for p, n := range tc.nlinks {
				if got := nlink(t, db, tr[p]); got != n {
					t.Errorf("nlink of %q (before the rename) = %d, want %d", p, got, n)
				}
			}
			// Every directory's parent is the directory that names it.
			for p, e := range got {
				if n := inode(t, db, e[0]); n.IsDir() {
					parent := splitPath(t, storetest.Tree(pathInos(got)), p).dir
					if n.Parent != parent {
						t.Errorf("%s has parent %d, want %d", p, n.Parent, parent)
					}
				}
			}
			var wantOrphans []uint64
			if tc.victim != "" && tc.victimNlink == 0 {
				wantOrphans = append(wantOrphans, tr[tc.victim])
			}
			if o := orphans(t, db); !slices.Equal(o, wantOrphans) {
				t.Errorf("Orphans = %v, want %v", o, wantOrphans)
			}
		})
	}
}

func pathInos(w map[string][2]uint64) map[string]uint64 {
	m := map[string]uint64{"": index.RootIno}
	for p, e := range w {
		m[p] = e[0]
	}
	return m
}

// CreateOwned makes a name as the filesystem does: the inode's owner is
// the one given, interned, its job notes the write at the first inode's
// ctime (the others follow within the second: not noted), and in a setgid
// directory it takes the directory's group, a directory
// staying setgid.
func TestCreateOwned(t *testing.T) {
	db := openDB(t)
	sgid := create(t, db, index.RootIno, "sgid", dirMode)
	update(t, db, func(tx *index.Tx) error {
		d, err := tx.Inode(sgid)
		if err != nil {
			return err
		}
		d.Mode |= syscall.S_ISGID
		d.Gid = 77
		return tx.PutInode(d)
	})
	o := owner.Owner{Level: owner.LevelJob, Executor: "tm-1", Job: "00000000000000000000000000000001"}
	var noted int64
	for _, tc := range []struct {
		name      string
		parent    uint64
		mode      uint32
		wantGid   uint32
		wantSetid bool
	}{
		{"file in a plain directory", index.RootIno, fileMode, 5, false},
		{"file in a setgid directory", sgid, fileMode, 77, false},
		{"directory in a setgid directory", sgid, dirMode, 77, true},
	} {
		n, err := db.NewInode(tc.mode, 4, 5)
		if err != nil {
			t.Fatal(err)
		}
		update(t, db, func(tx *index.Tx) error { return tx.CreateOwned(tc.parent, tc.name, n, o) })
		got := inode(t, db, n.Ino)
		if got.Gid != tc.wantGid || got.Uid != 4 || (got.Mode&syscall.S_ISGID != 0) != tc.wantSetid {
			t.Errorf("%s: uid %d gid %d mode %o, want uid 4 gid %d setgid %v", tc.name, got.Uid, got.Gid, got.Mode, tc.wantGid, tc.wantSetid)
		}
		var gotOwner owner.Owner
		if err := db.View(func(tx *index.Tx) (err error) { gotOwner, err = tx.Owner(got.Owner); return err }); err != nil || gotOwner != o {
			t.Errorf("%s: owner %+v, %v; want %+v", tc.name, gotOwner, err, o)
		}
		if noted == 0 {
			noted = got.Ctime
		}
		if j, err := readJob(db, o.Job); err != nil || j.LastWrite != noted {
			t.Errorf("%s: job record %+v, %v; want its last write at the first ctime %d", tc.name, j, err, noted)
		}
	}
}
