package store_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/testbytes"
	"github.com/statefs/statefs/store"
)

func objectPath(s *store.Store, h cas.Hash) string {
	return filepath.Join(s.Dir, "objects", h.String()[:2], h.String())
}

func inodeOf(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	must(t, syscall.Stat(path, &st))
	return st.Ino
}

func objectRefs(t *testing.T, s *store.Store, h cas.Hash) uint64 {
	t.Helper()
	var refs uint64
	must(t, s.Index.View(func(tx *index.Tx) (err error) { refs, err = tx.ObjectRefs(h); return err }))
	return refs
}

// A file whose content does not compress is sealed as the staging file
// itself: the object is the same inode, so no byte of it was written again.
func TestSealKeepsAnIncompressibleFileWhole(t *testing.T) {
	s := newStore(t)
	content := testbytes.Random(3<<20, 60)
	ino, staging := addContent(t, s, "sst", content)
	before := inodeOf(t, s.StagingPath(staging))
	m := seal(t, s, ino)
	if m.Object == nil || len(m.Extents) != 0 || m.Size != uint64(len(content)) {
		t.Fatalf("manifest %+v, want an object of %d bytes", m, len(content))
	}
	if *m.Object != cas.Sum(content) {
		t.Fatalf("object %s, want the content's hash %s", m.Object, cas.Sum(content))
	}
	if got := inodeOf(t, objectPath(s, *m.Object)); got != before {
		t.Errorf("the object is inode %d, the staging file was %d: the seal copied it", got, before)
	}
	if _, err := os.Stat(s.StagingPath(staging)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the staging file's name is still there: %v", err)
	}
	if len(chunkFiles(t, s)) != 0 {
		t.Errorf("an object seal stored chunks: %v", chunkFiles(t, s))
	}
	if got := readAll(t, s, ino, m); !bytes.Equal(got, content) {
		t.Error("the object reads back other bytes")
	}
}

// Content that compresses takes the chunked path, compressed.
func TestSealChunksACompressibleFile(t *testing.T) {
	s := newStore(t)
	content := text(3 << 20)
	ino, _ := addContent(t, s, "heap", content)
	m := seal(t, s, ino)
	if m.Object != nil || len(m.Extents) == 0 {
		t.Fatalf("manifest %+v, want chunks", m)
	}
	st, err := s.Stats()
	must(t, err)
	if st.ObjectFiles != 0 || st.ChunkBytes >= int64(len(content))/2 {
		t.Errorf("stats %+v: want no object and the chunks compressed to less than half", st)
	}
}

// Identical files share one object; it goes, without a sweep, with the
// last file that is it.
func TestIdenticalFilesShareOneObject(t *testing.T) {
	s := newStore(t)
	content := testbytes.Random(2<<20, 61)
	a, _ := addContent(t, s, "a", content)
	b, _ := addContent(t, s, "b", content)
	ma, mb := seal(t, s, a), seal(t, s, b)
	if ma.Object == nil || mb.Object == nil || *ma.Object != *mb.Object {
		t.Fatalf("manifests %+v and %+v, want one object", ma, mb)
	}
	st, err := s.Stats()
	must(t, err)
	if st.ObjectFiles != 1 || st.ObjectBytes > int64(len(content))+4096 || st.StagingFiles != 0 {
		t.Fatalf("stats %+v: want one object of the content's size and no staging file", st)
	}
	if refs := objectRefs(t, s, *ma.Object); refs != 2 {
		t.Fatalf("object has %d references, want 2", refs)
	}
	must(t, remove(s, "a"))
	if got := readAll(t, s, b, mb); !bytes.Equal(got, content) {
		t.Fatal("the second file reads other bytes once the first went")
	}
	must(t, remove(s, "b"))
	if _, err := os.Stat(objectPath(s, *ma.Object)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the object outlived its last file: %v", err)
	}
}

