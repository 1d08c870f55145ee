// Package hold is the held-deletes policy (statefs mount --hold-deletes).
// Flink removes an allocation's local state when its slot is freed, and
// whole local-state roots when the TaskManager shuts down; on a persistent
// disk that throws away state a restarted TaskManager could use. With
// deletes held, a removal in a job's local state (allocation level or
// deeper) whose job is not known to be gone is answered as done but moves
// the entry, by rename, to the same path in the attic's pending directory
// (index.Tx.MakePending): MakesPending decides that, inside the removal's transaction.
//
// Flink removes a tree file by file, so at each unlink it is not yet known
// whether a checkpoint is being pruned (constantly, never held) or a
// subtask, job or allocation is going. The Holder's decision waits until
// no removal has come for the hold window: a pending directory of subtask,
// job or allocation level whose path no longer exists in the tree is held
// whole, as one entry of the held directory; everything else pending (the
// pruned checkpoints) is removed for good.
//
// A held tree goes when its job's state is collected (it keeps its owners,
// so the collector finds it through the job roots, and the holder drops
// the tree it empties; the directories above the job's state are the
// executor's, whose TaskManager may run on), when it is older than
// the hold TTL, or, oldest first, when the store's disk has less free
// space than the floor. statefs restore moves it back by rename.
//
// The package decides; the filesystem it is given (Namespace) removes, so
// that the kernel's view follows.
package hold

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/crashpoint"
	"github.com/statefs/statefs/owner"
	"github.com/statefs/statefs/store"
)

// Options configure held deletes.
type Options struct {
	Enabled bool
	// Window is how long removals must have stopped before pending ones
	// are decided.
	Window time.Duration
	// TTL is how long a tree stays held at most; 0 keeps it until its job
	// is collected or space runs short.
	TTL time.Duration
	// MinFree is the fraction of the store's disk kept free: below it, held
	// trees go, oldest first.
	MinFree float64
}

// HeldWhole reports whether a directory at level l is one whose removal holds
// it: a subtask, a job in an allocation, or an allocation.
func HeldWhole(l owner.Level) bool {
	return l == owner.LevelAllocation || l == owner.LevelJobInAllocation || l == owner.LevelSubtask
}

// MakesPending reports whether removing name from directory dir, as rmdir (isDir)
// or unlink, is held back: name is of the kind the call removes, it is in
// a job's local state (o, from its path), and the job is not gone. The
// owner is the name's, from its path: a file with other names (an SST that
// a checkpoint shares with its live database) belongs here to the tree
// being removed, whoever else names it.
func MakesPending(tx *index.Tx, dir uint64, name string, o owner.Owner, isDir bool) (bool, error) {
	d, err := tx.Lookup(dir, name)
	if err != nil || (d.Mode&syscall.S_IFMT == syscall.S_IFDIR) != isDir {
		return false, err // the removal itself gives the error
	}
	if o.Job == "" || o.Level < owner.LevelAllocation {
		return false, nil
	}
	j, err := tx.Job(o.Job)
	if errors.Is(err, index.ErrNotFound) {
		return true, nil
	}
	return err == nil && !j.Gone(), err
}

// Namespace is what the Holder needs of the filesystem: removals that keep
// the kernel's view of the tree right.
type Namespace interface {
	// Remove takes name out of directory dir, as the collector does.
	Remove(dir uint64, name string) (orphan bool, err error)
	// LostName is told of inode n, which lost a name in one of the
	// Holder's transactions: if that was its last, it is deleted unless it
	// is open or the kernel knows it; otherwise the kernel's attributes of
	// it (its link count) are dropped.
	LostName(n *index.Inode)
	// HeldGone tells the kernel that held tree id is gone from
	// .statefs/held/.
	HeldGone(id string)
}

// Holder runs the hold decisions in the background.
type Holder struct {
	store *store.Store
	ns    Namespace
	opts  Options
	stop  chan struct{}
	done  chan struct{}

	// mu guards the three fields below; nothing is taken while it is held.
	mu          sync.Mutex
	undecided   bool      // removals wait in the pending directory
	firstUndone time.Time // when the oldest of them came
	lastPending time.Time // when the newest came
}

// Start starts deciding what removals of s, served by ns, hold; what an
// earlier run left pending is decided one window from now.
func Start(s *store.Store, ns Namespace, opts Options) *Holder {
	if opts.Window <= 0 {
		opts.Window = 5 * time.Second
	}
	now := time.Now()
	h := &Holder{store: s, ns: ns, opts: opts, stop: make(chan struct{}), done: make(chan struct{}),
		undecided: true, firstUndone: now, lastPending: now}
	go h.run()
	return h
}

// NotePending tells h that a removal was made pending just now; a nil Holder
// ignores it.
func (h *Holder) NotePending() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if !h.undecided {
		h.undecided, h.firstUndone = true, now
	}
	h.lastPending = now
}

