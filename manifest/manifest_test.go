package manifest_test

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/manifest"
)

var (
	h1 = cas.Sum([]byte("one"))
	h2 = cas.Sum([]byte("two"))
	h3 = cas.Sum([]byte("three"))
)

// sameManifest reports whether got and want describe the same content: a
// nil and an empty extent list are the same, but an inline manifest (even an
// empty one) is never the same as an extent manifest.
func sameManifest(got, want *manifest.Manifest) bool {
	return got.Size == want.Size &&
		slices.Equal(got.Extents, want.Extents) &&
		bytes.Equal(got.Inline, want.Inline) &&
		(got.Inline == nil) == (want.Inline == nil) &&
		(got.Object == nil) == (want.Object == nil) &&
		(got.Object == nil || *got.Object == *want.Object)
}

func TestMarshalRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    manifest.Manifest
	}{
		{"empty", manifest.Manifest{}},
		{"empty inline", manifest.Manifest{Inline: []byte{}}},
		{"inline", manifest.Manifest{Size: 5, Inline: []byte("hello")}},
		{"one extent", manifest.Manifest{Size: 10, Extents: []manifest.Extent{{Off: 0, Len: 10, Hash: h1}}}},
		{"contiguous extents", manifest.Manifest{Size: 30, Extents: []manifest.Extent{
			{Off: 0, Len: 10, Hash: h1}, {Off: 10, Len: 20, Hash: h2}}}},
		{"holes before, between and after extents", manifest.Manifest{Size: 1 << 40, Extents: []manifest.Extent{
			{Off: 100, Len: 10, Hash: h1}, {Off: 64 << 20, Len: 4 << 20, Hash: h2}, {Off: 1 << 39, Len: 1, Hash: h3}}}},
		{"one chunk twice", manifest.Manifest{Size: 20, Extents: []manifest.Extent{
			{Off: 0, Len: 10, Hash: h1}, {Off: 10, Len: 10, Hash: h1}}}},
		{"only a hole", manifest.Manifest{Size: 4096}},
		{"object", manifest.Manifest{Size: 1 << 33, Object: &h1}},
		{"extent ending at the largest size", manifest.Manifest{Size: math.MaxUint64, Extents: []manifest.Extent{
			{Off: math.MaxUint64 - 10, Len: 10, Hash: h1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.m.Marshal()
			got, err := manifest.Unmarshal(b)
			if err != nil {
				t.Fatalf("Unmarshal(Marshal(m)): %v", err)
			}
			if !sameManifest(got, &tc.m) {
				t.Errorf("round trip gave %+v, want %+v", got, tc.m)
			}
			if again := got.Marshal(); !bytes.Equal(again, b) {
				t.Errorf("Marshal after round trip gave %x, want %x", again, b)
			}
		})
	}
}

// TestUnmarshalCopiesInline checks that a decoded inline manifest does not
// alias the buffer it came from: badger reuses value buffers.
func TestUnmarshalCopiesInline(t *testing.T) {
	b := (&manifest.Manifest{Size: 3, Inline: []byte("abc")}).Marshal()
	m, err := manifest.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	clear(b)
	if string(m.Inline) != "abc" {
		t.Errorf("Inline = %q after the input was overwritten, want %q", m.Inline, "abc")
	}
}

func TestUnmarshalRejectsCorrupt(t *testing.T) {
	valid := (&manifest.Manifest{Size: 30, Extents: []manifest.Extent{
		{Off: 0, Len: 10, Hash: h1}, {Off: 20, Len: 10, Hash: h2}}}).Marshal()
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(valid)) }
	extents := func(size uint64, es ...manifest.Extent) []byte {
		return (&manifest.Manifest{Size: size, Extents: es}).Marshal()
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"nothing", nil},
		{"header cut short", valid[:9]},
		{"version 0", edit(func(b []byte) []byte { b[0] = 0; return b })},
		{"version 2", edit(func(b []byte) []byte { b[0] = 2; return b })},
		{"unknown kind", edit(func(b []byte) []byte { b[1] = 7; return b })},
		{"extent list cut in an extent", valid[:len(valid)-1]},
		{"extent list with a stray byte", append(bytes.Clone(valid), 0)},
		{"extents out of order", extents(30, manifest.Extent{Off: 20, Len: 10, Hash: h2}, manifest.Extent{Off: 0, Len: 10, Hash: h1})},
		{"extents overlapping", extents(30, manifest.Extent{Off: 0, Len: 10, Hash: h1}, manifest.Extent{Off: 9, Len: 10, Hash: h2})},
		{"one offset twice", extents(30, manifest.Extent{Off: 5, Len: 1, Hash: h1}, manifest.Extent{Off: 5, Len: 1, Hash: h2})},
		{"extent past size", extents(30, manifest.Extent{Off: 25, Len: 10, Hash: h1})},
		{"extent starting at size", extents(30, manifest.Extent{Off: 30, Len: 1, Hash: h1})},
		{"extent in an empty file", extents(0, manifest.Extent{Off: 0, Len: 1, Hash: h1})},
		{"zero-length extent", extents(30, manifest.Extent{Off: 10, Len: 0, Hash: h1})},
		{"extent end wrapping around", extents(math.MaxUint64, manifest.Extent{Off: math.MaxUint64 - 1, Len: 10, Hash: h1})},
		{"inline shorter than size", (&manifest.Manifest{Size: 6, Inline: []byte("hello")}).Marshal()},
		{"object hash cut short", (&manifest.Manifest{Size: 4, Object: &h1}).Marshal()[:10+31]},
		{"object hash with a stray byte", append((&manifest.Manifest{Size: 4, Object: &h1}).Marshal(), 0)},
		{"inline longer than size", (&manifest.Manifest{Size: 4, Inline: []byte("hello")}).Marshal()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := manifest.Unmarshal(tc.b)
			if !errors.Is(err, manifest.ErrCorrupt) {
				t.Fatalf("Unmarshal(%x) = %+v, %v; want an error wrapping ErrCorrupt", tc.b, m, err)
			}
			if m != nil {
				t.Errorf("Unmarshal returned a manifest with its error: %+v", m)
			}
		})
	}
}

