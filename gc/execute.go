package gc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/crashpoint"
	"github.com/statefs/statefs/store"
)

// Execute carries out plan p: it records p's verdicts, removes each tree
// whose verdict still holds, then sweeps. Before each job's or executor's
// tree it asks the oracles again (DESIGN invariant 4: Gone again right
// before the deletion), and before each name it checks the name again, as
// the index is now: still the inode planned, still made and written before
// the verdict, a directory still empty. Anything else stays, counted as kept.
// It reports what it removed, counted as the plan counts (tally), and
// what the sweep and the removals freed. Each tree it removes from is
// logged and recorded in the index (index.Collection) as it ends.
func (c *Collector) Execute(ctx context.Context, p *Plan) (Report, error) {
	r := Report{Verdicts: p.Verdicts, Executors: p.Executors, Collected: []Candidate{}}
	// Objects freed meanwhile by the executor's own removals count too.
	freedBefore, freedBytesBefore := c.Store.Freed()
	for _, v := range p.Verdicts {
		if err := c.record(v, p.at); err != nil && !errors.Is(err, index.ErrNotFound) {
			return r, err
		}
	}
	for _, v := range p.Executors {
		if err := c.recordExecutor(v); err != nil && !errors.Is(err, index.ErrNotFound) {
			return r, err
		}
	}
	x := execution{c: c, removed: map[uint64]uint32{}, counted: counter{}}
	var done []*tree
	for _, t := range p.trees {
		ok, err := x.tree(ctx, t)
		if err != nil {
			return r, err
		}
		if ok {
			done = append(done, t)
		}
	}
	for _, t := range done {
		r.Collected = append(r.Collected, t.Candidate)
	}
	r.Unknown = p.unknownKept(r.Collected)
	r.Orphans = x.orphans
	var err error
	if r.Swept, err = c.Store.Sweep(); err != nil {
		return r, err
	}
	// An object goes with the last file that is it, not in the sweep.
	objects, bytes := c.Store.Freed()
	r.Swept.Objects += objects - freedBefore
	r.Swept.Bytes += bytes - freedBytesBefore
	r.Took = Seconds(c.now().Sub(p.at))
	return r, nil
}

// execution is the state of one Execute: how many names of each inode it
// removed, the trees' removals counted so far (as tally counts them), and
// the orphans it left.
type execution struct {
	c       *Collector
	removed map[uint64]uint32
	counted counter
	orphans Orphans
}

