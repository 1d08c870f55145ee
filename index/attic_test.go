package index_test

import (
	"errors"
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/flinkid"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/owner"
)

// The attic tests use one TaskManager (tm1) with local state of allocation
// D for jobs A and B; E and F are other allocations.
const (
	atticExec = "tm1"
	atticAid  = "tm_tm1/localState/aid_{D}"
	atticJidA = atticAid + "/jid_{A}"
	atticJidB = atticAid + "/jid_{B}"
	atticSti  = atticJidA + "/vtx_{V}_sti_0"
	atticChk  = atticSti + "/chk_5"
	atticFile = atticChk + "/file"
)

// atticTree is the allocation's state: two files in a checkpoint, a file
// of the subtask and a checkpoint of job B.
var atticTree = []string{
	"tm_tm1/",
	"tm_tm1/localState/",
	atticAid + "/",
	atticJidA + "/",
	atticSti + "/",
	atticChk + "/",
	atticChk + "/file",
	atticChk + "/db/",
	atticChk + "/db/000001.sst",
	atticSti + "/_task_state_snapshot",
	atticJidB + "/",
	atticJidB + "/vtx_{V}_sti_1/",
	atticJidB + "/vtx_{V}_sti_1/chk_5/",
	atticJidB + "/vtx_{V}_sti_1/chk_5/file",
	"scratch",
}

// fl replaces the flinkid placeholders in p.
func fl(p string) string { return flinkid.Expand(p) }

// checkClean fails the test if Check reports any problem.
func checkClean(t *testing.T, db *index.DB) {
	t.Helper()
	if kinds := checkKinds(t, db); len(kinds) != 0 {
		t.Errorf("Check reported %v, want no problems", kinds)
	}
}

