package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/store"
)

// scrub's report names damaged chunks and objects as such, the files of
// each (all of an object's bytes are lost), the objects it quarantined, and
// counts them all in its last line.
func TestPrintScrubbedReportsObjects(t *testing.T) {
	chunk, object, other := cas.Sum([]byte("chunk")), cas.Sum([]byte("object")), cas.Sum([]byte("other"))
	r := store.Scrubbed{
		Chunks: 4, Objects: 3, Bytes: 3 << 20,
		Damaged: []store.DamagedChunk{
			{Hash: chunk, Kind: store.ProblemCorruptChunk, Why: "group 0", Used: true},
			{Hash: object, Kind: store.ProblemCorruptObject, Why: "group 2", Used: true},
			{Hash: other, Kind: store.ProblemQuarantined, Why: "quarantined: opens of its files fail", Used: true},
		},
		Files: []index.DamagedFile{
			{Ino: 7, Paths: []string{"a.sst"}, Size: 100, Lost: []manifest.Extent{{Off: 0, Len: 10, Hash: chunk}}},
			{Ino: 8, Paths: []string{"b.sst"}, Size: 5000, Object: &object},
		},
		Quarantined: []cas.Hash{object},
	}
	for _, c := range []struct {
		z     sizes
		sizes []string
	}{
		{sizes{}, []string{
			"damaged file a.sst (inode 7, 100 B): 10 B lost at 0+10\n",
			"damaged file b.sst (inode 8, 4.9 KiB): 4.9 KiB lost, all of object " + object.String() + "\n",
			"scrub: 4 chunks, 3 objects, 3.0 MiB verified, 1 damaged chunks, 2 damaged files, 2 damaged objects, 1 quarantined now\n",
		}},
		{sizes{exact: true}, []string{ // --bytes
			"damaged file a.sst (inode 7, 100): 10 lost at 0+10\n",
			"damaged file b.sst (inode 8, 5000): 5000 lost, all of object " + object.String() + "\n",
			"scrub: 4 chunks, 3 objects, 3145728 verified, 1 damaged chunks",
		}},
	} {
		var out strings.Builder
		printScrubbed(&out, r, c.z)
		for _, want := range append([]string{
			"damaged chunk " + chunk.String() + " (used): group 0",
			"damaged object " + object.String() + " (used): group 2",
			"damaged object " + other.String() + " (used): quarantined",
			"quarantined object " + object.String(),
		}, c.sizes...) {
			if !strings.Contains(out.String(), want) {
				t.Errorf("scrub printed\n%s\nwant it to say %q", out.String(), want)
			}
		}
	}
	raw, err := json.Marshal(scrubJSON(r))
	if err != nil {
		t.Fatal(err)
	}
	b := string(raw)
	for _, want := range []string{`"objects":3`, `"quarantined":["` + object.String() + `"]`, `"object":"` + object.String() + `"`, `"kind":"quarantined-object"`} {
		if !strings.Contains(b, want) {
			t.Errorf("scrub --json printed %s, want %s in it", b, want)
		}
	}
}
