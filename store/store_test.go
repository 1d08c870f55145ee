package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/internal/testbytes"
	"github.com/statefs/statefs/store"
)

func TestOpenNewStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, pending := open(t, dir)
	defer s.Close()
	if len(pending) != 0 {
		t.Errorf("new store has pending inodes %v", pending)
	}
	b, err := os.ReadFile(filepath.Join(dir, "FORMAT"))
	if err != nil {
		t.Fatalf("new store has no FORMAT: %v", err)
	}
	if got, want := strings.TrimSpace(string(b)), "statefs-store "+strconv.Itoa(store.FormatVersion); got != want {
		t.Errorf("FORMAT = %q, want %q", got, want)
	}
	for _, sub := range []string{"index", "chunks", "staging"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
			t.Errorf("new store has no %s directory: %v", sub, err)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("store directory mode %v, %v: it holds every user's data, so only its owner may enter", fi.Mode(), err)
	}
}

func TestOpenEmptyExistingDirectory(t *testing.T) {
	dir := t.TempDir()
	s, _ := open(t, dir)
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, "FORMAT")); err != nil {
		t.Errorf("store in an empty directory has no FORMAT: %v", err)
	}
}

func TestOpenNeedsParent(t *testing.T) {
	if s, _, err := store.Open(filepath.Join(t.TempDir(), "missing", "store")); err == nil {
		s.Close()
		t.Error("Open created a store whose parent does not exist")
	}
}

func TestOpenTwiceIsInUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, _ := open(t, dir)
	s2, _, err := store.Open(dir)
	if err == nil {
		s2.Close()
		s.Close()
		t.Fatal("a second Open of a store in use succeeded")
	}
	if !errors.Is(err, store.ErrInUse) {
		t.Errorf("second Open = %v, want ErrInUse", err)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Errorf("ErrInUse message %q does not name the holder, pid %d", err, os.Getpid())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = open(t, dir)
	s.Close()
}

func TestOpenRefusesForeignDirectories(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup prepares dir, which exists and holds a closed store if
		// store is set.
		store  bool
		setup  func(dir string) error
		errHas string
	}{
		{
			name: "FORMAT of a newer version", store: true,
			setup: func(dir string) error {
				return os.WriteFile(filepath.Join(dir, "FORMAT"), []byte("statefs-store 4\n"), 0o600)
			},
			errHas: "format version 4",
		},
		{
			name: "FORMAT of version 0", store: true,
			setup: func(dir string) error {
				return os.WriteFile(filepath.Join(dir, "FORMAT"), []byte("statefs-store 0\n"), 0o600)
			},
			errHas: "version 0",
		},
		{
			name: "FORMAT of something else", store: true,
			setup:  func(dir string) error { return os.WriteFile(filepath.Join(dir, "FORMAT"), []byte("ext4\n"), 0o600) },
			errHas: "not a statefs store",
		},
		{
			name:   "a non-empty directory without FORMAT",
			setup:  func(dir string) error { return os.WriteFile(filepath.Join(dir, "precious"), []byte("data"), 0o600) },
			errHas: "not empty",
		},
		{
			name:   "a directory holding only an empty directory",
			setup:  func(dir string) error { return os.Mkdir(filepath.Join(dir, "sub"), 0o700) },
			errHas: "not empty",
		},
		{
			name: "a store whose FORMAT was lost", store: true,
			setup:  func(dir string) error { return os.Remove(filepath.Join(dir, "FORMAT")) },
			errHas: "not empty",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storetest.LeaveDamaged(t, "the store's FORMAT is damaged on purpose")
			dir := filepath.Join(t.TempDir(), "store")
			if tc.store {
				s, _ := open(t, dir)
				addContent(t, s, "f", []byte("hello"))
				s.Close()
			} else if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tc.setup(dir); err != nil {
				t.Fatal(err)
			}
			// Make a change of a modification time visible.
			time.Sleep(10 * time.Millisecond)
			before := snapshot(t, dir)
			s, _, err := store.Open(dir)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("Open = %q, want a message with %q", err, tc.errHas)
			}
			requireSameFiles(t, "a refused Open", before, snapshot(t, dir))
		})
	}
}

// A shard of the staging, chunk or object directory that is a symlink is
// refused: files are made and removed in there, never through a symlink to
// outside the store. Opening finds it in its parent's listing.
func TestOpenRefusesAShardThatIsASymlink(t *testing.T) {
	for _, shard := range []string{"staging/05", "chunks/ab", "objects/ff"} {
		t.Run(shard, func(t *testing.T) {
			storetest.LeaveDamaged(t, "a shard is a symlink on purpose")
			dir := filepath.Join(t.TempDir(), "store")
			s, _ := open(t, dir)
			s.Close()
			p := filepath.Join(dir, shard)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(t.TempDir(), p); err != nil {
				t.Fatal(err)
			}
			s, _, err := store.Open(dir)
			if err == nil {
				s.Close()
				t.Fatalf("Open served a store whose %s is a symlink", shard)
			}
			if !strings.Contains(err.Error(), "is not a directory") {
				t.Errorf("Open = %q, want \"is not a directory\"", err)
			}
		})
	}
}

