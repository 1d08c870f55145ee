package gc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
)

// executorTree is the working directory of TaskManager x holding job A
// only: A's local state and RocksDB instance, and the executor's own
// files, which it keeps using between jobs.
var executorTree = []string{
	"tm_x/",
	"tm_x/blobStorage/",
	"tm_x/blobStorage/incoming/",
	"tm_x/blobStorage/incoming/temp-00000001",
	"tm_x/localState/",
	"tm_x/localState/aid_{D}/",
	"tm_x/localState/aid_{D}/jid_{A}/",
	"tm_x/localState/aid_{D}/jid_{A}/vtx_{V}_sti_0/",
	chkA3 + "/",
	chkA3 + "/_task_state_snapshot",
	"tm_x/tmp/",
	"tm_x/tmp/rocksdb-lib-1/",
	"tm_x/tmp/rocksdb-lib-1/librocksdbjni-linux64.so",
	rocksA + "/",
	rocksA + "/db/",
	rocksA + "/db/000009.sst",
	"tm_x/slotAllocationSnapshots/",
	"tm_x/slotAllocationSnapshots/0.bin",
}

// fakeFlink is a Flink REST endpoint whose answers a test changes: the
// state of each job it knows (404 for the others) and the resource ids of
// the TaskManagers registered with it; status, if set, answers every
// request instead.
type fakeFlink struct {
	*httptest.Server
	mu     sync.Mutex
	jobs   map[string]string
	tms    []string
	status int
}

func newFakeFlink(t *testing.T, jobs map[string]string, tms ...string) *fakeFlink {
	t.Helper()
	f := &fakeFlink{jobs: jobs, tms: tms}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.status != 0 {
			http.Error(w, `{"errors":["down"]}`, f.status)
			return
		}
		if r.URL.Path == "/taskmanagers" {
			type tm struct {
				ID        string `json:"id"`
				Path      string `json:"path"`
				FreeSlots int    `json:"freeSlots"`
			}
			list := []tm{}
			for _, id := range f.tms {
				list = append(list, tm{id, "pekko.tcp://flink@10.0.0.1:6122/user/rpc/taskmanager_0", 2})
			}
			json.NewEncoder(w).Encode(map[string]any{"taskmanagers": list})
			return
		}
		id, ok := strings.CutPrefix(r.URL.Path, "/jobs/")
		state, known := f.jobs[id]
		if !ok || !known {
			http.Error(w, `{"errors":["not found"]}`, http.StatusNotFound)
			return
		}
		fmt.Fprint(w, details(id, state))
	}))
	t.Cleanup(f.Close)
	return f
}

// register sets the TaskManagers f lists.
func (f *fakeFlink) register(tms ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tms = tms
}

// clock is a collector's clock a test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// set puts the clock at d after the real time now: the verdicts' times
// are real, the collector's view of how long they held is the clock's.
func (c *clock) set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = time.Now().Add(d)
}

// executorCollector is a collector with a grace of a minute on clock cl.
func (f *fixture) executorCollector(cl *clock, oracles ...gc.Oracle) *gc.Collector {
	return &gc.Collector{Store: f.S, Oracles: oracles, Grace: time.Minute, Now: cl.Now}
}

// executorVerdict is r's verdict about executor id.
func executorVerdict(t *testing.T, r gc.Report, id string) gc.ExecutorVerdict {
	t.Helper()
	for _, v := range r.Executors {
		if v.Executor == id {
			return v
		}
	}
	t.Fatalf("the run judged no executor %s: %+v", id, r.Executors)
	return gc.ExecutorVerdict{}
}

// collectedExecutor reports whether r collected executor id's tree.
func collectedExecutor(r gc.Report, id string) bool {
	for _, c := range r.Collected {
		if c.Executor == id {
			return true
		}
	}
	return false
}

