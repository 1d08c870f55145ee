package store_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/internal/testbytes"
	"github.com/statefs/statefs/store"
)

// damagedStore is a closed store with three sealed files of several
// chunks each and one chunk of the first file corrupt, and what the files
// held.
type damagedStore struct {
	dir      string
	inos     [3]uint64
	contents [3][]byte
	lost     cas.Hash // the corrupt chunk
	lostOff  uint64   // where the first file uses it
	lostLen  uint32
}

func newDamagedStore(t *testing.T) damagedStore {
	t.Helper()
	ds := damagedStore{dir: filepath.Join(t.TempDir(), "store")}
	s := openChunked(t, ds.dir)
	for i := range ds.inos {
		ds.contents[i] = testbytes.Random(3<<20, uint64(10+i))
		ino, _ := addContent(t, s, []string{"a", "b", "c"}[i], ds.contents[i])
		m := seal(t, s, ino)
		if len(m.Extents) < 2 {
			t.Fatalf("a 3 MiB file sealed into %d chunks", len(m.Extents))
		}
		ds.inos[i] = ino
		if i == 0 {
			e := m.Extents[1]
			ds.lost, ds.lostOff, ds.lostLen = e.Hash, e.Off, e.Len
		}
	}
	must(t, s.Close())
	path := filepath.Join(ds.dir, "chunks", ds.lost.String()[:2], ds.lost.String())
	b, err := os.ReadFile(path)
	must(t, err)
	b[len(b)/2] ^= 1
	must(t, os.WriteFile(path, b, 0o600))
	return ds
}

// Repair makes the lost range of the damaged file a hole, leaves its size
// and the other files alone, removes the damaged chunk, and leaves a store
// that Check(true) finds consistent.
func TestRepairMakesLostRangesHoles(t *testing.T) {
	ds := newDamagedStore(t)
	s, err := store.OpenForRepair(ds.dir)
	must(t, err)
	r, err := s.Repair()
	must(t, err)
	if len(r.Files) != 1 || r.Files[0].Ino != ds.inos[0] || len(r.Files[0].Paths) != 1 || r.Files[0].Paths[0] != "a" {
		t.Fatalf("Repair repaired %+v, want file a only", r.Files)
	}
	if lost := r.Files[0].Lost; len(lost) != 1 || lost[0].Off != ds.lostOff || lost[0].Len != ds.lostLen {
		t.Errorf("Repair lists lost extents %+v, want %d+%d", lost, ds.lostOff, ds.lostLen)
	}
	if len(r.RemovedChunks) != 1 || r.RemovedChunks[0] != ds.lost {
		t.Errorf("Repair removed chunks %v, want %s", r.RemovedChunks, ds.lost)
	}
	ps, err := s.Check(true)
	must(t, err)
	for _, p := range ps {
		if store.IsError(p) {
			t.Errorf("after Repair, Check found %s", p)
		}
	}
	must(t, s.Close())

	s2, _ := open(t, ds.dir)
	defer s2.Close()
	for i, ino := range ds.inos {
		want := ds.contents[i]
		if i == 0 {
			want = bytes.Clone(want)
			clear(want[ds.lostOff : ds.lostOff+uint64(ds.lostLen)])
		}
		if n := getInode(t, s2, ino); n.Size != uint64(len(want)) {
			t.Errorf("file %d has size %d after Repair, want %d", i, n.Size, len(want))
		}
		if got := readAll(t, s2, ino, sealedManifest(t, s2, ino)); !bytes.Equal(got, want) {
			t.Errorf("file %d does not read as before with zeros in the lost range", i)
		}
	}
}

// Check reports the damage and changes nothing: only Repair does.
func TestCheckDoesNotRepair(t *testing.T) {
	ds := newDamagedStore(t)
	storetest.LeaveDamaged(t, "a chunk is corrupt on purpose and nothing repairs it")
	for range 2 {
		s, err := store.OpenReadOnly(ds.dir)
		must(t, err)
		ps, err := s.Check(true)
		must(t, err)
		damaged := 0
		for _, p := range ps {
			if p.Kind == store.ProblemDamagedFile {
				damaged++
			}
		}
		if damaged != 1 {
			t.Errorf("Check reported %d damaged files, want 1: %v", damaged, ps)
		}
		must(t, s.Close())
	}
	s, _ := open(t, ds.dir)
	defer s.Close()
	buf := make([]byte, ds.lostLen)
	_, err := s.ReadAt(ds.inos[0], sealedManifest(t, s, ds.inos[0]), buf, int64(ds.lostOff))
	if !errors.Is(err, cas.ErrCorrupt) || !errors.Is(err, syscall.EIO) {
		t.Errorf("reading the lost range after Check: %v, want ErrCorrupt and EIO", err)
	}
	var ce *store.ChunkError
	if !errors.As(err, &ce) || ce.Hash != ds.lost || ce.Ino != ds.inos[0] {
		t.Errorf("the read error %v does not name the chunk and the inode", err)
	}
}

