package index_test

import (
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
)

// files returns the content of every file under dir by name.
func files(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[d.Name()] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A read-only index reads what was committed, refuses changes and writes
// nothing: after a clean close, and after a kill, whose log it replays in a
// copy that Close removes.
func TestOpenReadOnly(t *testing.T) {
	dir := t.TempDir()
	storetest.CheckAtEnd(t, dir)
	db, err := index.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	committed := create(t, db, index.RootIno, "committed", 0o100644)

	// What a SIGKILL leaves: the files as they are while the daemon runs,
	// the log not yet replayed into tables.
	killed := t.TempDir()
	for name := range files(t, dir) {
		if name == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(killed, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// And the same with a stray memtable file of another size beside the
	// log, as a kill while badger makes its next one can leave.
	stray := t.TempDir()
	for name := range files(t, killed) {
		b, err := os.ReadFile(filepath.Join(killed, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stray, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(stray, "00099.mem"), make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ name, dir string }{{"closed", dir}, {"killed", killed}, {"killed, a stray memtable file", stray}} {
		t.Run(tc.name, func(t *testing.T) {
			before := files(t, tc.dir)
			scratch, _ := filepath.Glob(filepath.Join(os.TempDir(), "statefs-index-*"))
			ro, err := index.OpenReadOnly(tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			if n := inode(t, ro, committed); n.Ino != committed {
				t.Errorf("inode %d reads as %+v", committed, n)
			}
			if err := ro.Update(func(*index.Tx) error { return nil }); !errors.Is(err, index.ErrReadOnly) {
				t.Errorf("Update = %v, want ErrReadOnly", err)
			}
			if _, err := ro.NewIno(); !errors.Is(err, index.ErrReadOnly) {
				t.Errorf("NewIno = %v, want ErrReadOnly", err)
			}
			if err := ro.Close(); err != nil {
				t.Fatal(err)
			}
			if after := files(t, tc.dir); !reflect.DeepEqual(after, before) {
				t.Errorf("the read-only open changed the index's files:\nbefore %v\nafter  %v", before, after)
			}
			if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "statefs-index-*")); len(left) != len(scratch) {
				t.Errorf("scratch copies before %v, after Close %v", scratch, left)
			}
		})
	}
}