// A TaskManager that Flink still lists keeps its whole tree, its own
// files (blobs, RocksDB's native library, slot snapshots) included, after
// every job it held is collected and the grace period has passed: an idle
// TaskManager of a session cluster between jobs. Once no Flink lists it,
// its tree goes after the grace period, and its record with it.
func TestCollectExecutorListedByFlinkStays(t *testing.T) {
	f := newFixture(t)
	f.build(executorTree...)
	before := f.paths()
	flink := newFakeFlink(t, map[string]string{jobA: "FINISHED"}, "x")
	cl := &clock{}
	col := f.executorCollector(cl, &gc.FlinkREST{URLs: []string{flink.URL}})

	cl.set(0)
	f.run(col, false) // the verdicts begin
	cl.set(time.Hour)
	r := f.run(col, false)
	if collectedExecutor(r, "x") {
		t.Errorf("a run collected the tree of executor x, which Flink lists: %s", collected(r.Collected))
	}
	if v := executorVerdict(t, r, "x"); v.Verdict != index.VerdictLive || !strings.Contains(v.Evidence, "registered TaskManager") {
		t.Errorf("executor x: %v (%s), want live, registered", v.Verdict, v.Evidence)
	}
	if _, err := f.job(jobA); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("job A was not collected: %v", err)
	}
	f.checkPaths("after A is collected while x is listed", without(before, jobATrees...))
	if e, err := f.executor("x"); err != nil || e.Verdict != index.VerdictLive || e.CheckedAt == 0 || !slices.Equal(e.ListedBy, []string{flink.URL}) {
		t.Errorf("executor x's record = %+v, %v; want live, checked, listed by %s", e, err, flink.URL)
	}

	flink.register("y")
	cl.set(0)
	r = f.run(col, false)
	if v := executorVerdict(t, r, "x"); v.Verdict != index.VerdictGone || !strings.Contains(v.Evidence, "not among its 1 registered TaskManagers, listed here before") {
		t.Errorf("executor x: %v (%s), want gone, not among 1, listed there before", v.Verdict, v.Evidence)
	}
	if collectedExecutor(r, "x") {
		t.Errorf("a run collected x's tree before its grace period: %s", collected(r.Collected))
	}
	f.checkPaths("within the grace period", without(before, jobATrees...))
	cl.set(2 * time.Minute)
	r = f.run(col, false)
	if !collectedExecutor(r, "x") {
		t.Errorf("x's tree not collected once gone for the grace period: %s", collected(r.Collected))
	}
	f.checkPaths("after the grace period", nil)
	if _, err := f.executor("x"); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("x's record after its tree went: %v, want ErrNotFound", err)
	}
	f.check()
}

// A TaskManager that no Flink asked has ever listed may run in a cluster
// nobody named (a new cluster on the node before --flink-url names it, or
// a URL that now reaches another cluster): absent from the lists of the
// Flinks asked, it is unknown, not gone, and its working directory stays,
// however long; nothing failed, so it is not unanswered.
func TestCollectExecutorOfAnUnaskedClusterStays(t *testing.T) {
	f := newFixture(t)
	f.build("tm_b1/", "tm_b1/blobStorage/", "tm_b1/blobStorage/incoming/",
		"tm_b1/tmp/", "tm_b1/tmp/rocksdb-lib-1/", "tm_b1/tmp/rocksdb-lib-1/librocksdbjni-linux64.so",
		"tm_b1/slotAllocationSnapshots/")
	before := f.paths()
	clusterA := newFakeFlink(t, nil, "a1", "a2") // b1 registers with cluster B, which nobody asks
	cl := &clock{}
	col := f.executorCollector(cl, &gc.FlinkREST{URLs: []string{clusterA.URL}})
	cl.set(0)
	f.run(col, false)
	cl.set(time.Hour)
	r := f.run(col, false)
	if collectedExecutor(r, "b1") {
		t.Errorf("removed the working directory of TaskManager b1, which runs in a cluster nobody asked: %s", collected(r.Collected))
	}
	v := executorVerdict(t, r, "b1")
	if v.Verdict != index.VerdictUnknown || v.Failure != "" || !strings.HasSuffix(v.Evidence, "not among its 2 registered TaskManagers; no Flink asked has listed it") {
		t.Errorf("executor b1: %v (%s), failure %q; want unknown, no failure, no Flink asked has listed it", v.Verdict, v.Evidence, v.Failure)
	}
	if u := r.UnansweredExecutors(); len(u) != 0 {
		t.Errorf("UnansweredExecutors = %+v, want none: every Flink answered", u)
	}
	f.checkPaths("after an hour unlisted by a Flink that never listed b1", before)
	f.check()
}

