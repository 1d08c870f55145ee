package store_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/owner"
	"github.com/statefs/statefs/store"
)

// open opens the store in dir, its index checked after every commit
// (index.DB.Strict) and the whole store when the test ends
// (storetest.CheckAtEnd); the caller closes it.
func open(t *testing.T, dir string) (*store.Store, []uint64) {
	t.Helper()
	storetest.CheckAtEnd(t, dir)
	s, unsealed, err := store.Open(dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	s.Index.Strict = storetest.Strict(t)
	return s, unsealed
}

// openChunked is open with every seal of more than InlineMax bytes kept
// as chunks, for the tests of chunks themselves.
func openChunked(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, _ := open(t, dir)
	s.SetSealAs(store.AsChunks)
	return s
}

// newChunkedStore is newStore for the tests of chunks: every seal of more
// than InlineMax bytes keeps the file as chunks.
func newChunkedStore(t *testing.T) *store.Store {
	t.Helper()
	s := newStore(t)
	s.SetSealAs(store.AsChunks)
	return s
}

// newStore opens a new store in a temporary directory, closed at the end of
// the test.
func newStore(t *testing.T) *store.Store {
	t.Helper()
	s, _ := open(t, filepath.Join(t.TempDir(), "store"))
	t.Cleanup(func() { s.Close() })
	return s
}

// newFile creates a regular file called name in the root whose content is
// a new staging file, filled by write, as the fs layer creates a file;
// safe to call from any goroutine.
func newFile(s *store.Store, name string, write func(f *os.File) error) (ino, staging uint64, err error) {
	n, err := s.Index.NewInode(syscall.S_IFREG|0o644, 0, 0)
	if err != nil {
		return 0, 0, err
	}
	id, f, err := s.NewStaging()
	if err != nil {
		return 0, 0, err
	}
	werr := write(f)
	if err := errors.Join(werr, f.Close()); err != nil {
		return 0, 0, err
	}
	err = s.Index.Update(func(tx *index.Tx) error {
		if err := tx.CreateOwned(index.RootIno, name, n, owner.Owner{}); err != nil {
			return err
		}
		_, err := tx.SetStaging(n, id)
		return err
	})
	return n.Ino, id, err
}

// addFile is newFile for a test, which it fails on an error.
func addFile(t *testing.T, s *store.Store, name string, write func(f *os.File) error) (ino, staging uint64) {
	t.Helper()
	ino, staging, err := newFile(s, name, write)
	if err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
	return ino, staging
}

// addContent is addFile for content written from offset 0.
func addContent(t *testing.T, s *store.Store, name string, content []byte) (ino, staging uint64) {
	t.Helper()
	return addFile(t, s, name, func(f *os.File) error { _, err := f.Write(content); return err })
}

// seal seals inode ino and commits it, and returns its manifest as the
// index now has it.
func seal(t *testing.T, s *store.Store, ino uint64) *manifest.Manifest {
	t.Helper()
	x, err := s.PrepareSeal(ino)
	if err != nil {
		t.Fatalf("Seal(%d): %v", ino, err)
	}
	if x == nil {
		t.Fatalf("Seal(%d) found no staging content", ino)
	}
	if err := s.CommitSeal(x); err != nil {
		t.Fatalf("CommitSeal(%d): %v", ino, err)
	}
	return sealedManifest(t, s, ino)
}

func sealedManifest(t *testing.T, s *store.Store, ino uint64) *manifest.Manifest {
	t.Helper()
	var m *manifest.Manifest
	err := s.Index.View(func(tx *index.Tx) (err error) { m, err = tx.Manifest(ino); return err })
	if err != nil {
		t.Fatalf("Manifest(%d): %v", ino, err)
	}
	return m
}

func getInode(t *testing.T, s *store.Store, ino uint64) *index.Inode {
	t.Helper()
	var n *index.Inode
	if err := s.Index.View(func(tx *index.Tx) (err error) { n, err = tx.Inode(ino); return err }); err != nil {
		t.Fatalf("Inode(%d): %v", ino, err)
	}
	return n
}

// readAll reads the whole sealed content of ino through ReadAt, in pieces
// of an odd size so that reads straddle chunk boundaries.
func readAll(t *testing.T, s *store.Store, ino uint64, m *manifest.Manifest) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, 777_777)
	for off := int64(0); ; {
		n, err := s.ReadAt(ino, m, buf, off)
		if err != nil {
			t.Fatalf("ReadAt(%d): %v", off, err)
		}
		if n == 0 {
			return out
		}
		out = append(out, buf[:n]...)
		off += int64(n)
	}
}

// text returns n bytes that compress well.
func text(n int) []byte {
	line := []byte("key=00000042 value=checkpoint state of operator map-1, subtask 3\n")
	return bytes.Repeat(line, n/len(line)+1)[:n]
}

// chunkFiles lists the chunk files under the store's chunks directory.
func chunkFiles(t *testing.T, s *store.Store) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.Join(s.Dir, "chunks"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && !strings.HasPrefix(d.Name(), ".") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// stagingFiles lists the names of the files in the store's staging
// directory and its shards.
func stagingFiles(t *testing.T, s *store.Store) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(filepath.Join(s.Dir, "staging"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, d.Name())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func fileContent(t *testing.T, f *os.File) []byte {
	t.Helper()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<62))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fileState is what a read must not change about a file of the store.
type fileState struct {
	mode  fs.FileMode
	size  int64
	mtime int64
	sum   [32]byte
}

// snapshot records every file and directory under dir.
func snapshot(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	files := map[string]fileState{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fileState{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			st.sum = sha256.Sum256(b)
		}
		rel, _ := filepath.Rel(dir, path)
		files[rel] = st
		return nil
	})
	must(t, err)
	return files
}

// requireSameFiles fails the test for every file created, removed or
// changed between two snapshots.
func requireSameFiles(t *testing.T, what string, before, after map[string]fileState) {
	t.Helper()
	for p, b := range before {
		if a, ok := after[p]; !ok {
			t.Errorf("%s removed %s", what, p)
		} else if a != b {
			t.Errorf("%s changed %s: %+v, was %+v", what, p, a, b)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s created %s", what, p)
		}
	}
}