// Scrub finds the corrupt chunk among all chunks, used or not, names the
// file that uses it, and changes nothing.
func TestScrubFindsDamagedChunks(t *testing.T) {
	ds := newDamagedStore(t)
	storetest.LeaveDamaged(t, "a chunk is corrupt on purpose and nothing repairs it")
	garbage := []byte("a chunk no file uses, rotten too")
	chunks, err := cas.Open(filepath.Join(ds.dir, "chunks"))
	must(t, err)
	gh := cas.Sum(garbage)
	_, err = chunks.Put(gh, garbage)
	must(t, err)
	gpath := filepath.Join(ds.dir, "chunks", gh.String()[:2], gh.String())
	must(t, os.Truncate(gpath, 3))

	s, err := store.OpenReadOnly(ds.dir)
	must(t, err)
	defer s.Close()
	calls, total := 0, -1
	r, err := s.Scrub(context.Background(), store.ScrubOptions{Progress: func(done, all int) {
		if done > 0 {
			calls++
		}
		total = all
	}})
	must(t, err)
	if calls != total || r.Chunks != total {
		t.Errorf("Scrub read %d chunks and reported progress %d times; it said it would read %d", r.Chunks, calls, total)
	}
	if len(r.Damaged) != 2 {
		t.Fatalf("Scrub found damaged chunks %+v, want the used one and the garbage one", r.Damaged)
	}
	for _, d := range r.Damaged {
		if (d.Hash == ds.lost) != d.Used || (d.Hash != ds.lost && d.Hash != gh) {
			t.Errorf("Scrub reported %+v", d)
		}
	}
	if len(r.Files) != 1 || r.Files[0].Ino != ds.inos[0] {
		t.Errorf("Scrub names damaged files %+v, want file a", r.Files)
	}
	if _, err := os.Stat(gpath); err != nil {
		t.Errorf("Scrub removed a chunk: %v", err)
	}
}

// A scrub of a store the daemon serves sees chunks go under it: a garbage
// chunk a sweep removes before the scrub reads it is no damage; a chunk a
// file uses that disappears is. (Both are removed at the scrub's first
// chunk, and both sort after that one.)
func TestScrubUnderSweep(t *testing.T) {
	storetest.LeaveDamaged(t, "a chunk of x is removed on purpose")
	s := newChunkedStore(t)
	ino, _ := addContent(t, s, "x", testbytes.Random(3<<20, 21))
	m := seal(t, s, ino)
	var garbage []cas.Hash
	for i := range 4 {
		b := testbytes.Random(600<<10, uint64(30+i))
		h := cas.Sum(b)
		_, err := store.Chunks(s).Put(h, b)
		must(t, err)
		garbage = append(garbage, h)
	}
	all := append(slices.Clone(garbage), m.Chunks()...)
	slices.SortFunc(all, func(a, b cas.Hash) int { return bytes.Compare(a[:], b[:]) })
	first := all[0]
	var swept, vanished cas.Hash
	for _, h := range garbage {
		if h != first {
			swept = h
		}
	}
	for _, h := range m.Chunks() {
		if h != first {
			vanished = h
		}
	}
	path := func(h cas.Hash) string { return filepath.Join(s.Dir, "chunks", h.String()[:2], h.String()) }
	r, err := s.Scrub(context.Background(), store.ScrubOptions{Progress: func(done, _ int) {
		if done == 1 {
			must(t, os.Remove(path(swept)))
			must(t, os.Remove(path(vanished)))
		}
	}})
	must(t, err)
	if len(r.Damaged) != 1 || r.Damaged[0].Hash != vanished || r.Damaged[0].Kind != store.ProblemMissingChunk || !r.Damaged[0].Used {
		t.Fatalf("Scrub found damaged chunks %+v, want only %s, missing and used", r.Damaged, vanished)
	}
	if len(r.Files) != 1 || r.Files[0].Ino != ino {
		t.Errorf("Scrub names damaged files %+v, want inode %d", r.Files, ino)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Scrub(ctx, store.ScrubOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Scrub with its context done: %v, want context.Canceled", err)
	}
}

// A scrub with a rate reads no faster than it: 2 MiB of chunks at 1 MiB a
// second take two seconds at the least (the bucket starts empty). Stopping
// it stops the wait too.
func TestScrubRate(t *testing.T) {
	s := newStore(t)
	ino, _ := addContent(t, s, "x", testbytes.Random(2<<20, 22))
	seal(t, s, ino)
	start := time.Now()
	r, err := s.Scrub(context.Background(), store.ScrubOptions{Rate: 1 << 20})
	must(t, err)
	if took := time.Since(start); took < 1900*time.Millisecond {
		t.Errorf("Scrub at 1 MiB/s read %d bytes in %v", r.Bytes, took)
	}
	if r.Bytes != 2<<20 {
		t.Errorf("Scrub read %d bytes, want %d", r.Bytes, 2<<20)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := s.Scrub(ctx, store.ScrubOptions{Rate: 1 << 10}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Scrub at 1 KiB/s stopped by its context: %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Scrub at 1 KiB/s took %v to stop after its context was done", took)
	}
}
