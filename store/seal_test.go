package store_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/testbytes"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/store"
)

const (
	sparseGap  = 64 << 20 // where the second data region of the sparse file starts
	sparseData = 300_000  // bytes in each data region
)

// sparse writes the sparse file: data at 0 and at 64 MiB, a hole between.
func sparse(f *os.File) error {
	if _, err := f.WriteAt(testbytes.Random(sparseData, 21), 0); err != nil {
		return err
	}
	_, err := f.WriteAt(testbytes.Random(sparseData, 22), sparseGap)
	return err
}

func sparseContent() []byte {
	b := make([]byte, sparseGap+sparseData)
	copy(b, testbytes.Random(sparseData, 21))
	copy(b[sparseGap:], testbytes.Random(sparseData, 22))
	return b
}

// checkExtents checks that m's extents are ordered, disjoint, inside the
// file and match their chunks in the store.
func checkExtents(t *testing.T, s *store.Store, m *manifest.Manifest, content []byte) {
	t.Helper()
	var end uint64
	for i, e := range m.Extents {
		if e.Off < end || e.Len == 0 || e.End() > m.Size {
			t.Fatalf("extent %d %+v out of order or outside size %d", i, e, m.Size)
		}
		end = e.End()
		b, err := store.Chunks(s).Get(e.Hash, nil)
		if err != nil {
			t.Fatalf("extent %d: chunk %s: %v", i, e.Hash, err)
		}
		if !bytes.Equal(b, content[e.Off:e.End()]) {
			t.Fatalf("extent %d [%d,%d) holds other bytes than the file", i, e.Off, e.End())
		}
	}
}

func TestSealSmallFileIsInline(t *testing.T) {
	for _, content := range [][]byte{
		[]byte("x"),
		testbytes.Random(store.InlineMax, 2),
		{},
	} {
		s := newStore(t)
		ino, id := addContent(t, s, "f", content)
		m := seal(t, s, ino)
		if m.Size != uint64(len(content)) || len(m.Extents) != 0 || !bytes.Equal(m.Inline, content) {
			t.Errorf("manifest of a %d-byte file = size %d, %d extents, %d inline bytes; want it inline", len(content), m.Size, len(m.Extents), len(m.Inline))
		}
		if files := chunkFiles(t, s); len(files) != 0 {
			t.Errorf("an inline file wrote chunks %q", files)
		}
		if _, err := os.Stat(s.StagingPath(id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("staging file after CommitSeal: %v, want removed", err)
		}
		if n := getInode(t, s, ino); n.Staging != 0 || n.Size != uint64(len(content)) {
			t.Errorf("sealed inode = %+v", n)
		}
		if got := readAll(t, s, ino, m); !bytes.Equal(got, content) {
			t.Errorf("ReadAt of a %d-byte inline file gave %d other bytes", len(content), len(got))
		}
	}
}

func TestSealLargeFileIntoExtents(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content []byte
	}{
		{"just above inline", testbytes.Random(store.InlineMax+1, 3)},
		{"5 MiB random", testbytes.Random(5<<20, 4)},
		{"5 MiB text", text(5 << 20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newChunkedStore(t)
			ino, _ := addContent(t, s, "f", tc.content)
			m := seal(t, s, ino)
			if m.Inline != nil || m.Size != uint64(len(tc.content)) {
				t.Fatalf("manifest: size %d, inline %v; want %d bytes in extents", m.Size, m.Inline != nil, len(tc.content))
			}
			checkExtents(t, s, m, tc.content)
			var pos uint64
			for _, e := range m.Extents {
				if e.Off != pos {
					t.Fatalf("extents leave [%d,%d) of a file without holes uncovered", pos, e.Off)
				}
				pos = e.End()
			}
			if pos != m.Size {
				t.Fatalf("extents end at %d, file at %d", pos, m.Size)
			}
			if len(tc.content) > cas.MaxChunk && len(m.Extents) < 2 {
				t.Errorf("%d bytes in %d extent; chunks are at most %d bytes", len(tc.content), len(m.Extents), cas.MaxChunk)
			}
			if got := readAll(t, s, ino, m); !bytes.Equal(got, tc.content) {
				t.Errorf("ReadAt of the sealed file gave other bytes")
			}
		})
	}
}