// A flipped byte in an object: the scrub finds it and quarantines it;
// opens of its file fail with EIO saying so; a verified read fails too;
// fsck reports it; repair makes the file a hole; a seal of the same bytes
// would have replaced it.
func TestScrubQuarantinesADamagedObject(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, _ := open(t, dir)
	content := testbytes.Random(1<<20, 62)
	ino, _ := addContent(t, s, "sst", content)
	m := seal(t, s, ino)
	flip(t, objectPath(s, *m.Object), 500_000)

	if _, err := s.ReadAt(ino, m, make([]byte, 4096), 500_000-100); !errors.Is(err, syscall.EIO) || !errors.Is(err, cas.ErrCorrupt) {
		t.Errorf("verified read of the damaged range: %v, want EIO and ErrCorrupt", err)
	}
	r, err := s.Scrub(context.Background(), store.ScrubOptions{Quarantine: true})
	must(t, err)
	if len(r.Quarantined) != 1 || r.Quarantined[0] != *m.Object || len(r.Files) != 1 || r.Files[0].Ino != ino {
		t.Fatalf("scrub: %+v, want the object quarantined and its file damaged", r)
	}
	_, err = s.OpenObject(ino, m, false)
	if !errors.Is(err, syscall.EIO) || !errors.Is(err, store.ErrQuarantined) || !bytes.Contains([]byte(err.Error()), []byte(m.Object.String())) {
		t.Fatalf("open of a quarantined object: %v, want EIO naming the object", err)
	}
	if _, _, err := s.Unseal(getInode(t, s, ino), m.Size); !errors.Is(err, syscall.EIO) {
		t.Errorf("unseal of a quarantined object: %v, want EIO", err)
	}
	s.Close()

	c, err := store.OpenReadOnly(dir)
	must(t, err)
	problems, err := c.Check(false)
	must(t, err)
	c.Close()
	kinds := map[string]bool{}
	for _, p := range problems {
		kinds[p.Kind] = true
	}
	if !kinds[store.ProblemQuarantined] || !kinds[store.ProblemDamagedFile] {
		t.Fatalf("fsck: %v, want the quarantined object and its file", problems)
	}

	rs, err := store.OpenForRepair(dir)
	must(t, err)
	rep, err := rs.Repair()
	must(t, err)
	if len(rep.Files) != 1 || len(rep.RemovedObjects) != 1 {
		t.Fatalf("repair: %+v, want one file and one object", rep)
	}
	if problems, err := rs.Check(true); err != nil || len(problems) != 0 {
		t.Fatalf("fsck after the repair: %v, %v", problems, err)
	}
	got := readAll(t, rs, ino, sealedManifest(t, rs, ino))
	if !bytes.Equal(got, make([]byte, len(content))) {
		t.Error("a repaired file does not read as zeros")
	}
	rs.Close()
}

// A seal of the same bytes as a quarantined object puts a sound copy in
// its place and lifts the quarantine.
func TestSealHealsAQuarantinedObject(t *testing.T) {
	s := newStore(t)
	content := testbytes.Random(1<<20, 63)
	a, _ := addContent(t, s, "a", content)
	m := seal(t, s, a)
	flip(t, objectPath(s, *m.Object), 10)
	_, err := s.Scrub(context.Background(), store.ScrubOptions{Quarantine: true})
	must(t, err)
	b, _ := addContent(t, s, "b", content)
	seal(t, s, b)
	o, err := s.OpenObject(a, m, true)
	if err != nil {
		t.Fatalf("open after a seal of the same bytes: %v", err)
	}
	defer o.Close()
	buf := make([]byte, len(content))
	if n, err := o.ReadAt(buf, 0); err != nil || !bytes.Equal(buf[:n], content) {
		t.Fatalf("verified read after the heal: %d bytes, %v", n, err)
	}
}

// A seal that linked its staging file as the object and did not commit
// (a crash there) leaves the two sharing an inode; the next Open gives the
// staging file an inode of its own, so that writing it cannot change the
// object, and the seal runs again.
func TestOpenUnsharesAStagingFileLinkedAsAnObject(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, _ := open(t, dir)
	content := testbytes.Random(1<<20, 64)
	ino, staging := addContent(t, s, "f", content)
	h := cas.Sum(content)
	must(t, os.MkdirAll(filepath.Dir(objectPath(s, h)), 0o700))
	must(t, os.Link(s.StagingPath(staging), objectPath(s, h)))
	s.Close()

	s, unsealed := open(t, dir)
	defer s.Close()
	if len(unsealed) != 1 || unsealed[0] != ino {
		t.Fatalf("unsealed %v, want [%d]", unsealed, ino)
	}
	if inodeOf(t, s.StagingPath(staging)) == inodeOf(t, objectPath(s, h)) {
		t.Fatal("the staging file still shares its inode with the object")
	}
	f, err := os.OpenFile(s.StagingPath(staging), os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("changed"), 0)
	must(t, err)
	f.Close()
	if _, err := os.Stat(objectPath(s, h)); err == nil {
		got, _ := os.ReadFile(objectPath(s, h))
		if !bytes.Equal(got, content) {
			t.Fatal("a write of the staging file changed the object")
		}
	}
	sw, err := s.Sweep()
	must(t, err)
	if sw.Objects != 1 {
		t.Errorf("sweep removed %d objects, want the one no file is", sw.Objects)
	}
}

// Adopt makes the open object's inode a staging file and gives the
// object's name a copy: writes to the staging file change neither the
// object nor another file that is it.
func TestAdoptDetachesTheObjectsName(t *testing.T) {
	s := newStore(t)
	content := testbytes.Random(1<<20, 65)
	a, _ := addContent(t, s, "a", content)
	b, _ := addContent(t, s, "b", content)
	m := seal(t, s, a)
	seal(t, s, b)
	o, err := s.OpenObject(a, m, false)
	must(t, err)
	defer o.Close()
	before := inodeOf(t, objectPath(s, *m.Object))
	id, f, err := s.Adopt(getInode(t, s, a), o)
	must(t, err)
	defer f.Close()
	if inodeOf(t, s.StagingPath(id)) != before {
		t.Fatal("the staging file is not the object's inode")
	}
	if inodeOf(t, objectPath(s, *m.Object)) == before {
		t.Fatal("the object's name still names the adopted inode")
	}
	_, err = f.WriteAt([]byte("changed"), 0)
	must(t, err)
	if got := readAll(t, s, b, sealedManifest(t, s, b)); !bytes.Equal(got, content) {
		t.Fatal("a write of the adopted inode changed another file that is the object")
	}
}
