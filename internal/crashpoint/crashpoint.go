// Package crashpoint makes the daemon die at named points of its work, so
// that the crash tests (test/crashpoint_test.go) reach every interesting
// moment of a crash deterministically instead of by chance.
//
// It is off unless the environment variable STATEFS_CRASH_AT names a point
// when the process starts:
//
//	STATEFS_CRASH_AT=<point>[:<n>]
//
// The process then SIGKILLs itself the n-th time (default: the first) it
// reaches that point: no deferred function runs, nothing is flushed or
// closed, exactly as when the kernel or an operator kills it. Right before,
// it writes one line to stderr, "crashpoint: <point> (hit <n>): killing
// the daemon", which the tests look for. An unknown point is refused at
// start, so that a typo cannot make a test wait for a crash that never
// comes.
//
// A point can also be made to stall instead, to widen a race window that a
// test needs to fall into every time:
//
//	STATEFS_PAUSE_AT=<point>:<duration>
//
// makes every hit of the point sleep for the duration (time.ParseDuration).
//
// Disabled, Hit costs two nil checks of variables written once, before
// main: it sits on the seal, sweep and release paths.
//
// The points, and what a crash there leaves behind:
//
//	seal-chunk-stored     store: a chunk of a seal is durable in chunks/, its manifest
//	                      not committed (n counts chunks: a crash mid-file)
//	seal-object-hashed    store: a seal that keeps the file whole hashed the staging
//	                      file, not yet synced
//	seal-object-synced    store: that staging file's bytes are durable, not yet linked
//	                      as an object
//	seal-object-linked    store: the staging file is linked as its object (or the
//	                      object was there), the manifest not committed: the staging
//	                      file and the object share an inode
//	seal-before-commit    store: every chunk of a seal stored (or, inline, read; or
//	                      its object linked), the manifest not committed; the file is
//	                      still in staging
//	seal-committed        store: the manifest committed, the staging file not yet deleted
//	sweep-chunk-removed   store: a sweep removed a chunk file (n counts removals)
//	sweep-before-forget   store: a sweep removed every chunk, the index still lists them
//	                      as garbage
//	recover-reaped        store: recovery at mount reaped the orphaned inodes, their
//	                      staging files not yet deleted
//	store-close           store: a clean shutdown unmounted and stopped sealing, the
//	                      index not yet closed (badger's memtable not flushed)
//	rename-before-commit  fs: rename(2) and the reowning of what moved are applied in
//	                      the transaction, not committed
//	rename-committed      fs: rename(2) committed; an inode it replaced not yet reaped
//	reap-committed        fs: an inode that lost its last name and its last user is
//	                      reaped in the index, its staging file not yet deleted
//	unseal-before-commit  fs: a sealed file opened for writing was copied into a new
//	                      staging file, the index does not refer to it yet
//	handle-released       fs: the last handle on a file released it and scheduled its
//	                      seal; go-fuse has not yet dropped the kernel's passthrough
//	                      backing file of that handle
//	reply-committed       fs: a kernel request that changes the namespace, an inode's
//	                      attributes or its extended attributes committed with its
//	                      reply record; its answer not yet given (n counts them)
//	hold-held             fs: a hold decision committed: a removed tree is held
//	hold-pending-removed  fs: the transaction that removes a made pending entry that is not
//	                      held, if it is due, committed (n counts them: a crash
//	                      mid-decision)
//	hold-dropping         fs: a held tree is marked as dropping, nothing of it removed
//	gc-inode-removed      gc: the collector removed a name of a gone job's state (n
//	                      counts them: a crash mid-collection)
//	gc-before-job-delete  gc: every tree of a gone job removed, its record not deleted
//
// Under a keeper (package keeper), the variables arm the connection's first
// server only: the keeper takes them from every later server's
// environment, so that a test sees one crash and the takeover after it.
// Tests that look at the store as a crash left it run the daemon without a
// keeper (--keeper=false), whose death is the end of the mount.
//
// badger flushes memtables and compacts in goroutines of its own, which no
// point reaches: only the crash campaign (test/campaign_test.go), which
// writes enough for the index to flush and compact, kills the daemon at
// random moments that may fall inside one; none is aimed at it.
package crashpoint

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// EnvVar is the environment variable that arms a crash point.
const EnvVar = "STATEFS_CRASH_AT"

// PauseEnvVar is the environment variable that makes a point stall.
const PauseEnvVar = "STATEFS_PAUSE_AT"