// Stop ends the background decisions and waits for a pass under way; a
// nil Holder has none.
func (h *Holder) Stop() {
	if h == nil {
		return
	}
	close(h.stop)
	<-h.done
}

func (h *Holder) run() {
	defer close(h.done)
	t := time.NewTicker(max(h.opts.Window/4, 100*time.Millisecond))
	defer t.Stop()
	// A pass that fails (a full disk, a damaged record) is tried again
	// after a wait that doubles up to a minute, and logged once per try.
	var backoff time.Duration
	var retryAt time.Time
	for {
		select {
		case <-h.stop:
			return
		case now := <-t.C:
			if now.Before(retryAt) {
				continue
			}
		}
		if err := h.pass(); err != nil {
			backoff = min(max(2*backoff, time.Second), time.Minute)
			retryAt = time.Now().Add(backoff)
			slog.Error("deciding held deletes failed; trying again later", "err", err, "retry_in", backoff)
			continue
		}
		backoff = 0
	}
}

// pass decides pending removals once none came for the window (or they
// kept coming for ten windows), then drops the held trees whose time is up.
func (h *Holder) pass() error {
	h.mu.Lock()
	now := time.Now()
	due := h.undecided && (now.Sub(h.lastPending) >= h.opts.Window || now.Sub(h.firstUndone) >= 10*h.opts.Window)
	h.mu.Unlock()
	if due {
		if err := h.decide(now.Add(-h.opts.Window)); err != nil {
			return err
		}
		h.mu.Lock()
		// What came meanwhile, or too late for this pass, waits for the next.
		h.undecided = h.lastPending.After(now.Add(-h.opts.Window))
		h.firstUndone = now
		h.mu.Unlock()
	}
	return h.dropExpired(now)
}

// decide goes through the pending directory: trees whose removal holds
// them are held, and whatever else was made pending before cutoff is removed.
func (h *Holder) decide(cutoff time.Time) error {
	var pending *index.Inode
	err := h.store.Index.View(func(tx *index.Tx) (err error) {
		pending, err = tx.Attic(index.AtticPending, false)
		return err
	})
	if errors.Is(err, index.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return h.decideDir(pending.Ino, "", cutoff.UnixNano())
}

func (h *Holder) decideDir(dir uint64, path string, cutoff int64) error {
	entries, err := h.readDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := e.Name
		if path != "" {
			p = path + "/" + e.Name
		}
		if e.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			held, err := h.holdIfGone(dir, e.Name, p)
			if err != nil {
				return fmt.Errorf("holding %s: %w", p, err)
			}
			if held {
				continue
			}
			if err := h.decideDir(e.Ino, p, cutoff); err != nil {
				return err
			}
		}
		if err := h.removePending(dir, e.Name, cutoff); err != nil {
			return fmt.Errorf("removing pending %s: %w", p, err)
		}
	}
	return nil
}

// holdIfGone holds pending directory name in dir, at path in the tree, if
// it is of a level whose removal holds it and the tree no longer has it.
func (h *Holder) holdIfGone(dir uint64, name, path string) (bool, error) {
	held := false
	var hold *index.Hold
	err := h.store.Index.Update(func(tx *index.Tx) error {
		d, err := tx.Lookup(dir, name)
		if err != nil {
			return err
		}
		n, err := tx.Inode(d.Ino)
		if err != nil {
			return err
		}
		o, err := tx.Owner(n.Owner)
		if err != nil || !HeldWhole(o.Level) {
			return err
		}
		if empty, err := tx.IsEmpty(n.Ino); err != nil || empty {
			return err // nothing to hold
		}
		if live, err := tx.Resolve(path); err == nil && live.IsDir() {
			return nil // still in the tree: only some of it went
		}
		id, err := h.newHoldID(tx, name)
		if err != nil {
			return err
		}
		hold = &index.Hold{ID: id, Path: path, At: index.Now()}
		held = true
		return tx.HoldPending(dir, name, hold)
	})
	if held && err == nil {
		crashpoint.Hit(crashpoint.HoldHeld)
		slog.Info("holding removed state", "hold", hold.ID, "path", hold.Path, "jobs", hold.Jobs,
			"files", hold.Files, "bytes", hold.Bytes)
	}
	return held, err
}

// newHoldID names a hold after when it was made and the directory held,
// so that ids sort by age: 20261130T051700Z-aid_<id>.
// An index that cannot say whether an id is taken fails the hold, which
// the next pass tries again.
func (h *Holder) newHoldID(tx *index.Tx, name string) (string, error) {
	base := time.Now().UTC().Format("20060102T150405Z") + "-" + name
	id := base
	for i := 2; ; i++ {
		switch _, err := tx.Hold(id); {
		case errors.Is(err, index.ErrNotFound):
			return id, nil
		case err != nil:
			return "", err
		}
		id = fmt.Sprintf("%s-%d", base, i)
	}
}

