package index

// White-box test: it builds a consistent index through the exported API and
// then breaks it one key at a time with the unexported Tx.set and Tx.del,
// which write raw keys (layout in tx.go and owner.go).

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/owner"
)

// checkFixture is an index with a namespace addressed by path.
type checkFixture struct {
	t     *testing.T
	db    *DB
	inos  map[string]uint64
	rules *owner.Rules
}

func newCheckFixture(t *testing.T) *checkFixture {
	db, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &checkFixture{t: t, db: db, inos: map[string]uint64{"": RootIno}, rules: owner.FlinkRules()}
}

func (f *checkFixture) update(fn func(tx *Tx) error) {
	f.t.Helper()
	if err := f.db.Update(fn); err != nil {
		f.t.Fatalf("Update: %v", err)
	}
}

// create makes p (a directory if it ends in "/") with the owner the Flink
// rules give its path, as the fs layer does.
func (f *checkFixture) create(p string) uint64 {
	f.t.Helper()
	mode := uint32(syscall.S_IFREG | 0o644)
	if strings.HasSuffix(p, "/") {
		mode = syscall.S_IFDIR | 0o755
	}
	p = strings.TrimSuffix(p, "/")
	dir, name := path.Split(p)
	ino, err := f.db.NewIno()
	if err != nil {
		f.t.Fatal(err)
	}
	f.update(func(tx *Tx) error {
		now := Now()
		n := &Inode{Ino: ino, Mode: mode, Atime: now, Mtime: now, Ctime: now}
		if n.Owner, err = tx.OwnerID(f.rules.Owner(p)); err != nil {
			return err
		}
		if err := tx.Create(f.ino(dir), name, n); err != nil {
			return err
		}
		return tx.NoteWrite(f.rules.Owner(p), now)
	})
	f.inos[p] = ino
	return ino
}

func (f *checkFixture) ino(p string) uint64 {
	f.t.Helper()
	ino, ok := f.inos[strings.Trim(p, "/")]
	if !ok {
		f.t.Fatalf("no %q in the fixture", p)
	}
	return ino
}

// rename renames old to new and reowns what moved, as the fs layer does.
func (f *checkFixture) rename(old, new string, flags uint32) {
	f.t.Helper()
	od, on := path.Split(old)
	nd, nn := path.Split(new)
	f.update(func(tx *Tx) error {
		if _, err := tx.Rename(f.ino(od), on, f.ino(nd), nn, flags); err != nil {
			return err
		}
		d, err := tx.Lookup(f.ino(nd), nn)
		if err != nil {
			return err
		}
		return tx.Reown(d.Ino, new, f.rules)
	})
	for p, ino := range f.inos {
		if p == old || strings.HasPrefix(p, old+"/") {
			delete(f.inos, p)
			f.inos[new+strings.TrimPrefix(p, old)] = ino
		}
	}
}

// stage gives file p a staging reference.
func (f *checkFixture) stage(p string) uint64 {
	f.t.Helper()
	id, err := f.db.NewStagingID()
	if err != nil {
		f.t.Fatal(err)
	}
	f.update(func(tx *Tx) error {
		n, err := tx.Inode(f.ino(p))
		if err != nil {
			return err
		}
		_, err = tx.SetStaging(n, id)
		return err
	})
	return id
}

// seal stages file p and seals it with extents of the given chunks.
func (f *checkFixture) seal(p string, chunks ...cas.Hash) {
	f.t.Helper()
	id := f.stage(p)
	m := &manifest.Manifest{}
	for _, h := range chunks {
		m.Extents = append(m.Extents, manifest.Extent{Off: m.Size, Len: 100, Hash: h})
		m.Size += 100
	}
	f.update(func(tx *Tx) error {
		now := Now()
		return tx.Seal(f.ino(p), id, m, now, now)
	})
}

