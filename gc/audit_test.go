package gc_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/flinkid"
)

// collections reads the store's collection records, oldest first.
func (f *fixture) collections() []*index.Collection {
	f.T.Helper()
	var cs []*index.Collection
	if err := f.S.Index.View(func(tx *index.Tx) (err error) { cs, err = tx.Collections(); return err }); err != nil {
		f.T.Fatal(err)
	}
	return cs
}

// Every removal is logged, one line per job and per executor tree, and
// recorded in the index with what went and why.
func TestCollectLogsAndRecordsEachRemoval(t *testing.T) {
	f := newFixture(t)
	f.build(gcTree...)
	f.sayGone(jobA, time.Now())
	f.sayGone(jobB, time.Now())
	f.sayExecutor("x", index.VerdictGone, time.Now())
	var log bytes.Buffer
	col := f.collector()
	col.Log = slog.New(slog.NewTextHandler(&log, nil))
	col.Now = func() time.Time { return time.Now().Add(time.Hour) } // past the executor's grace
	r := f.run(col, false)
	if len(r.Collected) != 3 {
		t.Fatalf("collected %s, want jobs A and B and executor tm_x", collected(r.Collected))
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != len(r.Collected) {
		t.Fatalf("%d log lines, want one per removal (%d):\n%s", len(lines), len(r.Collected), log.String())
	}
	recs := f.collections()
	if len(recs) != len(r.Collected) {
		t.Fatalf("%d collection records, want %d", len(recs), len(r.Collected))
	}
	for i, c := range r.Collected {
		rec := recs[i]
		who := "job=" + c.Job.ID
		if c.Executor != "" {
			who = "executor=" + c.Executor
		}
		for _, want := range []string{"level=INFO", "collector removed", who, "names=" + itoa(c.Names), "files=" + itoa(c.Files), "bytes=" + itoa(int(c.Bytes))} {
			if !strings.Contains(lines[i], want) {
				t.Errorf("log line %q lacks %q", lines[i], want)
			}
		}
		if !strings.Contains(lines[i], "verdict=gone") || !strings.Contains(lines[i], "evidence=") {
			t.Errorf("log line %q lacks the verdict and its evidence", lines[i])
		}
		if rec.Job != c.Job.ID && c.Executor == "" || rec.Executor != c.Executor || rec.Names != c.Names || rec.Files != c.Files ||
			rec.Bytes != c.Bytes || rec.Why == "" || rec.At == 0 {
			t.Errorf("record %d = %+v, want what candidate %+v removed, when and why", i, rec, c)
		}
		if rec.Verdict != index.VerdictGone || !strings.Contains(rec.Evidence, "operator") {
			t.Errorf("record %d = %+v, want the gone verdict and the operator's evidence", i, rec)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// notFound answers about every job that it knows nothing of it, or,
// while failing, that it could not answer.
type notFound struct {
	mu      sync.Mutex
	failing bool
}

func (o *notFound) Name() string { return "not-found" }

func (o *notFound) fail(on bool) { o.mu.Lock(); o.failing = on; o.mu.Unlock() }

func (o *notFound) Judge(ctx context.Context, job string) gc.JobVerdict {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := gc.JobVerdict{Job: job, Oracle: o.Name(), At: time.Now(), Evidence: "404 not found", NotFound: true}
	if o.failing {
		v = gc.JobVerdict{Job: job, Oracle: o.Name(), At: time.Now(), Evidence: "unreachable", Failure: "unreachable"}
	}
	return v
}

// A job every oracle knows nothing of is unknown to every oracle from the
// first such answer on, without a break: a failure ends it, and with no
// oracle but the operator's silence nobody knows nothing of it.
func TestCollectTracksUnknownToEveryOracle(t *testing.T) {
	f := newFixture(t)
	f.build(gcTree...)
	unknownSince := func() int64 {
		t.Helper()
		j, err := f.job(jobA)
		if err != nil {
			t.Fatal(err)
		}
		return j.UnknownSince
	}
	f.run(f.collector(), false)
	if s := unknownSince(); s != 0 {
		t.Errorf("with no oracle: unknown since %d, want 0", s)
	}

	o := &notFound{}
	first := time.Now()
	r := f.run(f.collector(o), false)
	since := unknownSince()
	if since < first.UnixNano() {
		t.Fatalf("after a 404 from every oracle: unknown since %d, want from %d on", since, first.UnixNano())
	}
	if len(r.Unknown) != 2 || r.Unknown[0].Job != jobA || !r.Unknown[0].Since.Equal(time.Unix(0, since)) {
		t.Errorf("report's unknown jobs = %+v, want A (since %d) and B", r.Unknown, since)
	}
	if !r.Verdicts[0].NotFound || r.Verdicts[0].Verdict != index.VerdictUnknown {
		t.Errorf("verdict %+v: want unknown, not found", r.Verdicts[0])
	}
	f.run(f.collector(o), false)
	if got := unknownSince(); got != since {
		t.Errorf("a second 404: unknown since %d, want %d still", got, since)
	}

	o.fail(true)
	r = f.run(f.collector(o), false)
	if got := unknownSince(); got != 0 || len(r.Unknown) != 0 {
		t.Errorf("after a failure: unknown since %d and report %+v, want 0 and none", got, r.Unknown)
	}
	o.fail(false)
	f.sayGone(jobB, time.Now())
	r = f.run(f.collector(o), false)
	if got := unknownSince(); got <= since {
		t.Errorf("404 again after a failure: unknown since %d, want later than %d", got, since)
	}
	if len(r.Unknown) != 1 || r.Unknown[0].Job != jobA {
		t.Errorf("report's unknown jobs = %+v, want A alone: the operator said B is gone", r.Unknown)
	}
	f.check()
}

// With CollectUnknownAfter a job unknown to every oracle, and unwritten,
// for that long is collected; not before, not when off, not after a write
// or a failure within that time.
func TestCollectUnknownAfter(t *testing.T) {
	const after = 24 * time.Hour
	for _, c := range []struct {
		name    string
		after   time.Duration // CollectUnknownAfter
		wait    time.Duration // from the first 404 to the run that may collect
		write   time.Duration // a write this long after the first 404, if not 0
		fail    bool          // an oracle fails between the two
		collect bool
	}{
		{name: "off", wait: 30 * 24 * time.Hour},
		{name: "not long enough", after: after, wait: after - time.Minute},
		{name: "long enough", after: after, wait: after + time.Minute, collect: true},
		{name: "written since", after: after, wait: after + time.Minute, write: time.Hour},
		{name: "unwritten long enough after a write", after: after, wait: after + 2*time.Hour, write: time.Hour, collect: true},
		{name: "a failure between", after: after, wait: after + time.Minute, fail: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.build(gcTree...)
			before := f.paths()
			o := &notFound{}
			col := f.collector(o)
			col.CollectUnknownAfter = c.after
			first := time.Now()
			col.Now = func() time.Time { return first }
			f.run(col, false)
			for _, job := range []string{jobA, jobB} {
				if c.write == 0 {
					break
				}
				err := f.S.Index.Update(func(tx *index.Tx) error {
					j, err := tx.Job(job)
					if err != nil {
						return err
					}
					j.LastWrite = first.Add(c.write).UnixNano()
					return tx.PutJob(j)
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if c.fail {
				o.fail(true)
				col.Now = func() time.Time { return first.Add(time.Hour) }
				if _, err := col.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				o.fail(false)
			}
			col.Now = func() time.Time { return first.Add(c.wait) }
			r := f.run(col, false)
			want := before
			if c.collect { // A and B; their executor's tree stays, its TaskManager unknown
				want = without(before, "jid_{A}", "job_{A}", "jid_{B}", "job_{B}")
			}
			f.checkPaths("after the run", want)
			if got := len(r.Collected) > 0; got != c.collect {
				t.Errorf("collected %s, want any: %v", collected(r.Collected), c.collect)
			}
			for _, cand := range r.Collected {
				if cand.Executor != "" {
					continue
				}
				if !strings.Contains(cand.Why, "unknown to every oracle") || cand.Verdict.Verdict != index.VerdictUnknown {
					t.Errorf("collected %s %s as %v: %q; want unknown to every oracle", flinkid.Shorten(cand.Job.ID), cand.Executor, cand.Verdict.Verdict, cand.Why)
				}
			}
			if c.collect {
				if _, err := f.job(jobA); err == nil {
					t.Errorf("job A's record is left after its collection")
				}
			}
			f.check()
		})
	}
}

// The execution judges a job planned under CollectUnknownAfter again right
// before its deletion: a write, or an oracle that knows the job, since the
// plan keeps it.
func TestCollectUnknownAfterChecksAgain(t *testing.T) {
	const after = time.Hour
	for _, c := range []struct {
		name    string
		between func(f *fixture, o *notFound, first time.Time)
	}{
		{"a write", func(f *fixture, o *notFound, first time.Time) {
			err := f.S.Index.Update(func(tx *index.Tx) error {
				j, err := tx.Job(jobA)
				if err != nil {
					return err
				}
				j.LastWrite = first.Add(after).UnixNano()
				return tx.PutJob(j)
			})
			if err != nil {
				f.T.Fatal(err)
			}
		}},
		{"a failure", func(f *fixture, o *notFound, first time.Time) { o.fail(true) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.build(gcTree...)
			before := f.paths()
			o := &notFound{}
			col := f.collector(o)
			col.CollectUnknownAfter = after
			first := time.Now()
			col.Now = func() time.Time { return first }
			f.run(col, false)
			col.Now = func() time.Time { return first.Add(after + time.Minute) }
			p, err := col.Plan(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if planned := p.Report().Collected; len(planned) == 0 {
				t.Fatalf("the plan collects nothing, want jobs A and B")
			}
			c.between(f, o, first)
			r, err := col.Execute(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			for _, cand := range r.Collected {
				if cand.Job.ID == jobA {
					t.Errorf("collected job A after %s since the plan: %s", c.name, collected(r.Collected))
				}
			}
			want := only(before, jobATrees...)
			got := only(f.paths(), jobATrees...)
			if len(got) != len(want) {
				t.Errorf("job A's state: %d paths left of %d", len(got), len(want))
			}
			f.check()
		})
	}
}

// The JobResultStore records jobs that ended, so a job that runs has no
// entry there either: its "no entry", like the operator's silence, is no
// evidence that a job is forgotten. With it as the only oracle no job is
// unknown to every oracle, and CollectUnknownAfter collects nothing however
// long the jobs go unwritten; beside a Flink that answers 404 for a job,
// the job is.
func TestCollectUnknownNeedsAnOracleThatSeesRunningJobs(t *testing.T) {
	f := newFixture(t)
	f.build(gcTree...)
	jrs := &gc.JobResultStore{Dir: t.TempDir()}
	col := f.collector(jrs)
	col.CollectUnknownAfter = time.Hour
	first := time.Now()
	col.Now = func() time.Time { return first }
	if r := f.run(col, false); len(r.Unknown) != 0 {
		t.Errorf("with the JobResultStore alone, the running jobs %v are unknown to every oracle", r.Unknown)
	}
	col.Now = func() time.Time { return first.Add(2 * time.Hour) }
	if r := f.run(col, false); len(r.Collected) != 0 {
		t.Errorf("with the JobResultStore alone, collected %s", collected(r.Collected))
	}

	col.Oracles = append(col.Oracles, &notFound{})
	if r := f.run(col, false); len(r.Unknown) == 0 {
		t.Errorf("a job Flink answers 404 for, with no entry in the JobResultStore, is not unknown to every oracle: %+v", r.Verdicts)
	}
}

// failingRemover removes names in the index, as statefs gc does offline,
// and fails from its nth removal on (the disk's EIO, say).
type failingRemover struct {
	f        *fixture
	n, calls int
}

func (r *failingRemover) Remove(dir uint64, name string) (bool, error) {
	r.calls++
	if r.calls >= r.n {
		return false, errors.New("input/output error")
	}
	err := r.f.S.Index.Update(func(tx *index.Tx) error {
		left, err := tx.Remove(dir, name)
		if err != nil || left == nil || left.Nlink > 0 {
			return err
		}
		_, err = tx.Reap(left.Ino)
		return err
	})
	return false, err
}

// A run that fails part-way through a tree has removed names all the same:
// they are logged and recorded, with what stayed counted as kept, and the
// job's record stays for the next run.
func TestCollectRecordsRemovalsBeforeAFailure(t *testing.T) {
	f := newFixture(t)
	f.build(gcTree...)
	f.sayGone(jobA, time.Now())
	before := len(f.paths())
	var log bytes.Buffer
	col := f.collector()
	col.Log = slog.New(slog.NewTextHandler(&log, nil))
	col.Remover = &failingRemover{f: f, n: 5}
	if _, err := col.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("run: %v, want the remover's failure", err)
	}
	removed := before - len(f.paths())
	if removed != 4 {
		t.Fatalf("%d names removed before the failure, want 4", removed)
	}
	recs := f.collections()
	if len(recs) != 1 || recs[0].Job != jobA || recs[0].Names != removed || recs[0].Kept == 0 {
		t.Errorf("records after a failed removal: %+v, want one for job A with %d names and the rest kept", recs, removed)
	}
	if !strings.Contains(log.String(), "collector removed") || !strings.Contains(log.String(), "names=4") {
		t.Errorf("log after a failed removal: %q, want the 4 names removed", log.String())
	}
	if _, err := f.job(jobA); err != nil {
		t.Errorf("job A's record after a failed removal: %v, want it kept", err)
	}
}
