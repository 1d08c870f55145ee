// Package gc decides which jobs and executors are gone and removes their
// state: oracles (Flink's REST API, Flink HA's JobResultStore, the
// operator's word) give verdicts with evidence, and the Collector removes
// the state of a job whose combined verdict has been gone without a break
// for the grace period, and was gone again when asked right before (DESIGN
// invariant 4); then the tree of each executor judged the same way (its
// TaskManager confirmed gone: no Flink asked lists it and one that listed
// it before is among them, or the operator says so)
// that no job holds any more and nothing wrote within the grace period;
// then the chunks nothing refers to. A run is a plan (plan.go: what goes and what it
// frees, from one snapshot of the index, changing nothing; a dry run
// prints it) and its execution (execute.go: every verdict and every name
// checked again as it is removed). It removes through a Remover: the
// mounted filesystem, so that the kernel forgets the names, or the index
// of a store no daemon serves.
package gc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/statefs/statefs/index"
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
// to old content included. An executor's tree is judged the same way, by
// its own verdict about its TaskManager, and goes only once every job it
// held is collected: a TaskManager that runs keeps its working directory
// between jobs.
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
	// CollectUnknownAfter, if positive, also collects a job that every
	// oracle has answered knows nothing of it (JobVerdict.NotFound), without
	// a break, for that long, and that nothing has written for that long:
	// the operator's opt-in (DESIGN invariant 4). 0 keeps such jobs.
	CollectUnknownAfter time.Duration
	// Log is where each removal is logged, at info; nil is slog's default.
	Log *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Removed, if set, is called after each name removed (for a progress bar).
	Removed func()
}

// Candidate is one job, or one executor's tree, whose state a run removed
// (or a plan removes). It counts a file once however many names it has:
// Names are the names removed, files and directories; Files and Bytes the
// files whose last name went, whose content goes with them. A file with a
// name left elsewhere counts in Names only, and in Files of the run that
// removes its last name.
type Candidate struct {
	// Job and Verdict are set for a job's state, Executor and the
	// Executor fields below for an executor's tree.
	Job      index.Job  `json:"job,omitzero"`
	Executor string     `json:"executor,omitempty"`
	Verdict  JobVerdict `json:"verdict,omitzero"`
	Why      string     `json:"why"` // the rule that lets it go
	// For an executor's tree: its record as judged when planned (its
	// verdict, since when), and the verdict asked right before removal.
	ExecutorRecord  *index.Executor  `json:"executor_record,omitempty"`
	ExecutorVerdict *ExecutorVerdict `json:"executor_verdict,omitempty"`
	Names           int              `json:"names"`
	Files           int              `json:"files"`
	Bytes           int64            `json:"bytes"` // logical bytes of Files
	Kept            int              `json:"kept"`  // names kept: made or written after the verdict
}

// Orphans are the files a run removed that were still open: their content
// stays until their last close.
type Orphans struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"` // logical
}

// Report is what one run of the collector did, or what a plan would do
// (Plan.Report).
type Report struct {
	Verdicts  []JobVerdict      `json:"verdicts"`
	Executors []ExecutorVerdict `json:"executors"`
	Collected []Candidate       `json:"collected"`
	// Unknown are the jobs unknown to every oracle that the run keeps.
	Unknown []UnknownJob `json:"unknown"`
	Orphans Orphans      `json:"orphans"`
	Swept   store.Swept  `json:"swept"`
	Took    Seconds      `json:"took"`
}

// UnknownJob is a job that every oracle answers it knows nothing of
// (JobVerdict.NotFound): Flink forgot it (jobstore.expiration-time, a
// JobManager without HA restarted) or never ran it here. Its state is kept
// for ever unless the operator says it is gone or opts in to
// Collector.CollectUnknownAfter.
type UnknownJob struct {
	Job       string    `json:"job"`
	Since     time.Time `json:"since"` // unknown to every oracle since, without a break
	LastWrite time.Time `json:"last_write"`
}

// Seconds is a duration that JSON carries as seconds, as every duration
// statefs prints.
type Seconds time.Duration

func (s Seconds) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(s).Seconds()) }

func (s *Seconds) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*s = Seconds(f * float64(time.Second))
	return nil
}

// Duration is s as a time.Duration.
func (s Seconds) Duration() time.Duration { return time.Duration(s) }