// Only the Flinks asked now can say a TaskManager is gone: one listed by
// URL A, which is then no longer asked (A taken out of the collector's
// URLs), stays while only URL B, which never listed it, is asked and
// does not list it. Asked again, A decides.
func TestCollectExecutorListedByAURLNoLongerAskedStays(t *testing.T) {
	f := newFixture(t)
	f.build("tm_x/", "tm_x/blobStorage/", "tm_x/tmp/", "tm_x/tmp/rocksdb-lib-1/")
	before := f.paths()
	a := newFakeFlink(t, nil, "x")
	b := newFakeFlink(t, nil, "y")
	cl := &clock{}
	cl.set(0)
	r := f.run(f.executorCollector(cl, &gc.FlinkREST{URLs: []string{a.URL}}), false)
	if v := executorVerdict(t, r, "x"); v.Verdict != index.VerdictLive {
		t.Fatalf("executor x listed by A: %v (%s), want live", v.Verdict, v.Evidence)
	}
	col := f.executorCollector(cl, &gc.FlinkREST{URLs: []string{b.URL}})
	f.run(col, false)
	cl.set(time.Hour)
	r = f.run(col, false)
	if v := executorVerdict(t, r, "x"); v.Verdict != index.VerdictUnknown || v.Failure != "" {
		t.Errorf("executor x asked of B only: %v (%s), failure %q; want unknown, no failure", v.Verdict, v.Evidence, v.Failure)
	}
	if collectedExecutor(r, "x") {
		t.Errorf("removed x's tree on the word of B, which never listed it: %s", collected(r.Collected))
	}
	f.checkPaths("with only B asked", before)
	if e, err := f.executor("x"); err != nil || !slices.Equal(e.ListedBy, []string{a.URL}) {
		t.Errorf("executor x's record = %+v, %v; want listed by A only", e, err)
	}

	a.register("y")
	col = f.executorCollector(cl, &gc.FlinkREST{URLs: []string{a.URL, b.URL}})
	cl.set(0)
	if v := executorVerdict(t, f.run(col, false), "x"); v.Verdict != index.VerdictGone {
		t.Errorf("executor x unlisted by A, which listed it, and B: %v (%s), want gone", v.Verdict, v.Evidence)
	}
	cl.set(2 * time.Minute)
	if r := f.run(col, false); !collectedExecutor(r, "x") {
		t.Errorf("x's tree not collected, gone for the grace period: %s", collected(r.Collected))
	}
	f.check()
}

// Gone needs every Flink asked to answer: with one URL failing, a
// TaskManager the other does not list is unknown, kept, and reported
// unanswered with that URL's failure; listed by either, it is live.
func TestCollectExecutorOneURLFailing(t *testing.T) {
	f := newFixture(t)
	f.build(executorTree...)
	before := f.paths()
	f.sayGone(jobA, time.Now())
	up := newFakeFlink(t, nil, "y")
	down := newFakeFlink(t, nil)
	down.status = http.StatusInternalServerError
	cl := &clock{}
	col := f.executorCollector(cl, &gc.FlinkREST{URLs: []string{up.URL, down.URL}})

	cl.set(0)
	f.run(col, false)
	cl.set(time.Hour)
	r := f.run(col, false)
	v := executorVerdict(t, r, "x")
	if v.Verdict != index.VerdictUnknown || !strings.Contains(v.Failure, down.URL+": HTTP 500") {
		t.Errorf("executor x: %v, failure %q; want unknown, failing with %s's 500", v.Verdict, v.Failure, down.URL)
	}
	if u := r.UnansweredExecutors(); len(u) != 1 || u[0].Executor != "x" {
		t.Errorf("UnansweredExecutors = %+v, want x", u)
	}
	if collectedExecutor(r, "x") {
		t.Errorf("collected x's tree while one Flink failed: %s", collected(r.Collected))
	}
	f.checkPaths("with one Flink failing", without(before, jobATrees...))

	up.register("x")
	r = f.run(col, false)
	if v := executorVerdict(t, r, "x"); v.Verdict != index.VerdictLive || v.Failure != "" {
		t.Errorf("executor x listed by one Flink, the other failing: %v, failure %q; want live, none", v.Verdict, v.Failure)
	}
	if u := r.UnansweredExecutors(); len(u) != 0 {
		t.Errorf("UnansweredExecutors = %+v, want none", u)
	}
	f.check()
}

