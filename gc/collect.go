// Package gc decides which jobs are gone and removes their state: oracles
// (Flink's REST API, Flink HA's JobResultStore, the operator's word) give
// verdicts with evidence, and the Collector removes the state of a job
// whose combined verdict has been gone without a break for the grace
// period, and was gone again when asked right before (DESIGN invariant 4);
// then the trees of executors that no job holds any more, and the chunks
// nothing refers to. It removes through a Remover: the mounted filesystem,
// so that the kernel forgets the names, or the index of a store no daemon
// serves.
package gc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/crashpoint"
	"github.com/statefs/statefs/store"
)

// Collector removes the state of jobs confirmed gone, then sweeps the
// chunks nothing refers to any more.
//
// The safety argument (DESIGN invariant 4): a job's state is deleted only
// if the combined verdict of every oracle, the operator's word included,
// has been Gone without a break for the grace period, and is Gone again
// when asked right before the deletion; a Live answer from any oracle wins
// over every Gone, and anything in doubt is Unknown, which keeps
// everything. Only names made, and content written, before the verdict
// began are deleted, so a job id that is reused keeps its new state, links
// to old content included.
//
// The collector judges names, not inodes: it walks each job's trees from
// their roots and removes the names it finds there. A file linked from
// another owner's tree keeps that name and its content; a file whose last
// name goes is freed before the run returns unless a handle has it open
// (an orphan, reported, freed at its last close).
type Collector struct {
	Store   *store.Store
	Oracles []Oracle
	// Remover removes names; nil removes them in the index directly, which
	// is right only while no daemon serves the store.
	Remover Remover
	// Grace is how long Gone must hold before the state goes.
	Grace time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Removed, if set, is called after each inode removed (for a progress bar).
	Removed func()

	// names counts, in a dry run, the names of each file it would remove;
	// orphans what a real run removed that was still open.
	names   map[uint64]int
	orphans Orphans
}

// Candidate is one job, or one executor's tree, whose state a run removed
// (or, dry, would remove). It counts a file once however many names it
// has: Names are the names removed, files and directories; Files and Bytes
// the files whose last name went, whose content goes with them. A file
// with a name left elsewhere counts in Names only, and in Files of the run
// that removes its last name.
type Candidate struct {
	Job      index.Job  `json:"job"`
	Executor string     `json:"executor,omitempty"` // set for an executor's tree
	Verdict  JobVerdict `json:"verdict"`
	Names    int        `json:"names"`
	Files    int        `json:"files"`
	Bytes    int64      `json:"bytes"` // logical bytes of Files
	Kept     int        `json:"kept"`  // names kept: made or written after the verdict
}

// Orphans are the files a run removed that were still open: their content
// stays until their last close.
type Orphans struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"` // logical
}

// Report is what one run of the collector did.
type Report struct {
	Verdicts  []JobVerdict  `json:"verdicts"`
	Collected []Candidate   `json:"collected"`
	Orphans   Orphans       `json:"orphans"`
	Swept     store.Swept   `json:"swept"`
	Took      time.Duration `json:"took"`
}

func (c *Collector) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Run judges every job the index knows, removes the state of the
// collectable ones, and sweeps chunks. With dryRun it changes nothing but
// the recorded verdicts and reports what it would remove. A run killed at
// any point leaves a consistent index (every step is one transaction) and
// the next run picks up where it stopped.
func (c *Collector) Run(ctx context.Context, dryRun bool) (Report, error) {
	start := c.now()
	var r Report
	c.names, c.orphans = map[uint64]int{}, Orphans{}
	// Objects freed meanwhile by the executor's own removals count too.
	freedBefore, freedBytesBefore := c.Store.Freed()
	var jobs []*index.Job
	err := c.Store.Index.View(func(tx *index.Tx) (err error) {
		jobs, err = tx.Jobs()
		return err
	})
	if err != nil {
		return r, err
	}
	for _, j := range jobs {
		v, err := c.Judge(ctx, j.ID)
		if err != nil {
			return r, err
		}
		r.Verdicts = append(r.Verdicts, v)
	}
	for _, j := range jobs {
		cand, ok, err := c.collect(ctx, j.ID, dryRun)
		if err != nil {
			return r, err
		}
		if ok {
			r.Collected = append(r.Collected, cand)
		}
	}
	executors, err := c.collectExecutors(dryRun)
	if err != nil {
		return r, err
	}
	r.Collected = append(r.Collected, executors...)
	r.Orphans = c.orphans
	if r.Swept, err = c.Store.Sweep(dryRun); err != nil {
		return r, err
	}
	if dryRun {
		freed, err := c.wouldFree()
		if err != nil {
			return r, err
		}
		r.Swept.Chunks += freed.Chunks
		r.Swept.Objects += freed.Objects
		r.Swept.Bytes += freed.Bytes
	} else {
		// An object goes with the last file that is it, not in the sweep.
		objects, bytes := c.Store.Freed()
		r.Swept.Objects += objects - freedBefore
		r.Swept.Bytes += bytes - freedBytesBefore
	}
	r.Took = c.now().Sub(start)
	return r, nil
}

