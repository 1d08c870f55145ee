package index_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/manifest"
)

var (
	chunkA = cas.Sum([]byte("chunk a"))
	chunkB = cas.Sum([]byte("chunk b"))
	chunkC = cas.Sum([]byte("chunk c"))
)

// extents builds a manifest of back-to-back 10-byte extents of the given
// chunks.
func extents(hs ...cas.Hash) *manifest.Manifest {
	m := &manifest.Manifest{Size: uint64(10 * len(hs))}
	for i, h := range hs {
		m.Extents = append(m.Extents, manifest.Extent{Off: uint64(10 * i), Len: 10, Hash: h})
	}
	return m
}

// stage makes a new staging id the content of file ino.
func stage(t *testing.T, db *index.DB, ino uint64) (id, old uint64) {
	t.Helper()
	id, err := db.NewStagingID()
	if err != nil {
		t.Fatalf("NewStagingID: %v", err)
	}
	update(t, db, func(tx *index.Tx) error {
		n, err := tx.Inode(ino)
		if err != nil {
			return err
		}
		old, err = tx.SetStaging(n, id)
		return err
	})
	return id, old
}

func seal(db *index.DB, ino, id uint64, m *manifest.Manifest, mtime int64) error {
	return db.Update(func(tx *index.Tx) error { return tx.Seal(ino, id, m, mtime, mtime) })
}