func TestSealSparseFile(t *testing.T) {
	s := newStore(t)
	ino, _ := addFile(t, s, "sparse", sparse)
	m := seal(t, s, ino)
	content := sparseContent()
	if m.Size != uint64(len(content)) {
		t.Fatalf("size %d, want %d", m.Size, len(content))
	}
	checkExtents(t, s, m, content)
	// File systems report data at block granularity; 1 MiB is far more
	// than any block, and far less than the hole.
	const slack = 1 << 20
	var stored uint64
	for _, e := range m.Extents {
		stored += uint64(e.Len)
		if e.End() > sparseData+slack && e.Off < sparseGap {
			t.Errorf("extent [%d,%d) lies in the hole [%d,%d)", e.Off, e.End(), sparseData, sparseGap)
		}
	}
	if stored > 2*(sparseData+slack) {
		t.Errorf("extents hold %d bytes of a file with %d bytes of data", stored, 2*sparseData)
	}
	checkReads(t, s, ino, m, content)
}

func TestSealFileWithTrailingHole(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"data then a hole", testbytes.Random(100_000, 5)},
		{"only a hole", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			ino, _ := addFile(t, s, "f", func(f *os.File) error {
				if _, err := f.Write(tc.data); err != nil {
					return err
				}
				return f.Truncate(32 << 20)
			})
			m := seal(t, s, ino)
			content := make([]byte, 32<<20)
			copy(content, tc.data)
			if m.Size != uint64(len(content)) || m.Inline != nil {
				t.Fatalf("size %d, inline %v; want %d bytes in extents", m.Size, m.Inline != nil, len(content))
			}
			if tc.data == nil && len(m.Extents) != 0 {
				t.Errorf("a file that is all hole has extents %v", m.Extents)
			}
			checkExtents(t, s, m, content)
			checkReads(t, s, ino, m, content)
		})
	}
}

// The sealed inode takes the staging file's size and modification time:
// the time the content was last written, not the time it was sealed.
func TestSealKeepsMtime(t *testing.T) {
	mtime := time.Date(2024, 2, 29, 12, 34, 56, 789_000_000, time.UTC)
	for _, content := range [][]byte{[]byte("small"), testbytes.Random(1<<20, 6)} {
		s := newStore(t)
		ino, _ := addFile(t, s, "f", func(f *os.File) error {
			if _, err := f.Write(content); err != nil {
				return err
			}
			return os.Chtimes(f.Name(), mtime, mtime)
		})
		seal(t, s, ino)
		if n := getInode(t, s, ino); n.Mtime != mtime.UnixNano() || n.Size != uint64(len(content)) {
			t.Errorf("sealed %d-byte file: mtime %v, size %d; want %v, %d", len(content), time.Unix(0, n.Mtime).UTC(), n.Size, mtime, len(content))
		}
	}
}

// checkReads compares ReadAt with content for reads at and across every
// extent boundary, past the end, and at many random places.
func checkReads(t *testing.T, s *store.Store, ino uint64, m *manifest.Manifest, content []byte) {
	t.Helper()
	size := int64(len(content))
	type read struct{ off, n int64 }
	reads := []read{
		{0, 0}, {0, 1}, {0, size}, {0, size + 1000}, {size - 1, 10}, {size, 10}, {size + 1, 10}, {size + 1<<30, 10},
	}
	for _, e := range m.Extents {
		for _, b := range []int64{int64(e.Off), int64(e.End())} {
			reads = append(reads, read{b - 10, 20}, read{b, 4096}, read{b - 4096, 4096}, read{b - 1, 1})
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		n := rng.Int64N(3 << 20)
		if rng.IntN(4) == 0 {
			n = rng.Int64N(100)
		}
		reads = append(reads, read{rng.Int64N(size + 1000), n})
	}
	for _, r := range reads {
		if r.off < 0 {
			continue
		}
		dst := make([]byte, r.n)
		for i := range dst {
			dst[i] = 0xAA // a hole must be cleared, not left as it was
		}
		n, err := s.ReadAt(ino, m, dst, r.off)
		if err != nil {
			t.Fatalf("ReadAt(%d bytes at %d): %v", r.n, r.off, err)
		}
		want := content[min(r.off, size):min(r.off+r.n, size)]
		if n != len(want) || !bytes.Equal(dst[:n], want) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d bytes, want %d bytes of the file (equal: %v)", r.n, r.off, n, len(want), bytes.Equal(dst[:min(n, len(want))], want[:min(n, len(want))]))
		}
	}
}

