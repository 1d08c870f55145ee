package store_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/internal/testbytes"
	"github.com/statefs/statefs/store"
)

// checkedStore is a closed, consistent store: a sealed file in chunks (one
// chunk shared with a second file), a small sealed file kept inline, and a
// file whose content waits in staging.
type checkedStore struct {
	dir     string
	chunk   cas.Hash // a chunk the first file uses
	staging uint64   // the unsealed file's staging id
}

func newCheckedStore(t *testing.T) checkedStore {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	s := openChunked(t, dir)
	defer s.Close()
	big := testbytes.Random(100<<10, 1)
	ino, _ := addContent(t, s, "big", big)
	m := seal(t, s, ino)
	if len(m.Extents) == 0 {
		t.Fatal("a 100 KiB file sealed into no chunks")
	}
	ino, _ = addContent(t, s, "copy", big)
	seal(t, s, ino)
	ino, _ = addContent(t, s, "small", []byte("inline"))
	seal(t, s, ino)
	_, staging := addContent(t, s, "open", text(100<<10))
	return checkedStore{dir: dir, chunk: m.Extents[0].Hash, staging: staging}
}

// chunkPath is where the chunk store keeps chunk h (cas's layout: a
// directory per first byte).
func (cs checkedStore) chunkPath(h cas.Hash) string {
	return filepath.Join(cs.dir, "chunks", h.String()[:2], h.String())
}

func (cs checkedStore) stagingPath(id uint64) string {
	s := &store.Store{Dir: cs.dir}
	return s.StagingPath(id)
}

// check opens the store for checking and returns the kinds of problem
// Check reports, sorted and deduplicated; every problem is logged.
func (cs checkedStore) check(t *testing.T, verify bool) []string {
	t.Helper()
	s, err := store.OpenReadOnly(cs.dir)
	if err != nil {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	defer s.Close()
	ps, err := s.Check(verify)
	if err != nil {
		t.Fatalf("Check(%v): %v", verify, err)
	}
	var kinds []string
	for _, p := range ps {
		t.Logf("verify=%v: %s", verify, p)
		kinds = append(kinds, p.Kind)
	}
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

func TestCheckConsistentStore(t *testing.T) {
	cs := newCheckedStore(t)
	for _, verify := range []bool{false, true} {
		if got := cs.check(t, verify); len(got) != 0 {
			t.Errorf("Check(verify=%v) of a consistent store reported %v", verify, got)
		}
	}
}

// TestCheckFindsEachFileProblem breaks a consistent store one way at a
// time and expects Check to report exactly that kind of problem, with and
// without verify.
func TestCheckFindsEachFileProblem(t *testing.T) {
	for _, tc := range []struct {
		name             string
		break_           func(t *testing.T, cs checkedStore)
		plain, verifying []string
	}{
		{"missing chunk file", func(t *testing.T, cs checkedStore) {
			must(t, os.Remove(cs.chunkPath(cs.chunk)))
		}, lostChunk(store.ProblemMissingChunk), lostChunk(store.ProblemMissingChunk)},
		{"flipped byte in a chunk", func(t *testing.T, cs checkedStore) {
			path := cs.chunkPath(cs.chunk)
			b, err := os.ReadFile(path)
			must(t, err)
			b[len(b)-1] ^= 0x40
			must(t, os.WriteFile(path, b, 0o600))
		}, nil, lostChunk(store.ProblemCorruptChunk)},
		// The chunk is 100 KiB of random bytes: raw, seven 16 KiB groups,
		// a 384-byte tree after the 20-byte header, zeros up to 4096.
		{"flipped byte in a chunk's verification tree", func(t *testing.T, cs checkedStore) {
			flip(t, cs.chunkPath(cs.chunk), 100)
		}, nil, lostChunk(store.ProblemCorruptChunk)},
		{"flipped byte in a chunk's padding", func(t *testing.T, cs checkedStore) {
			flip(t, cs.chunkPath(cs.chunk), 2000)
		}, nil, lostChunk(store.ProblemCorruptChunk)},
		{"chunk file cut short", func(t *testing.T, cs checkedStore) {
			must(t, os.Truncate(cs.chunkPath(cs.chunk), 100))
		}, nil, lostChunk(store.ProblemCorruptChunk)},
		{"directory in place of a chunk file", func(t *testing.T, cs checkedStore) {
			must(t, os.Remove(cs.chunkPath(cs.chunk)))
			must(t, os.Mkdir(cs.chunkPath(cs.chunk), 0o700))
		}, lostChunk(store.ProblemCorruptChunk), lostChunk(store.ProblemCorruptChunk)},
		{"missing staging file", func(t *testing.T, cs checkedStore) {
			must(t, os.Remove(cs.stagingPath(cs.staging)))
		}, []string{store.ProblemMissingStaging}, []string{store.ProblemMissingStaging}},
		{"stray staging file", func(t *testing.T, cs checkedStore) {
			must(t, os.WriteFile(cs.stagingPath(cs.staging+1000), []byte("left by a crash"), 0o600))
		}, []string{store.ProblemStrayStaging}, []string{store.ProblemStrayStaging}},
		{"unreferenced chunk", func(t *testing.T, cs checkedStore) {
			chunks, err := cas.Open(filepath.Join(cs.dir, "chunks"))
			must(t, err)
			data := []byte("a chunk whose seal was never committed")
			_, err = chunks.Put(cas.Sum(data), data)
			must(t, err)
		}, []string{store.ProblemGarbageChunk}, []string{store.ProblemGarbageChunk}},
		{"wrong reference count in the index", func(t *testing.T, cs checkedStore) {
			// A chunk's reference count is key 'c' + hash, value the count
			// as 8 bytes big-endian (index/tx.go).
			db, err := badger.Open(badger.DefaultOptions(filepath.Join(cs.dir, "index")).WithLogger(nil))
			must(t, err)
			defer db.Close()
			must(t, db.Update(func(txn *badger.Txn) error {
				return txn.Set(append([]byte{'c'}, cs.chunk[:]...), binary.BigEndian.AppendUint64(nil, 7))
			}))
		}, []string{index.ProblemChunkRefcount}, []string{index.ProblemChunkRefcount}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storetest.LeaveDamaged(t, "the store is broken on purpose")
			cs := newCheckedStore(t)
			tc.break_(t, cs)
			if got := cs.check(t, false); !slices.Equal(got, tc.plain) {
				t.Errorf("Check(verify=false) reported kinds %v, want %v", got, tc.plain)
			}
			if got := cs.check(t, true); !slices.Equal(got, tc.verifying) {
				t.Errorf("Check(verify=true) reported kinds %v, want %v", got, tc.verifying)
			}
		})
	}
}

func flip(t *testing.T, path string, off int) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	b[off] ^= 0x40
	must(t, os.WriteFile(path, b, 0o600))
}

