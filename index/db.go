// Package index is statefs's metadata, kept in badger: inodes, directory
// entries, file content (staging references and manifests), chunk
// references, extended attributes and orphans; the owner of every inode
// and the roots of each job's and executor's state; job and executor
// records with their verdicts; and the attic, where held deletes keep
// removed trees (keys.go lists every kind of record). Every change is one
// transaction, so after a crash the index shows the state of some commit
// (DESIGN invariant 2); badger's write-ahead log lives in shared memory
// maps and survives the daemon's SIGKILL, and Sync makes it survive power
// loss too.
//
// Writers are serialized by the DB (one Update at a time): the namespace
// rules (link counts, rename cycles) read and write many keys, and a single
// writer keeps them simple and conflict-free; readers run concurrently.
package index

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/statefs/statefs/cas"
)

// FormatVersion is the layout of keys and values this package writes.
// Version 2 added when a name was made to directory entries; a version 1
// index is upgraded on open by rewriting its version alone, since its
// entries read as made before any verdict (Dirent.Born 0). An older
// statefs refuses a version 2 index in one line, as this one refuses a
// newer version.
const FormatVersion = 2

// formatV1 is the oldest index version this package upgrades.
const formatV1 = 1

// RootIno is the inode number of the root directory.
const RootIno = 1

// The errors a namespace operation can fail with; the fs layer maps them
// to errno.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
	ErrNotEmpty = errors.New("directory not empty")
	ErrNotDir   = errors.New("not a directory")
	ErrIsDir    = errors.New("is a directory")
	ErrInvalid  = errors.New("invalid operation")
	ErrStale    = errors.New("content changed meanwhile")
	ErrFormat   = errors.New("incompatible index format")
	ErrDetached = errors.New("in the attic, outside the tree")
	// ErrTooLarge is a transaction larger than the index commits at once
	// (badger's limit, about 15% of a memtable: some 20,000 records); none
	// of it is committed.
	ErrTooLarge = errors.New("too large for one index transaction")
	// ErrReadOnly is a change asked of an index opened read-only.
	ErrReadOnly = errors.New("index opened read-only")
)

// DB is an open index.
type DB struct {
	bdb      *badger.DB
	readOnly bool
	// scratch is the copy a read-only DB replays a killed daemon's log in.
	scratch string
	// stagingDropped removes a staging file whose reference a commit
	// dropped (OnStagingDropped).
	stagingDropped func(id uint64)
	// objectDropped frees an object whose last reference a commit dropped
	// (OnObjectDropped).
	objectDropped func(h cas.Hash)
	// notes lets NoteWrite skip a record's update within a second of the
	// last (note.go).
	notes notes
	// writeMu makes Update the single writer. Callers may hold a file's mu
	// in fs, the store's sweeping lock or control's collector lock; inside
	// a transaction fs takes only go-fuse's node locks (to read a node's
	// path), and the index its notes' lock and its xattr set's (both
	// leaves). A transaction's function never calls Update.
	writeMu sync.Mutex
	inos    *badger.Sequence
	staging *badger.Sequence
	owners  *badger.Sequence

	// Strict, set by tests, makes every committed Update run Check and
	// call Strict with what it found, if anything, so that a transaction
	// that leaves the index inconsistent fails the test that made it, at
	// the commit that did (bbolt's StrictMode, which panics instead).
	Strict func(problems []Problem, err error)

	// commits counts committed updates; synced is the count the last Sync
	// covered, so that a Sync with nothing new to flush costs nothing (a
	// WAL appended and fsync'd in a loop changes no index entry).
	commits atomic.Uint64
	synced  atomic.Uint64

	xattrs xattrInos

	// replyFloor is a reply record key's unique id below which every
	// record was deleted: where pruneReplies starts its walk. replyOldest
	// is when the first record from there was made, 0 for unknown.
	replyFloor  atomic.Uint64
	replyOldest atomic.Int64

	// listings caches directories' entries for Listing; nil when the
	// index is read-only.
	listings *listings
}

// memTableEnv names a test knob: badger's memtable size in MiB, instead
// of 16. The crash campaign sets it to 1 (make soak
// SOAK_INDEX_MEMTABLE_MIB=1) so that badger flushes memtables and compacts
// tables all the time under its kills.
const memTableEnv = "STATEFS_INDEX_MEMTABLE_MIB"

// memTableSize is badger's memtable size: 16 MiB, or what memTableEnv says.
func memTableSize() (int64, error) {
	v := os.Getenv(memTableEnv)
	if v == "" {
		return 16 << 20, nil
	}
	mib, err := strconv.Atoi(v)
	if err != nil || mib < 1 || mib > 1024 {
		return 0, fmt.Errorf("%s=%q: want a whole number of MiB from 1 to 1024", memTableEnv, v)
	}
	return int64(mib) << 20, nil
}

