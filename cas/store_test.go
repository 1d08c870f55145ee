package cas_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/internal/testbytes"
)

func openStore(t testing.TB) (*cas.Chunks, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "chunks")
	s, err := cas.Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, dir
}

// chunkPath is where the documented layout puts chunk h.
func chunkPath(dir string, h cas.Hash) string {
	return filepath.Join(dir, h.String()[:2], h.String())
}

func put(t *testing.T, s *cas.Chunks, data []byte) cas.Hash {
	t.Helper()
	h := cas.Sum(data)
	if _, err := s.Put(h, data); err != nil {
		t.Fatalf("Put: %v", err)
	}
	return h
}

// text returns n bytes of compressible, text-like data.
func text(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "key-%08d value=%d state=RUNNING checkpoint=%d\n", i, i*i%9973, i/97)
	}
	return b.Bytes()[:n]
}

var kinds = []struct {
	name       string
	data       []byte
	compressed bool
}{
	{"compressible", text(1 << 20), true},
	{"incompressible", testbytes.Random(1<<20, 10), false},
	{"small incompressible", testbytes.Random(100, 13), false},
	{"empty", []byte{}, false},
}

func TestPutGetRoundTrip(t *testing.T) {
	s, _ := openStore(t)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			h := cas.Sum(k.data)
			stored, err := s.Put(h, k.data)
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			size, err := s.Size(h)
			if err != nil {
				t.Fatalf("Size: %v", err)
			}
			if stored != size {
				t.Errorf("Put stored %d bytes, Size says %d", stored, size)
			}
			if k.compressed && size > int64(len(k.data))/2 {
				t.Errorf("compressible chunk of %d bytes takes %d on disk", len(k.data), size)
			}
			// Stored raw: the file is the data plus the header and its
			// verification tree (64 bytes per 16 KiB group), on a page boundary.
			if !k.compressed && (size < int64(len(k.data)) || size > int64(len(k.data))+int64(len(k.data))/256+4096) {
				t.Errorf("incompressible chunk of %d bytes takes %d on disk, want it raw", len(k.data), size)
			}
			if ok, err := s.Has(h); err != nil || !ok {
				t.Errorf("Has = %v, %v; want true", ok, err)
			}
			got, err := s.Get(h, nil)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if !bytes.Equal(got, k.data) {
				t.Fatal("Get returned different bytes")
			}
		})
	}
}

func TestGetDecodesIntoCallersBuffer(t *testing.T) {
	s, _ := openStore(t)
	for _, k := range kinds[:2] {
		h := put(t, s, k.data)
		buf := make([]byte, 0, len(k.data)+10)
		got, err := s.Get(h, buf)
		if err != nil {
			t.Fatalf("%s: Get: %v", k.name, err)
		}
		if &got[0] != &buf[:1][0] {
			t.Errorf("%s: Get did not use the caller's buffer", k.name)
		}
	}
}

func TestPutTwiceStoresOnce(t *testing.T) {
	s, _ := openStore(t)
	data := text(300 << 10)
	h := cas.Sum(data)
	first, err := s.Put(h, data)
	if err != nil || first <= 0 {
		t.Fatalf("first Put = %d, %v; want > 0, nil", first, err)
	}
	second, err := s.Put(h, data)
	if err != nil || second != 0 {
		t.Fatalf("second Put = %d, %v; want 0, nil", second, err)
	}
}

func TestGetMissing(t *testing.T) {
	s, _ := openStore(t)
	h := cas.Sum([]byte("never stored"))
	if _, err := s.Get(h, nil); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("Get of a missing chunk: %v, want ErrNotFound", err)
	}
	if _, err := s.Size(h); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("Size of a missing chunk: %v, want ErrNotFound", err)
	}
	if ok, err := s.Has(h); ok || err != nil {
		t.Fatalf("Has of a missing chunk = %v, %v; want false, nil", ok, err)
	}
}