// Unanswered are the verdicts of r for which no oracle could answer
// (JobVerdict.Failure): a run with any is not doing its work for those
// jobs, whose state it keeps however long they have been gone.
func (r Report) Unanswered() []JobVerdict {
	return unanswered(r.Verdicts, func(v JobVerdict) string { return v.Failure })
}

// UnansweredExecutors are the executor verdicts of r for which no oracle
// could answer: their trees are kept however long their TaskManagers have
// been gone.
func (r Report) UnansweredExecutors() []ExecutorVerdict {
	return unanswered(r.Executors, func(v ExecutorVerdict) string { return v.Failure })
}

// unanswered are the verdicts of vs with a failure, in order; nil for
// none.
func unanswered[V any](vs []V, failure func(V) string) []V {
	var out []V
	for _, v := range vs {
		if failure(v) != "" {
			out = append(out, v)
		}
	}
	return out
}

func (c *Collector) log() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.Default()
}

// unknownLongEnough reports whether job record j may go under
// CollectUnknownAfter at now: every oracle has known nothing of it, and
// nothing has written it, for at least that long.
func (c *Collector) unknownLongEnough(j *index.Job, now time.Time) bool {
	if c.CollectUnknownAfter <= 0 || j.Verdict != index.VerdictUnknown || j.UnknownSince == 0 {
		return false
	}
	return now.Sub(time.Unix(0, max(j.UnknownSince, j.LastWrite))) >= c.CollectUnknownAfter
}

func (c *Collector) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Run plans a collection and executes the plan (Plan, Execute). A run
// killed at any point leaves a consistent index (every step is one
// transaction) and the next run picks up where it stopped.
func (c *Collector) Run(ctx context.Context) (Report, error) {
	p, err := c.Plan(ctx)
	if err != nil {
		return Report{}, err
	}
	return c.Execute(ctx, p)
}

// Judge asks the oracles about job and records the combined verdict: its
// evidence, and since when it has held without a break.
func (c *Collector) Judge(ctx context.Context, job string) (JobVerdict, error) {
	v, err := c.ask(ctx, job)
	if err != nil {
		return v, err
	}
	return v, c.record(v, c.now())
}

// ask combines the answers of the oracles, the operator's word first,
// about job; it records nothing.
func (c *Collector) ask(ctx context.Context, job string) (JobVerdict, error) {
	var rec *index.Job
	err := c.Store.Index.View(func(tx *index.Tx) (err error) {
		rec, err = tx.Job(job)
		return err
	})
	if err != nil {
		return JobVerdict{}, err
	}
	return Combine(ctx, job, append([]Oracle{operator{rec}}, c.Oracles...)...), nil
}

// record writes verdict v, judged at now, into its job's record.
func (c *Collector) record(v JobVerdict, now time.Time) error {
	return c.Store.Index.Update(func(tx *index.Tx) error {
		j, err := tx.Job(v.Job)
		if err != nil {
			return err
		}
		judged(j, v, now)
		return tx.PutJob(j)
	})
}

// judged updates job record j with verdict v: the verdict, its evidence,
// and since when it has held without a break; and since when every oracle
// has known nothing of the job, without a break (any other answer, a
// failure above all, ends that), by the collector's clock now, which
// CollectUnknownAfter is measured with.
func judged(j *index.Job, v JobVerdict, now time.Time) {
	switch {
	case !v.NotFound:
		j.UnknownSince = 0
	case j.UnknownSince == 0:
		j.UnknownSince = now.UnixNano()
	}
	j.Since = heldSince(heldVerdict{j.Verdict, j.Since, j.CheckedAt, j.Operator, j.OperatorAt}, v.Verdict, v.At)
	j.Verdict, j.Evidence, j.Oracle = v.Verdict, v.Evidence, v.Oracle
	j.CheckedAt = v.At.UnixNano()
}

// heldVerdict is what a record keeps of its verdict, as heldSince reads
// it: the verdict, since when it has held, when it was last checked, and
// the operator's word with when it was said.
type heldVerdict struct {
	verdict          index.Verdict
	since, checkedAt int64
	operator         index.Verdict
	operatorAt       int64
}

