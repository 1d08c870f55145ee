package main

import (
	"strings"
	"testing"
	"time"

	"github.com/statefs/statefs/store"
)

// inspect says how a sealed file is kept: as chunks, with its extents, or
// as an object, with its hash, the files that are it, its size on disk and
// whether it is quarantined, with why.
func TestPrintInspectionSaysHowContentIsKept(t *testing.T) {
	const hash = "4eb67719b706cbe1701dc4a122797c3fd2743e13db4305cd71bc4fcefb17c163"
	at := time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		in   store.Inspection
		want []string
		not  []string
	}{
		{"chunks", store.Inspection{Type: "file", Content: "sealed", As: "chunks",
			Extents: []store.ChunkExtent{{Len: 10, Chunk: hash, DiskBytes: 7, Refs: 1}}, Sharing: &store.ContentSharing{UniqueBytes: 10, UniqueChunks: 1}},
			[]string{"content  sealed as chunks, 1 extents", hash, "unique   10 B in 1 chunks"}, []string{"object"}},
		{"object", store.Inspection{Type: "file", Content: "sealed", As: "object",
			Object: &store.ObjectContent{Hash: hash, Refs: 3, DiskBytes: 204800}},
			[]string{"content  sealed as an object", "object   " + hash, "refs     3 (files that are this object)", "disk     200 KiB on disk", "status   not quarantined"},
			[]string{"extents", "unique"}},
		{"quarantined object", store.Inspection{Type: "file", Content: "sealed", As: "object",
			Object: &store.ObjectContent{Hash: hash, Refs: 1, Missing: true, Quarantined: true, QuarantinedAt: at, QuarantinedWhy: "group 3 is not the object's"}},
			[]string{"missing from the disk", "status   quarantined since 2026-12-01T08:30:00Z: group 3 is not the object's (opens fail with EIO"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			if err := printInspection(&out, &c.in, sizes{}); err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("inspect printed\n%s\nwant it to say %q", out.String(), w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(out.String(), n) {
					t.Errorf("inspect printed\n%s\nwant no %q", out.String(), n)
				}
			}
		})
	}
}
