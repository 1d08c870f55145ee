package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/store"
)

// Plan is what a run of the collector removes and what that frees, decided
// from one snapshot of the index: the verdicts about jobs and executors as
// the oracles give them now, and for each job gone for the grace period,
// and each executor tree whose TaskManager is and every job of which goes,
// the names to remove, children before their directory. Making a plan
// changes nothing; Execute carries it out, checking each verdict and each
// name again as it removes; a dry run prints it (Report).
type Plan struct {
	Verdicts  []JobVerdict
	Executors []ExecutorVerdict
	unknown   []UnknownJob // the jobs unknown to every oracle (Report.Unknown)
	trees     []*tree
	// frees is what the sweep after the removals would free: the chunks
	// and objects unreferenced now, and those whose every reference is
	// held by files that lose their last name.
	frees store.Swept
	at    time.Time     // when planning began
	took  time.Duration // how long planning took
}

// tree is one job's state, or one executor's tree, that a plan removes.
type tree struct {
	Candidate
	since int64 // names made, and content written, from then on stay
	// unknown: a job collected under Collector.CollectUnknownAfter, not
	// as gone.
	unknown  bool
	removals []removal
}

// removal is one name a plan removes, with what it knew of its inode.
type removal struct {
	dir   uint64
	name  string
	ino   uint64
	isDir bool
	nlink uint32 // the inode's names; a run removing as many frees it
	size  int64  // logical bytes of a file
	// byName: the name's own time (Dirent.Born) counts as a write; not in
	// the attic, where names are moved by held deletes, not made by the
	// executor.
	byName bool
}

// Report is what executing p would do: its verdicts, its trees with what
// they remove, and what the sweep would free.
func (p *Plan) Report() Report {
	r := Report{Verdicts: p.Verdicts, Executors: p.Executors, Collected: []Candidate{}, Swept: p.frees, Took: Seconds(p.took)}
	for _, t := range p.trees {
		r.Collected = append(r.Collected, t.Candidate)
	}
	r.Unknown = p.unknownKept(r.Collected)
	return r
}

// Plan judges every job and every executor the index knows and plans the
// collection of the collectable jobs (gone for the grace period) and of
// the executor trees they leave behind whose TaskManagers are gone too.
// It records nothing: the verdicts are recorded when the plan is executed.
func (c *Collector) Plan(ctx context.Context) (*Plan, error) {
	p := &Plan{at: c.now(), Verdicts: []JobVerdict{}, Executors: []ExecutorVerdict{}}
	var jobs []*index.Job
	var executors []*index.Executor
	err := c.Store.Index.View(func(tx *index.Tx) (err error) {
		if jobs, err = tx.Jobs(); err != nil {
			return err
		}
		executors, err = tx.Executors()
		return err
	})
	if err != nil {
		return nil, err
	}
	records := map[string]*index.Job{}
	for _, j := range jobs {
		v, err := c.ask(ctx, j.ID)
		if errors.Is(err, index.ErrNotFound) {
			continue // collected or forgotten meanwhile
		}
		if err != nil {
			return nil, err
		}
		judged(j, v, p.at)
		if j.Gone() {
			v.Since = time.Unix(0, j.Since).UTC()
			v.CollectableAt = v.Since.Add(c.Grace)
		}
		records[j.ID] = j
		p.Verdicts = append(p.Verdicts, v)
		if j.UnknownSince != 0 {
			p.unknown = append(p.unknown, UnknownJob{Job: j.ID, Since: time.Unix(0, j.UnknownSince).UTC(), LastWrite: time.Unix(0, j.LastWrite).UTC()})
		}
	}
	var judgedExecutors []*index.Executor
	for _, e := range executors {
		v, err := c.askExecutor(ctx, e.ID)
		if errors.Is(err, index.ErrNotFound) {
			continue // collected meanwhile
		}
		if err != nil {
			return nil, err
		}
		judgedExecutor(e, v)
		if e.Gone() {
			v.Since = time.Unix(0, e.Since).UTC()
			v.CollectableAt = v.Since.Add(c.Grace)
		}
		judgedExecutors = append(judgedExecutors, e)
		p.Executors = append(p.Executors, v)
	}
	now := c.now()
	err = c.Store.Index.View(func(tx *index.Tx) error {
		w := walk{c: c, tx: tx, planned: map[dirent]bool{}}
		collected := map[string]bool{} // the jobs whose record goes
		for _, v := range p.Verdicts {
			j := records[v.Job]
			var t *tree
			switch {
			case j.Gone() && now.Sub(time.Unix(0, j.Since)) >= c.Grace:
				t = &tree{Candidate: Candidate{Job: *j, Verdict: v,
					Why: fmt.Sprintf("gone since %s, for the grace period (%s)", stamp(j.Since), c.Grace)}, since: j.Since}
			case c.unknownLongEnough(j, now):
				// Only what was written before the cutoff goes, as for
				// an executor's tree.
				cutoff := now.Add(-c.CollectUnknownAfter).UnixNano()
				t = &tree{Candidate: Candidate{Job: *j, Verdict: v,
					Why: fmt.Sprintf("unknown to every oracle since %s and unwritten for %s (collect-unknown-after)", stamp(j.UnknownSince), c.CollectUnknownAfter)},
					since: cutoff, unknown: true}
			default:
				continue
			}
			roots, err := tx.JobRoots(j.ID)
			if err != nil {
				return err
			}
			if err := w.roots(roots, t); err != nil {
				return fmt.Errorf("planning the collection of job %s: %w", j.ID, err)
			}
			collected[j.ID] = t.Kept == 0
			p.trees = append(p.trees, t)
		}
		executors, err := w.executors(judgedExecutors, now.Add(-c.Grace).UnixNano(), collected)
		if err != nil {
			return err
		}
		p.trees = append(p.trees, executors...)
		p.frees, err = c.frees(tx, tally(p.trees))
		return err
	})
	p.took = c.now().Sub(p.at)
	return p, err
}