// refs reads the reference counts of chunks A, B and C.
func refs(t *testing.T, db *index.DB) []uint64 {
	t.Helper()
	var got []uint64
	err := db.View(func(tx *index.Tx) error {
		for _, h := range []cas.Hash{chunkA, chunkB, chunkC} {
			n, err := tx.ChunkRefs(h)
			if err != nil {
				return err
			}
			got = append(got, n)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ChunkRefs: %v", err)
	}
	return got
}

func countStaging(t *testing.T, db *index.DB) int {
	t.Helper()
	var n int
	if err := db.View(func(tx *index.Tx) (err error) { n, err = tx.CountStaging(); return err }); err != nil {
		t.Fatalf("CountStaging: %v", err)
	}
	return n
}

func readManifest(t *testing.T, db *index.DB, ino uint64) *manifest.Manifest {
	t.Helper()
	var m *manifest.Manifest
	if err := db.View(func(tx *index.Tx) (err error) { m, err = tx.Manifest(ino); return err }); err != nil {
		t.Fatalf("Manifest(%d): %v", ino, err)
	}
	return m
}

func TestStagingAndSeal(t *testing.T) {
	db := openDB(t)
	tr := storetest.Build(t, db, "f", "g")
	f, g := tr["f"], tr["g"]

	if m := readManifest(t, db, f); m.Size != 0 || len(m.Extents) != 0 || len(m.Inline) != 0 {
		t.Errorf("new file's manifest = %+v, want empty", m)
	}
	idF, old := stage(t, db, f)
	if old != 0 {
		t.Errorf("first SetStaging returned old id %d, want 0", old)
	}
	if n := inode(t, db, f); n.Staging != idF {
		t.Errorf("inode Staging = %d, want %d", n.Staging, idF)
	}
	var owner uint64
	if err := db.View(func(tx *index.Tx) (err error) { owner, err = tx.StagingInode(idF); return err }); err != nil || owner != f {
		t.Errorf("StagingInode(%d) = %d, %v; want %d", idF, owner, err, f)
	}
	idG, _ := stage(t, db, g)
	if n := countStaging(t, db); n != 2 {
		t.Errorf("CountStaging = %d, want 2", n)
	}

	// f is A B A: one reference per extent, so A counts twice.
	mF := extents(chunkA, chunkB, chunkA)
	const mtime = 1_700_000_000_123_456_789
	if err := seal(db, f, idF, mF, mtime); err != nil {
		t.Fatalf("Seal f: %v", err)
	}
	if got := refs(t, db); !slices.Equal(got, []uint64{2, 1, 0}) {
		t.Errorf("refs of A, B, C after sealing f = %v, want [2 1 0]", got)
	}
	n := inode(t, db, f)
	if n.Staging != 0 || n.Size != mF.Size || n.Mtime != mtime {
		t.Errorf("sealed inode = %+v, want Staging 0, Size %d, Mtime %d", n, mF.Size, mtime)
	}
	if m := readManifest(t, db, f); !slices.Equal(m.Extents, mF.Extents) || m.Size != mF.Size {
		t.Errorf("Manifest(f) = %+v, want %+v", m, mF)
	}
	if err := db.View(func(tx *index.Tx) error { _, err := tx.StagingInode(idF); return err }); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("StagingInode of a sealed id: %v, want ErrNotFound", err)
	}
	if n := countStaging(t, db); n != 1 {
		t.Errorf("CountStaging = %d, want 1", n)
	}

	// g shares B with f.
	if err := seal(db, g, idG, extents(chunkB, chunkC), mtime); err != nil {
		t.Fatalf("Seal g: %v", err)
	}
	if got := refs(t, db); !slices.Equal(got, []uint64{2, 2, 1}) {
		t.Errorf("refs after sealing g = %v, want [2 2 1]", got)
	}
	if n := countStaging(t, db); n != 0 {
		t.Errorf("CountStaging = %d, want 0", n)
	}

	// Writing f again drops its manifest and its references.
	idF2, old := stage(t, db, f)
	if old != 0 {
		t.Errorf("SetStaging of a sealed file returned old id %d, want 0", old)
	}
	if got := refs(t, db); !slices.Equal(got, []uint64{0, 1, 1}) {
		t.Errorf("refs after SetStaging f = %v, want [0 1 1]", got)
	}
	if m := readManifest(t, db, f); len(m.Extents) != 0 {
		t.Errorf("manifest after SetStaging = %+v, want none", m)
	}
	// A second staging file replaces the first, whose file goes after the
	// commit (DB.OnStagingDropped).
	if _, old := stage(t, db, f); old != idF2 {
		t.Errorf("SetStaging over staging returned old id %d, want %d", old, idF2)
	}
	if n := countStaging(t, db); n != 1 {
		t.Errorf("CountStaging = %d, want 1 after restaging", n)
	}

	// Removing g, its last name, and reaping it drops its references.
	update(t, db, func(tx *index.Tx) error {
		if _, err := tx.Unlink(index.RootIno, "g"); err != nil {
			return err
		}
		_, err := tx.Reap(g)
		return err
	})
	if got := refs(t, db); !slices.Equal(got, []uint64{0, 0, 0}) {
		t.Errorf("refs after Reap g = %v, want [0 0 0]", got)
	}
}

func TestSealStale(t *testing.T) {
	db := openDB(t)
	f := storetest.Build(t, db, "f")["f"]
	id1, _ := stage(t, db, f)
	id2, _ := stage(t, db, f) // written again while id1 was being sealed

	if err := seal(db, f, id1, extents(chunkA), 1); !errors.Is(err, index.ErrStale) {
		t.Fatalf("Seal with replaced staging id = %v, want ErrStale", err)
	}
	if got := refs(t, db); !slices.Equal(got, []uint64{0, 0, 0}) {
		t.Errorf("refs after a stale Seal = %v, want none taken", got)
	}
	if n := inode(t, db, f); n.Staging != id2 {
		t.Errorf("Staging after a stale Seal = %d, want %d", n.Staging, id2)
	}
	if err := seal(db, f, id2, extents(chunkA), 1); err != nil {
		t.Fatalf("Seal with the current id: %v", err)
	}
	if err := seal(db, f, id2, extents(chunkA), 1); !errors.Is(err, index.ErrStale) {
		t.Errorf("sealing the same id twice = %v, want ErrStale", err)
	}
	if got := refs(t, db); !slices.Equal(got, []uint64{1, 0, 0}) {
		t.Errorf("refs = %v, want [1 0 0]", got)
	}
}

func TestSealInlineAndEmpty(t *testing.T) {
	for _, m := range []*manifest.Manifest{
		{Size: 5, Inline: []byte("hello")},
		{Size: 0, Inline: []byte{}},
		{},
	} {
		db := openDB(t)
		f := storetest.Build(t, db, "f")["f"]
		id, _ := stage(t, db, f)
		if err := seal(db, f, id, m, 1); err != nil {
			t.Fatalf("Seal %+v: %v", m, err)
		}
		got := readManifest(t, db, f)
		if got.Size != m.Size || string(got.Inline) != string(m.Inline) || len(got.Extents) != 0 {
			t.Errorf("Manifest after sealing %+v = %+v", m, got)
		}
		if n := inode(t, db, f); n.Size != m.Size || n.Staging != 0 {
			t.Errorf("inode after sealing %+v = %+v", m, n)
		}
	}
}

// TestReapDropsStaging checks that reaping an orphan with staging content
// hands back the staging id for its file to be removed.
func TestReapDropsStaging(t *testing.T) {
	db := openDB(t)
	f := storetest.Build(t, db, "f")["f"]
	id, _ := stage(t, db, f)
	update(t, db, func(tx *index.Tx) error { _, err := tx.Unlink(index.RootIno, "f"); return err })
	var got uint64
	update(t, db, func(tx *index.Tx) (err error) { got, err = tx.Reap(f); return err })
	if got != id {
		t.Errorf("Reap returned staging id %d, want %d", got, id)
	}
	if n := countStaging(t, db); n != 0 {
		t.Errorf("CountStaging after Reap = %d, want 0", n)
	}
}

// A sweep after a big collection forgets more garbage marks than one badger
// transaction can delete (it failed with "Txn is too big" over 500,000).
func TestForgetGarbageBeyondOneTransaction(t *testing.T) {
	db := openDB(t)
	const files, perFile = 60, 1000
	var names []string
	for i := range files {
		names = append(names, fmt.Sprintf("f%d", i))
	}
	tr := storetest.Build(t, db, names...)
	for i, name := range names {
		var hs []cas.Hash
		for j := range perFile {
			hs = append(hs, cas.Sum([]byte(fmt.Sprintf("chunk %d of %d", j, i))))
		}
		id, _ := stage(t, db, tr[name])
		if err := seal(db, tr[name], id, extents(hs...), 1); err != nil {
			t.Fatal(err)
		}
		stage(t, db, tr[name]) // drops the manifest: its chunks become garbage
	}
	if got := usage(t, db).GarbageMarks; got != files*perFile {
		t.Fatalf("garbage marks = %d, want %d", got, files*perFile)
	}
	if err := db.ForgetGarbage(); err != nil {
		t.Fatal(err)
	}
	if got := usage(t, db).GarbageMarks; got != 0 {
		t.Fatalf("garbage marks after ForgetGarbage = %d, want 0", got)
	}
}

func usage(t *testing.T, db *index.DB) index.Usage {
	t.Helper()
	var u index.Usage
	if err := db.View(func(tx *index.Tx) (err error) { u, err = tx.Usage(); return err }); err != nil {
		t.Fatal(err)
	}
	return u
}

// A seal with more chunks than one transaction takes fails with
// ErrTooLarge and changes nothing: the file stays in staging, no chunk
// gains a reference.
func TestSealTooLarge(t *testing.T) {
	db := openDB(t)
	tr := storetest.Build(t, db, "big")
	var hs []cas.Hash
	for j := range 100_000 {
		hs = append(hs, cas.Sum(fmt.Appendf(nil, "chunk %d", j)))
	}
	id, _ := stage(t, db, tr["big"])
	err := seal(db, tr["big"], id, extents(hs...), 1)
	if !errors.Is(err, index.ErrTooLarge) {
		t.Fatalf("sealing %d chunks: %v, want ErrTooLarge", len(hs), err)
	}
	err = db.View(func(tx *index.Tx) error {
		n, err := tx.Inode(tr["big"])
		if err != nil || n.Staging != id {
			return fmt.Errorf("inode %+v, %v; want staging %d", n, err, id)
		}
		if r, err := tx.ChunkRefs(hs[0]); err != nil || r != 0 {
			return fmt.Errorf("chunk references %d, %v; want 0", r, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
