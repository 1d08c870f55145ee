package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/manifest"
)

// Staging files hold the content of files that are open for writing or not
// yet sealed. They are named by a number the index hands out, never after
// the caller's path (DESIGN invariant 6).

func (s *Store) stagingDir() string { return filepath.Join(s.Dir, "staging") }

// StagingPath is the path of staging file id.
func (s *Store) StagingPath(id uint64) string {
	return filepath.Join(s.stagingDir(), fmt.Sprintf("%016x", id))
}

// OpenStaging opens staging file id for reading and writing.
func (s *Store) OpenStaging(id uint64) (*os.File, error) {
	return os.OpenFile(s.StagingPath(id), os.O_RDWR, 0)
}

// NewStaging creates an empty staging file and returns its id and the file
// open for reading and writing; the caller makes an inode refer to it.
func (s *Store) NewStaging() (uint64, *os.File, error) {
	id, err := s.Index.NewStagingID()
	if err != nil {
		return 0, nil, err
	}
	f, err := os.OpenFile(s.StagingPath(id), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, nil, fmt.Errorf("creating staging file: %w", err)
	}
	return id, f, nil
}

// RemoveStaging deletes staging file id; a missing file is not an error.
func (s *Store) RemoveStaging(id uint64) {
	if id == 0 {
		return
	}
	if err := os.Remove(s.StagingPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		slog.Error("removing staging file", "id", strconv.FormatUint(id, 16), "err", err)
	}
}

// Materialize copies the sealed content of inode n into a new staging file
// of the given size (the content is cut or zero-extended to it), so that it
// can be written again, and returns the file's id and the open file. The
// caller makes the inode refer to it (index.Tx.SetStaging).
func (s *Store) Materialize(n *index.Inode, size uint64) (uint64, *os.File, error) {
	var m *manifest.Manifest
	err := s.Index.View(func(tx *index.Tx) (err error) {
		m, err = tx.Manifest(n.Ino)
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	id, f, err := s.NewStaging()
	if err != nil {
		return 0, nil, err
	}
	fail := func(err error) (uint64, *os.File, error) {
		f.Close()
		os.Remove(f.Name())
		return 0, nil, fmt.Errorf("materializing inode %d: %w", n.Ino, err)
	}
	if err := f.Truncate(int64(size)); err != nil {
		return fail(err)
	}
	if len(m.Inline) > 0 {
		if _, err := f.WriteAt(m.Inline[:min(uint64(len(m.Inline)), size)], 0); err != nil {
			return fail(err)
		}
	}
	var buf []byte
	for _, e := range m.Extents {
		if e.Off >= size {
			break
		}
		if buf, err = s.Chunks.Get(e.Hash, buf); err != nil {
			return fail(err)
		}
		if _, err := f.WriteAt(buf[:min(uint64(len(buf)), size-e.Off)], int64(e.Off)); err != nil {
			return fail(err)
		}
	}
	return id, f, nil
}

// SyncStagingDir makes the names of the staging files durable.
func (s *Store) SyncStagingDir() error {
	d, err := os.Open(s.stagingDir())
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// StagingStat describes staging file id.
func (s *Store) StagingStat(id uint64) (os.FileInfo, error) {
	return os.Stat(s.StagingPath(id))
}