// The operator's word about an executor: gone collects its tree after the
// grace period with no oracle at all; live keeps it whatever Flink says,
// and a live Flink wins over the operator's gone; withdrawn, Flink's
// verdict holds again.
func TestCollectExecutorOperatorWord(t *testing.T) {
	G, L, U := index.VerdictGone, index.VerdictLive, index.VerdictUnknown
	for _, tc := range []struct {
		name    string
		said    index.Verdict
		flink   []string // the TaskManagers Flink lists, once it listed x; nil: no Flink asked
		want    index.Verdict
		collect bool
	}{
		{"gone, no oracle", G, nil, G, true},
		{"withdrawn, no oracle", U, nil, U, false},
		{"live, Flink no longer lists it", L, []string{"y"}, L, false},
		{"gone, Flink lists it", G, []string{"x"}, L, false},
		{"withdrawn, Flink no longer lists it", U, []string{"y"}, G, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.build(executorTree...)
			f.sayGone(jobA, time.Now())
			var oracles []gc.Oracle
			cl := &clock{}
			if tc.flink != nil {
				flink := newFakeFlink(t, nil, "x")
				oracles = append(oracles, &gc.FlinkREST{URLs: []string{flink.URL}})
				cl.set(0)
				f.run(f.executorCollector(cl, oracles...), false) // Flink knows x
				flink.register(tc.flink...)
			}
			if tc.said == U {
				f.sayExecutor("x", G, time.Now())
			}
			f.sayExecutor("x", tc.said, time.Now())
			col := f.executorCollector(cl, oracles...)
			cl.set(0)
			f.run(col, false)
			cl.set(time.Hour)
			r := f.run(col, false)
			if v := executorVerdict(t, r, "x"); v.Verdict != tc.want {
				t.Errorf("executor x: %v (%s), want %v", v.Verdict, v.Evidence, tc.want)
			}
			if got := collectedExecutor(r, "x"); got != tc.collect {
				t.Errorf("collected x's tree = %v, want %v: %s", got, tc.collect, collected(r.Collected))
			}
			f.check()
		})
	}
}

// An executor tree goes only once every job it held is collected (a job's
// state is judged by its job), and one that never held a job goes on its
// own verdict; what was written there after the verdict began stays.
func TestCollectExecutorJobsAndWrites(t *testing.T) {
	f := newFixture(t)
	f.build(executorTree...)
	f.build("tm_y/", "tm_y/blobStorage/", "tm_y/blobStorage/incoming")
	cl := &clock{}
	col := f.executorCollector(cl)
	f.sayExecutor("x", index.VerdictGone, time.Now())
	f.sayExecutor("y", index.VerdictGone, time.Now())
	cl.set(time.Hour)
	r := f.run(col, false)
	if collectedExecutor(r, "x") {
		t.Errorf("collected x's tree while job A's state, unknown, is in it: %s", collected(r.Collected))
	}
	if !collectedExecutor(r, "y") {
		t.Errorf("y, which held no job, gone for the grace period, not collected: %s", collected(r.Collected))
	}
	if len(only(f.paths(), "tm_x/")) != len(only(executorTree, "tm_x/")) {
		t.Errorf("x's tree lost names: %q", f.paths())
	}

	f.sayGone(jobA, time.Now())
	f.build("tm_x/blobStorage/later")
	r = f.run(col, false)
	if !collectedExecutor(r, "x") {
		t.Fatalf("x's tree not collected once A is: %s", collected(r.Collected))
	}
	f.checkPaths("after x is collected, with a file written after its verdict", []string{"tm_x/", "tm_x/blobStorage/", "tm_x/blobStorage/later"})
	if _, err := f.executor("x"); err != nil {
		t.Errorf("x's record went while its tree keeps a file: %v", err)
	}
	f.check()
}