// The crash points; the package documentation says where each one is.
const (
	SealChunkStored    = "seal-chunk-stored"
	SealObjectHashed   = "seal-object-hashed"
	SealObjectSynced   = "seal-object-synced"
	SealObjectLinked   = "seal-object-linked"
	SealBeforeCommit   = "seal-before-commit"
	SealCommitted      = "seal-committed"
	SweepChunkRemoved  = "sweep-chunk-removed"
	SweepBeforeForget  = "sweep-before-forget"
	RecoverReaped      = "recover-reaped"
	StoreClose         = "store-close"
	RenameBeforeCommit = "rename-before-commit"
	RenameCommitted    = "rename-committed"
	ReapCommitted      = "reap-committed"
	UnsealBeforeCommit = "unseal-before-commit"
	HandleReleased     = "handle-released"
	ReplyCommitted     = "reply-committed"
	HoldHeld           = "hold-held"
	HoldPendingRemoved = "hold-pending-removed"
	HoldDropping       = "hold-dropping"
	GCInodeRemoved     = "gc-inode-removed"
	GCBeforeJobDelete  = "gc-before-job-delete"
)

// Points lists every crash point.
var Points = []string{
	SealChunkStored, SealObjectHashed, SealObjectSynced, SealObjectLinked, SealBeforeCommit, SealCommitted, SweepChunkRemoved, SweepBeforeForget,
	RecoverReaped, StoreClose, RenameBeforeCommit, RenameCommitted, ReapCommitted,
	UnsealBeforeCommit, HandleReleased, ReplyCommitted, HoldHeld, HoldPendingRemoved, HoldDropping, GCInodeRemoved,
	GCBeforeJobDelete,
}

// armed is the point STATEFS_CRASH_AT names; nil when it is not set. It is
// written only by init, so reading it needs no synchronisation.
var armed *target

type target struct {
	point string
	nth   int64
	hits  atomic.Int64
}

// paused is the point STATEFS_PAUSE_AT names; nil when it is not set.
var paused *pause

type pause struct {
	point string
	d     time.Duration
}

func init() {
	if spec := os.Getenv(EnvVar); spec != "" {
		t, err := parse(spec)
		if err != nil {
			fmt.Fprintf(os.Stderr, "statefs: %s: %v\n", EnvVar, err)
			os.Exit(2)
		}
		armed = t
	}
	if spec := os.Getenv(PauseEnvVar); spec != "" {
		p, err := parsePause(spec)
		if err != nil {
			fmt.Fprintf(os.Stderr, "statefs: %s: %v\n", PauseEnvVar, err)
			os.Exit(2)
		}
		paused = p
	}
}

// parse reads a STATEFS_CRASH_AT value: a known point, optionally followed
// by ":n" with n ≥ 1.
func parse(spec string) (*target, error) {
	point, count, hasCount := strings.Cut(spec, ":")
	if !slices.Contains(Points, point) {
		return nil, fmt.Errorf("%q names no crash point (known: %s)", point, strings.Join(Points, ", "))
	}
	t := &target{point: point, nth: 1}
	if hasCount {
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: the hit count after the colon must be a number ≥ 1", spec)
		}
		t.nth = n
	}
	return t, nil
}

// parsePause reads a STATEFS_PAUSE_AT value: a known point, a colon and a
// positive duration.
func parsePause(spec string) (*pause, error) {
	point, d, _ := strings.Cut(spec, ":")
	if !slices.Contains(Points, point) {
		return nil, fmt.Errorf("%q names no point (known: %s)", point, strings.Join(Points, ", "))
	}
	p := &pause{point: point}
	var err error
	if p.d, err = time.ParseDuration(d); err != nil || p.d <= 0 {
		return nil, fmt.Errorf("%q: the pause after the colon must be a positive duration such as 200ms", spec)
	}
	return p, nil
}

// Hit kills the process if point is the armed one and this is its n-th
// hit, or sleeps if point is the paused one; otherwise it does nothing.
func Hit(point string) {
	if paused != nil && paused.point == point {
		time.Sleep(paused.d)
	}
	if armed == nil {
		return
	}
	armed.hit(point)
}

func (t *target) hit(point string) {
	if point != t.point {
		return
	}
	n := t.hits.Add(1)
	if n != t.nth {
		return
	}
	fmt.Fprintf(os.Stderr, "crashpoint: %s (hit %d): killing the daemon\n", point, n)
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	for { // the signal is on its way; this goroutine must not go on meanwhile
		time.Sleep(time.Second)
	}
}