// The temporary files a crashed process left among the chunks and the
// objects are removed once the store is open, in the background: Close
// waits for that.
func TestOpenRemovesTempsACrashLeft(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, _ := open(t, dir)
	s.Close()
	temps := []string{filepath.Join(dir, "chunks", "00", ".tmp-dead-1"), filepath.Join(dir, "objects", "ff", ".tmp-dead-2")}
	for _, p := range temps {
		if err := os.WriteFile(p, []byte("torn"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, _ = open(t, dir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range temps {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there after an Open and Close (%v)", p, err)
		}
	}
}

func TestOpenRecovers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, _ := open(t, dir)

	// kept: a file still being written; its staging file is referenced.
	kept, keptID := addContent(t, s, "kept", []byte("open for writing"))
	// stray: a staging file created but never made any inode's content
	// (a crash between NewStaging and the index commit).
	strayID, f, err := s.NewStaging()
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("stray"))
	f.Close()
	// foreign: a file nobody could have named.
	if err := os.WriteFile(filepath.Join(dir, "staging", "not-a-staging-file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// orphan: unlinked while open, with staging content.
	orphan, orphanID := addContent(t, s, "orphan", []byte("unlinked while open"))
	// sealedOrphan: unlinked while open, with sealed content in chunks.
	sealedOrphan, _ := addContent(t, s, "sealed-orphan", testbytes.Random(1<<20, 1))
	m := seal(t, s, sealedOrphan)
	err = s.Index.Update(func(tx *index.Tx) error {
		for _, name := range []string{"orphan", "sealed-orphan"} {
			if _, err := tx.Unlink(index.RootIno, name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The daemon dies here with both orphans open.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, pending := open(t, dir)
	defer s.Close()
	if !slices.Equal(pending, []uint64{kept}) {
		t.Errorf("pending = %v, want [%d] (the file with staging content)", pending, kept)
	}
	if got, want := stagingFiles(t, s), []string{filepath.Base(s.StagingPath(keptID))}; !slices.Equal(got, want) {
		t.Errorf("staging files after recovery = %q, want %q", got, want)
	}
	for _, id := range []uint64{strayID, orphanID} {
		if _, err := os.Stat(s.StagingPath(id)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("staging file %d survived recovery: %v", id, err)
		}
	}
	if b, err := os.ReadFile(s.StagingPath(keptID)); err != nil || string(b) != "open for writing" {
		t.Errorf("kept staging file = %q, %v", b, err)
	}
	err = s.Index.View(func(tx *index.Tx) error {
		for _, ino := range []uint64{orphan, sealedOrphan} {
			if _, err := tx.Inode(ino); !errors.Is(err, index.ErrNotFound) {
				t.Errorf("orphan %d after recovery: %v, want reaped", ino, err)
			}
		}
		if o, err := tx.Orphans(); err != nil || len(o) != 0 {
			t.Errorf("Orphans after recovery = %v, %v; want none", o, err)
		}
		for _, h := range m.Chunks() {
			if n, err := tx.ChunkRefs(h); err != nil || n != 0 {
				t.Errorf("chunk %s of the reaped orphan has %d references (%v), want 0", h, n, err)
			}
		}
		if n, err := tx.CountStaging(); err != nil || n != 1 {
			t.Errorf("CountStaging = %d, %v; want 1", n, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := getInode(t, s, kept); n.Staging != keptID {
		t.Errorf("kept inode's staging = %d, want %d", n.Staging, keptID)
	}

	// Sealing a pending file after recovery works as before the crash.
	if m := seal(t, s, kept); string(m.Inline) != "open for writing" {
		t.Errorf("sealed pending file = %+v", m)
	}
	if files := stagingFiles(t, s); len(files) != 0 {
		t.Errorf("staging files after sealing = %q, want none", files)
	}
}

// A store written before staging files had shards keeps its unsealed
// content: Open moves each staging file into its shard.
func TestOpenMovesFlatStagingIntoShards(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, _ := open(t, dir)
	ino, id := addContent(t, s, "old", []byte("written by an older statefs"))
	shardPath := s.StagingPath(id)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	flat := filepath.Join(dir, "staging", filepath.Base(shardPath))
	if err := os.Rename(shardPath, flat); err != nil {
		t.Fatal(err)
	}

	s, pending := open(t, dir)
	defer s.Close()
	if !slices.Equal(pending, []uint64{ino}) {
		t.Errorf("pending = %v, want [%d]", pending, ino)
	}
	if b, err := os.ReadFile(shardPath); err != nil || string(b) != "written by an older statefs" {
		t.Errorf("staging file in its shard: %q, %v", b, err)
	}
	if _, err := os.Stat(flat); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the flat staging file is still there: %v", err)
	}
	if got := stagingFiles(t, s); !slices.Equal(got, []string{filepath.Base(shardPath)}) {
		t.Errorf("staging files = %q", got)
	}
}
