package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/store"
)

// A store opened read-only serves every read (check, scrub, listings) and
// refuses writes, and none of its files changes: no recovery, no reserve,
// no index replay or compaction.
func TestOpenReadOnlyChangesNothing(t *testing.T) {
	cs := newCheckedStore(t)
	before := snapshot(t, cs.dir)

	s, err := store.OpenReadOnly(cs.dir)
	must(t, err)
	// Readers share the store.
	s2, err := store.OpenReadOnly(cs.dir)
	must(t, err)
	s2.Close()
	if ps, err := s.Check(true); err != nil {
		t.Fatal(err)
	} else {
		for _, p := range ps {
			if store.IsError(p) {
				t.Errorf("Check: %v", p)
			}
		}
	}
	if _, err := s.Scrub(context.Background(), store.ScrubOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Index.CountInodes(); err != nil {
		t.Fatal(err)
	}
	if err := s.Index.Update(func(*index.Tx) error { return nil }); !errors.Is(err, index.ErrReadOnly) {
		t.Errorf("Index.Update on a read-only store: %v, want ErrReadOnly", err)
	}
	data := []byte("a new chunk")
	if _, err := store.Chunks(s).Put(cas.Sum(data), data); !errors.Is(err, cas.ErrReadOnly) {
		t.Errorf("Chunks.Put on a read-only store: %v, want ErrReadOnly", err)
	}
	if err := store.Chunks(s).Remove(cs.chunk); !errors.Is(err, cas.ErrReadOnly) {
		t.Errorf("Chunks.Remove on a read-only store: %v, want ErrReadOnly", err)
	}
	// A daemon cannot take the store meanwhile.
	if d, _, err := store.Open(cs.dir); !errors.Is(err, store.ErrInUse) {
		if d != nil {
			d.Close()
		}
		t.Errorf("Open while a reader holds the store: %v, want ErrInUse", err)
	}
	must(t, s.Close())
	requireSameFiles(t, "a read-only open", before, snapshot(t, cs.dir))

	// Open, for comparison, does write: the test can tell.
	d, _ := open(t, cs.dir)
	d.Close()
	after := snapshot(t, cs.dir)
	changed := 0
	for p, b := range before {
		if after[p] != b {
			changed++
		}
	}
	if changed == 0 && len(after) == len(before) {
		t.Error("a read-write Open changed no file either: the snapshot sees nothing")
	}
}