// Judge asks the oracles about job and records the combined verdict: its
// evidence, and since when it has held without a break.
func (c *Collector) Judge(ctx context.Context, job string) (JobVerdict, error) {
	var rec *index.Job
	err := c.Store.Index.View(func(tx *index.Tx) (err error) {
		rec, err = tx.Job(job)
		return err
	})
	if err != nil {
		return JobVerdict{}, err
	}
	v := Combine(ctx, job, append([]Oracle{operator{rec}}, c.Oracles...)...)
	err = c.Store.Index.Update(func(tx *index.Tx) error {
		j, err := tx.Job(job)
		if err != nil {
			return err
		}
		if j.Verdict != v.Verdict || j.Since == 0 {
			j.Since = v.At.UnixNano()
			// The operator's word holds from when it was said: state written
			// after it is never collected under it.
			if v.Verdict == index.VerdictGone && j.Operator == index.VerdictGone {
				j.Since = min(j.Since, j.OperatorAt)
			}
		}
		j.Verdict, j.Evidence, j.Oracle = v.Verdict, v.Evidence, v.Oracle
		j.CheckedAt = v.At.UnixNano()
		return tx.PutJob(j)
	})
	return v, err
}

// collect removes the state of job if it is collectable: Gone for the
// grace period and Gone again now.
func (c *Collector) collect(ctx context.Context, job string, dryRun bool) (Candidate, bool, error) {
	var rec *index.Job
	err := c.Store.Index.View(func(tx *index.Tx) (err error) {
		rec, err = tx.Job(job)
		return err
	})
	if err != nil {
		return Candidate{}, false, err
	}
	if !rec.Gone() || c.now().Sub(time.Unix(0, rec.Since)) < c.Grace {
		return Candidate{}, false, nil
	}
	v, err := c.Judge(ctx, job) // re-checked right before deletion
	if err != nil || v.Verdict != index.VerdictGone {
		return Candidate{}, false, err
	}
	cand := Candidate{Job: *rec, Verdict: v}
	var roots []uint64
	err = c.Store.Index.View(func(tx *index.Tx) (err error) {
		roots, err = tx.JobRoots(job)
		return err
	})
	if err != nil {
		return cand, false, err
	}
	for _, root := range roots {
		if err := c.removeTree(root, rec.Since, dryRun, &cand); err != nil {
			return cand, false, fmt.Errorf("collecting job %s: %w", job, err)
		}
	}
	if !dryRun && cand.Kept == 0 {
		crashpoint.Hit(crashpoint.GCBeforeJobDelete)
		err = c.Store.Index.Update(func(tx *index.Tx) error {
			left, err := tx.JobRoots(job)
			if err != nil || len(left) > 0 {
				return err
			}
			return tx.DeleteJob(job)
		})
	}
	return cand, true, err
}

// removeTree removes the job root ino and everything below it that was
// last changed before since (nanoseconds), bottom up; a directory that
// keeps something newer stays. Each removal is one transaction.
func (c *Collector) removeTree(ino uint64, since int64, dryRun bool, cand *Candidate) error {
	var root *index.Inode
	var name string
	var attic bool
	err := c.Store.Index.View(func(tx *index.Tx) (err error) {
		if root, err = tx.Inode(ino); err != nil {
			return err
		}
		if !root.IsDir() {
			return errors.New("only directories are job roots the collector removes")
		}
		if attic, err = tx.InAttic(root.Parent); err != nil {
			return err
		}
		name, err = tx.NameIn(root.Parent, ino)
		return err
	})
	if errors.Is(err, index.ErrNotFound) {
		return nil // removed meanwhile
	}
	if err != nil {
		return err
	}
	_, err = c.removeEntry(root.Parent, name, since, !attic, dryRun, cand)
	return err
}