func TestIdenticalFilesShareChunks(t *testing.T) {
	s := newChunkedStore(t)
	content := testbytes.Random(6<<20, 6)
	a, _ := addContent(t, s, "a", content)
	b, _ := addContent(t, s, "b", content)

	xa, err := s.PrepareSeal(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CommitSeal(xa); err != nil {
		t.Fatal(err)
	}
	xb, err := s.PrepareSeal(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CommitSeal(xb); err != nil {
		t.Fatal(err)
	}
	if xa.Stored == 0 || xb.Stored != 0 {
		t.Errorf("Stored = %d then %d; want the second seal to store nothing new", xa.Stored, xb.Stored)
	}
	ma, mb := sealedManifest(t, s, a), sealedManifest(t, s, b)
	if !slices.Equal(ma.Extents, mb.Extents) {
		t.Fatalf("identical files have different extents:\n%v\n%v", ma.Extents, mb.Extents)
	}
	distinct := map[cas.Hash]bool{}
	err = s.Index.View(func(tx *index.Tx) error {
		for _, h := range ma.Chunks() {
			distinct[h] = true
			if n, err := tx.ChunkRefs(h); err != nil || n != 2 {
				t.Errorf("ChunkRefs(%s) = %d, %v; want 2", h, n, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files := chunkFiles(t, s); len(files) != len(distinct) {
		t.Errorf("chunks directory holds %d files for %d distinct chunks", len(files), len(distinct))
	}
	if got := readAll(t, s, b, mb); !bytes.Equal(got, content) {
		t.Error("ReadAt of the second file gave other bytes")
	}
}

func TestSealWithoutStaging(t *testing.T) {
	s := newStore(t)
	ino, _ := addContent(t, s, "f", []byte("abc"))
	seal(t, s, ino)
	for _, i := range []uint64{ino, 9999} {
		if x, err := s.PrepareSeal(i); x != nil || err != nil {
			t.Errorf("Seal(%d) without staging content = %+v, %v; want nil, nil", i, x, err)
		}
	}
}

// A file written again while it was being sealed keeps its new content:
// the seal's commit fails and leaves the new staging file alone.
func TestCommitSealStale(t *testing.T) {
	s := newStore(t)
	ino, oldID := addContent(t, s, "f", testbytes.Random(100_000, 7))
	x, err := s.PrepareSeal(ino)
	if err != nil {
		t.Fatal(err)
	}
	newID, f, err := s.NewStaging()
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("rewritten"))
	f.Close()
	err = s.Index.Update(func(tx *index.Tx) error {
		n, err := tx.Inode(ino)
		if err != nil {
			return err
		}
		_, err = tx.SetStaging(n, newID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.StagingPath(oldID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the staging file the rewrite replaced is still there after the commit: %v", err)
	}

	if err := s.CommitSeal(x); !errors.Is(err, index.ErrStale) {
		t.Fatalf("CommitSeal after a rewrite = %v, want ErrStale", err)
	}
	if n := getInode(t, s, ino); n.Staging != newID {
		t.Errorf("inode staging = %d, want the new %d", n.Staging, newID)
	}
	if b, err := os.ReadFile(s.StagingPath(newID)); err != nil || string(b) != "rewritten" {
		t.Errorf("new staging file = %q, %v", b, err)
	}
	err = s.Index.View(func(tx *index.Tx) error {
		for _, h := range x.Manifest.Chunks() {
			if n, err := tx.ChunkRefs(h); err != nil || n != 0 {
				t.Errorf("stale seal left %d references on %s (%v)", n, h, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Concurrent readers of one sealed file get the right bytes (the chunk
// cache and its shared loads are safe); run with -race.
func TestConcurrentReads(t *testing.T) {
	s := newStore(t)
	content := testbytes.Random(6<<20, 8)
	ino, _ := addContent(t, s, "f", content)
	m := seal(t, s, ino)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			buf := make([]byte, 256<<10)
			for range 100 {
				off := rng.Int64N(int64(len(content)))
				n, err := s.ReadAt(ino, m, buf, off)
				if err != nil {
					t.Errorf("ReadAt(%d): %v", off, err)
					return
				}
				if want := content[off:min(off+int64(len(buf)), int64(len(content)))]; !bytes.Equal(buf[:n], want) {
					t.Errorf("ReadAt(%d) gave other bytes", off)
					return
				}
			}
		})
	}
	wg.Wait()
}
