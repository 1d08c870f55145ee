// Package store is the one directory on the persistent volume that holds
// everything statefs keeps: the index, the chunks and the staging files. It
// opens and locks that directory, recovers it after a crash, and moves
// content between staging files and chunks (Seal, Unseal, ReadAt).
// It knows inodes but not paths or the kernel.
//
// Locks: a sweep holds Store.sweeping from start to end and takes the chunk
// guard's lock (guard.go) per batch, with a read transaction of the index
// under it; a seal takes the guard's lock per chunk it pins. Neither waits
// for the other but where a seal wants a chunk a sweep is removing.
package store

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/crashpoint"
)

// FormatVersion is the on-disk layout this statefs reads and writes; it is
// written to the FORMAT file of every store it creates. Version 3 added
// whole-file objects (objects/, and manifests that are one): an older
// statefs, which would not know them, refuses it. Version 2 differs from 3
// only in having no objects, so Open upgrades it by writing FORMAT alone;
// version 1 differs from 2 in its chunk files (cas format version 1),
// which Open rewrites first.
const FormatVersion = 3

// oldestVersion is the oldest FORMAT that Open upgrades.
const oldestVersion = 1

const formatPrefix = "statefs-store "

// ErrInUse means another process holds the store.
var ErrInUse = errors.New("store is in use by another statefs process")

// Store is an open, locked store directory.
type Store struct {
	Dir     string
	Index   *index.DB
	chunks  *cas.Chunks
	objects *cas.Objects
	lock    *os.File
	// guard keeps the chunks a seal has found or stored from a sweep until
	// its commit, and objectGuard the same for objects (guard.go).
	guard, objectGuard contentGuard
	// sweeping lets one Sweep run at a time. It is held across the whole
	// sweep, so it comes before the chunk guard's lock and DB.writeMu;
	// nothing else waits for it.
	sweeping sync.Mutex
	// beforeRemove, set by tests, runs when Sweep has found chunk h still
	// unreferenced, right before it removes it.
	beforeRemove func(h cas.Hash)
	// freed counts the objects freeObject removed (Freed).
	freed struct{ objects, bytes atomic.Int64 }
	// sealAs, if set, is how every seal keeps a file (SetSealAs).
	sealAs Representation
	// space keeps the index writable on a full disk (space.go); nil for a
	// store opened for a check.
	space *spaceKeeper
	// tempsRemoved is closed once removeStaleTemps is done; nil if it never
	// started.
	tempsRemoved chan struct{}
}

// Open opens the store in dir, creating it (but not its parent) if it does
// not exist, takes its lock, and recovers it from whatever crash came
// before. It returns the inodes whose staging content waits to be sealed.
func Open(dir string) (*Store, []uint64, error) { return OpenKeeping(dir, nil) }

// OpenKeeping is Open for a server that takes over a FUSE connection
// (DESIGN.md, "The keeper"): the kernel still holds file handles on the
// inodes inUse, so recovery reaps none of them though it has no name left,
// and leaves their staging files as they are: the kernel may write to them
// itself, through passthrough.
func OpenKeeping(dir string, inUse []uint64) (*Store, []uint64, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, err
	}
	version, err := checkFormat(dir)
	if err != nil {
		return nil, nil, err
	}
	lock, err := takeLock(dir, false)
	if err != nil {
		return nil, nil, err
	}
	s := &Store{Dir: dir, lock: lock}
	releaseReserveIfFull(dir)
	if err := s.open(); err != nil {
		s.Close()
		return nil, nil, err
	}
	if version != FormatVersion {
		if err := s.upgrade(version); err != nil {
			s.Close()
			return nil, nil, fmt.Errorf("upgrading store %s to format version %d: %w", dir, FormatVersion, err)
		}
	}
	unsealed, err := s.recover(inUse)
	if err != nil {
		s.Close()
		return nil, nil, fmt.Errorf("recovering store %s: %w", dir, err)
	}
	s.keepSpace()
	s.removeStaleTemps()
	return s, unsealed, nil
}

// removeStaleTemps removes, in the background, the temporary files a
// crashed process left in chunks/ and objects/: they hold nothing anything
// refers to, and reading the 512 directories they may be in before serving
// would make a server's start, and so a takeover, as slow as the store is
// large. Close waits for it.
func (s *Store) removeStaleTemps() {
	done := make(chan struct{})
	s.tempsRemoved = done
	go func() {
		defer close(done)
		for _, dir := range []interface{ RemoveStaleTemps() error }{s.chunks, s.objects} {
			if err := dir.RemoveStaleTemps(); err != nil {
				slog.Warn("could not remove the temporary files a crash left; the next start tries again", "err", err)
				return
			}
		}
	}()
}

func (s *Store) open() error {
	for _, sub := range []string{"index", "chunks", "objects", "staging"} {
		path := filepath.Join(s.Dir, sub)
		if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		// Recovery removes what it does not know in these directories: a
		// symlink would take that outside the store.
		if fi, err := os.Lstat(path); err != nil {
			return err
		} else if !fi.IsDir() {
			return fmt.Errorf("store %s: %s is not a directory (%v): refusing to follow it out of the store", s.Dir, path, fi.Mode().Type())
		}
	}
	var err error
	if err := s.makeStagingShards(); err != nil {
		return fmt.Errorf("staging directory: %w", err)
	}
	if s.Index, err = index.Open(filepath.Join(s.Dir, "index")); err != nil {
		return err
	}
	// A staging file goes once the index no longer refers to it.
	s.Index.OnStagingDropped(s.RemoveStaging)
	if s.chunks, err = cas.Open(filepath.Join(s.Dir, "chunks")); err != nil {
		return err
	}
	if s.objects, err = cas.OpenObjects(filepath.Join(s.Dir, "objects")); err != nil {
		return err
	}
	s.guard.refs = (*index.Tx).ChunkRefs
	s.objectGuard.refs = (*index.Tx).ObjectRefs
	// An object goes once no file is it.
	s.Index.OnObjectDropped(s.freeObject)
	return nil
}