// Open opens or creates the index in dir.
func Open(dir string) (*DB, error) {
	opts, err := options(dir)
	if err != nil {
		return nil, err
	}
	bdb, err := openBadger(opts)
	if err != nil {
		return nil, err
	}
	db := &DB{bdb: bdb, listings: newListings(listingBudget)}
	if err := db.init(); err != nil {
		bdb.Close()
		return nil, err
	}
	if db.inos, err = bdb.GetSequence(seqKey("ino"), 1024); err != nil {
		bdb.Close()
		return nil, err
	}
	if db.staging, err = bdb.GetSequence(seqKey("staging"), 1024); err != nil {
		db.inos.Release()
		bdb.Close()
		return nil, err
	}
	if db.owners, err = bdb.GetSequence(seqKey("owner"), 64); err != nil {
		db.inos.Release()
		db.staging.Release()
		bdb.Close()
		return nil, err
	}
	if err := db.xattrs.load(db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// OpenReadOnly opens the index in dir for reading and changes none of its
// files: Update fails with ErrReadOnly, and badger flushes, compacts and
// truncates nothing. An index whose daemon was killed still has a log that
// badger must replay, and replaying writes: when badger cannot open the
// index read-only, it is copied to a scratch directory under os.TempDir()
// and opened there, so the reader sees every commit the log holds; Close
// removes the copy. A version 1 index is read as it is.
func OpenReadOnly(dir string) (*DB, error) {
	opts, err := options(dir)
	if err != nil {
		return nil, err
	}
	db := &DB{readOnly: true}
	db.bdb, err = openBadger(opts.WithReadOnly(true))
	if err != nil {
		// A log to replay (badger.ErrTruncateNeeded, wrapped without %w),
		// or a memtable file a kill left unsized, which badger would size:
		// whatever badger would have to write, it writes in a copy.
		readOnlyErr := err
		if db.scratch, err = copyDir(dir); err == nil {
			opts.Dir, opts.ValueDir = db.scratch, db.scratch
			db.bdb, err = openBadger(opts.WithNumCompactors(0))
		}
		if err != nil {
			db.removeScratch()
			return nil, fmt.Errorf("%w (and in a scratch copy: %v)", readOnlyErr, err)
		}
	}
	if err := db.View(func(tx *Tx) error {
		v, err := tx.get(versionKey())
		if err != nil {
			return fmt.Errorf("%w: index has no version: %w", ErrFormat, err)
		}
		if len(v) != 1 || (v[0] != FormatVersion && v[0] != formatV1) {
			return fmt.Errorf("%w: index has version %v, this statefs reads %d", ErrFormat, v, FormatVersion)
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// copyDir copies the files of badger directory dir, but its lock, into a
// new scratch directory and returns its path.
func copyDir(dir string) (scratch string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	if scratch, err = os.MkdirTemp("", "statefs-index-"); err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Name() == "LOCK" || !e.Type().IsRegular() {
			continue
		}
		if err = copyFile(filepath.Join(dir, e.Name()), filepath.Join(scratch, e.Name())); err != nil {
			os.RemoveAll(scratch)
			return "", err
		}
	}
	return scratch, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func (db *DB) removeScratch() {
	if db.scratch != "" {
		os.RemoveAll(db.scratch)
	}
}

// options are badger's options for the index in dir.
func options(dir string) (badger.Options, error) {
	memTable, err := memTableSize()
	if err != nil {
		return badger.Options{}, err
	}
	return badger.DefaultOptions(dir).
		WithLogger(badgerLogger{}).
		WithSyncWrites(false).
		WithDetectConflicts(false).
		WithNumVersionsToKeep(1).
		WithMemTableSize(memTable).
		WithNumMemtables(3).
		WithBlockCacheSize(32 << 20).
		WithIndexCacheSize(16 << 20).
		WithValueLogFileSize(64 << 20).
		WithValueThreshold(64 << 10).
		WithNumCompactors(2).
		WithBaseTableSize(1 << 20).
		WithCompactL0OnClose(false), nil
}

func openBadger(opts badger.Options) (*badger.DB, error) {
	bdb, err := badger.Open(opts)
	if err != nil && !opts.ReadOnly && strings.Contains(err.Error(), z.NewFile.Error()) {
		// A kill between creating a memtable file and sizing it leaves an
		// empty .mem file; badger's first open sizes it and then fails, the
		// second succeeds (badger issue 2207). The file held no commits.
		bdb, err = badger.Open(opts)
	}
	if err != nil {
		return nil, fmt.Errorf("opening index %s: %w", opts.Dir, err)
	}
	return bdb, nil
}

// init writes the format version and the root directory of a new index, or
// checks the version of an existing one.
func (db *DB) init() error {
	return db.Update(func(tx *Tx) error {
		v, err := tx.get(versionKey())
		switch {
		case errors.Is(err, ErrNotFound):
			if err := tx.set(versionKey(), []byte{FormatVersion}); err != nil {
				return err
			}
			now := Now()
			return tx.PutInode(&Inode{Ino: RootIno, Mode: modeDir | 0o755, Nlink: 2, Size: dirSize,
				Atime: now, Mtime: now, Ctime: now, Parent: RootIno})
		case err != nil:
			return err
		case len(v) == 1 && v[0] == formatV1:
			return tx.set(versionKey(), []byte{FormatVersion})
		case len(v) != 1 || v[0] != FormatVersion:
			return fmt.Errorf("%w: index has version %v, this statefs reads %d", ErrFormat, v, FormatVersion)
		}
		return nil
	})
}

// Close releases the sequences and closes badger.
func (db *DB) Close() error {
	var err error
	if !db.readOnly {
		err = errors.Join(db.inos.Release(), db.staging.Release(), db.owners.Release())
	}
	err = errors.Join(err, db.bdb.Close())
	db.removeScratch()
	return err
}

// Sync makes every committed transaction durable against power loss.
func (db *DB) Sync() error {
	n := db.commits.Load()
	if db.synced.Load() >= n {
		return nil
	}
	if err := db.bdb.Sync(); err != nil {
		return err
	}
	for {
		old := db.synced.Load()
		if old >= n || db.synced.CompareAndSwap(old, n) {
			return nil
		}
	}
}

// NewIno allocates an inode number never handed out before.
func (db *DB) NewIno() (uint64, error) {
	if db.readOnly {
		return 0, ErrReadOnly
	}
	n, err := db.inos.Next()
	return n + RootIno + 1, err
}

// NewInode returns a new inode of mode owned by uid and gid, its number
// allocated (NewIno) and its times now, for Tx.CreateOwned.
func (db *DB) NewInode(mode, uid, gid uint32) (*Inode, error) {
	ino, err := db.NewIno()
	if err != nil {
		return nil, err
	}
	now := Now()
	return &Inode{Ino: ino, Mode: mode, Uid: uid, Gid: gid, Atime: now, Mtime: now, Ctime: now, Btime: now}, nil
}

// NewStagingID allocates a staging file id never handed out before.
func (db *DB) NewStagingID() (uint64, error) {
	if db.readOnly {
		return 0, ErrReadOnly
	}
	n, err := db.staging.Next()
	return n + 1, err
}

// View runs fn in a read-only transaction.
func (db *DB) View(fn func(*Tx) error) error {
	return db.bdb.View(func(txn *badger.Txn) error { return fn(&Tx{txn: txn, db: db}) })
}

// OnStagingDropped makes fn run, with the staging id, after every commit
// that dropped an inode's reference to a staging file (Tx.SetStaging,
// Tx.Seal, Tx.Reap): the store removes the file there. Set it before the
// first Update.
func (db *DB) OnStagingDropped(fn func(id uint64)) { db.stagingDropped = fn }

// OnObjectDropped makes fn run, with the object's hash, after every commit
// that dropped the last reference to an object: the store frees it there,
// unless a seal has found it meanwhile. Set it before the first Update.
func (db *DB) OnObjectDropped(fn func(h cas.Hash)) { db.objectDropped = fn }

// Update runs fn in a read-write transaction and commits it if fn returns
// nil, then runs the functions the transaction registered with OnCommit.
// Updates run one at a time. On an index opened read-only it fails with
// ErrReadOnly and runs nothing.
func (db *DB) Update(fn func(*Tx) error) error {
	if db.readOnly {
		return ErrReadOnly
	}
	tx, err := db.commit(fn)
	if err != nil {
		return err
	}
	for _, f := range tx.onCommit {
		f()
	}
	return nil
}

func (db *DB) commit(fn func(*Tx) error) (*Tx, error) {
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	txn := db.bdb.NewTransaction(true)
	defer txn.Discard()
	tx := &Tx{txn: txn, db: db}
	if err := fn(tx); err != nil {
		if errors.Is(err, badger.ErrTxnTooBig) {
			return nil, fmt.Errorf("%w: %w", ErrTooLarge, err)
		}
		return nil, err
	}
	if err := txn.Commit(); err != nil {
		// What badger kept of it is unknown: read directories anew.
		db.listings.reset()
		if errors.Is(err, badger.ErrTxnTooBig) {
			err = fmt.Errorf("%w: %w", ErrTooLarge, err)
		}
		return nil, fmt.Errorf("committing index transaction: %w", err)
	}
	db.commits.Add(1)
	db.listings.apply(tx.dirents)
	if db.Strict != nil {
		// writeMu is held: Check sees the index as this commit left it.
		problems, _, err := db.Check()
		problems = append(problems, db.checkListings()...)
		if len(problems) > 0 || err != nil {
			db.Strict(problems, err)
		}
	}
	return tx, nil
}

// RunValueLogGC reclaims the space that deleted or replaced values left in
// the value log (manifests over 64 KiB, of files of about 1,500 chunks or
// more): a file at a time, while badger finds one at least half garbage.
func (db *DB) RunValueLogGC() error {
	for range 64 {
		err := db.bdb.RunValueLogGC(0.5)
		if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrRejected) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// badgerLogger sends badger's warnings and errors to slog and drops its
// chatter.
type badgerLogger struct{}

func (badgerLogger) Errorf(f string, a ...any)   { slog.Error(fmt.Sprintf("index: "+f, a...)) }
func (badgerLogger) Warningf(f string, a ...any) { slog.Warn(fmt.Sprintf("index: "+f, a...)) }
func (badgerLogger) Infof(string, ...any)        {}
func (badgerLogger) Debugf(string, ...any)       {}
