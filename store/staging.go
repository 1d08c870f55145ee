package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/manifest"
)

// Staging files hold the content of files that are open for writing or not
// yet sealed. They are named by a number the index hands out, never after
// the caller's path (DESIGN invariant 6): staging/<ss>/<id>, 16 hex digits,
// in one of 256 shard directories by the id's low byte.
//
// The shards are for ext4, which gives a new file an inode in its
// directory's block group and skips the inodes freed there recently: one
// directory whose files are created and deleted at a high rate (every file
// a checkpoint or RocksDB writes passes through staging) makes each create
// scan past them, which made a create cost many times more in one
// directory than in 256. The staging directory also asks ext4 to spread
// its subdirectories over the block groups (FS_TOPDIR_FL, best effort).

const stagingShards = 256

// fsTopdirFlag is FS_TOPDIR_FL of linux/fs.h (chattr +T).
const fsTopdirFlag = 0x00020000

func (s *Store) stagingDir() string { return filepath.Join(s.Dir, "staging") }

func stagingShard(id uint64) string { return fmt.Sprintf("%02x", id%stagingShards) }

func stagingName(id uint64) string { return fmt.Sprintf("%016x", id) }

// StagingPath is the path of staging file id.
func (s *Store) StagingPath(id uint64) string {
	return filepath.Join(s.stagingDir(), stagingShard(id), stagingName(id))
}

// makeStagingShards creates the shard directories that are missing, and
// moves staging files of a store written before there were shards into
// theirs.
func (s *Store) makeStagingShards() error {
	dir := s.stagingDir()
	if d, err := os.Open(dir); err == nil {
		if flags, err := unix.IoctlGetUint32(int(d.Fd()), unix.FS_IOC_GETFLAGS); err == nil && flags&fsTopdirFlag == 0 {
			unix.IoctlSetPointerInt(int(d.Fd()), unix.FS_IOC_SETFLAGS, int(flags|fsTopdirFlag))
		}
		d.Close()
	}
	// One listing finds the shards there are (a server's start lists no
	// more than it must) and the staging files of a store from before them.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var listed [stagingShards]bool
	for _, e := range entries {
		n, err := strconv.ParseUint(e.Name(), 16, 64)
		if err != nil || n >= stagingShards || e.Name() != stagingShard(n) {
			continue
		}
		// Staging files are created in here: never through a symlink.
		if !e.IsDir() {
			return fmt.Errorf("%s is not a directory", filepath.Join(dir, e.Name()))
		}
		listed[n] = true
	}
	made := false
	for i := range stagingShards {
		if listed[i] {
			continue
		}
		shard := filepath.Join(dir, stagingShard(uint64(i)))
		err := os.Mkdir(shard, 0o700)
		if errors.Is(err, os.ErrExist) { // made since the listing
			if fi, lerr := os.Lstat(shard); lerr != nil || !fi.IsDir() {
				return fmt.Errorf("%s is not a directory", shard)
			}
		} else if err != nil {
			return err
		}
		made = made || err == nil
	}
	for _, e := range entries {
		id, err := strconv.ParseUint(e.Name(), 16, 64)
		if err != nil || !e.Type().IsRegular() || e.Name() != stagingName(id) {
			continue
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), s.StagingPath(id)); err != nil {
			return err
		}
		if err := syncDir(filepath.Dir(s.StagingPath(id))); err != nil {
			return err
		}
		made = true
	}
	if made {
		return syncDir(dir)
	}
	return nil
}

// stagingFile is one entry of a staging shard: a staging file if ok.
type stagingFile struct {
	path string
	id   uint64
	ok   bool // named after a staging id, in its shard, and a regular file
	info os.DirEntry
}

// walkStaging calls fn for every entry of every staging shard, and for
// anything else in the staging directory (never ok).
func (s *Store) walkStaging(fn func(stagingFile) error) error {
	dir := s.stagingDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		shard := e.Name()
		if n, err := strconv.ParseUint(shard, 16, 64); err != nil || !e.IsDir() || shard != stagingShard(n) {
			if err := fn(stagingFile{path: filepath.Join(dir, shard), info: e}); err != nil {
				return err
			}
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, shard))
		if err != nil {
			return err
		}
		for _, f := range files {
			id, err := strconv.ParseUint(f.Name(), 16, 64)
			sf := stagingFile{path: filepath.Join(dir, shard, f.Name()), id: id, info: f}
			sf.ok = err == nil && f.Type().IsRegular() && sf.path == s.StagingPath(id)
			if err := fn(sf); err != nil {
				return err
			}
		}
	}
	return nil
}

func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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

// Unseal copies the sealed content of inode n into a new staging file
// of the given size (the content is cut or zero-extended to it), so that it
// can be written again, and returns the file's id and the open file. The
// caller makes the inode refer to it (index.Tx.SetStaging).
func (s *Store) Unseal(n *index.Inode, size uint64) (uint64, *os.File, error) {
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
		return 0, nil, fmt.Errorf("unsealing inode %d: %w", n.Ino, err)
	}
	if err := f.Truncate(int64(size)); err != nil {
		return fail(err)
	}
	if len(m.Inline) > 0 {
		if _, err := f.WriteAt(m.Inline[:min(uint64(len(m.Inline)), size)], 0); err != nil {
			return fail(err)
		}
	}
	if m.Object != nil && size > 0 {
		if err := s.copyObject(n.Ino, m, f, size); err != nil {
			return fail(err)
		}
	}
	var buf []byte
	for _, e := range m.Extents {
		if e.Off >= size {
			break
		}
		if buf, err = s.chunks.Get(e.Hash, buf); err != nil {
			return fail(err)
		}
		if _, err := f.WriteAt(buf[:min(uint64(len(buf)), size-e.Off)], int64(e.Off)); err != nil {
			return fail(err)
		}
	}
	// The content moved, it did not change: the file keeps its times.
	times := []unix.Timespec{unix.NsecToTimespec(n.Atime), unix.NsecToTimespec(n.Mtime)}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, f.Name(), times, 0); err != nil {
		return fail(err)
	}
	return id, f, nil
}

// SyncStagingName makes the name of the open staging file f durable: it
// syncs f's shard directory.
func (s *Store) SyncStagingName(f *os.File) error {
	return syncDir(filepath.Dir(f.Name()))
}

// StagingStat describes staging file id.
func (s *Store) StagingStat(id uint64) (os.FileInfo, error) {
	return os.Stat(s.StagingPath(id))
}
