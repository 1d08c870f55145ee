package manifest_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/statefs/statefs/manifest"
)

// FuzzUnmarshal checks that Unmarshal never panics, rejects what it does not
// accept with ErrCorrupt, and that whatever it accepts is exactly what
// Marshal writes for the result: there is one encoding per manifest, so an
// index value that decodes is never silently rewritten to something else.
// The seed corpus is in testdata/fuzz/FuzzUnmarshal.
func FuzzUnmarshal(f *testing.F) {
	for _, m := range []*manifest.Manifest{
		{},
		{Size: 3, Inline: []byte("abc")},
		{Size: 100, Extents: []manifest.Extent{{Off: 10, Len: 20, Hash: h1}, {Off: 30, Len: 5, Hash: h2}}},
	} {
		f.Add(m.Marshal())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := manifest.Unmarshal(b)
		if err != nil {
			if !errors.Is(err, manifest.ErrCorrupt) {
				t.Fatalf("Unmarshal failed with %v, which does not wrap ErrCorrupt", err)
			}
			return
		}
		if again := m.Marshal(); !bytes.Equal(again, b) {
			t.Fatalf("Unmarshal(%x) = %+v, which marshals to %x", b, m, again)
		}
		for i, e := range m.Extents {
			if e.Len == 0 || e.End() < e.Off || e.End() > m.Size || (i > 0 && e.Off < m.Extents[i-1].End()) {
				t.Fatalf("accepted extent %d %+v of %+v", i, e, m)
			}
		}
	})
}