// Execution asks again right before it removes an executor's tree: a
// TaskManager that registers between the plan and its execution keeps
// its tree.
func TestCollectExecutorAskedAgainBeforeRemoval(t *testing.T) {
	f := newFixture(t)
	f.build(executorTree...)
	before := f.paths()
	f.sayGone(jobA, time.Now())
	flink := newFakeFlink(t, nil, "x")
	cl := &clock{}
	col := f.executorCollector(cl, &gc.FlinkREST{URLs: []string{flink.URL}})
	cl.set(0)
	f.run(col, false) // Flink knows x
	flink.register("y")
	f.run(col, false)
	cl.set(time.Hour)
	p, err := col.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !collectedExecutor(p.Report(), "x") {
		t.Fatalf("the plan does not collect x: %s", collected(p.Report().Collected))
	}
	flink.register("x")
	r, err := col.Execute(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if collectedExecutor(r, "x") {
		t.Errorf("collected x's tree after x registered again: %s", collected(r.Collected))
	}
	f.checkPaths("after x registered again", without(before, jobATrees...))
	if e, err := f.executor("x"); err != nil || e.Verdict != index.VerdictLive {
		t.Errorf("x's record = %+v, %v; want live", e, err)
	}
	f.check()
}

// An operator's gone that a live answer outvoted, and that stayed on
// record, dates nothing: when the TaskManager later drops out of Flink's
// list (a JobManager that has just restarted lists none yet), or Flink
// fails, the gone verdict begins then and waits out the grace period. Were
// it dated from the old word, the first such run would remove the tree of
// a TaskManager that runs.
func TestCollectExecutorOutvotedOperatorWordDatesNothing(t *testing.T) {
	for _, outage := range []string{"an empty list", "a failing Flink"} {
		t.Run(outage, func(t *testing.T) {
			f := newFixture(t)
			f.build("tm_y/", "tm_y/blobStorage/", "tm_y/blobStorage/incoming/",
				"tm_y/tmp/", "tm_y/tmp/rocksdb-lib-1/", "tm_y/tmp/rocksdb-lib-1/librocksdbjni-linux64.so")
			f.sayExecutor("y", index.VerdictGone, time.Now()) // said in error: y runs on
			flink := newFakeFlink(t, nil, "y")
			col := &gc.Collector{Store: f.S, Oracles: []gc.Oracle{&gc.FlinkREST{URLs: []string{flink.URL}}}, Grace: 2 * time.Second}
			if v := executorVerdict(t, f.run(col, false), "y"); v.Verdict != index.VerdictLive {
				t.Fatalf("y: %v, want live: Flink lists it", v.Verdict)
			}
			time.Sleep(3 * time.Second) // longer than the grace period since the word
			if outage == "an empty list" {
				flink.register()
			} else {
				flink.mu.Lock()
				flink.status = http.StatusServiceUnavailable
				flink.mu.Unlock()
			}
			r := f.run(col, false)
			if v := executorVerdict(t, r, "y"); v.Verdict != index.VerdictGone {
				t.Fatalf("y: %v (%s), want gone: the operator's word", v.Verdict, v.Evidence)
			}
			if collectedExecutor(r, "y") {
				t.Errorf("the first run of %s removed y's tree, its gone dated from an outvoted word: %s", outage, collected(r.Collected))
			}
			time.Sleep(3 * time.Second) // now gone for the grace period
			if r := f.run(col, false); !collectedExecutor(r, "y") {
				t.Errorf("y, gone for the grace period on the operator's word, not collected: %s", collected(r.Collected))
			}
		})
	}
}

// An executor's tree in a report says what it is and no more: no job, and
// no job verdict of the zero time.
func TestExecutorCandidateJSONNamesNoJob(t *testing.T) {
	b, err := json.Marshal(gc.Candidate{Executor: "tm-1", Names: 3})
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"job", "verdict"} {
		if _, ok := keys[k]; ok {
			t.Errorf("an executor's candidate prints %q: %s", k, b)
		}
	}
	if keys["executor"] != "tm-1" {
		t.Errorf("an executor's candidate: %s, want executor tm-1", b)
	}
}