// heldSince is when verdict is, judged at at, began to hold without a
// break, for a record that held r: r.since while the verdict stays (and
// r.since is set), at when it changes. The operator's gone holds from when
// it was said, so that state written after the word is never collected
// under it; but only while no check since the word gave another verdict
// (r.checkedAt before r.operatorAt). A word that a live answer outvoted
// and that stayed on record dates nothing: the gone it later makes, when
// the other oracles fail or forget, begins now and waits out the grace
// period like any other.
func heldSince(r heldVerdict, is index.Verdict, at time.Time) int64 {
	if r.verdict == is && r.since != 0 {
		return r.since
	}
	if is == index.VerdictGone && r.operator == index.VerdictGone && r.checkedAt < r.operatorAt {
		return min(at.UnixNano(), r.operatorAt)
	}
	return at.UnixNano()
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

// operator is the operator's word about a job (statefs job gone|live) as
// one more oracle.
type operator struct{ job *index.Job }

func (o operator) Name() string { return "operator" }

func (o operator) Judge(ctx context.Context, job string) JobVerdict {
	v := JobVerdict{Job: job, Oracle: o.Name(), At: time.Now(), Evidence: "operator: nothing said", Silent: true}
	if o.job == nil || o.job.Operator == index.VerdictUnknown {
		return v
	}
	v.Silent = false
	v.Verdict = o.job.Operator
	v.Evidence = operatorEvidence("job", o.job.Operator, o.job.OperatorAt)
	return v
}

// JudgeExecutor asks the oracles about executor and records the combined
// verdict in its record, as Judge does for a job.
func (c *Collector) JudgeExecutor(ctx context.Context, executor string) (ExecutorVerdict, error) {
	v, err := c.askExecutor(ctx, executor)
	if err != nil {
		return v, err
	}
	return v, c.recordExecutor(v)
}

// askExecutor combines the answers of the oracles, the operator's word
// first, about executor; it records nothing.
func (c *Collector) askExecutor(ctx context.Context, executor string) (ExecutorVerdict, error) {
	var rec *index.Executor
	err := c.Store.Index.View(func(tx *index.Tx) (err error) {
		rec, err = tx.Executor(executor)
		return err
	})
	if err != nil {
		return ExecutorVerdict{}, err
	}
	return CombineExecutor(ctx, executor, rec.ListedBy, append([]Oracle{executorOperator{rec}}, c.Oracles...)...), nil
}

// recordExecutor writes verdict v into its executor's record.
func (c *Collector) recordExecutor(v ExecutorVerdict) error {
	return c.Store.Index.Update(func(tx *index.Tx) error {
		e, err := tx.Executor(v.Executor)
		if err != nil {
			return err
		}
		judgedExecutor(e, v)
		return tx.PutExecutor(e)
	})
}

// judgedExecutor updates executor record e with verdict v as judged does
// a job's, and adds the URLs that listed it to those it keeps.
func judgedExecutor(e *index.Executor, v ExecutorVerdict) {
	e.Listed(v.ListedBy...)
	e.Since = heldSince(heldVerdict{e.Verdict, e.Since, e.CheckedAt, e.Operator, e.OperatorAt}, v.Verdict, v.At)
	e.Verdict, e.Evidence, e.Oracle = v.Verdict, v.Evidence, v.Oracle
	e.CheckedAt = v.At.UnixNano()
}

// executorOperator is the operator's word about an executor (statefs
// executor gone|live) as one more oracle; about jobs it says nothing.
type executorOperator struct{ e *index.Executor }

func (o executorOperator) Name() string { return "operator" }

func (o executorOperator) Judge(ctx context.Context, job string) JobVerdict {
	return JobVerdict{Job: job, Oracle: o.Name(), At: time.Now(), Evidence: "operator: nothing said"}
}

func (o executorOperator) JudgeExecutor(ctx context.Context, executor string, _ []string) ExecutorVerdict {
	v := ExecutorVerdict{Executor: executor, Oracle: o.Name(), At: time.Now(), Evidence: "operator: nothing said"}
	if o.e == nil || o.e.Operator == index.VerdictUnknown {
		return v
	}
	v.Verdict = o.e.Operator
	v.Evidence = operatorEvidence("executor", o.e.Operator, o.e.OperatorAt)
	return v
}

// operatorEvidence is the evidence of the operator's word said, given
// with `statefs command said` at at: the command as the operator typed it,
// and when.
func operatorEvidence(command string, said index.Verdict, at int64) string {
	return fmt.Sprintf("operator: statefs %s %s at %s", command, said, time.Unix(0, at).UTC().Format(time.RFC3339))
}