// checkKinds runs Check and returns the kinds of problem it reports,
// sorted and deduplicated; each problem is logged.
func checkKinds(t *testing.T, db *index.DB) []string {
	t.Helper()
	ps, _, err := db.Check()
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	var kinds []string
	for _, p := range ps {
		t.Logf("Check: %s", p)
		kinds = append(kinds, p.Kind)
	}
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

// makeOwned creates file p (with flinkid's {X}) in its existing directory with
// the owner FlinkRules gives its path.
func makeOwned(t *testing.T, db *index.DB, p string) uint64 {
	t.Helper()
	p = fl(p)
	parent := mustLookup(t, db, path.Dir(p))
	ino := newIno(t, db)
	now := index.Now()
	update(t, db, func(tx *index.Tx) (err error) {
		n := &index.Inode{Ino: ino, Mode: fileMode, Atime: now, Mtime: now, Ctime: now, Btime: now}
		if n.Owner, err = tx.OwnerID(owner.FlinkRules().Owner(p)); err != nil {
			return err
		}
		return tx.Create(parent, path.Base(p), n)
	})
	return ino
}

// atticIno is the inode of attic directory name, failing if there is none.
func atticIno(t *testing.T, db *index.DB, name string) uint64 {
	t.Helper()
	var ino uint64
	err := db.View(func(tx *index.Tx) error {
		n, err := tx.Attic(name, false)
		if err == nil {
			ino = n.Ino
		}
		return err
	})
	if err != nil {
		t.Fatalf("Attic(%s): %v", name, err)
	}
	return ino
}

// atticLookup resolves p (with flinkid's {X}) below attic directory name.
func atticLookup(db *index.DB, name, p string) (ino uint64, err error) {
	err = db.View(func(tx *index.Tx) error {
		a, err := tx.Attic(name, false)
		if err != nil {
			return err
		}
		ino = a.Ino
		for _, c := range strings.Split(fl(p), "/") {
			if c == "" {
				continue
			}
			d, err := tx.Lookup(ino, c)
			if err != nil {
				return fmt.Errorf("%s: %w", c, err)
			}
			ino = d.Ino
		}
		return nil
	})
	return ino, err
}

func mustAtticLookup(t *testing.T, db *index.DB, name, p string) uint64 {
	t.Helper()
	ino, err := atticLookup(db, name, p)
	if err != nil {
		t.Fatalf("%s/%s: %v", name, p, err)
	}
	return ino
}

// make pending makes pending p (with flinkid's {X}) as the fs layer does when deletes are held,
// in its own transaction, and returns the inode that lost a link.
func pend(db *index.DB, p string) (victim *index.Inode, err error) {
	p = fl(p)
	dir, name := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	err = db.Update(func(tx *index.Tx) error {
		parent, err := tx.Resolve(dir)
		if err != nil {
			return err
		}
		victim, err = tx.MakePending(parent.Ino, name, dir)
		return err
	})
	return victim, err
}

func mustMakePending(t *testing.T, db *index.DB, p string) *index.Inode {
	t.Helper()
	victim, err := pend(db, p)
	if err != nil {
		t.Fatalf("Pend(%s): %v", p, err)
	}
	return victim
}

// rmrf makes pending everything at and below p as rm -rf removes it: the entries
// of a directory first, then the directory.
func rmrf(t *testing.T, db *index.DB, p string) {
	t.Helper()
	p = fl(p)
	ino := mustLookup(t, db, p)
	if inode(t, db, ino).IsDir() {
		for _, name := range names(t, db, ino) {
			rmrf(t, db, p+"/"+name)
		}
	}
	if victim := mustMakePending(t, db, p); victim != nil && victim.Nlink == 0 {
		t.Fatalf("Pend(%s) took the last link of inode %d", p, victim.Ino)
	}
}

// holdPending holds pending directory p (with flinkid's {X}) as id.
func holdPending(db *index.DB, p, id string) (*index.Hold, error) {
	p = fl(p)
	dir, name := path.Split(p)
	h := &index.Hold{ID: id, Path: p, At: 1_700_000_000_000_000_000}
	pd, err := atticLookup(db, index.AtticPending, dir)
	if err != nil {
		return nil, err
	}
	return h, db.Update(func(tx *index.Tx) error { return tx.HoldPending(pd, name, h) })
}

func holds(t *testing.T, db *index.DB) []*index.Hold {
	t.Helper()
	var hs []*index.Hold
	if err := db.View(func(tx *index.Tx) (err error) { hs, err = tx.Holds(); return err }); err != nil {
		t.Fatalf("Holds: %v", err)
	}
	return hs
}

func holdIDs(t *testing.T, db *index.DB) []string {
	t.Helper()
	var ids []string
	for _, h := range holds(t, db) {
		ids = append(ids, h.ID)
	}
	return ids
}

func executorRoots(t *testing.T, db *index.DB, executor string) []uint64 {
	t.Helper()
	var roots []uint64
	if err := db.View(func(tx *index.Tx) (err error) { roots, err = tx.ExecutorRoots(executor); return err }); err != nil {
		t.Fatalf("ExecutorRoots(%s): %v", executor, err)
	}
	slices.Sort(roots)
	return roots
}

func ownerOf(t *testing.T, db *index.DB, ino uint64) owner.Owner {
	t.Helper()
	var o owner.Owner
	if err := db.View(func(tx *index.Tx) error {
		n, err := tx.Inode(ino)
		if err != nil {
			return err
		}
		o, err = tx.Owner(n.Owner)
		return err
	}); err != nil {
		t.Fatalf("owner of inode %d: %v", ino, err)
	}
	return o
}

func dirPath(db *index.DB, ino uint64) (p string, err error) {
	err = db.View(func(tx *index.Tx) (err error) { p, err = tx.DirPath(ino); return err })
	return p, err
}

// entry is what atticState records of one name.
type entry struct {
	Ino, Nlink, Owner uint64
	Mode              uint32
}

// atticState is everything a failed attic operation must leave as it was:
// the names below the root and below each attic directory with their
// inodes, link counts, owners and modes, and the hold records.
func atticState(t *testing.T, db *index.DB) (map[string]entry, []index.Hold) {
	t.Helper()
	all := map[string]entry{}
	var visit func(tx *index.Tx, dir uint64, prefix string) error
	visit = func(tx *index.Tx, dir uint64, prefix string) error {
		var ds []index.Dirent
		if err := tx.ReadDir(dir, func(d index.Dirent) bool { ds = append(ds, d); return true }); err != nil {
			return err
		}
		for _, d := range ds {
			n, err := tx.Inode(d.Ino)
			if err != nil {
				return err
			}
			all[prefix+d.Name] = entry{n.Ino, uint64(n.Nlink), n.Owner, n.Mode}
			if n.IsDir() {
				if err := visit(tx, n.Ino, prefix+d.Name+"/"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var hs []index.Hold
	err := db.View(func(tx *index.Tx) error {
		if err := visit(tx, index.RootIno, "/"); err != nil {
			return err
		}
		for _, a := range []string{index.AtticPending, index.AtticHeld} {
			d, err := tx.Attic(a, false)
			if errors.Is(err, index.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			all[a+":"] = entry{d.Ino, uint64(d.Nlink), d.Owner, d.Mode}
			if err := visit(tx, d.Ino, a+":"); err != nil {
				return err
			}
		}
		ps, err := tx.Holds()
		for _, h := range ps {
			hs = append(hs, *h)
		}
		return err
	})
	if err != nil {
		t.Fatalf("reading the index: %v", err)
	}
	return all, hs
}

// setDirAttrs gives each directory on the way to p distinct mode bits, uid
// and gid, so that copies can be told apart from defaults.
func setDirAttrs(t *testing.T, db *index.DB, p string) {
	t.Helper()
	dir := ""
	for i, c := range strings.Split(fl(p), "/") {
		dir = path.Join(dir, c)
		ino := mustLookup(t, db, dir)
		update(t, db, func(tx *index.Tx) error {
			n, err := tx.Inode(ino)
			if err != nil {
				return err
			}
			n.Mode = syscall.S_IFDIR | uint32(0o700|i)
			n.Uid, n.Gid = uint32(1000+i), uint32(2000+i)
			return tx.PutInode(n)
		})
	}
}

// sealChunks gives file ino sealed content of the given chunks (10 bytes
// each).
func sealChunks(t *testing.T, db *index.DB, ino uint64, m *manifest.Manifest) {
	t.Helper()
	id, _ := stage(t, db, ino)
	if err := seal(db, ino, id, m, index.Now()); err != nil {
		t.Fatalf("Seal(%d): %v", ino, err)
	}
}

// TestAtticRenameIntoPending comes first: with a checkNotInside that does
// not stop at attic directories, every directory rename into the attic
// loops, and the tests after it hang until go test's timeout.
func TestAtticRenameIntoPending(t *testing.T) {
	db := openDB(t)
	tr := storetest.Build(t, db, append(atticTree, "tm_tm1/x/", "tm_tm1/x/y/")...)
	mustMakePending(t, db, atticFile)
	mirrorChk := mustAtticLookup(t, db, index.AtticPending, atticChk)
	mirrorSti := mustAtticLookup(t, db, index.AtticPending, atticSti)
	x, tm := tr.Ino(t, "tm_tm1/x"), tr.Ino(t, "tm_tm1")
	y := tr.Ino(t, "tm_tm1/x/y")
	mirrorJidA := mustAtticLookup(t, db, index.AtticPending, atticJidA)
	sti := path.Base(fl(atticSti))

	// checkNotInside climbs from the pending chk_5 to the pending directory,
	// which is its own parent: it must stop there, not loop.
	done := make(chan error, 1)
	go func() {
		done <- db.Update(func(tx *index.Tx) error {
			_, err := tx.Rename(tm, "x", mirrorChk, "x", 0)
			return err
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Rename of a directory into a pending directory: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Rename of a directory into a pending directory did not return (checkNotInside loops at the attic)")
	}
	if got := mustAtticLookup(t, db, index.AtticPending, atticChk+"/x"); got != x {
		t.Errorf("pending chk_5/x is inode %d, want %d", got, x)
	}
	if _, err := dirPath(db, x); !errors.Is(err, index.ErrDetached) {
		t.Errorf("DirPath(moved x) err = %v, want ErrDetached", err)
	}

	// Within the attic, a directory still cannot move below itself.
	for _, c := range []struct {
		name      string
		newParent uint64
	}{
		{"pending sti into its own chk_5", mirrorChk},
		{"pending sti into chk_5/x/y", y},
	} {
		err := db.Update(func(tx *index.Tx) error {
			_, err := tx.Rename(mirrorJidA, sti, c.newParent, "sti", 0)
			return err
		})
		if !errors.Is(err, index.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", c.name, err)
		}
	}
	if got := mustAtticLookup(t, db, index.AtticPending, atticSti); got != mirrorSti {
		t.Errorf("pending sti moved: inode %d, want %d", got, mirrorSti)
	}
	checkClean(t, db)
}

func TestAtticPendFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string // made after atticTree; "x=y" links x to y
		file  string   // what is pended
		nlink uint32
		kept  string // another name of the file that stays in the tree
	}{
		{"file in a checkpoint", nil, atticFile, 1, ""},
		{"hard-linked file keeps its other name", []string{atticSti + "/link=" + atticFile}, atticFile, 2, atticSti + "/link"},
		{"file of a subtask", nil, atticSti + "/_task_state_snapshot", 1, ""},
		{"unowned file at the top", nil, "scratch", 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			tr := storetest.Build(t, db, atticTree...)
			for _, l := range tc.extra {
				l = fl(l)
				p, target, _ := strings.Cut(l, "=")
				dir, name := path.Split(p)
				update(t, db, func(tx *index.Tx) error {
					_, err := tx.Link(tr.Ino(t, dir), name, tr.Ino(t, target))
					return err
				})
			}
			file := fl(tc.file)
			dir := path.Dir(file)
			if dir == "." {
				dir = ""
			}
			if dir != "" {
				setDirAttrs(t, db, dir)
			}
			ino := tr.Ino(t, file)
			m := extents(chunkA, chunkB)
			sealChunks(t, db, ino, m)
			before := inode(t, db, ino)
			refsBefore := refs(t, db)

			if victim := mustMakePending(t, db, file); victim != nil {
				t.Errorf("Pend into an empty pending directory returned victim %+v, want none", victim)
			}

			mustNotExist(t, db, file)
			if tc.kept != "" {
				if got := mustLookup(t, db, fl(tc.kept)); got != ino {
					t.Errorf("the file's other name %s is inode %d, want %d", tc.kept, got, ino)
				}
			}
			if dir != "" {
				mustLookup(t, db, dir) // the directory stays in the tree
			}
			if got := mustAtticLookup(t, db, index.AtticPending, file); got != ino {
				t.Errorf("pending %s is inode %d, want %d", file, got, ino)
			}
			after := inode(t, db, ino)
			if after.Nlink != tc.nlink {
				t.Errorf("pended file has link count %d, want %d", after.Nlink, tc.nlink)
			}
			if after.Size != before.Size || after.Owner != before.Owner || after.Mode != before.Mode || after.Btime != before.Btime {
				t.Errorf("pended file is %+v, was %+v", after, before)
			}
			if got := readManifest(t, db, ino); !reflect.DeepEqual(got, m) {
				t.Errorf("pended file's manifest = %+v, want %+v", got, m)
			}
			if got := refs(t, db); !slices.Equal(got, refsBefore) {
				t.Errorf("chunk refs after Pend = %v, want %v", got, refsBefore)
			}
			if o := orphans(t, db); len(o) != 0 {
				t.Errorf("orphans after Pend = %v, want none", o)
			}

			// The directories on the way are copies of the live ones.
			pending := atticIno(t, db, index.AtticPending)
			if p := inode(t, db, pending); p.Parent != pending || !p.IsDir() {
				t.Errorf("pending directory %+v is not a directory that is its own parent", p)
			}
			if _, err := dirPath(db, pending); !errors.Is(err, index.ErrDetached) {
				t.Errorf("DirPath(pending) err = %v, want ErrDetached", err)
			}
			parent, walked := pending, ""
			for _, c := range strings.Split(dir, "/") {
				if c == "" {
					continue
				}
				walked = path.Join(walked, c)
				live := inode(t, db, mustLookup(t, db, walked))
				mirror := inode(t, db, mustAtticLookup(t, db, index.AtticPending, walked))
				if mirror.Ino == live.Ino {
					t.Errorf("pending %s is the live directory %d itself", walked, live.Ino)
				}
				if mirror.Mode != live.Mode || mirror.Uid != live.Uid || mirror.Gid != live.Gid || mirror.Owner != live.Owner {
					t.Errorf("pending %s has mode %o uid %d gid %d owner %d; the live one %o %d %d %d",
						walked, mirror.Mode, mirror.Uid, mirror.Gid, mirror.Owner, live.Mode, live.Uid, live.Gid, live.Owner)
				}
				if mirror.Parent != parent {
					t.Errorf("pending %s has parent %d, want %d", walked, mirror.Parent, parent)
				}
				if _, err := dirPath(db, mirror.Ino); !errors.Is(err, index.ErrDetached) {
					t.Errorf("DirPath(pending %s) err = %v, want ErrDetached", walked, err)
				}
				if got, err := dirPath(db, live.Ino); err != nil || got != walked {
					t.Errorf("DirPath(live %s) = %q, %v", walked, got, err)
				}
				parent = mirror.Ino
			}
			checkClean(t, db)
		})
	}
}

func TestAtticPendConflicts(t *testing.T) {
	t.Run("non-empty directory", func(t *testing.T) {
		db := openDB(t)
		storetest.Build(t, db, atticTree...)
		before, beforeHolds := atticState(t, db)
		for _, p := range []string{atticChk, atticAid, "tm_tm1"} {
			if _, err := pend(db, p); !errors.Is(err, index.ErrNotEmpty) {
				t.Errorf("Pend(%s) err = %v, want ErrNotEmpty", p, err)
			}
		}
		after, afterHolds := atticState(t, db)
		if !reflect.DeepEqual(after, before) || !reflect.DeepEqual(afterHolds, beforeHolds) {
			t.Errorf("refused Pend changed the index from %v to %v", before, after)
		}
		checkClean(t, db)
	})

	t.Run("empty directory not yet pending moves", func(t *testing.T) {
		db := openDB(t)
		tr := storetest.Build(t, db, append(atticTree, atticChk+"/empty/")...)
		empty := tr.Ino(t, fl(atticChk+"/empty"))
		if victim := mustMakePending(t, db, atticChk+"/empty"); victim != nil {
			t.Errorf("Pend of an empty directory returned victim %+v", victim)
		}
		mustNotExist(t, db, fl(atticChk+"/empty"))
		if got := mustAtticLookup(t, db, index.AtticPending, atticChk+"/empty"); got != empty {
			t.Errorf("pending empty directory is inode %d, want %d", got, empty)
		}
		checkClean(t, db)
	})

	t.Run("empty directory already pending", func(t *testing.T) {
		db := openDB(t)
		tr := storetest.Build(t, db, atticTree...)
		live := tr.Ino(t, fl(atticChk))
		mustMakePending(t, db, atticFile)
		mustMakePending(t, db, atticChk+"/db/000001.sst")
		mustMakePending(t, db, atticChk+"/db")
		mirror := mustAtticLookup(t, db, index.AtticPending, atticChk)
		if victim := mustMakePending(t, db, atticChk); victim != nil {
			t.Errorf("Pend of chk_5 returned victim %+v, want none", victim)
		}
		mustNotExist(t, db, fl(atticChk))
		if _, err := tryInode(db, live); !errors.Is(err, index.ErrNotFound) {
			t.Errorf("the live chk_5 (inode %d) is still there: %v", live, err)
		}
		if got := mustAtticLookup(t, db, index.AtticPending, atticChk); got != mirror {
			t.Errorf("pending chk_5 is inode %d, want the mirror %d", got, mirror)
		}
		if got := names(t, db, mirror); !slices.Equal(got, []string{"db", "file"}) {
			t.Errorf("pending chk_5 holds %v, want [db file]", got)
		}
		if got, want := mustAtticLookup(t, db, index.AtticPending, atticFile), tr.Ino(t, fl(atticFile)); got != want {
			t.Errorf("pending file is inode %d, want %d", got, want)
		}
		checkClean(t, db)
	})

	t.Run("file already pending is replaced", func(t *testing.T) {
		db := openDB(t)
		tr := storetest.Build(t, db, atticTree...)
		old := tr.Ino(t, fl(atticFile))
		mustMakePending(t, db, atticFile)
		renewed := makeOwned(t, db, atticFile)
		victim := mustMakePending(t, db, atticFile)
		if victim == nil || victim.Ino != old || victim.Nlink != 0 {
			t.Fatalf("Pend over a pending file returned victim %+v, want inode %d with link count 0", victim, old)
		}
		if got := mustAtticLookup(t, db, index.AtticPending, atticFile); got != renewed {
			t.Errorf("pending file is inode %d, want the newer %d", got, renewed)
		}
		if got := orphans(t, db); !slices.Equal(got, []uint64{old}) {
			t.Errorf("orphans = %v, want [%d]", got, old)
		}
		checkClean(t, db) // an orphan is consistent
		update(t, db, func(tx *index.Tx) error { _, err := tx.Reap(old); return err })
		if _, err := tryInode(db, old); !errors.Is(err, index.ErrNotFound) {
			t.Errorf("reaped victim %d: %v, want ErrNotFound", old, err)
		}
		checkClean(t, db)
	})

	t.Run("file where a directory is pending", func(t *testing.T) {
		db := openDB(t)
		tr := storetest.Build(t, db, atticTree...)
		mustMakePending(t, db, atticFile)
		mustMakePending(t, db, atticChk+"/db/000001.sst")
		mirrorDB := mustAtticLookup(t, db, index.AtticPending, atticChk+"/db")
		mustMakePending(t, db, atticChk+"/db")
		live := makeOwned(t, db, atticChk+"/db") // db is a file now
		victim := mustMakePending(t, db, atticChk+"/db")
		if victim == nil || victim.Ino != live || victim.Nlink != 0 {
			t.Fatalf("Pend of file db over a pending directory returned victim %+v, want inode %d with link count 0", victim, live)
		}
		mustNotExist(t, db, fl(atticChk+"/db"))
		if got := mustAtticLookup(t, db, index.AtticPending, atticChk+"/db"); got != mirrorDB {
			t.Errorf("pending db is inode %d, want the pending directory %d", got, mirrorDB)
		}
		if got, want := mustAtticLookup(t, db, index.AtticPending, atticChk+"/db/000001.sst"), tr.Ino(t, fl(atticChk+"/db/000001.sst")); got != want {
			t.Errorf("pending db/000001.sst is inode %d, want %d", got, want)
		}
		update(t, db, func(tx *index.Tx) error { _, err := tx.Reap(live); return err })
		checkClean(t, db)
	})

	t.Run("empty directory where a file is pending", func(t *testing.T) {
		db := openDB(t)
		tr := storetest.Build(t, db, atticTree...)
		file := tr.Ino(t, fl(atticFile))
		mustMakePending(t, db, atticFile)
		dir := create(t, db, tr.Ino(t, fl(atticChk)), "file", dirMode) // file is a directory now
		if victim := mustMakePending(t, db, atticChk+"/file"); victim != nil {
			t.Errorf("Pend of an empty directory over a pending file returned victim %+v, want none", victim)
		}
		mustNotExist(t, db, fl(atticFile))
		if _, err := tryInode(db, dir); !errors.Is(err, index.ErrNotFound) {
			t.Errorf("the removed directory (inode %d) is still there: %v", dir, err)
		}
		if got := mustAtticLookup(t, db, index.AtticPending, atticFile); got != file {
			t.Errorf("pending file is inode %d, want the pending file %d", got, file)
		}
		if n := inode(t, db, file); n.Nlink != 1 {
			t.Errorf("pending file has link count %d, want 1", n.Nlink)
		}
		checkClean(t, db)
	})

	t.Run("pending file where a directory goes", func(t *testing.T) {
		// MakePending refuses (the caller removes for good): the pending file stays,
		// unreaped, since the executor may still hold it open.
		db := openDB(t)
		tr := storetest.Build(t, db, atticTree...)
		old := tr.Ino(t, fl(atticFile))
		mustMakePending(t, db, atticFile)
		create(t, db, tr.Ino(t, fl(atticChk)), "file", dirMode) // file is a directory now
		inner := makeOwned(t, db, atticFile+"/inner")
		if _, err := pend(db, atticFile+"/inner"); !errors.Is(err, index.ErrExists) {
			t.Fatalf("Pend under a name a pending file has: err = %v, want ErrExists", err)
		}
		if got := mustAtticLookup(t, db, index.AtticPending, atticFile); got != old {
			t.Errorf("pending %s is inode %d, want the pending file %d", atticFile, got, old)
		}
		if n := inode(t, db, old); n.Nlink != 1 {
			t.Errorf("the pending file has %d links, want 1", n.Nlink)
		}
		err := db.View(func(tx *index.Tx) error {
			n, err := tx.Resolve(fl(atticFile + "/inner"))
			if err == nil && n.Ino != inner {
				t.Errorf("live inner is inode %d, want %d still in the tree", n.Ino, inner)
			}
			return err
		})
		if err != nil {
			t.Errorf("live inner: %v", err)
		}
		checkClean(t, db)
	})

	t.Run("missing name", func(t *testing.T) {
		db := openDB(t)
		storetest.Build(t, db, atticTree...)
		if _, err := pend(db, atticChk+"/nothing"); !errors.Is(err, index.ErrNotFound) {
			t.Errorf("Pend of a missing name err = %v, want ErrNotFound", err)
		}
		checkClean(t, db)
	})
}

func TestAtticJobRootsWhilePending(t *testing.T) {
	db := openDB(t)
	tr := storetest.Build(t, db, atticTree...)
	jobA, jobB := fl("{A}"), fl("{B}")
	liveA, liveB := tr.Ino(t, fl(atticJidA)), tr.Ino(t, fl(atticJidB))
	if got := jobRoots(t, db, jobA); !slices.Equal(got, []uint64{liveA}) {
		t.Fatalf("JobRoots(A) before = %v, want [%d]", got, liveA)
	}
	if got := jobRoots(t, db, jobB); !slices.Equal(got, []uint64{liveB}) {
		t.Fatalf("JobRoots(B) before = %v, want [%d]", got, liveB)
	}

	// rm -rf of the sti directory: job A's state is in both places.
	rmrf(t, db, atticSti)
	mirrorA := mustAtticLookup(t, db, index.AtticPending, atticJidA)
	if got, want := jobRoots(t, db, jobA), sorted(liveA, mirrorA); !slices.Equal(got, want) {
		t.Errorf("JobRoots(A) with the subtask pending = %v, want %v (live and pending jid)", got, want)
	}
	if got := jobRoots(t, db, jobB); !slices.Equal(got, []uint64{liveB}) {
		t.Errorf("JobRoots(B) with A's subtask pending = %v, want [%d]", got, liveB)
	}
	checkClean(t, db)

	// rm -rf of the rest of the allocation.
	rmrf(t, db, atticAid)
	mustNotExist(t, db, fl(atticAid))
	mirrorB := mustAtticLookup(t, db, index.AtticPending, atticJidB)
	if got := jobRoots(t, db, jobA); !slices.Equal(got, []uint64{mirrorA}) {
		t.Errorf("JobRoots(A) with all pending = %v, want the pending jid [%d]", got, mirrorA)
	}
	if got := jobRoots(t, db, jobB); !slices.Equal(got, []uint64{mirrorB}) {
		t.Errorf("JobRoots(B) with all pending = %v, want the pending jid [%d]", got, mirrorB)
	}
	for _, p := range []string{atticFile, atticChk + "/db/000001.sst", atticSti + "/_task_state_snapshot", atticJidB + "/vtx_{V}_sti_1/chk_5/file"} {
		if got, want := mustAtticLookup(t, db, index.AtticPending, p), tr.Ino(t, fl(p)); got != want {
			t.Errorf("pending %s is inode %d, want %d", p, got, want)
		}
	}
	checkClean(t, db)
}

func sorted(inos ...uint64) []uint64 {
	slices.Sort(inos)
	return inos
}

func TestAtticHoldPending(t *testing.T) {
	jobA, jobB := fl("{A}"), fl("{B}")
	for _, tc := range []struct {
		name        string
		top         string // what rm -rf removes and is held
		files       int
		bytes       int64
		jobs        []string
		jobRootsA   []string // roots of job A afterwards: "@" the held top, "held:", "pending:" or "live:" and a path
		execRootTop bool     // the held top is a root of the executor
	}{
		{"allocation", atticAid, 4, 60, []string{jobA, jobB}, []string{"held:jid_{A}"}, true},
		{"job in an allocation", atticJidA, 3, 50, []string{jobA}, []string{"@"}, true},
		{"checkpoint", atticChk, 2, 30, []string{jobA}, []string{"@", "live:" + atticJidA, "pending:" + atticJidA}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			tr := storetest.Build(t, db, atticTree...)
			// Sizes: file 10, 000001.sst 20, _task_state_snapshot 20, B's file 10.
			sealChunks(t, db, tr.Ino(t, fl(atticFile)), extents(chunkA))
			sealChunks(t, db, tr.Ino(t, fl(atticChk+"/db/000001.sst")), extents(chunkA, chunkB))
			sealChunks(t, db, tr.Ino(t, fl(atticSti+"/_task_state_snapshot")), extents(chunkB, chunkC))
			sealChunks(t, db, tr.Ino(t, fl(atticJidB+"/vtx_{V}_sti_1/chk_5/file")), extents(chunkC))

			rmrf(t, db, tc.top)
			top := mustAtticLookup(t, db, index.AtticPending, tc.top)
			const id = "20261130T051700Z-hold"
			h, err := holdPending(db, tc.top, id)
			if err != nil {
				t.Fatalf("HoldPending: %v", err)
			}
			want := index.Hold{ID: id, Ino: top, Path: fl(tc.top), Jobs: tc.jobs, Executor: atticExec,
				At: 1_700_000_000_000_000_000, Files: tc.files, Bytes: tc.bytes}
			if !reflect.DeepEqual(*h, want) {
				t.Errorf("HoldPending filled in %+v, want %+v", *h, want)
			}
			if hs := holds(t, db); len(hs) != 1 || !reflect.DeepEqual(*hs[0], want) {
				t.Errorf("Holds() = %v, want [%+v]", hs, want)
			}
			db.View(func(tx *index.Tx) error {
				if got, err := tx.Hold(id); err != nil || !reflect.DeepEqual(*got, want) {
					t.Errorf("Hold(%s) = %+v, %v; want %+v", id, got, err, want)
				}
				if _, err := tx.Hold("other"); !errors.Is(err, index.ErrNotFound) {
					t.Errorf("Hold(other) err = %v, want ErrNotFound", err)
				}
				return nil
			})

			held := atticIno(t, db, index.AtticHeld)
			if got := mustAtticLookup(t, db, index.AtticHeld, id); got != top {
				t.Errorf("held/%s is inode %d, want the pending top %d", id, got, top)
			}
			if _, err := atticLookup(db, index.AtticPending, tc.top); !errors.Is(err, index.ErrNotFound) {
				t.Errorf("pending %s after HoldPending: %v, want ErrNotFound", tc.top, err)
			}
			if n := inode(t, db, top); n.Parent != held {
				t.Errorf("held top has parent %d, want the held directory %d", n.Parent, held)
			}
			if n := inode(t, db, held); n.Nlink != 3 || n.Parent != held {
				t.Errorf("held directory has link count %d and parent %d, want 3 and itself", n.Nlink, n.Parent)
			}
			for _, ino := range []uint64{held, top} {
				if _, err := dirPath(db, ino); !errors.Is(err, index.ErrDetached) {
					t.Errorf("DirPath(%d) err = %v, want ErrDetached", ino, err)
				}
			}

			var wantA []uint64
			for _, r := range tc.jobRootsA {
				where, p, _ := strings.Cut(r, ":")
				switch where {
				case "@":
					wantA = append(wantA, top)
				case "held":
					wantA = append(wantA, mustAtticLookup(t, db, index.AtticHeld, id+"/"+p))
				case "pending":
					wantA = append(wantA, mustAtticLookup(t, db, index.AtticPending, p))
				case "live":
					wantA = append(wantA, mustLookup(t, db, fl(p)))
				}
			}
			slices.Sort(wantA)
			if got := jobRoots(t, db, jobA); !slices.Equal(got, wantA) {
				t.Errorf("JobRoots(A) = %v, want %v", got, wantA)
			}
			if got := executorRoots(t, db, atticExec); slices.Contains(got, top) != tc.execRootTop {
				t.Errorf("ExecutorRoots(%s) = %v: held top %d a root is %v, want %v", atticExec, got, top, !tc.execRootTop, tc.execRootTop)
			}
			checkClean(t, db)
		})
	}

	t.Run("id taken", func(t *testing.T) {
		db := openDB(t)
		storetest.Build(t, db, atticTree...)
		rmrf(t, db, atticJidA)
		rmrf(t, db, atticJidB)
		if _, err := holdPending(db, atticJidA, "h"); err != nil {
			t.Fatalf("HoldPending: %v", err)
		}
		before, beforeHolds := atticState(t, db)
		if _, err := holdPending(db, atticJidB, "h"); !errors.Is(err, index.ErrExists) {
			t.Errorf("HoldPending under a taken id err = %v, want ErrExists", err)
		}
		after, afterHolds := atticState(t, db)
		if !reflect.DeepEqual(after, before) || !reflect.DeepEqual(afterHolds, beforeHolds) {
			t.Errorf("refused HoldPending changed the index from %v / %v to %v / %v", before, beforeHolds, after, afterHolds)
		}
		checkClean(t, db)
	})
}

// heldAllocation builds atticTree, makes pending all of allocation D and holds it
// as id; it returns the tree as built (the held files keep their inodes).
func heldAllocation(t *testing.T, db *index.DB, id string) storetest.Tree {
	t.Helper()
	tr := storetest.Build(t, db, append(atticTree, "tm_tm1/localState/aid_{F}/", "tm_tm1/file")...)
	rmrf(t, db, atticAid)
	if _, err := holdPending(db, atticAid, id); err != nil {
		t.Fatalf("HoldPending: %v", err)
	}
	return tr
}

func TestAtticRestore(t *testing.T) {
	const id = "h1"
	jobA := fl("{A}")
	for _, tc := range []struct {
		name, dest string
		at         string // the clean path the tree lands at
		alloc      string // the allocation id the restored top gets
	}{
		{"to a new allocation", "tm_tm1/localState/aid_{E}", "tm_tm1/localState/aid_{E}", fl("{E}")},
		{"to where it was", atticAid, atticAid, fl("{D}")},
		{"slashes around", "/tm_tm1/localState/aid_{E}/", "tm_tm1/localState/aid_{E}", fl("{E}")},
		{"dots and double slashes", "./tm_tm1//localState/./aid_{E}", "tm_tm1/localState/aid_{E}", fl("{E}")},
		{"out of the job's tree", "restored", "restored", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			tr := heldAllocation(t, db, id)
			h := holds(t, db)[0]
			var heldFiles map[string]uint64 // path below the top -> ino
			db.View(func(tx *index.Tx) error {
				heldFiles = map[string]uint64{"": h.Ino}
				return tx.Walk(h.Ino, func(p string, n *index.Inode) error { heldFiles[p] = n.Ino; return nil })
			})
			var parent uint64
			var name string
			update(t, db, func(tx *index.Tx) (err error) {
				parent, name, err = tx.RestoreTo(id, fl(tc.dest), owner.FlinkRules())
				return err
			})
			at := fl(tc.at)
			if wantParent := mustLookup(t, db, path.Dir(at)); parent != wantParent || name != path.Base(at) {
				t.Errorf("RestoreTo = %d, %q; want %d, %q", parent, name, wantParent, path.Base(at))
			}
			for p, ino := range heldFiles {
				full := path.Join(at, p)
				if got := mustLookup(t, db, full); got != ino {
					t.Errorf("restored %s is inode %d, want %d", full, got, ino)
				}
				if got, want := ownerOf(t, db, ino), owner.FlinkRules().Owner(full); got != want {
					t.Errorf("owner of restored %s = %+v, want %+v", full, got, want)
				}
			}
			if got := ownerOf(t, db, h.Ino).Allocation; got != tc.alloc {
				t.Errorf("restored top's allocation = %q, want %q", got, tc.alloc)
			}
			if got, err := dirPath(db, h.Ino); err != nil || got != at {
				t.Errorf("DirPath(restored top) = %q, %v; want %q", got, err, at)
			}
			// The sealed file keeps its place in the job's tree.
			if got, want := mustLookup(t, db, path.Join(at, "jid_"+jobA, fl("vtx_{V}_sti_0/chk_5/file"))), tr.Ino(t, fl(atticFile)); got != want {
				t.Errorf("restored file is inode %d, want %d", got, want)
			}
			var wantA []uint64
			if tc.alloc != "" {
				wantA = []uint64{mustLookup(t, db, path.Join(at, "jid_"+jobA))}
			}
			if got := jobRoots(t, db, jobA); !slices.Equal(got, wantA) {
				t.Errorf("JobRoots(A) = %v, want the restored jid %v", got, wantA)
			}
			if got := executorRoots(t, db, atticExec); slices.Contains(got, h.Ino) {
				t.Errorf("ExecutorRoots(%s) = %v still has the restored top %d", atticExec, got, h.Ino)
			}
			if ids := holdIDs(t, db); len(ids) != 0 {
				t.Errorf("Holds after restore = %v, want none", ids)
			}
			db.View(func(tx *index.Tx) error {
				if _, err := tx.Hold(id); !errors.Is(err, index.ErrNotFound) {
					t.Errorf("Hold(%s) after restore err = %v, want ErrNotFound", id, err)
				}
				return nil
			})
			if got := names(t, db, atticIno(t, db, index.AtticHeld)); len(got) != 0 {
				t.Errorf("held directory after restore holds %v, want nothing", got)
			}
			checkOwners(t, db)
			checkClean(t, db)
		})
	}
}

func TestAtticRestoreRefuses(t *testing.T) {
	const id = "h1"
	for _, tc := range []struct {
		name, id, dest string
		want           error
	}{
		{"destination exists", id, "tm_tm1/localState/aid_{F}", index.ErrExists},
		{"destination is a file", id, "tm_tm1/file", index.ErrExists},
		{"parent missing", id, "tm_tm1/nothing/aid_{E}", index.ErrNotFound},
		{"parent a file", id, "tm_tm1/file/aid_{E}", index.ErrNotDir},
		{"'..' in the parent", id, "tm_tm1/../aid_{E}", index.ErrInvalid},
		{"'..' in the middle", id, "tm_tm1/localState/../localState/aid_{E}", index.ErrInvalid},
		{"empty", id, "", index.ErrInvalid},
		{"only slashes", id, "//", index.ErrInvalid},
		{"dot", id, ".", index.ErrInvalid},
		{"dot-dot", id, "..", index.ErrInvalid},
		{"ends in dot", id, "tm_tm1/localState/.", index.ErrExists}, // tm_tm1/localState
		{"ends in dot-dot", id, "tm_tm1/localState/..", index.ErrInvalid},
		{"name too long", id, "tm_tm1/" + strings.Repeat("x", 256), index.ErrInvalid},
		{"unknown hold", "nothing", "tm_tm1/localState/aid_{E}", index.ErrNotFound},
		{"being dropped", id, "tm_tm1/localState/aid_{E}", index.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			heldAllocation(t, db, id)
			if tc.name == "being dropped" {
				err := db.Update(func(tx *index.Tx) error {
					h, err := tx.Hold(id)
					if err != nil {
						return err
					}
					h.Dropping = "older than the hold TTL"
					return tx.PutHold(h)
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			before, beforeHolds := atticState(t, db)
			err := db.Update(func(tx *index.Tx) error {
				_, _, err := tx.RestoreTo(tc.id, fl(tc.dest), owner.FlinkRules())
				return err
			})
			if !errors.Is(err, tc.want) {
				t.Errorf("RestoreTo(%s, %q) err = %v, want %v", tc.id, tc.dest, err, tc.want)
			}
			after, afterHolds := atticState(t, db)
			if !reflect.DeepEqual(after, before) || !reflect.DeepEqual(afterHolds, beforeHolds) {
				t.Errorf("refused RestoreTo changed the index from %v / %v to %v / %v", before, beforeHolds, after, afterHolds)
			}
			if ids := holdIDs(t, db); !slices.Equal(ids, []string{id}) {
				t.Errorf("Holds after a refused restore = %v, want [%s]", ids, id)
			}
			checkClean(t, db)
		})
	}
}

func TestAtticCheckHolds(t *testing.T) {
	const id = "h1"
	for _, tc := range []struct {
		name    string
		corrupt func(tx *index.Tx, h *index.Hold) error
	}{
		{"held tree without a record", func(tx *index.Tx, h *index.Hold) error { return tx.DeleteHold(id) }},
		{"record without a held tree", func(tx *index.Tx, h *index.Hold) error {
			return tx.PutHold(&index.Hold{ID: "ghost", Ino: h.Ino, Path: h.Path})
		}},
		{"record naming another inode", func(tx *index.Tx, h *index.Hold) error {
			h.Ino = index.RootIno
			return tx.PutHold(h)
		}},
		{"record of a restored tree", func(tx *index.Tx, h *index.Hold) error {
			if _, _, err := tx.RestoreTo(id, fl("tm_tm1/localState/aid_{E}"), owner.FlinkRules()); err != nil {
				return err
			}
			return tx.PutHold(h)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			heldAllocation(t, db, id)
			checkClean(t, db)
			h := holds(t, db)[0]
			db.Strict = nil // the corruption is the point
			storetest.LeaveDamaged(t, "the hold is corrupt on purpose")
			update(t, db, func(tx *index.Tx) error { return tc.corrupt(tx, h) })
			if got := checkKinds(t, db); !slices.Equal(got, []string{index.ProblemHold}) {
				t.Errorf("Check reported %v, want [%s]", got, index.ProblemHold)
			}
		})
	}
}

// A held tree put back where it was changes no owner, so the restore
// writes only its top, whatever its size: one transaction of badger holds
// a few megabytes, and a restore of 30,000 files rewrote every root record
// before.
func TestAtticRestoreOfALargeTreeInPlace(t *testing.T) {
	db := openDB(t)
	db.Strict = nil // 30,000 removals, each checked against 30,000 inodes, is too slow
	storetest.Build(t, db, atticTree...)
	chk := mustLookup(t, db, fl(atticChk))
	const files = 30_000
	for i := 0; i < files; i += 1000 {
		update(t, db, func(tx *index.Tx) error {
			for j := i; j < i+1000; j++ {
				p := fmt.Sprintf("%s/f%d", fl(atticChk), j)
				ino, err := db.NewIno()
				if err != nil {
					return err
				}
				now := index.Now()
				n := &index.Inode{Ino: ino, Mode: fileMode, Atime: now, Mtime: now, Ctime: now, Btime: now}
				if n.Owner, err = tx.OwnerID(owner.FlinkRules().Owner(p)); err != nil {
					return err
				}
				if err := tx.Create(chk, path.Base(p), n); err != nil {
					return err
				}
			}
			return nil
		})
	}
	rmrf(t, db, atticAid)
	if _, err := holdPending(db, atticAid, "big"); err != nil {
		t.Fatalf("HoldPending: %v", err)
	}
	update(t, db, func(tx *index.Tx) error {
		_, _, err := tx.RestoreTo("big", fl(atticAid), owner.FlinkRules())
		return err
	})
	err := db.View(func(tx *index.Tx) error {
		n, err := tx.CountEntries(mustLookup(t, db, fl(atticChk)))
		if err == nil && n < files {
			t.Errorf("the restored checkpoint holds %d entries, want at least %d", n, files)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, db)
}
