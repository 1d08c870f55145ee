package cas_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/internal/testbytes"
)

// objectFrom writes data to a file in dir and links it as an object.
func objectFrom(t *testing.T, o *cas.Objects, dir string, data []byte) (cas.Hash, []byte, string) {
	t.Helper()
	path := filepath.Join(dir, "file")
	os.Remove(path)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	h, tree, err := cas.Tree(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Link(h, path); err != nil {
		t.Fatal(err)
	}
	return h, tree, path
}

// The tree's root is the content's hash, the name chunks use too.
func TestTreeRootIsTheHash(t *testing.T) {
	for _, n := range []int{0, 1, cas.GroupSize - 1, cas.GroupSize, cas.GroupSize + 1, 5*cas.GroupSize + 17, 1 << 20} {
		data := testbytes.Random(n, uint64(n))
		h, _, err := cas.Tree(bytes.NewReader(data), int64(n))
		if err != nil {
			t.Fatal(err)
		}
		if h != cas.Sum(data) {
			t.Errorf("%d bytes: Tree's root %s, Sum %s", n, h, cas.Sum(data))
		}
	}
}

func TestObjectLinkDeduplicates(t *testing.T) {
	dir := t.TempDir()
	o, err := cas.OpenObjects(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	data := testbytes.Random(100<<10, 1)
	h, _, _ := objectFrom(t, o, dir, data)
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, data, 0o600); err != nil {
		t.Fatal(err)
	}
	linked, err := o.Link(h, other)
	if err != nil || linked {
		t.Fatalf("Link of a second file with the same bytes = %v, %v; want false, nil", linked, err)
	}
	var n int
	o.Hashes(func(cas.Hash) error { n++; return nil })
	if n != 1 {
		t.Errorf("%d objects after two links of the same bytes, want 1", n)
	}
	if _, err := o.Verify(h, nil); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

// A flipped byte fails Verify, and the verified reads of its group and of
// no other.
func TestObjectFlippedByte(t *testing.T) {
	dir := t.TempDir()
	o, err := cas.OpenObjects(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	data := testbytes.Random(4*cas.GroupSize+100, 2)
	h, tree, _ := objectFrom(t, o, dir, data)
	f, err := o.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := make([]byte, 4096)
	for _, off := range []int64{0, cas.GroupSize - 10, 4 * cas.GroupSize} {
		n, err := cas.ReadVerified(f, tree, h, p, off)
		if err != nil || !bytes.Equal(p[:n], data[off:min(int(off)+len(p), len(data))]) {
			t.Fatalf("ReadVerified at %d before the damage: %d bytes, %v", off, n, err)
		}
	}
	flip := int64(2*cas.GroupSize + 5)
	w, err := os.OpenFile(filepath.Join(dir, "objects", h.String()[:2], h.String()), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteAt([]byte{data[flip] ^ 1}, flip)
	w.Close()
	if _, err := o.Verify(h, nil); !errors.Is(err, cas.ErrCorrupt) {
		t.Errorf("Verify of a damaged object: %v, want ErrCorrupt", err)
	}
	if _, err := cas.ReadVerified(f, tree, h, p, flip-100); !errors.Is(err, cas.ErrCorrupt) {
		t.Errorf("ReadVerified of the damaged group: %v, want ErrCorrupt", err)
	}
	if _, err := cas.ReadVerified(f, tree, h, p, 0); err != nil {
		t.Errorf("ReadVerified of an intact group: %v", err)
	}
	if _, err := cas.ReadVerified(f, tree[:len(tree)-1], h, p, 0); !errors.Is(err, cas.ErrCorrupt) {
		t.Errorf("ReadVerified with a cut tree: %v, want ErrCorrupt", err)
	}
}

func TestCompresses(t *testing.T) {
	if cas.Compresses(testbytes.Random(64<<10, 3)) {
		t.Error("random bytes compress")
	}
	if !cas.Compresses(bytes.Repeat([]byte("flink state "), 5000)) {
		t.Error("repeated text does not compress")
	}
}
