package store_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/testbytes"
)

// Unseal copies a sealed file back into a staging file, cut or
// zero-extended to the size asked for, as open(O_RDWR) or truncate(2) of a
// sealed file needs.
func TestUnseal(t *testing.T) {
	big := testbytes.Random(5<<20, 30)
	files := []struct {
		name    string
		write   func(f *os.File) error
		content []byte
	}{
		{"empty", func(*os.File) error { return nil }, nil},
		{"inline", func(f *os.File) error { _, err := f.Write([]byte("hello world")); return err }, []byte("hello world")},
		{"5 MiB", func(f *os.File) error { _, err := f.Write(big); return err }, big},
		{"sparse", sparse, sparseContent()},
	}
	s := newStore(t)
	for _, file := range files {
		ino, _ := addFile(t, s, file.name, file.write)
		seal(t, s, ino)
		size := uint64(len(file.content))
		for _, tc := range []struct {
			name string
			size uint64
		}{
			{"same size", size},
			{"cut to zero", 0},
			{"cut to one byte", min(size, 1)},
			{"cut in the middle", size / 2},
			{"cut just before the end", max(size, 1) - 1},
			{"extended by a byte", size + 1},
			{"extended by 1 MiB", size + 1<<20},
		} {
			t.Run(file.name+"/"+tc.name, func(t *testing.T) {
				n := getInode(t, s, ino)
				id, f, err := s.Unseal(n, tc.size)
				if err != nil {
					t.Fatalf("Unseal: %v", err)
				}
				defer s.RemoveStaging(id)
				defer f.Close()
				want := make([]byte, tc.size)
				copy(want, file.content)
				got := fileContent(t, f)
				if !bytes.Equal(got, want) {
					t.Errorf("unsealed %d bytes, want %d (equal prefix: %v)", len(got), len(want), bytes.HasPrefix(want, got))
				}
				if f.Name() != s.StagingPath(id) {
					t.Errorf("Unseal opened %s for staging id %d (%s)", f.Name(), id, s.StagingPath(id))
				}
				if _, err := f.WriteAt([]byte("w"), 0); err != nil {
					t.Errorf("unsealed file is not writable: %v", err)
				}
			})
		}
	}
}

// A unsealed file made the inode's content and sealed again reads as
// the same file: the round trip staging -> chunks -> staging -> chunks loses
// nothing, and the chunk references follow the content.
func TestUnsealAndSealAgain(t *testing.T) {
	s := newStore(t)
	content := testbytes.Random(3<<20, 31)
	ino, _ := addContent(t, s, "f", content)
	m1 := seal(t, s, ino)

	id, f, err := s.Unseal(getInode(t, s, ino), uint64(len(content)))
	if err != nil {
		t.Fatal(err)
	}
	extra := []byte("appended after reopening")
	if _, err := f.WriteAt(extra, int64(len(content))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = s.Index.Update(func(tx *index.Tx) error {
		n, err := tx.Inode(ino)
		if err != nil {
			return err
		}
		_, err = tx.SetStaging(n, id)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Index.View(func(tx *index.Tx) error {
		for _, h := range m1.Chunks() {
			if n, err := tx.ChunkRefs(h); err != nil || n != 0 {
				t.Errorf("old chunk %s keeps %d references (%v) after SetStaging", h, n, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	m2 := seal(t, s, ino)
	want := append(bytes.Clone(content), extra...)
	if got := readAll(t, s, ino, m2); !bytes.Equal(got, want) {
		t.Errorf("file after unseal, append and seal: %d bytes, want %d", len(got), len(want))
	}
}