// removeEntry removes name in dir (and, for a directory, its subtree) if
// its content was written and, with byName, the name made before since,
// and reports whether it is gone. In the attic names are judged by their
// content alone: the executor makes no names there, and a name's time
// there says only when held deletes moved it aside, which may follow the
// verdict (Flink clearing a gone job's slots before the verdict was
// recorded) without making it new state.
func (c *Collector) removeEntry(dir uint64, name string, since int64, byName, dryRun bool, cand *Candidate) (bool, error) {
	var d index.Dirent
	var n *index.Inode
	var children []index.Dirent
	err := c.Store.Index.View(func(tx *index.Tx) (err error) {
		if d, err = tx.Lookup(dir, name); err != nil {
			return err
		}
		if n, err = tx.Inode(d.Ino); err != nil {
			return err
		}
		if n.IsDir() {
			return tx.ReadDir(d.Ino, func(e index.Dirent) bool { children = append(children, e); return true })
		}
		return nil
	})
	if errors.Is(err, index.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	empty := true
	for _, ch := range children {
		gone, err := c.removeEntry(d.Ino, ch.Name, since, byName, dryRun, cand)
		if err != nil {
			return false, err
		}
		empty = empty && gone
	}
	written, size := c.written(n)
	if byName {
		written = max(written, d.Born)
	}
	if !empty || written >= since {
		cand.Kept++
		return false, nil
	}
	// The file's last name: in a dry run the names it would have removed
	// stand in for the removals; in a real run they are made.
	last := n.Nlink <= 1
	if dryRun && !n.IsDir() {
		c.names[n.Ino]++
		last = uint32(c.names[n.Ino]) >= n.Nlink
	}
	cand.Names++
	if last && !n.IsDir() {
		cand.Files++
		cand.Bytes += size
	}
	if dryRun {
		return true, nil
	}
	orphan, err := c.remover().Remove(dir, name)
	if err != nil && !errors.Is(err, index.ErrNotFound) {
		return false, err
	}
	if orphan {
		c.orphans.Files++
		c.orphans.Bytes += size
	}
	crashpoint.Hit(crashpoint.GCInodeRemoved)
	if c.Removed != nil {
		c.Removed()
	}
	return true, nil
}

// wouldFree is what the sweep would free once a dry run's removals were
// made, and the objects those removals would free: the chunks and objects
// whose every reference is held by files that would lose their last name.
func (c *Collector) wouldFree() (store.Swept, error) {
	var freed store.Swept
	err := c.Store.Index.View(func(tx *index.Tx) error {
		drop, dropObjects := map[cas.Hash]uint64{}, map[cas.Hash]uint64{}
		for ino, names := range c.names {
			n, err := tx.Inode(ino)
			if err != nil {
				return err
			}
			if uint32(names) < n.Nlink || n.Staging != 0 {
				continue // another name keeps it, or its content is not in chunks
			}
			m, err := tx.Manifest(ino)
			if errors.Is(err, index.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			for _, e := range m.Extents {
				drop[e.Hash]++
			}
			if m.Object != nil {
				dropObjects[*m.Object]++
			}
		}
		for h, d := range dropObjects {
			refs, err := tx.ObjectRefs(h)
			if err != nil {
				return err
			}
			if size, err := c.Store.ObjectSize(h); refs <= d && err == nil {
				freed.Objects++
				freed.Bytes += size
			}
		}
		for h, d := range drop {
			refs, err := tx.ChunkRefs(h)
			if err != nil {
				return err
			}
			if refs > d {
				continue
			}
			size, err := c.Store.ChunkSize(h)
			if err != nil {
				continue // missing: nothing on disk to free
			}
			freed.Chunks++
			freed.Bytes += size
		}
		return nil
	})
	return freed, err
}

// Remover removes one name, a file or an empty directory, from directory
// dir, each removal one transaction. A file whose last name it was goes
// with it, content and all, unless a handle has it open: it then reports
// an orphan. The daemon's filesystem is one: it also keeps the kernel's
// caches and open files right.
type Remover interface {
	Remove(dir uint64, name string) (orphan bool, err error)
}

func (c *Collector) remover() Remover {
	if c.Remover != nil {
		return c.Remover
	}
	return offline{c.Store}
}

// offline removes names straight in the index of a store no daemon serves:
// no file is open, so an inode that loses its last name goes at once.
type offline struct{ s *store.Store }

func (o offline) Remove(dir uint64, name string) (bool, error) {
	err := o.s.Index.Update(func(tx *index.Tx) error {
		left, err := tx.Remove(dir, name)
		if err != nil || left == nil || left.Nlink > 0 {
			return err
		}
		_, err = tx.Reap(left.Ino)
		return err
	})
	return false, err
}

// written is when the executor last wrote an inode, and its logical size.
// A directory counts from its creation and a file from its last content
// change: ctime and a directory's mtime move when names come and go, which
// the collector's own removals do too, so they would make a resumed run
// keep what an interrupted one began to remove. (When a name was put where
// it is, the dirent's Born, is the name's time, which no removal moves.)
func (c *Collector) written(n *index.Inode) (int64, int64) {
	t, size := n.Btime, int64(n.Size)
	if n.IsDir() {
		return t, 0
	}
	t = max(t, n.Mtime)
	if n.Staging != 0 {
		if st, err := c.Store.StagingStat(n.Staging); err == nil {
			t, size = max(t, st.ModTime().UnixNano()), st.Size()
		}
	}
	return t, size
}

// collectExecutors removes the trees (tm_<resource-id>) of executors that
// held jobs, all of them gone and collected, and that nothing has written
// for the grace period: the trees of TaskManagers whose resource id never
// comes back. What was written within the grace period stays.
func (c *Collector) collectExecutors(dryRun bool) ([]Candidate, error) {
	var executors []*index.Executor
	var done []Candidate
	cutoff := c.now().Add(-c.Grace).UnixNano()
	err := c.Store.Index.View(func(tx *index.Tx) (err error) {
		executors, err = tx.Executors()
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, e := range executors {
		ok, err := c.executorGone(e, cutoff)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		cand := Candidate{Executor: e.ID}
		var roots []uint64
		err = c.Store.Index.View(func(tx *index.Tx) (err error) {
			roots, err = tx.ExecutorRoots(e.ID)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, root := range roots {
			if err := c.removeTree(root, cutoff, dryRun, &cand); err != nil {
				return nil, fmt.Errorf("collecting executor %s: %w", e.ID, err)
			}
		}
		if !dryRun {
			err = c.Store.Index.Update(func(tx *index.Tx) error {
				left, err := tx.ExecutorRoots(e.ID)
				if err != nil || len(left) > 0 {
					return err
				}
				return tx.DeleteExecutor(e.ID)
			})
			if err != nil {
				return nil, err
			}
		}
		done = append(done, cand)
	}
	return done, nil
}

// executorGone reports whether every job executor e held has been
// collected (its record goes with its last state: a job whose id came back
// keeps its record, and so its executor's tree stays) and nothing wrote to
// the tree since cutoff.
func (c *Collector) executorGone(e *index.Executor, cutoff int64) (bool, error) {
	if len(e.Jobs) == 0 || e.LastWrite >= cutoff {
		return false, nil
	}
	collected := true
	err := c.Store.Index.View(func(tx *index.Tx) error {
		for _, id := range e.Jobs {
			_, err := tx.Job(id)
			if err == nil {
				collected = false
			} else if !errors.Is(err, index.ErrNotFound) {
				return err
			}
		}
		return nil
	})
	return collected, err
}

// operator is the operator's word about a job (statefs job gone|live) as
// one more oracle.
type operator struct{ job *index.Job }

func (o operator) Name() string { return "operator" }

func (o operator) Judge(ctx context.Context, job string) JobVerdict {
	v := JobVerdict{Job: job, Oracle: o.Name(), At: time.Now(), Evidence: "operator: nothing said"}
	if o.job == nil || o.job.Operator == index.VerdictUnknown {
		return v
	}
	v.Verdict = o.job.Operator
	v.Evidence = fmt.Sprintf("operator: statefs job %s at %s", o.job.Operator, time.Unix(0, o.job.OperatorAt).UTC().Format(time.RFC3339))
	return v
}
