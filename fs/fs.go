// Package fs is the FUSE node tree of statefs, built on go-fuse's fs
// package: one node type for every kind of inode, whose methods translate
// kernel operations into index transactions and store calls. It holds no
// storage logic of its own.
//
// The hard parts, explained once:
//
//   - Content lives in one of two places. A file that is open for writing,
//     or closed but not yet sealed, is a plain staging file in the store; it
//     is served through FUSE passthrough where the kernel offers it, so a
//     live RocksDB reads and writes it at the speed of the disk. A sealed
//     file is immutable: an object (the staging file itself, under its
//     hash) the kernel reads by passthrough too, or verified chunks or
//     inline bytes read through the daemon and kept by the kernel's page
//     cache.
//   - The kernel lets an inode be open either through passthrough or
//     through the page cache, never both at once. A staging file is opened
//     through passthrough unless handles reading sealed content are still
//     open on the inode; those then see the staging file through the daemon.
//   - Sealing runs in the background once a file has been closed for the
//     seal delay, and commits only if nobody opened or changed the file in
//     the meantime (file.gen), so close() never waits for it.
//   - Per-inode open state (file) lives in a map keyed by inode number, not
//     in the go-fuse node, because the kernel may forget a node while a seal
//     of its inode is still running.
//
// Locks, in the order they are taken (DESIGN.md, "Concurrency", has every
// path): an open's or a release's openOrder stripe; a file's mu; then FS.mu,
// FS.sealMu, the store's locks and an index transaction (DB.writeMu). Inside
// a transaction only go-fuse's node locks (reading a node's path) are
// taken. No path holds two files' mu. The holder's lock guards
// its own fields only.
package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/hold"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/owner"
	"github.com/statefs/statefs/store"
)

// Options are the behaviours a mount can tune.
type Options struct {
	// SealDelay is how long a file stays closed before it is sealed.
	SealDelay time.Duration
	// Passthrough lets the kernel read and write staging files directly.
	Passthrough bool
	// Sealers bounds how many files are sealed at once.
	Sealers int
	// Rules say who owns a path; nil means Flink's layout.
	Rules *owner.Rules
	// Hold says whether and how long removed local state is held.
	Hold hold.Options
	// OnSeal, if set, is told of each committed seal, its representation
	// and bytes, and how long it took (metrics).
	OnSeal func(x *store.PreparedSeal, took time.Duration)
	// VerifyReads serves every read of an object through the daemon,
	// verified against the object's hash, instead of by passthrough.
	VerifyReads bool
	// MaxKernelInodes bounds the inodes the kernel may hold the daemon to
	// (evict.go); 0 sets no bound.
	MaxKernelInodes int
	// Version is the daemon's version, which .statefs/status.json shows.
	Version string
	// ConnectedAt is when the connection the server serves was made, in
	// nanoseconds since the epoch (Connection.Since), under a keeper: only
	// a reply record written since answers a request the kernel sends
	// again. 0: no keeper; no request is ever sent again, and none records
	// its reply.
	ConnectedAt int64
}

// DefaultCacheTimeout is how long the kernel may answer lookups and stats
// in the executor's tree from its caches by default. statefs is the only
// writer of its namespace: the kernel sees every change made through the
// mount, and statefs tells it of every change it makes itself (collector,
// holder, restore, seal, unseal), so the timeout bounds only a change
// neither knows of. The views under .statefs change with the index and keep
// viewTimeout.
const DefaultCacheTimeout = time.Hour

// FS is the state one mount shares between its nodes.
type FS struct {
	store *store.Store
	opts  Options
	rules *owner.Rules

	// mu guards files (and each file's refs), kernelKnows, latecomers,
	// sweepLatecomersAt, nameless, evicting and evictAgain. It is taken
	// after a file's mu (reap), never before one, and only go-fuse's node
	// locks are taken while it is held.
	mu                sync.Mutex
	files             map[uint64]*file
	kernelKnows       map[uint64]*gofs.Inode // inodes the kernel holds a node for
	nameless          map[uint64]struct{}    // of those, the ones with no name left, for their FORGET to reap
	latecomers        map[uint64][]latecomer // nodes lookups made beside known ones (kernelnodes.go)
	sweepLatecomersAt int                    // how many latecomers call for a sweep
	evicting          bool                   // an eviction is under way (evict.go)
	evictAgain        bool                   // and a lookup took the count past the bound meanwhile

	// sealMu guards sealTimers and closing closed against new timers. It
	// is taken after a file's mu (a truncate or a failed commit schedules
	// a seal), and nothing is taken while it is held.
	sealMu     sync.Mutex
	sealTimers map[uint64]*time.Timer
	sealers    chan struct{}
	sealing    sync.WaitGroup
	closed     atomic.Bool

	holds *hold.Holder // nil unless deletes are held

	// objectsMu guards objectUsers, and orders the opening of an object by
	// its name against adopt's detaching of that name. It is taken after a
	// file's mu, and nothing is taken while it is held.
	objectsMu   sync.Mutex
	objectUsers map[cas.Hash]int // files that have each object open

	// requestsMu guards requests: the unique ids of the mutating requests
	// being served, by their cancel channel (replies.go). It is a leaf.
	requestsMu sync.Mutex
	requests   map[<-chan struct{}]uint64
}