// tree removes what t planned, if its verdict still holds, and reports
// whether it did; t's removals become those made. A job's record goes with
// its last name, an executor's with its tree, in the transaction that
// records the collection.
func (x *execution) tree(ctx context.Context, t *tree) (bool, error) {
	if t.Executor == "" {
		v, err := x.c.Judge(ctx, t.Job.ID) // right before the deletion
		if errors.Is(err, index.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		holds := v.Verdict == index.VerdictGone
		if t.unknown {
			holds, err = x.stillUnknown(t.Job.ID)
		}
		if err != nil || !holds {
			return false, err
		}
		t.Verdict = v
	} else {
		v, err := x.c.JudgeExecutor(ctx, t.Executor) // right before the deletion
		if errors.Is(err, index.ErrNotFound) {
			return false, nil
		}
		if err != nil || v.Verdict != index.VerdictGone {
			return false, err
		}
		t.ExecutorVerdict = &v
		// Gone without a break since the plan's verdict began, and its
		// jobs still collected.
		var gone bool
		cutoff := x.c.now().Add(-x.c.Grace).UnixNano()
		err = x.c.Store.Index.View(func(tx *index.Tx) error {
			e, err := tx.Executor(t.Executor)
			if err == nil {
				gone, err = executorGone(tx, e, t.since, cutoff, nil)
			}
			return err
		})
		if errors.Is(err, index.ErrNotFound) {
			return false, nil
		}
		if err != nil || !gone {
			return false, err
		}
	}
	made := t.removals[:0]
	var failed error
	for i, r := range t.removals {
		ok, err := x.remove(&r, t.since)
		if err != nil {
			// What went before the failure is recorded and logged all
			// the same, below; what is left stays, counted as kept.
			t.Kept += len(t.removals) - i
			failed = fmt.Errorf("collecting %s: %w", t.what(), err)
			break
		}
		if ok {
			made = append(made, r)
		} else {
			t.Kept++
		}
	}
	t.removals = made
	x.counted.count(t)
	if t.Names == 0 && t.Kept > 0 {
		return failed == nil, failed // nothing went
	}
	rec := t.collection(x.c.now())
	if t.Executor == "" && t.Kept == 0 {
		crashpoint.Hit(crashpoint.GCBeforeJobDelete)
	}
	err := x.c.Store.Index.Update(func(tx *index.Tx) error {
		if err := tx.AddCollection(rec); err != nil || t.Kept > 0 {
			return err
		}
		if t.Executor != "" {
			left, err := tx.ExecutorRoots(t.Executor)
			if err != nil || len(left) > 0 {
				return err
			}
			return tx.DeleteExecutor(t.Executor)
		}
		left, err := tx.JobRoots(t.Job.ID)
		if err != nil || len(left) > 0 {
			return err
		}
		return tx.DeleteJob(t.Job.ID)
	})
	if err != nil {
		return false, errors.Join(failed, err)
	}
	x.c.logRemoval(rec)
	return failed == nil, failed
}

// stillUnknown reports whether job's record, as the judgement right
// before the deletion left it, may still go under CollectUnknownAfter:
// a write or any answer but "not found" since the plan keeps it.
func (x *execution) stillUnknown(job string) (bool, error) {
	var j *index.Job
	err := x.c.Store.Index.View(func(tx *index.Tx) (err error) {
		j, err = tx.Job(job)
		return err
	})
	if errors.Is(err, index.ErrNotFound) {
		return false, nil
	}
	return err == nil && x.c.unknownLongEnough(j, x.c.now()), err
}

// collection is the record of t's removal, ended at now.
func (t *tree) collection(now time.Time) *index.Collection {
	rec := &index.Collection{At: now.UnixNano(), Executor: t.Executor, Why: t.Why, Since: t.since,
		Names: t.Names, Files: t.Files, Bytes: t.Bytes, Kept: t.Kept}
	if t.Executor == "" {
		rec.Job, rec.Verdict, rec.Evidence = t.Job.ID, t.Verdict.Verdict, t.Verdict.Evidence
	} else if t.ExecutorVerdict != nil {
		rec.Verdict, rec.Evidence = t.ExecutorVerdict.Verdict, t.ExecutorVerdict.Evidence
	}
	return rec
}

// logRemoval logs one collection record: the audit trail of every removal
// the collector makes, in the daemon or in statefs gc.
func (c *Collector) logRemoval(rec *index.Collection) {
	who := []any{"job", rec.Job, "verdict", rec.Verdict.String(), "evidence", rec.Evidence}
	if rec.Executor != "" {
		who = []any{"executor", rec.Executor, "verdict", rec.Verdict.String(), "evidence", rec.Evidence}
	}
	c.log().Info("collector removed", append(who, "why", rec.Why,
		"names", rec.Names, "files", rec.Files, "bytes", rec.Bytes, "kept", rec.Kept)...)
}

// what names t's owner in an error.
func (t *tree) what() string {
	if t.Executor != "" {
		return "executor " + t.Executor
	}
	return "job " + t.Job.ID
}

// remove removes r's name if it still is what the plan saw: the same
// inode, made and written before since, a directory empty. It keeps r's
// link count right for tally: the inode's names now plus those this run
// removed.
func (x *execution) remove(r *removal, since int64) (bool, error) {
	still := false
	err := x.c.Store.Index.View(func(tx *index.Tx) error {
		d, err := tx.Lookup(r.dir, r.name)
		if err != nil || d.Ino != r.ino {
			return err
		}
		n, err := tx.Inode(d.Ino)
		if err != nil {
			return err
		}
		written, size := x.c.written(n)
		if r.byName {
			written = max(written, d.Born)
		}
		empty := true
		if n.IsDir() {
			if empty, err = tx.IsEmpty(n.Ino); err != nil {
				return err
			}
		}
		still = empty && written < since
		r.nlink, r.size = n.Nlink+x.removed[n.Ino], size
		return nil
	})
	if errors.Is(err, index.ErrNotFound) || (err == nil && !still) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	orphan, err := x.c.remover().Remove(r.dir, r.name)
	if errors.Is(err, index.ErrNotFound) || errors.Is(err, index.ErrNotEmpty) {
		return false, nil // changed since the check
	}
	if err != nil {
		return false, err
	}
	if !r.isDir {
		x.removed[r.ino]++
	}
	if orphan {
		x.orphans.Files++
		x.orphans.Bytes += r.size
	}
	crashpoint.Hit(crashpoint.GCInodeRemoved)
	if x.c.Removed != nil {
		x.c.Removed()
	}
	return true, nil
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
