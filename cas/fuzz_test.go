package cas_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/statefs/statefs/cas"
)

// chunkHeader is a chunk file header as the package documentation lays it
// out, with a correct checksum: what a damaged or hostile file could hold.
func chunkHeader(kind byte, size uint64) []byte {
	b := make([]byte, 20)
	copy(b, "sfck")
	b[4], b[5] = 1, kind
	binary.LittleEndian.PutUint64(b[8:], size)
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(b[:16], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// A header's length is trusted for an allocation only up to MaxChunk: a
// file whose header (checksum and all) claims more is corrupt, and Get says
// so instead of trying to allocate it (which killed the daemon with an
// out-of-memory fatal error before the bound).
func TestGetRefusesHugeLength(t *testing.T) {
	s, dir := openStore(t)
	h := cas.Sum([]byte("hello"))
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"zstd 1 TiB", append(chunkHeader(1, 1<<40), 0x28, 0xb5, 0x2f, 0xfd)},
		{"zstd MaxChunk+1", append(chunkHeader(1, cas.MaxChunk+1), 0x28, 0xb5, 0x2f, 0xfd)},
		{"raw 1 TiB", append(chunkHeader(0, 1<<40), "hello"...)},
		{"zstd 2^63-1", chunkHeader(1, 1<<63-1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeChunkFile(t, dir, h, tc.file)
			if _, err := s.Get(h, nil); !errors.Is(err, cas.ErrCorrupt) {
				t.Fatalf("Get = %v, want ErrCorrupt", err)
			}
		})
	}
	if _, err := s.Put(cas.Sum(make([]byte, cas.MaxChunk+1)), make([]byte, cas.MaxChunk+1)); err == nil {
		t.Fatal("Put of a chunk longer than MaxChunk succeeded; Get would refuse it")
	}
}

func writeChunkFile(t testing.TB, dir string, h cas.Hash, b []byte) {
	t.Helper()
	if err := os.WriteFile(chunkPath(dir, h), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// FuzzChunkFile puts arbitrary bytes where chunk "hello" lives and reads it
// back: Get never panics, gives back "hello" or an error wrapping
// ErrCorrupt (DESIGN invariant 5: never wrong bytes), and allocates no more
// than the file's size and one chunk, whatever lengths the header claims.
// The seeds include every header kind and both payload encodings.
func FuzzChunkFile(f *testing.F) {
	want := []byte("hello")
	h := cas.Sum(want)
	{
		s, dir := openStore(f)
		for _, data := range [][]byte{want, bytes.Repeat(want, 1000)} {
			if _, err := s.Put(cas.Sum(data), data); err != nil {
				f.Fatal(err)
			}
			b, err := os.ReadFile(chunkPath(dir, cas.Sum(data)))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b) // raw, then zstd
		}
	}
	f.Add(append(chunkHeader(1, 1<<40), 0x28, 0xb5, 0x2f, 0xfd))
	f.Add(append(chunkHeader(2, 5), want...))
	f.Add(chunkHeader(0, 5)[:19])

	s, dir := openStore(f)
	path := chunkPath(dir, h)
	f.Fuzz(func(t *testing.T, file []byte) {
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := s.Get(h, nil)
		runtime.ReadMemStats(&after)
		switch {
		case err == nil && !bytes.Equal(got, want):
			t.Fatalf("Get returned %q, want %q", got, want)
		case err != nil && !errors.Is(err, cas.ErrCorrupt):
			t.Fatalf("Get failed with %v, which does not wrap ErrCorrupt", err)
		}
		// Slack for the zstd decoder's own buffers.
		if n, limit := after.TotalAlloc-before.TotalAlloc, uint64(2*len(file)+cas.MaxChunk+(16<<20)); n > limit {
			t.Fatalf("Get of a %d-byte file allocated %d bytes, more than %d", len(file), n, limit)
		}
	})
}

// FuzzChunkRoundTrip: whatever is Put comes back byte for byte, and its file
// is never longer than the data, the header, the verification tree and a
// page of alignment (a chunk that does not compress is stored raw).
func FuzzChunkRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("x"))
	f.Add(bytes.Repeat([]byte("abc"), 5000))
	s, dir := openStore(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		h := cas.Sum(data)
		if _, err := s.Put(h, data); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, h.String()[:2], h.String()))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > int64(len(data))+20+int64(len(data))/256+4096 {
			t.Fatalf("%d bytes stored in a %d-byte file", len(data), fi.Size())
		}
		got, err := s.Get(h, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("Get returned %d bytes that differ from the %d Put", len(got), len(data))
		}
		if err := s.Remove(h); err != nil {
			t.Fatal(err)
		}
	})
}