// New makes the filesystem over an open store and returns its root node.
// unsealed lists the inodes whose staging content waits to be sealed.
func New(s *store.Store, opts Options, unsealed []uint64) (*FS, gofs.InodeEmbedder) {
	if opts.Sealers <= 0 {
		opts.Sealers = 1
	}
	if opts.Rules == nil {
		opts.Rules = owner.FlinkRules()
	}
	f := &FS{store: s, opts: opts, rules: opts.Rules, files: map[uint64]*file{}, objectUsers: map[cas.Hash]int{}, kernelKnows: map[uint64]*gofs.Inode{}, latecomers: map[uint64][]latecomer{}, nameless: map[uint64]struct{}{},
		sealTimers: map[uint64]*time.Timer{}, sealers: make(chan struct{}, opts.Sealers), requests: map[<-chan struct{}]uint64{}}
	for _, ino := range unsealed {
		f.scheduleSeal(ino)
	}
	if opts.Hold.Enabled {
		f.holds = hold.Start(s, holdNamespace{f}, opts.Hold)
	}
	return f, &node{fs: f}
}

// Shutdown stops scheduling seals and waits for the ones running. Content
// left in staging is sealed after the next mount.
func (f *FS) Shutdown() {
	f.holds.Stop()
	f.sealMu.Lock()
	f.closed.Store(true)
	for _, t := range f.sealTimers {
		if t.Stop() {
			f.sealing.Done()
		}
	}
	f.sealMu.Unlock()
	f.sealing.Wait()
}

// MountOptions are the go-fuse options statefs mounts with; the kernel
// caches names, their absence and attributes for cacheTimeout.
func MountOptions(allowOther bool, cacheTimeout time.Duration, debug bool) *gofs.Options {
	return &gofs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:        allowOther,
			FsName:            "statefs",
			Name:              "statefs",
			DirectMountStrict: true,
			// The kernel checks permissions from the modes we report.
			Options:  []string{"default_permissions"},
			MaxWrite: 1 << 20,
			// With HANDLE_KILLPRIV_V2 the kernel marks inodes without
			// setuid bits S_NOSEC instead of asking for security.capability
			// before every write; setuid bits are still cleared, by a setattr
			// the kernel sends (see applyAttr).
			ExtraCapabilities: fuse.CAP_HANDLE_KILLPRIV_V2,
			MaxReadAhead:      1 << 20,
			// Every read statefs answers is bytes in memory (verified
			// sealed content, or a staging file's bytes): go-fuse's splice
			// path only stages the reply header in a pipe and throws it away.
			DisableSplice: true,
			Debug:         debug,
		},
		EntryTimeout:    &cacheTimeout,
		AttrTimeout:     &cacheTimeout,
		NegativeTimeout: &cacheTimeout,
		RootStableAttr:  &gofs.StableAttr{Ino: index.RootIno},
		NullPermissions: true,
		// The kernel's node id of an inode is its number in the index
		// (the views' numbers are above every one the index hands out), so
		// that a server taking over the connection knows every node id the
		// kernel holds without being told (resume.go).
		ExternalNodeID: true,
	}
}

// errno maps an error from the layers below to the errno the caller gets
// (DESIGN invariant 7). Anything unexpected is logged and becomes EIO.
func errno(err error) syscall.Errno {
	var e syscall.Errno
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		return e
	case errors.Is(err, index.ErrNotFound):
		return syscall.ENOENT
	case errors.Is(err, index.ErrExists):
		return syscall.EEXIST
	case errors.Is(err, index.ErrNotEmpty):
		return syscall.ENOTEMPTY
	case errors.Is(err, index.ErrNotDir):
		return syscall.ENOTDIR
	case errors.Is(err, index.ErrIsDir):
		return syscall.EISDIR
	case errors.Is(err, index.ErrInvalid):
		return syscall.EINVAL
	case errors.Is(err, cas.ErrCorrupt), errors.Is(err, cas.ErrNotFound), errors.Is(err, manifest.ErrCorrupt):
		return syscall.EIO
	}
	slog.Error("unexpected error", "err", err)
	return syscall.EIO
}

// caller is the uid and gid of the process behind a request.
func caller(ctx context.Context) (uint32, uint32) {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Uid, c.Gid
	}
	return 0, 0
}

// SetReadAhead sets how far the kernel reads ahead of a sequential reader
// of the mount at mnt, in bytes. FUSE mounts start with the kernel's
// default of 128 KiB, which keeps one small request in flight at a time
// and leaves a reader of sealed content waiting for each in turn (the
// restore workload of make bench measures it). The kernel keeps it per
// mount, in the mount's backing device info.
func SetReadAhead(mnt string, bytes uint64) error {
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil {
		return err
	}
	path := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	return os.WriteFile(path, []byte(strconv.FormatUint(bytes>>10, 10)), 0)
}