func TestFind(t *testing.T) {
	// [0,10) hole [20,30)[30,40) hole up to 50
	m := &manifest.Manifest{Size: 50, Extents: []manifest.Extent{
		{Off: 0, Len: 10, Hash: h1}, {Off: 20, Len: 10, Hash: h2}, {Off: 30, Len: 10, Hash: h3}}}
	for _, tc := range []struct {
		off  uint64
		want int
	}{
		{0, 0},
		{9, 0},
		{10, 1}, // in the hole: the next extent
		{19, 1},
		{20, 1},
		{29, 1},
		{30, 2},
		{39, 2},
		{40, 3}, // in the trailing hole: none
		{50, 3},
		{math.MaxUint64, 3},
	} {
		if got := m.Find(tc.off); got != tc.want {
			t.Errorf("Find(%d) = %d, want %d", tc.off, got, tc.want)
		}
	}
	if got := (&manifest.Manifest{Size: 10}).Find(0); got != 0 {
		t.Errorf("Find(0) without extents = %d, want 0", got)
	}
}

func TestChunks(t *testing.T) {
	m := &manifest.Manifest{Size: 30, Extents: []manifest.Extent{
		{Off: 0, Len: 10, Hash: h1}, {Off: 10, Len: 10, Hash: h2}, {Off: 20, Len: 10, Hash: h1}}}
	if got, want := m.Chunks(), []cas.Hash{h1, h2, h1}; !slices.Equal(got, want) {
		t.Errorf("Chunks() = %v, want one entry per extent %v", got, want)
	}
	if got := (&manifest.Manifest{Size: 3, Inline: []byte("abc")}).Chunks(); len(got) != 0 {
		t.Errorf("Chunks() of an inline manifest = %v, want none", got)
	}
}