func TestGetDetectsCorruption(t *testing.T) {
	for _, k := range kinds[:2] {
		s, dir := openStore(t)
		h := put(t, s, k.data)
		path := chunkPath(dir, h)
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if size, _ := s.Size(h); k.compressed != (size < int64(len(k.data))) {
			t.Fatalf("%s chunk takes %d bytes on disk: wrong kind for this test", k.name, size)
		}
		for _, damage := range []struct {
			name string
			do   func(p []byte) []byte
		}{
			{"payload byte flipped", func(p []byte) []byte { p[len(p)/2] ^= 0x01; return p }},
			{"last byte flipped", func(p []byte) []byte { p[len(p)-1] ^= 0x80; return p }},
			{"truncated", func(p []byte) []byte { return p[:len(p)-1] }},
			{"truncated to half", func(p []byte) []byte { return p[:len(p)/2] }},
			{"truncated into header", func(p []byte) []byte { return p[:10] }},
			{"empty file", func(p []byte) []byte { return p[:0] }},
			{"bad magic", func(p []byte) []byte { p[0] ^= 0xff; return p }},
			{"bad version", func(p []byte) []byte { p[4] = 99; return p }},
			{"bad kind", func(p []byte) []byte { p[5] = 7; return p }},
			{"bad length", func(p []byte) []byte { p[9]++; return p }},
			{"bad header checksum", func(p []byte) []byte { p[17] ^= 0x10; return p }},
			{"extra byte", func(p []byte) []byte { return append(p, 0) }},
		} {
			t.Run(k.name+"/"+damage.name, func(t *testing.T) {
				if err := os.WriteFile(path, damage.do(bytes.Clone(orig)), 0o600); err != nil {
					t.Fatal(err)
				}
				got, err := s.Get(h, nil)
				if !errors.Is(err, cas.ErrCorrupt) {
					t.Fatalf("Get of a damaged chunk = %d bytes, %v; want ErrCorrupt", len(got), err)
				}
				if !strings.Contains(err.Error(), h.String()) {
					t.Fatalf("error %q does not name the chunk", err)
				}
			})
		}
	}
}

