// Package storetest holds what the tests of index, store, fs, gc and the
// mounted tests share: the one tree builder (Build), which makes a
// namespace from a list of paths through the index as the fs layer would
// (owners from FlinkRules, writes noted for their jobs, content staged and
// sealed into chunks, or with NewWithObjects as each seal chooses), and the
// one consistency check, run on every store a test builds when the test
// ends (CheckAtEnd).
package storetest

import (
	"errors"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/owner"
	"github.com/statefs/statefs/store"
)

// Strict is a DB.Strict function that fails t at every commit that leaves
// the index inconsistent, naming what the check found.
func Strict(t testing.TB) func([]index.Problem, error) {
	return func(ps []index.Problem, err error) {
		t.Errorf("a commit left the index inconsistent: %v %v", ps, err)
	}
}

// Fixture is a store of one test; every method fails the test on error.
type Fixture struct {
	T *testing.T
	S *store.Store
}

// New opens a new store for t, which runs in parallel with the other tests
// that have one: stores share nothing, and opening one takes a while. Its
// seals keep every file of more than store.InlineMax bytes as chunks.
func New(t *testing.T) *Fixture {
	t.Helper()
	f := NewWithObjects(t)
	f.S.SetSealAs(store.AsChunks)
	return f
}

// NewWithObjects is New with seals that choose from the content, as the
// daemon's do: random bytes become objects. Its index is checked after
// every commit (Strict), and the whole store when the test ends
// (CheckAtEnd).
func NewWithObjects(t *testing.T) *Fixture {
	t.Helper()
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	CheckAtEnd(t, dir)
	s, _, err := store.Open(dir)
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	s.Index.Strict = Strict(t)
	t.Cleanup(func() { s.Close() })
	return &Fixture{T: t, S: s}
}

// TryLookup resolves p, a path from the root.
func (f *Fixture) TryLookup(p string) (ino uint64, err error) {
	err = f.S.Index.View(func(tx *index.Tx) error {
		n, err := tx.Resolve(p)
		if err == nil {
			ino = n.Ino
		}
		return err
	})
	return ino, err
}

// Lookup resolves p.
func (f *Fixture) Lookup(p string) uint64 {
	f.T.Helper()
	ino, err := f.TryLookup(p)
	if err != nil {
		f.T.Fatalf("lookup %s: %v", p, err)
	}
	return ino
}

// Create adds a new inode of mode at p, whose directory exists, owned as
// its path says, with staging file staging as its content if not 0.
func (f *Fixture) Create(p string, mode uint32, staging uint64) uint64 {
	f.T.Helper()
	n, err := f.S.Index.NewInode(mode, 0, 0)
	if err != nil {
		f.T.Fatal(err)
	}
	parent := f.Lookup(path.Dir(p))
	err = f.S.Index.Update(func(tx *index.Tx) error {
		if err := tx.CreateOwned(parent, path.Base(p), n, owner.FlinkRules().Owner(p)); err != nil || staging == 0 {
			return err
		}
		_, err := tx.SetStaging(n, staging)
		return err
	})
	if err != nil {
		f.T.Fatalf("creating %s: %v", p, err)
	}
	return n.Ino
}

// MkdirAll creates the directories of p that do not exist.
func (f *Fixture) MkdirAll(p string) uint64 {
	f.T.Helper()
	ino := uint64(index.RootIno)
	if p == "." || p == "" {
		return ino
	}
	names := strings.Split(p, "/")
	for i := range names {
		at := strings.Join(names[:i+1], "/")
		next, err := f.TryLookup(at)
		switch {
		case errors.Is(err, index.ErrNotFound):
			next = f.Create(at, syscall.S_IFDIR|0o755, 0)
		case err != nil:
			f.T.Fatal(err)
		}
		ino = next
	}
	return ino
}

// Write makes data, at offset off (a hole before it), the content of the
// file at p, creating it and its directories if need be, and seals it if
// seal is set.
func (f *Fixture) Write(p string, data []byte, off int64, seal bool) uint64 {
	f.T.Helper()
	id, file, err := f.S.NewStaging()
	if err != nil {
		f.T.Fatal(err)
	}
	if _, err := file.WriteAt(data, off); err != nil {
		f.T.Fatal(err)
	}
	if err := file.Close(); err != nil {
		f.T.Fatal(err)
	}
	f.MkdirAll(path.Dir(p))
	ino, err := f.TryLookup(p)
	switch {
	case errors.Is(err, index.ErrNotFound):
		ino = f.Create(p, syscall.S_IFREG|0o644, id)
	case err != nil:
		f.T.Fatal(err)
	default:
		err = f.S.Index.Update(func(tx *index.Tx) error {
			n, err := tx.Inode(ino)
			if err != nil {
				return err
			}
			if _, err = tx.SetStaging(n, id); err != nil {
				return err
			}
			return tx.NoteWrite(owner.FlinkRules().Owner(p), index.Now())
		})
		if err != nil {
			f.T.Fatalf("rewriting %s: %v", p, err)
		}
	}
	if !seal {
		return ino
	}
	x, err := f.S.PrepareSeal(ino)
	if err != nil || x == nil {
		f.T.Fatalf("Seal(%s) = %v, %v", p, x, err)
	}
	if err := f.S.CommitSeal(x); err != nil {
		f.T.Fatalf("CommitSeal(%s): %v", p, err)
	}
	return ino
}

// Link makes p, in a directory that is made if need be, another name of
// file ino.
func (f *Fixture) Link(p string, ino uint64) {
	f.T.Helper()
	parent := f.MkdirAll(path.Dir(p))
	err := f.S.Index.Update(func(tx *index.Tx) error {
		_, err := tx.LinkOwned(parent, path.Base(p), ino, owner.FlinkRules().Owner(p))
		return err
	})
	if err != nil {
		f.T.Fatalf("linking %s: %v", p, err)
	}
}

// Remove removes p, a file or an empty directory, as the collector does:
// a file that loses its last name is reaped.
func (f *Fixture) Remove(p string) {
	f.T.Helper()
	parent := f.Lookup(path.Dir(p))
	err := f.S.Index.Update(func(tx *index.Tx) error {
		n, err := tx.Remove(parent, path.Base(p))
		if err != nil || n == nil || n.Nlink > 0 {
			return err
		}
		_, err = tx.Reap(n.Ino)
		return err
	})
	if err != nil {
		f.T.Fatalf("removing %s: %v", p, err)
	}
}
