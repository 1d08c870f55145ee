package storetest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/store"
)

// The one consistency check of the tests, as bbolt's internal/btesting
// has it: every test that builds a store (or a bare index) checks it when
// the test ends, with the check `statefs fsck --verify` runs (store.Check,
// which runs index.DB.Check), and a test that fails it keeps a copy of the
// store outside the test's temporary directories and names it in the
// failure. Leftovers that the store removes by itself (store.IsError) are
// not failures.

// checked holds the directories whose check at the end of a test is
// registered, keyed by test and directory, so that a test that opens a
// store again registers one check.
var checked sync.Map // endKey -> struct{}

type endKey struct {
	t   testing.TB
	dir string
}

// damaged holds why each test that damages its stores on purpose does it
// (LeaveDamaged), by the test's name; its subtests are covered too. Its
// entries stay: a test's cleanups cannot tell which of them runs last.
var damaged sync.Map // test name -> string

// damagedWhy is why t, or a test t is a subtest of, damages its stores.
func damagedWhy(t testing.TB) (string, bool) {
	name := t.Name()
	for {
		if why, ok := damaged.Load(name); ok {
			return why.(string), true
		}
		i := strings.LastIndex(name, "/")
		if i < 0 {
			return "", false
		}
		name = name[:i]
	}
}

// CheckAtEnd makes the end of t check the store in dir, or the index if
// dir holds only an index, once every cleanup registered after this call
// has run: call it before registering the close of what you open. A store
// still open then fails the check (store.ErrInUse). Calls after the first
// for the same test and directory add nothing. Opening a small store
// read-only and checking it takes some 50 ms, most of it badger's open.
func CheckAtEnd(t testing.TB, dir string) {
	t.Helper()
	key := endKey{t, mustAbs(dir)}
	if _, registered := checked.LoadOrStore(key, struct{}{}); registered {
		return
	}
	t.Cleanup(func() {
		checked.Delete(key)
		if why, ok := damagedWhy(t); ok {
			t.Logf("not checking %s at the end: the test damages it (%s)", dir, why)
			return
		}
		ps, err := checkClosed(dir)
		report(t, dir, ps, err)
	})
}

// LeaveDamaged turns off the check at the end of t and of its subtests:
// the test damages its store on purpose, as why says, and its own checks
// say what the damage must look like.
func LeaveDamaged(t testing.TB, why string) {
	damaged.Store(t.Name(), why)
}

// Check checks the open store s now, as the end of the test would (with
// nothing else using it), and fails t with what it finds.
func Check(t testing.TB, s *store.Store) {
	t.Helper()
	ps, err := s.Check(true)
	report(t, s.Dir, errorsOnly(ps), err)
}

// Check is storetest.Check of the fixture's store.
func (f *Fixture) Check() {
	f.T.Helper()
	Check(f.T, f.S)
}

// checkClosed opens the store, or the bare index, in dir read-only and
// checks it; a directory that holds neither (the test failed before it
// made one) has nothing to check.
func checkClosed(dir string) ([]index.Problem, error) {
	if _, err := os.Stat(filepath.Join(dir, "FORMAT")); err != nil {
		if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
			return nil, nil
		}
		db, err := index.OpenReadOnly(dir)
		if err != nil {
			return nil, fmt.Errorf("opening the index: %w", err)
		}
		defer db.Close()
		ps, _, err := db.Check()
		return ps, err
	}
	s, err := store.OpenReadOnly(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	defer s.Close()
	ps, err := s.Check(true)
	return errorsOnly(ps), err
}

func errorsOnly(ps []index.Problem) []index.Problem {
	var errs []index.Problem
	for _, p := range ps {
		if store.IsError(p) {
			errs = append(errs, p)
		}
	}
	return errs
}

// report fails t if the check found problems or could not run, keeping a
// copy of dir for the post-mortem.
func report(t testing.TB, dir string, ps []index.Problem, err error) {
	t.Helper()
	if err == nil && len(ps) == 0 {
		return
	}
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "\n\t%s", p)
	}
	if err != nil {
		fmt.Fprintf(&b, "\n\t%v", err)
	}
	kept, cerr := keep(t, dir)
	if cerr != nil {
		kept = fmt.Sprintf("(no copy kept: %v)", cerr)
	}
	t.Errorf("the check at the end of the test found %s inconsistent; copy kept in %s:%s", dir, kept, b.String())
}

// keep copies dir, but its sockets and its free-space reserve files
// (store.ReserveNames: zeros, 64 MiB each), into a new directory under
// os.TempDir() that outlives the test, and returns its path.
func keep(t testing.TB, dir string) (string, error) {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	to, err := os.MkdirTemp("", "statefs-inconsistent-"+name+"-")
	if err != nil {
		return "", err
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		dst := filepath.Join(to, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, dst)
		case d.Type().IsRegular() && !slices.Contains(store.ReserveNames[:], d.Name()):
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, b, 0o644)
		}
		return nil
	})
	return to, err
}

func mustAbs(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}