// A chunk file whose content is another chunk's (a misnamed or swapped file)
// decodes cleanly and must still be refused.
func TestGetDetectsWrongContent(t *testing.T) {
	s, dir := openStore(t)
	a := put(t, s, text(200<<10))
	b := put(t, s, testbytes.Random(200<<10, 11))
	if err := os.Rename(chunkPath(dir, b), chunkPath(dir, a)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(a, nil); !errors.Is(err, cas.ErrCorrupt) {
		t.Fatalf("Get of a chunk holding other bytes: %v, want ErrCorrupt", err)
	}
}

// Open reads no fan-out subdirectory, so that a server's start costs the
// same however many chunks the store holds: the temporary files a crash
// left there stay until RemoveStaleTemps, which removes them and keeps the
// chunks and this process's own temporary files, which may be mid-write.
func TestRemoveStaleTempsKeepsChunksAndOwnTemps(t *testing.T) {
	s, dir := openStore(t)
	h := put(t, s, text(1000))
	stale := []string{
		filepath.Join(dir, "00", ".tmp-123"),
		filepath.Join(dir, h.String()[:2], ".tmp-torn"),
	}
	own := filepath.Join(dir, "ff", cas.OwnTemps+"being-written")
	for _, p := range append(stale, own) {
		if err := os.WriteFile(p, []byte("torn"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := cas.Open(dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	for _, p := range stale {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("Open read the fan-out subdirectories: the temporary file %s is gone (%v)", p, err)
		}
	}
	if err := s.RemoveStaleTemps(); err != nil {
		t.Fatalf("RemoveStaleTemps: %v", err)
	}
	for _, p := range stale {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("temporary file %s survived RemoveStaleTemps (%v)", p, err)
		}
	}
	if _, err := os.Stat(own); err != nil {
		t.Errorf("RemoveStaleTemps removed this process's temporary file: %v", err)
	}
	if _, err := s.Get(h, nil); err != nil {
		t.Fatalf("chunk lost: %v", err)
	}
}

// A fan-out subdirectory that is a symlink or a file is refused, not
// written through.
func TestOpenRefusesSubdirectoryNotADirectory(t *testing.T) {
	for _, kind := range []string{"symlink", "file"} {
		t.Run(kind, func(t *testing.T) {
			_, dir := openStore(t)
			sub := filepath.Join(dir, "ab")
			if err := os.Remove(sub); err != nil {
				t.Fatal(err)
			}
			var err error
			if kind == "symlink" {
				err = os.Symlink(t.TempDir(), sub)
			} else {
				err = os.WriteFile(sub, nil, 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cas.Open(dir); err == nil || !strings.Contains(err.Error(), "is not a directory") {
				t.Errorf("Open of a store whose ab is a %s: %v, want \"is not a directory\"", kind, err)
			}
			if _, err := cas.OpenObjects(dir); err == nil {
				t.Errorf("OpenObjects of a directory whose ab is a %s: no error", kind)
			}
		})
	}
}

func TestConcurrentPutOfSameHash(t *testing.T) {
	s, dir := openStore(t)
	data := text(2 << 20)
	h := cas.Sum(data)
	const n = 8
	var wg sync.WaitGroup
	stored := make([]int64, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { stored[i], errs[i] = s.Put(h, data) })
	}
	wg.Wait()
	writers := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Put %d: %v", i, errs[i])
		}
		if stored[i] > 0 {
			writers++
		}
	}
	if writers != 1 {
		t.Errorf("%d Puts report writing the chunk, want 1", writers)
	}
	entries, err := os.ReadDir(filepath.Join(dir, h.String()[:2]))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != h.String() {
		t.Errorf("fan-out directory holds %v, want only the chunk", entries)
	}
	if got, err := s.Get(h, nil); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get after concurrent Puts: %v", err)
	}
}

func TestRemove(t *testing.T) {
	s, _ := openStore(t)
	h := put(t, s, text(5000))
	if err := s.Remove(h); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if ok, _ := s.Has(h); ok {
		t.Fatal("chunk still there after Remove")
	}
	if err := s.Remove(h); err != nil {
		t.Fatalf("Remove of a missing chunk: %v", err)
	}
}

func TestWalkListsExactlyTheChunks(t *testing.T) {
	s, dir := openStore(t)
	want := map[cas.Hash]int64{}
	for i := range 40 {
		h := put(t, s, text(1000+i))
		size, err := s.Size(h)
		if err != nil {
			t.Fatal(err)
		}
		want[h] = size
	}
	removed := put(t, s, text(999))
	if err := s.Remove(removed); err != nil {
		t.Fatal(err)
	}
	// Neither a temporary file nor a foreign name is a chunk.
	for _, name := range []string{".tmp-x", "README", cas.Sum([]byte("x")).String()[:10]} {
		if err := os.WriteFile(filepath.Join(dir, "ab", name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := map[cas.Hash]int64{}
	err := s.Walk(func(h cas.Hash, size int64) error {
		if _, dup := got[h]; dup {
			t.Errorf("Walk visited %s twice", h)
		}
		got[h] = size
		return nil
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	if len(got) != len(want) {
		t.Errorf("Walk found %d chunks, want %d", len(got), len(want))
	}
	for h, size := range want {
		if got[h] != size {
			t.Errorf("Walk gave %s size %d, want %d", h, got[h], size)
		}
	}

	stop := errors.New("stop")
	calls := 0
	if err := s.Walk(func(cas.Hash, int64) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("Walk with a failing fn = %v after %d calls, want fn's error after 1", err, calls)
	}
}

// On a full filesystem Put fails with an error that is ENOSPC, and leaves
// nothing behind. Needs permission to mount a small tmpfs.
func TestPutOnFullDisk(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=2m"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, 0) })
	s, err := cas.Open(mnt)
	if err != nil {
		t.Fatal(err)
	}
	data := testbytes.Random(3<<20, 12)
	_, err = s.Put(cas.Sum(data), data)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Put on a full disk: %v, want ENOSPC", err)
	}
	err = s.Walk(func(h cas.Hash, _ int64) error { return fmt.Errorf("chunk %s left behind", h) })
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(mnt, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			err = fmt.Errorf("file %s left behind", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	small := text(1000)
	if _, err := s.Put(cas.Sum(small), small); err != nil {
		t.Fatalf("Put after ENOSPC: %v", err)
	}
}