// dirent is one name: directory and name.
type dirent struct {
	dir  uint64
	name string
}

// walk plans removals in one snapshot of the index; planned are the
// names a tree planned before (an executor's tree holds its jobs' trees).
type walk struct {
	c       *Collector
	tx      *index.Tx
	planned map[dirent]bool
}

// roots plans the removal of the directories roots, and everything below
// them made and written before t.since, into t.
func (w *walk) roots(roots []uint64, t *tree) error {
	for _, ino := range roots {
		root, err := w.tx.Inode(ino)
		if errors.Is(err, index.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if !root.IsDir() {
			return errors.New("only directories are job roots the collector removes")
		}
		attic, err := w.tx.InAttic(root.Parent)
		if err != nil {
			return err
		}
		name, err := w.tx.NameIn(root.Parent, ino)
		if errors.Is(err, index.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if _, err := w.entry(dirent{root.Parent, name}, !attic, t); err != nil {
			return err
		}
	}
	return nil
}

// entry plans the removal of name in dir (and, for a directory, of its
// subtree) if its content was written and, with byName, the name made
// before t.since, and reports whether it goes. In the attic names are
// judged by their content alone: the executor makes no names there, and a
// name's time there says only when held deletes moved it aside, which may
// follow the verdict (Flink clearing a gone job's slots before the verdict
// was recorded) without making it new state.
func (w *walk) entry(e dirent, byName bool, t *tree) (bool, error) {
	if w.planned[e] {
		return true, nil
	}
	d, err := w.tx.Lookup(e.dir, e.name)
	if errors.Is(err, index.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	n, err := w.tx.Inode(d.Ino)
	if err != nil {
		return false, err
	}
	empty := true
	if n.IsDir() {
		var children []string
		err := w.tx.ReadDir(d.Ino, func(c index.Dirent) bool { children = append(children, c.Name); return true })
		if err != nil {
			return false, err
		}
		for _, name := range children {
			gone, err := w.entry(dirent{d.Ino, name}, byName, t)
			if err != nil {
				return false, err
			}
			empty = empty && gone
		}
	}
	written, size := w.c.written(n)
	if byName {
		written = max(written, d.Born)
	}
	if !empty || written >= t.since {
		t.Kept++
		return false, nil
	}
	w.planned[e] = true
	t.removals = append(t.removals, removal{dir: e.dir, name: e.name, ino: n.Ino, isDir: n.IsDir(),
		nlink: n.Nlink, size: size, byName: byName})
	return true, nil
}

// executors plans the removal of the trees (tm_<resource-id>) of the
// executors, judged as they are in executors, that executorGone lets go
// with cutoff as both its times: the trees of TaskManagers confirmed gone
// for the grace period. What was made or written since the verdict began
// stays, as for a job.
func (w *walk) executors(executors []*index.Executor, cutoff int64, collected map[string]bool) ([]*tree, error) {
	var trees []*tree
	for _, e := range executors {
		gone, err := executorGone(w.tx, e, cutoff, cutoff, collected)
		if err != nil || !gone {
			if err != nil {
				return nil, err
			}
			continue
		}
		why := fmt.Sprintf("its TaskManager gone since %s, every job it held collected, nothing written since %s (the grace period)", stamp(e.Since), stamp(cutoff))
		t := &tree{Candidate: Candidate{Executor: e.ID, ExecutorRecord: e, Why: why}, since: e.Since}
		roots, err := w.tx.ExecutorRoots(e.ID)
		if err != nil {
			return nil, err
		}
		if err := w.roots(roots, t); err != nil {
			return nil, fmt.Errorf("planning the collection of executor %s: %w", e.ID, err)
		}
		trees = append(trees, t)
	}
	return trees, nil
}

// executorGone reports whether executor e's tree may go: its verdict has
// been Gone since since or before (DESIGN invariant 4: its TaskManager is
// confirmed gone), nothing wrote to the tree since cutoff, and every job
// it held is collected (its record goes with its last state: a job whose
// id came back keeps its record, and so its executor's tree stays), or
// collected[job] says it will be. An executor that held no job goes on its
// verdict alone.
func executorGone(tx *index.Tx, e *index.Executor, since, cutoff int64, collected map[string]bool) (bool, error) {
	if !e.Gone() || e.Since > since || e.LastWrite >= cutoff {
		return false, nil
	}
	for _, id := range e.Jobs {
		_, err := tx.Job(id)
		if errors.Is(err, index.ErrNotFound) || collected[id] {
			continue
		}
		return false, err
	}
	return true, nil
}

// tally counts what each tree's removals remove: the names, and the files
// whose last name they are, with their bytes. A file counts in the tree
// whose removal brings the names removed in the run to its link count.
// A plan counts with it; it returns those files.
func tally(trees []*tree) (lost []uint64) {
	c := counter{}
	for _, t := range trees {
		lost = append(lost, c.count(t)...)
	}
	return lost
}

// counter is tally one tree at a time, as an execution removes them: the
// names of each inode the trees counted so far removed.
type counter map[uint64]uint32

// count counts t's removals into t, and returns the files whose last name
// they are.
func (c counter) count(t *tree) (lost []uint64) {
	t.Names, t.Files, t.Bytes = 0, 0, 0
	for _, r := range t.removals {
		t.Names++
		if r.isDir {
			continue
		}
		c[r.ino]++
		if c[r.ino] == r.nlink {
			t.Files++
			t.Bytes += r.size
			lost = append(lost, r.ino)
		}
	}
	return lost
}

// unknownKept is p's unknown jobs but those collected.
func (p *Plan) unknownKept(collected []Candidate) []UnknownJob {
	out := []UnknownJob{}
	for _, u := range p.unknown {
		if !slices.ContainsFunc(collected, func(c Candidate) bool { return c.Executor == "" && c.Job.ID == u.Job && c.Kept == 0 }) {
			out = append(out, u)
		}
	}
	return out
}

// stamp is ns nanoseconds since the epoch as an RFC 3339 time in UTC.
func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339) }

// frees is what a sweep would free once the files in lost lose their last
// name: the chunk and object files no manifest refers to now, and those
// whose every reference is held by those files (their content goes with
// them; staging content is no chunk's).
func (c *Collector) frees(tx *index.Tx, lost []uint64) (store.Swept, error) {
	freed, err := c.Store.Unreferenced(tx)
	if err != nil {
		return freed, err
	}
	chunks, objects := map[cas.Hash]uint64{}, map[cas.Hash]uint64{}
	for _, ino := range lost {
		m, err := tx.Manifest(ino)
		if errors.Is(err, index.ErrNotFound) {
			continue // staging content, or none
		}
		if err != nil {
			return freed, err
		}
		for _, e := range m.Extents {
			chunks[e.Hash]++
		}
		if m.Object != nil {
			objects[*m.Object]++
		}
	}
	if err := lastRefs(objects, tx.ObjectRefs, c.Store.ObjectSize, &freed.Objects, &freed.Bytes); err != nil {
		return freed, err
	}
	return freed, lastRefs(chunks, tx.ChunkRefs, c.Store.ChunkSize, &freed.Chunks, &freed.Bytes)
}

// lastRefs counts into n and bytes the hashes of dropped whose every
// reference (refs) is among those dropped, with their size on disk; a
// hash with no file on disk frees nothing.
func lastRefs(dropped map[cas.Hash]uint64, refs func(cas.Hash) (uint64, error), size func(cas.Hash) (int64, error), n *int, bytes *int64) error {
	for h, drop := range dropped {
		r, err := refs(h)
		if err != nil {
			return err
		}
		if sz, err := size(h); r <= drop && err == nil {
			*n++
			*bytes += sz
		}
	}
	return nil
}
