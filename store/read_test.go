package store_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/internal/testbytes"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/store"
)

// chunkPath is where the cas package's documented layout puts chunk h.
func chunkPath(s *store.Store, h cas.Hash) string {
	return filepath.Join(s.Dir, "chunks", h.String()[:2], h.String())
}

// A damaged chunk fails the reads that need its damaged part, with
// cas.ErrCorrupt, and never gives wrong bytes (DESIGN invariant 5); reads
// elsewhere in the file still work. (Which reads of a damaged chunk still
// work is cas's to test: TestEveryCorruptByteFailsItsRange.)
func TestReadCorruptChunk(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content []byte
		damage  func(path string) error
		want    error
	}{
		{"byte flipped in a raw chunk", testbytes.Random(5<<20, 10), flipAt(0.5), cas.ErrCorrupt},
		{"last byte flipped in a raw chunk", testbytes.Random(5<<20, 11), flipAt(1), cas.ErrCorrupt},
		{"byte flipped in a compressed chunk", text(5 << 20), flipAt(0.5), cas.ErrCorrupt},
		{"byte flipped in the header", testbytes.Random(5<<20, 12), flipByte(10), cas.ErrCorrupt},
		{"chunk cut short", testbytes.Random(5<<20, 13), func(p string) error { return os.Truncate(p, 1000) }, cas.ErrCorrupt},
		{"chunk empty", testbytes.Random(5<<20, 14), func(p string) error { return os.Truncate(p, 0) }, cas.ErrCorrupt},
		{"chunk missing", testbytes.Random(5<<20, 15), os.Remove, cas.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storetest.LeaveDamaged(t, "a chunk of f is damaged on purpose")
			dir := filepath.Join(t.TempDir(), "store")
			s := openChunked(t, dir)
			ino, _ := addContent(t, s, "f", tc.content)
			m := seal(t, s, ino)
			if len(m.Extents) < 2 {
				t.Fatalf("want at least two extents, got %d", len(m.Extents))
			}
			s.Close() // a new store: nothing of the file in memory
			bad := m.Extents[1]
			if err := tc.damage(chunkPath(s, bad.Hash)); err != nil {
				t.Fatal(err)
			}
			s, _ = open(t, dir)
			defer s.Close()

			for _, r := range []struct{ off, n uint64 }{
				{bad.Off, uint64(bad.Len)},
				{bad.Off - 10, uint64(bad.Len) + 10}, // starts in the good extent before
				{0, m.Size},
			} {
				dst := make([]byte, r.n)
				n, err := s.ReadAt(ino, m, dst, int64(r.off))
				if !errors.Is(err, tc.want) {
					t.Errorf("ReadAt(%d bytes at %d) = %d, %v; want %v", r.n, r.off, n, err, tc.want)
				}
				if n != 0 {
					t.Errorf("failed ReadAt claims %d bytes", n)
				}
			}
			good := m.Extents[0]
			dst := make([]byte, good.Len)
			if n, err := s.ReadAt(ino, m, dst, int64(good.Off)); err != nil || !bytes.Equal(dst[:n], tc.content[:good.Len]) {
				t.Errorf("ReadAt of an undamaged extent = %d, %v", n, err)
			}
			if _, _, err := s.Unseal(getInode(t, s, ino), m.Size); !errors.Is(err, tc.want) {
				t.Errorf("Unseal = %v, want %v", err, tc.want)
			}
			if files := stagingFiles(t, s); len(files) != 0 {
				t.Errorf("failed Unseal left staging files %q", files)
			}
		})
	}
}

// flipAt flips the byte at the given fraction of the file's length.
func flipAt(frac float64) func(path string) error {
	return func(path string) error {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		return flipByte(min(fi.Size()-1, int64(float64(fi.Size())*frac)))(path)
	}
}

func flipByte(off int64) func(path string) error {
	return func(path string) error {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, off); err != nil {
			return err
		}
		b[0] ^= 0x5a
		_, err = f.WriteAt(b, off)
		return err
	}
}

// ReadAt follows the manifest it is given, inline or extents, with holes.
func TestReadAtManifest(t *testing.T) {
	s := newStore(t)
	a, b := testbytes.Random(1000, 16), testbytes.Random(500, 17)
	ha, hb := cas.Sum(a), cas.Sum(b)
	for _, c := range [][]byte{a, b} {
		if _, err := store.Chunks(s).Put(cas.Sum(c), c); err != nil {
			t.Fatal(err)
		}
	}
	// hole [0,100) a [100,1100) b [1100,1600) hole [1600,2000)
	m := &manifest.Manifest{Size: 2000, Extents: []manifest.Extent{{Off: 100, Len: 1000, Hash: ha}, {Off: 1100, Len: 500, Hash: hb}}}
	content := make([]byte, 2000)
	copy(content[100:], a)
	copy(content[1100:], b)
	checkReads(t, s, 1, m, content)

	inline := &manifest.Manifest{Size: 5, Inline: []byte("hello")}
	checkReads(t, s, 1, inline, []byte("hello"))
	checkReads(t, s, 1, &manifest.Manifest{}, nil)
	checkReads(t, s, 1, &manifest.Manifest{Size: 10000}, make([]byte, 10000))

	// An extent longer than its chunk is refused where the chunk ends,
	// not served short or padded.
	wrong := &manifest.Manifest{Size: 2000, Extents: []manifest.Extent{{Off: 0, Len: 1001, Hash: ha}}}
	if n, err := s.ReadAt(1, wrong, make([]byte, 10), 995); !errors.Is(err, cas.ErrCorrupt) {
		t.Errorf("ReadAt past the end of an extent's chunk = %d, %v; want %v", n, err, cas.ErrCorrupt)
	}
	// A negative offset reads nothing.
	if n, err := s.ReadAt(1, m, make([]byte, 10), -5); n != 0 || err != nil {
		t.Errorf("ReadAt at -5 = %d, %v", n, err)
	}
}