// checkFormat creates the store directory and its FORMAT file if the
// directory is new or empty, and otherwise refuses anything that is not a
// store of this FormatVersion or the one before, before touching it. It
// returns the store's version.
func checkFormat(dir string) (int, error) {
	path := filepath.Join(dir, "FORMAT")
	b, err := os.ReadFile(path)
	if err == nil {
		v, ok := strings.CutPrefix(string(bytes.TrimSpace(b)), formatPrefix)
		if !ok {
			return 0, fmt.Errorf("%s is not a statefs store: %s is %q", dir, path, b)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < oldestVersion || n > FormatVersion {
			return 0, fmt.Errorf("store %s has format version %s; this statefs reads versions %d to %d", dir, v, oldestVersion, FormatVersion)
		}
		return n, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("reading store format: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return 0, fmt.Errorf("creating store: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	if len(entries) > 0 {
		return 0, fmt.Errorf("%s is not empty and not a statefs store (no FORMAT file)", dir)
	}
	return FormatVersion, writeFileSync(path, formatLine())
}

func formatLine() []byte { return []byte(fmt.Sprintf("%s%d\n", formatPrefix, FormatVersion)) }

// upgrade brings a store of an older version to FormatVersion: a version
// 1 store's chunks are rewritten in the current chunk format first; then
// the new version is recorded in FORMAT. A crash before that leaves FORMAT
// as it was, and the next Open finishes the upgrade.
func (s *Store) upgrade(version int) error {
	if version == 1 {
		slog.Info("upgrading the store's chunk files to the current format", "store", s.Dir)
		upgraded, damaged, err := s.chunks.Upgrade()
		if err != nil {
			return err
		}
		if damaged > 0 {
			slog.Warn("damaged chunk files left as they are; statefs fsck --verify lists them", "damaged", damaged)
		}
		slog.Info("upgraded the store's chunk files", "store", s.Dir, "chunks_rewritten", upgraded)
	}
	path := filepath.Join(s.Dir, "FORMAT")
	tmp := path + ".new"
	os.Remove(tmp)
	if err := writeFileSync(tmp, formatLine()); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if err := syncDir(s.Dir); err != nil {
		return err
	}
	slog.Info("upgraded the store", "store", s.Dir, "from", version, "format", FormatVersion)
	return nil
}

// takeLock holds a flock on dir/LOCK for the life of the process: an
// exclusive one, so that two daemons never serve one store, or with shared
// set a shared one, which excludes a daemon but not other readers and
// writes nothing.
func takeLock(dir string, shared bool) (*os.File, error) {
	path := filepath.Join(dir, "LOCK")
	// O_NOFOLLOW: the lock file is truncated and written, never through a
	// symlink to outside the store.
	flag, how := os.O_RDWR|os.O_CREATE, syscall.LOCK_EX
	if shared {
		flag, how = os.O_RDONLY, syscall.LOCK_SH
	}
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking store: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (held by pid %s)", ErrInUse, dir, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("locking store: %w", err)
	}
	if !shared {
		f.Truncate(0)
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// Close closes the index and releases the lock.
func (s *Store) Close() error {
	if s.tempsRemoved != nil {
		<-s.tempsRemoved
	}
	s.stopKeepingSpace()
	var err error
	if s.Index != nil {
		crashpoint.Hit(crashpoint.StoreClose)
		err = s.Index.Close()
	}
	if s.lock != nil {
		s.lock.Close()
	}
	return err
}

// Sync makes every committed index change durable against power loss.
func (s *Store) Sync() error { return s.Index.Sync() }

// Statfs reports the space of the disk that holds the store.
func (s *Store) Statfs() (syscall.Statfs_t, error) {
	var st syscall.Statfs_t
	err := syscall.Statfs(s.Dir, &st)
	return st, err
}

// recover reaps inodes orphaned by a crash, removes staging files no inode
// refers to, gives each staging file that shares its inode with an object
// an inode of its own, and lists the inodes whose staging content waits
// for sealing: the inodes inUse excepted from all three.
func (s *Store) recover(inUse []uint64) ([]uint64, error) {
	keep := make(map[uint64]bool, len(inUse))
	for _, ino := range inUse {
		keep[ino] = true
	}
	err := s.Index.Update(func(tx *index.Tx) error {
		orphans, err := tx.Orphans()
		if err != nil {
			return err
		}
		// Before the reaped orphans' staging files go.
		tx.OnCommit(func() { crashpoint.Hit(crashpoint.RecoverReaped) })
		for _, ino := range orphans {
			if keep[ino] {
				continue // reaped once the kernel forgets it
			}
			if _, err := tx.Reap(ino); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var unsealed []uint64
	err = s.Index.View(func(tx *index.Tx) error {
		return s.walkStaging(func(f stagingFile) error {
			if f.ok {
				ino, err := tx.StagingInode(f.id)
				if err == nil {
					if keep[ino] {
						return nil // sealed once the kernel releases it
					}
					unsealed = append(unsealed, ino)
					// A seal that linked it as an object and did not
					// commit leaves it sharing the object's inode.
					return s.unshare(f.id)
				}
				if !errors.Is(err, index.ErrNotFound) {
					return err
				}
			}
			slog.Info("removing unreferenced staging file", "file", f.path)
			return os.RemoveAll(f.path)
		})
	})
	return unsealed, err
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