// problems runs Check and returns the kinds it reported, sorted and
// deduplicated; every problem is logged.
func (f *checkFixture) problems() []string {
	f.t.Helper()
	ps, _, err := f.db.Check()
	if err != nil {
		f.t.Fatalf("Check: %v", err)
	}
	var kinds []string
	for _, p := range ps {
		f.t.Logf("%s", p)
		kinds = append(kinds, p.Kind)
	}
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

var (
	chunkA = cas.Sum([]byte("a"))
	chunkB = cas.Sum([]byte("b"))
	chunkC = cas.Sum([]byte("c"))
)

const (
	checkJob  = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	checkSti  = "tm_x/localState/aid_dddddddddddddddddddddddddddddddd/jid_" + checkJob + "/vtx_cccccccccccccccccccccccccccccccc_sti_0"
	checkRock = "tm_x/tmp/job_" + checkJob + "_op_Map_1_uuid_12345678-9abc-def0-1234-56789abcdef0"
)

// consistentFixture builds an index that has each kind of record: nested
// directories, hard links, renames across directories, an exchange, a
// replaced file, an orphan, a removed directory, staging and sealed files
// sharing chunks, extended attributes, Flink job state with roots, and
// reply records, one of an inode that is gone.
func consistentFixture(t *testing.T) *checkFixture {
	f := newCheckFixture(t)
	for _, p := range []string{"a/", "a/b/", "a/b/f", "a/g", "c/", "c/h", "c/empty", "c/gone/", "tm_x/", "tm_x/localState/",
		"tm_x/localState/aid_dddddddddddddddddddddddddddddddd/",
		"tm_x/localState/aid_dddddddddddddddddddddddddddddddd/jid_" + checkJob + "/",
		checkSti + "/", checkSti + "/chk_1/", checkSti + "/chk_1/db.tmp/", checkSti + "/chk_1/db.tmp/000001.sst",
		"tm_x/tmp/", checkRock + "/", checkRock + "/000001.sst"} {
		f.create(p)
	}
	f.update(func(tx *Tx) error {
		if _, err := tx.Link(f.ino("c"), "f-link", f.ino("a/b/f")); err != nil {
			return err
		}
		_, err := tx.Link(f.ino(checkSti+"/chk_1/db.tmp"), "000002.sst", f.ino(checkRock+"/000001.sst"))
		return err
	})
	f.rename("a/b", "c/b", 0)
	f.rename("a/g", "c/h", 0) // replaces c/h, which becomes an orphan
	f.rename("c/b", "a/x", RenameNoReplace)
	f.rename(checkSti+"/chk_1/db.tmp", checkSti+"/chk_1/db", 0)
	f.update(func(tx *Tx) error {
		if err := tx.Rmdir(f.ino("c"), "gone"); err != nil {
			return err
		}
		if err := tx.PutReply(10, Reply{At: Now(), Ino: f.ino("a/x/f")}); err != nil {
			return err
		}
		if err := tx.PutReply(12, Reply{At: Now(), Ino: 999_999}); err != nil {
			return err
		}
		return tx.SetXattr(f.ino("a/x/f"), "user.k", []byte("v"))
	})
	f.seal("a/x/f", chunkA, chunkB)
	f.seal("c/h", chunkA)
	f.seal(checkRock+"/000001.sst", chunkA, chunkC)
	f.seal(checkRock+"/000001.sst", chunkC) // a new seal drops the old manifest's references
	f.stage(checkSti + "/chk_1/db/000001.sst")
	return f
}

func TestCheckConsistent(t *testing.T) {
	f := consistentFixture(t)
	if got := f.problems(); len(got) != 0 {
		t.Fatalf("Check of a consistent index reported %v", got)
	}
	_, used, err := f.db.Check()
	if err != nil {
		t.Fatal(err)
	}
	want := []cas.Hash{chunkA, chunkB, chunkC}
	slices.SortFunc(want, func(a, b cas.Hash) int { return strings.Compare(string(a[:]), string(b[:])) })
	if !slices.Equal(used, want) {
		t.Errorf("Check used chunks = %v, want %v", used, want)
	}
}

// TestCheckFindsEachProblem breaks a consistent index one way at a time and
// expects Check to report exactly the kind of problem made.
func TestCheckFindsEachProblem(t *testing.T) {
	u64 := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	dirent := func(ino uint64, mode uint32) []byte {
		return binary.BigEndian.AppendUint32(u64(ino), mode&syscall.S_IFMT)
	}
	inode := func(tx *Tx, ino uint64, fn func(n *Inode)) error {
		n, err := tx.Inode(ino)
		if err != nil {
			return err
		}
		fn(n)
		return tx.PutInode(n)
	}
	for _, tc := range []struct {
		name   string
		want   []string
		break_ func(f *checkFixture, tx *Tx) error
	}{
		{"dirent to a missing inode", []string{ProblemDanglingDirent}, func(f *checkFixture, tx *Tx) error {
			return tx.set(inoNameKey(prefixDirent, f.ino("a"), "ghost"), dirent(999_999, syscall.S_IFREG))
		}},
		{"dirent of the wrong type", []string{ProblemDirentType}, func(f *checkFixture, tx *Tx) error {
			return tx.set(inoNameKey(prefixDirent, f.ino("c"), "h"), dirent(f.ino("c/h"), syscall.S_IFLNK))
		}},
		{"file link count too high", []string{ProblemNlink}, func(f *checkFixture, tx *Tx) error {
			return inode(tx, f.ino("a/x/f"), func(n *Inode) { n.Nlink = 3 })
		}},
		{"directory link count", []string{ProblemNlink}, func(f *checkFixture, tx *Tx) error {
			return inode(tx, f.ino("a"), func(n *Inode) { n.Nlink = 2 })
		}},
		{"nameless file without orphan mark", []string{ProblemOrphan}, func(f *checkFixture, tx *Tx) error {
			ins, err := tx.Orphans()
			if err != nil || len(ins) != 1 {
				return fmt.Errorf("orphans %v, %v", ins, err)
			}
			return tx.del(inoKey(prefixOrphan, ins[0]))
		}},
		{"orphan mark on a named file", []string{ProblemOrphan}, func(f *checkFixture, tx *Tx) error {
			return tx.set(inoKey(prefixOrphan, f.ino("a/x/f")), nil)
		}},
		{"directory with a wrong parent", []string{ProblemParent}, func(f *checkFixture, tx *Tx) error {
			return inode(tx, f.ino("a/x"), func(n *Inode) { n.Parent = f.ino("c") })
		}},
		{"directory cycle cut off from the root", []string{ProblemNlink, ProblemParent, ProblemUnreachable}, func(f *checkFixture, tx *Tx) error {
			// a/x moves into itself: its only entry is now inside it.
			if err := tx.del(inoNameKey(prefixDirent, f.ino("a"), "x")); err != nil {
				return err
			}
			return tx.set(inoNameKey(prefixDirent, f.ino("a/x"), "loop"), dirent(f.ino("a/x"), syscall.S_IFDIR))
		}},
		{"staging reference without file content", []string{ProblemStagingRef}, func(f *checkFixture, tx *Tx) error {
			return tx.set(inoKey(prefixStaging, 777), u64(f.ino("a/x/f")))
		}},
		{"inode's staging reference gone", []string{ProblemStagingRef}, func(f *checkFixture, tx *Tx) error {
			n, err := tx.Inode(f.ino(checkSti + "/chk_1/db/000001.sst"))
			if err != nil {
				return err
			}
			return tx.del(inoKey(prefixStaging, n.Staging))
		}},
		{"staging and manifest at once", []string{ProblemStagingRef}, func(f *checkFixture, tx *Tx) error {
			return inode(tx, f.ino("a/x/f"), func(n *Inode) { n.Staging = 1 << 40 }) // then its reference too
		}},
		{"sealed size differs", []string{ProblemSize}, func(f *checkFixture, tx *Tx) error {
			return inode(tx, f.ino("a/x/f"), func(n *Inode) { n.Size++ })
		}},
		{"manifest does not decode", []string{ProblemManifest}, func(f *checkFixture, tx *Tx) error {
			return tx.set(inoKey(prefixManifest, f.ino("c/empty")), []byte{9, 9, 9})
		}},
		{"chunk reference count too low", []string{ProblemChunkRefcount}, func(f *checkFixture, tx *Tx) error {
			return tx.set(hashKey(prefixChunk, chunkA[:]), u64(1))
		}},
		{"chunk reference count missing", []string{ProblemChunkRefcount}, func(f *checkFixture, tx *Tx) error {
			return tx.del(hashKey(prefixChunk, chunkB[:]))
		}},
		{"chunk reference count for no extent", []string{ProblemChunkRefcount}, func(f *checkFixture, tx *Tx) error {
			h := cas.Sum([]byte("nobody"))
			return tx.set(hashKey(prefixChunk, h[:]), u64(1))
		}},
		{"referenced chunk listed as garbage", []string{ProblemGarbageList}, func(f *checkFixture, tx *Tx) error {
			return tx.set(hashKey(prefixGarbage, chunkA[:]), nil)
		}},
		{"owner missing", []string{ProblemOwner}, func(f *checkFixture, tx *Tx) error {
			return inode(tx, f.ino("a/x/f"), func(n *Inode) { n.Owner = 12345 })
		}},
		{"job root of another job", []string{ProblemJobRoot}, func(f *checkFixture, tx *Tx) error {
			return tx.set(jobRootKey("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", f.ino(checkRock)), nil)
		}},
		{"job root below its own job", []string{ProblemJobRoot}, func(f *checkFixture, tx *Tx) error {
			return tx.set(jobRootKey(checkJob, f.ino(checkSti)), nil)
		}},
		{"job root missing", []string{ProblemJobRoot}, func(f *checkFixture, tx *Tx) error {
			return tx.del(jobRootKey(checkJob, f.ino(checkRock)))
		}},
		{"collection record that does not decode", []string{ProblemCollection}, func(f *checkFixture, tx *Tx) error {
			return tx.set(collectionKey(1), []byte("{"))
		}},
		{"reply record that does not decode", []string{ProblemReply}, func(f *checkFixture, tx *Tx) error {
			return tx.set(replyKey(10), []byte{1, 2, 3})
		}},
		{"reply record key that is not a number", []string{ProblemReply}, func(f *checkFixture, tx *Tx) error {
			return tx.set([]byte{prefixReply, 1}, encodeReply(Reply{At: 1}))
		}},
		{"extended attribute of no inode", []string{ProblemXattr}, func(f *checkFixture, tx *Tx) error {
			return tx.SetXattr(999_999, "user.k", nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := consistentFixture(t)
			f.update(func(tx *Tx) error { return tc.break_(f, tx) })
			if got := f.problems(); !slices.Equal(got, tc.want) {
				t.Errorf("Check reported kinds %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCheckAfterRandomOperations runs random namespace and content
// operations through the exported API, as the fs layer calls them, and
// expects the index to stay consistent after each one.
func TestCheckAfterRandomOperations(t *testing.T) {
	seed := uint64(Now())
	r := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d", seed)
	f := newCheckFixture(t)
	chunks := []cas.Hash{chunkA, chunkB, chunkC}
	names := []string{"p", "q", "r", "s"}
	// dirs and files track what exists, by path.
	dirs := []string{""}
	var files []string
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	under := func(dir string) string { return path.Join(dir, pick(names)) }
	parent := func(p string) uint64 {
		if d := path.Dir(p); d != "." {
			return f.inos[d]
		}
		return RootIno
	}
	// refresh lists what exists now, by path.
	var walk func(dir string, ino uint64)
	walk = func(dir string, ino uint64) {
		var ds []Dirent
		if err := f.db.View(func(tx *Tx) error {
			return tx.ReadDir(ino, func(d Dirent) bool { ds = append(ds, d); return true })
		}); err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			p := path.Join(dir, d.Name)
			f.inos[p] = d.Ino
			if d.Mode&syscall.S_IFMT == syscall.S_IFDIR {
				dirs = append(dirs, p)
				walk(p, d.Ino)
			} else {
				files = append(files, p)
			}
		}
	}
	refresh := func() {
		dirs, files, f.inos = []string{""}, nil, map[string]uint64{"": RootIno}
		walk("", RootIno)
	}
	for i := range 400 {
		var op string
		err := f.db.Update(func(tx *Tx) error {
			switch k := r.IntN(8); {
			case k <= 1:
				op = "create"
				p := under(pick(dirs))
				ino, err := f.db.NewIno()
				if err != nil {
					return err
				}
				mode := uint32(syscall.S_IFREG | 0o644)
				if r.IntN(3) == 0 {
					mode = syscall.S_IFDIR | 0o755
				}
				now := Now()
				return tx.Create(parent(p), path.Base(p), &Inode{Ino: ino, Mode: mode, Atime: now, Mtime: now, Ctime: now})
			case k == 2 && len(files) > 0:
				op = "link"
				_, err := tx.Link(f.inos[pick(dirs)], pick(names), f.inos[pick(files)])
				return err
			case k == 3 && len(files) > 0:
				op = "unlink"
				p := pick(files)
				n, err := tx.Unlink(parent(p), path.Base(p))
				if err == nil && n.Nlink == 0 && r.IntN(2) == 0 {
					_, err = tx.Reap(n.Ino)
				}
				return err
			case k == 4 && len(dirs) > 1:
				op = "rmdir"
				p := pick(dirs[1:])
				return tx.Rmdir(parent(p), path.Base(p))
			case k == 5:
				op = "rename"
				all := append(slices.Clone(dirs[1:]), files...)
				if len(all) == 0 {
					return nil
				}
				src, dst := pick(all), under(pick(dirs))
				_, err := tx.Rename(parent(src), path.Base(src), parent(dst), path.Base(dst), uint32(r.IntN(3)))
				return err
			case k == 6 && len(files) > 0:
				op = "seal"
				n, err := tx.Inode(f.inos[pick(files)])
				if err != nil {
					return err
				}
				id, err := f.db.NewStagingID()
				if err != nil {
					return err
				}
				if _, err := tx.SetStaging(n, id); err != nil {
					return err
				}
				if r.IntN(3) == 0 {
					return nil // left in staging
				}
				m := &manifest.Manifest{}
				for range r.IntN(4) {
					m.Extents = append(m.Extents, manifest.Extent{Off: m.Size, Len: 10, Hash: chunks[r.IntN(len(chunks))]})
					m.Size += 10
				}
				now := Now()
				return tx.Seal(n.Ino, id, m, now, now)
			case k == 7:
				op = "reap orphans"
				orphans, err := tx.Orphans()
				for _, ino := range orphans {
					if err == nil {
						_, err = tx.Reap(ino)
					}
				}
				return err
			}
			return nil
		})
		if got := f.problems(); len(got) != 0 {
			t.Fatalf("after operation %d (%s, err %v): Check reported %v", i, op, err, got)
		}
		refresh()
	}
}
