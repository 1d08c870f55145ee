package store_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/internal/testbytes"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/store"
)

// A store of format version 1 opens: every chunk file is rewritten in the
// current format, FORMAT says so, and every file reads back as before. A
// crash in the middle of the upgrade (some chunks rewritten, FORMAT still
// at 1) is finished by the next Open.
func TestOpenUpgradesVersion1(t *testing.T) {
	for _, crashed := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "store")
		s := openChunked(t, dir) // a version 1 store has no objects
		contents := [][]byte{testbytes.Random(3<<20, 40), text(3 << 20), testbytes.Random(100, 41)}
		var inos []uint64
		var ms []*manifest.Manifest
		for i, c := range contents {
			ino, _ := addContent(t, s, string(rune('a'+i)), c)
			ms = append(ms, seal(t, s, ino))
			inos = append(inos, ino)
		}
		s.Close()
		files := chunkFilesOf(t, dir)
		for i, path := range files {
			if crashed && i%2 == 0 {
				continue // already rewritten when the crash came
			}
			writeVersion1(t, path)
		}
		if err := os.WriteFile(filepath.Join(dir, "FORMAT"), []byte("statefs-store 1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(dir, "objects")); err != nil {
			t.Fatal(err)
		}

		// Read as it is, for a check, without upgrading.
		c, err := store.OpenReadOnly(dir)
		if err != nil {
			t.Fatal(err)
		}
		if problems, err := c.Check(true); err != nil || len(problems) != 0 {
			t.Fatalf("check of a version 1 store: %v, %v", problems, err)
		}
		c.Close()

		s, _ = open(t, dir)
		if b, _ := os.ReadFile(filepath.Join(dir, "FORMAT")); string(b) != "statefs-store 3\n" {
			t.Fatalf("FORMAT after the upgrade is %q", b)
		}
		for _, path := range chunkFilesOf(t, dir) {
			if b, err := os.ReadFile(path); err != nil || b[4] != 2 {
				t.Fatalf("chunk file %s not upgraded (version %d, %v)", path, b[4], err)
			}
		}
		for i, ino := range inos {
			checkReads(t, s, ino, ms[i], contents[i])
		}
		if problems, err := s.Check(true); err != nil || len(problems) != 0 {
			t.Fatalf("check after the upgrade: %v, %v", problems, err)
		}
		s.Close()
	}
}

// A store of format version 2 (chunks only, no objects/) opens as it is:
// FORMAT says 3, its chunked files read back, and new seals write objects.
func TestOpenUpgradesVersion2(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s := openChunked(t, dir)
	old := testbytes.Random(3<<20, 42)
	ino, _ := addContent(t, s, "old", old)
	m := seal(t, s, ino)
	s.Close()
	if err := os.WriteFile(filepath.Join(dir, "FORMAT"), []byte("statefs-store 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "objects")); err != nil {
		t.Fatal(err)
	}
	c, err := store.OpenReadOnly(dir)
	if err != nil {
		t.Fatalf("read-only open of a version 2 store: %v", err)
	}
	if problems, err := c.Check(true); err != nil || len(problems) != 0 {
		t.Fatalf("check of a version 2 store: %v, %v", problems, err)
	}
	c.Close()
	s, _ = open(t, dir)
	defer s.Close()
	if b, _ := os.ReadFile(filepath.Join(dir, "FORMAT")); string(b) != "statefs-store 3\n" {
		t.Fatalf("FORMAT after the upgrade is %q", b)
	}
	checkReads(t, s, ino, m, old)
	fresh := testbytes.Random(3<<20, 43)
	ino, _ = addContent(t, s, "new", fresh)
	if m := seal(t, s, ino); m.Object == nil {
		t.Fatalf("a new seal of random bytes in an upgraded store: %+v, want an object", m)
	}
	if problems, err := s.Check(true); err != nil || len(problems) != 0 {
		t.Fatalf("check after the upgrade: %v, %v", problems, err)
	}
}

func chunkFilesOf(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "chunks", "??", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no chunk files: %v", err)
	}
	return files
}

// writeVersion1 rewrites a chunk file in format version 1, raw: a 20-byte
// header and the chunk's bytes.
func writeVersion1(t *testing.T, path string) {
	t.Helper()
	h, err := cas.ParseHash(filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	s, err := cas.Open(filepath.Dir(filepath.Dir(path)))
	if err != nil {
		t.Fatal(err)
	}
	data, err := s.Get(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 20)
	copy(hdr, "sfck")
	hdr[4] = 1
	binary.LittleEndian.PutUint64(hdr[8:], uint64(len(data)))
	binary.LittleEndian.PutUint32(hdr[16:], crc32.Checksum(hdr[:16], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(path, append(hdr, data...), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b[20:], data) {
		t.Fatal("rewrite failed")
	}
}