// TestOpenReadOnlyRecoversNothing checks that a check sees what a crash
// left, which Open would clean up, and that only leftovers are not errors.
func TestOpenReadOnlyRecoversNothing(t *testing.T) {
	cs := newCheckedStore(t)
	stray := cs.stagingPath(cs.staging + 1000)
	must(t, os.WriteFile(stray, nil, 0o600))
	s, err := store.OpenReadOnly(cs.dir)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := s.Check(false)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || store.IsError(ps[0]) {
		t.Errorf("Check = %v, want one stray staging file that is not an error", ps)
	}
	if _, err := os.Stat(stray); err != nil {
		t.Errorf("the stray staging file is gone after the check: %v", err)
	}
	s2, _ := open(t, cs.dir) // recovery removes it
	s2.Close()
	if got := cs.check(t, false); len(got) != 0 {
		t.Errorf("after Open recovered the store, Check reported %v", got)
	}
}

// The offline opens, for reading and for a repair, refuse a store a daemon
// serves, and never create one.
var offlineOpens = []struct {
	name string
	open func(string) (*store.Store, error)
}{{"OpenReadOnly", store.OpenReadOnly}, {"OpenForRepair", store.OpenForRepair}}

func TestOfflineOpenRefusesStoreInUse(t *testing.T) {
	cs := newCheckedStore(t)
	s, _ := open(t, cs.dir)
	defer s.Close()
	for _, o := range offlineOpens {
		if c, err := o.open(cs.dir); !errors.Is(err, store.ErrInUse) {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s of a store in use: %v, want ErrInUse", o.name, err)
		}
	}
}

func TestOfflineOpenRefusesNoStore(t *testing.T) {
	dir := t.TempDir()
	for _, o := range offlineOpens {
		if s, err := o.open(filepath.Join(dir, "nothing")); err == nil {
			s.Close()
			t.Errorf("%s of a missing directory succeeded", o.name)
		}
		if _, err := os.Stat(filepath.Join(dir, "nothing")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s created the store: %v", o.name, err)
		}
	}
}

// lostChunk is what Check reports for a lost chunk: the chunk, and the
// files that use it.
func lostChunk(kind string) []string {
	kinds := []string{kind, store.ProblemDamagedFile}
	slices.Sort(kinds)
	return kinds
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