// removePending removes name from pending directory dir for good: a file
// made pending before cutoff (nanoseconds), a directory once empty. A file is
// judged by when its name was made pending, not by its inode's ctime, which its
// other names move (another pending name of it removed, a new checkpoint
// linking it).
func (h *Holder) removePending(dir uint64, name string, cutoff int64) error {
	var victim *index.Inode
	err := h.store.Index.Update(func(tx *index.Tx) error {
		d, err := tx.Lookup(dir, name)
		if err != nil {
			return err
		}
		if d.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			if empty, err := tx.IsEmpty(d.Ino); err != nil || !empty {
				return err
			}
		} else if d.Born >= cutoff {
			return nil
		}
		victim, err = tx.Remove(dir, name)
		return err
	})
	if errors.Is(err, index.ErrNotFound) {
		return nil
	}
	if err == nil {
		crashpoint.Hit(crashpoint.HoldPendingRemoved)
		h.ns.LostName(victim)
	}
	return err
}

// dropExpired drops held trees that are empty (their job was collected),
// older than the TTL, or, oldest first, in the way of the free-space floor.
func (h *Holder) dropExpired(now time.Time) error {
	var holds []*index.Hold
	err := h.store.Index.View(func(tx *index.Tx) (err error) {
		holds, err = tx.Holds()
		return err
	})
	if err != nil {
		return err
	}
	var kept []*index.Hold
	for _, hd := range holds {
		reason := hd.Dropping // a drop a crash or an error cut short goes on
		empty, err := h.isEmpty(hd.Ino)
		switch {
		case err != nil:
			return err
		case reason != "":
		case empty:
			reason = "empty: its state was collected"
		case h.opts.TTL > 0 && now.Sub(time.Unix(0, hd.At)) >= h.opts.TTL:
			reason = "older than the hold TTL " + h.opts.TTL.String()
		}
		if reason == "" {
			kept = append(kept, hd)
			continue
		}
		if err := h.Drop(hd.ID, reason); err != nil {
			return err
		}
	}
	for len(kept) > 0 && h.opts.MinFree > 0 {
		st, err := h.store.Statfs()
		if err != nil {
			return err
		}
		free := float64(st.Bavail) / float64(max(st.Blocks, 1))
		if free >= h.opts.MinFree {
			return nil
		}
		if err := h.Drop(kept[0].ID, fmt.Sprintf("the store's disk is %.1f%% free, under the floor of %.1f%%", 100*free, 100*h.opts.MinFree)); err != nil {
			return err
		}
		kept = kept[1:]
		if _, err := h.store.Sweep(); err != nil {
			return err
		}
	}
	return nil
}

// Drop removes held tree id and its record for good. The record says
// so first, so that what is left after a crash is never restored as whole.
func (h *Holder) Drop(id, reason string) error {
	var hold *index.Hold
	var held *index.Inode
	err := h.store.Index.Update(func(tx *index.Tx) (err error) {
		if hold, err = tx.Hold(id); err != nil {
			return err
		}
		if held, err = tx.Attic(index.AtticHeld, false); err != nil {
			return err
		}
		if hold.Dropping == "" {
			hold.Dropping = reason
			return tx.PutHold(hold)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("hold %s: %w", id, err)
	}
	crashpoint.Hit(crashpoint.HoldDropping)
	if err := h.removeBelow(hold.Ino); err != nil {
		return fmt.Errorf("dropping hold %s: %w", id, err)
	}
	err = h.store.Index.Update(func(tx *index.Tx) error {
		if err := tx.Rmdir(held.Ino, id); err != nil && !errors.Is(err, index.ErrNotFound) {
			return err
		}
		return tx.DeleteHold(id)
	})
	if err == nil {
		h.ns.HeldGone(id)
		slog.Info("dropped held state", "hold", id, "path", hold.Path, "why", reason)
	}
	return err
}

// removeBelow removes everything in directory dir, bottom up, one name per
// transaction.
func (h *Holder) removeBelow(dir uint64) error {
	entries, err := h.readDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			if err := h.removeBelow(e.Ino); err != nil {
				return err
			}
		}
		if _, err := h.ns.Remove(dir, e.Name); err != nil && !errors.Is(err, index.ErrNotFound) {
			return err
		}
	}
	return nil
}

func (h *Holder) readDir(dir uint64) ([]index.Dirent, error) {
	var entries []index.Dirent
	err := h.store.Index.View(func(tx *index.Tx) error {
		return tx.ReadDir(dir, func(d index.Dirent) bool { entries = append(entries, d); return true })
	})
	return entries, err
}

func (h *Holder) isEmpty(dir uint64) (bool, error) {
	var empty bool
	err := h.store.Index.View(func(tx *index.Tx) (err error) {
		empty, err = tx.IsEmpty(dir)
		return err
	})
	return empty, err
}
