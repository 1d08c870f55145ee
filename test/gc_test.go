package test

import (
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/store"
)

// A job the operator marks gone is collected, with its chunks, and nothing
// else is; a dry run before removes nothing.
func TestGCCollectsOnlyTheGoneJob(t *testing.T) {
	m := mountFS(t, "--seal-delay", "0", "--seal-as", "chunks")
	gone := flinkTree(t, m, jobGone, 10)
	live := flinkTree(t, m, jobLive, 20)
	waitAllSealed(t, m)
	m.Unmount()
	before := chunkBytes(t, m)

	jobs := mustCLI(t, "jobs", "--store", m.Store)
	require.Contains(t, jobs, jobGone)
	require.Contains(t, jobs, jobLive)
	mustCLI(t, "job", "--store", m.Store, "gone", jobGone)

	dry := mustCLI(t, "gc", "--store", m.Store, "--grace", "0", "--dry-run")
	require.Contains(t, dry, "would remove job "+jobGone)
	require.NotContains(t, dry, "remove job "+jobLive)
	require.Equal(t, before, chunkBytes(t, m), "a dry run removed chunks")

	out := mustCLI(t, "gc", "--store", m.Store, "--grace", "0")
	require.Contains(t, out, "removed job "+jobGone)
	freed := before - chunkBytes(t, m)
	require.GreaterOrEqual(t, freed, int64(5<<20), "gc freed %d bytes of chunks:\n%s", freed, out)
	// The dry run foretold the chunks the sweep freed.
	swept := regexp.MustCompile(`remove(?:d)? (\d+ chunks and \d+ objects, [^,]+),`)
	require.Equal(t, swept.FindStringSubmatch(out)[1], swept.FindStringSubmatch(dry)[1], "dry:\n%s\nreal:\n%s", dry, out)

	m.Start()
	requireTree(t, m, gone, false)
	requireTree(t, m, live, true)
}

// forstTree writes job's state as Flink 2's asynchronous ForSt backend lays
// it out under executor tm-1 (tmp/<job>/op_<operator>_attempt_<n>/db/),
// with one SST copied into ForSt's file cache, and returns the job's files
// and the cache's.
func forstTree(t *testing.T, m *Mount, job string, seed int64) (files, cache map[string][]byte) {
	t.Helper()
	return forstTreeOn(t, m, "tm-1", job, seed)
}

// forstTreeOn is forstTree under the executor with resource id rid.
func forstTreeOn(t *testing.T, m *Mount, rid, job string, seed int64) (files, cache map[string][]byte) {
	t.Helper()
	db := "tm_" + rid + "/tmp/" + job + "/op_KeyedProcessOperator_window_attempt_0/db"
	sst := pseudoRandom(1<<20, seed)
	files = map[string][]byte{
		db + "/000009.sst":      sst,
		db + "/MANIFEST-000004": pseudoRandom(4<<10, seed+1),
		db + "/CURRENT":         []byte("MANIFEST-000004\n"),
	}
	cache = map[string][]byte{"tm_" + rid + "/tmp/cache/" + job + "-000009.sst": sst}
	for p, b := range files {
		putFileWithDirs(t, m.Path(p), b)
	}
	for p, b := range cache {
		putFileWithDirs(t, m.Path(p), b)
	}
	return files, cache
}

// Flink 2's asynchronous ForSt keeps a job's live database in
// tmp/<job>/: it is the job's, collected with it; ForSt's file cache holds
// copies of any job's SSTs and is the executor's, never collected with a
// job.
func TestGCCollectsForStState(t *testing.T) {
	m := mountFS(t)
	gone, goneCache := forstTree(t, m, jobGone, 30)
	live, liveCache := forstTree(t, m, jobLive, 40)
	mustCLI(t, "job", "--store", m.Store, "gone", jobGone)
	out := mustCLI(t, "gc", "--store", m.Store, "--grace", "0")
	require.Contains(t, out, "removed job "+jobGone)
	requireTree(t, m, gone, false)
	requireAbsent(t, m.Path("tm_tm-1/tmp", jobGone))
	requireTree(t, m, live, true)
	requireTree(t, m, goneCache, true)
	requireTree(t, m, liveCache, true)
}

// Without the grace period passed, or with the verdict unknown, nothing goes.
func TestGCKeepsWhatIsNotConfirmedGone(t *testing.T) {
	m := mountFS(t)
	files := flinkTree(t, m, jobGone, 30)
	m.Unmount()
	mustCLI(t, "gc", "--store", m.Store, "--grace", "0") // no oracle: unknown
	mustCLI(t, "job", "--store", m.Store, "gone", jobGone)
	out := mustCLI(t, "gc", "--store", m.Store, "--grace", "1h")
	require.NotContains(t, out, "removed job")
	m.Start()
	requireTree(t, m, files, true)
}

// A live answer from Flink wins over the operator's gone, and a job that
// Flink reports FINISHED is collected; the TaskManager that Flink lists
// keeps its tree.
func TestGCAsksFlink(t *testing.T) {
	var hits int
	flink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		switch r.URL.Path {
		case "/jobs/" + jobLive:
			fmt.Fprint(w, `{"jid":"`+jobLive+`","state":"RUNNING"}`)
		case "/jobs/" + jobGone:
			fmt.Fprint(w, `{"jid":"`+jobGone+`","state":"FINISHED"}`)
		case "/taskmanagers":
			fmt.Fprint(w, `{"taskmanagers":[{"id":"tm-1"}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer flink.Close()
	m := mountFS(t)
	gone := flinkTree(t, m, jobGone, 40)
	live := flinkTree(t, m, jobLive, 50)
	m.Unmount()
	mustCLI(t, "job", "--store", m.Store, "gone", jobLive) // the operator is wrong
	out := mustCLI(t, "gc", "--store", m.Store, "--grace", "0", "--flink-url", flink.URL)
	require.Contains(t, out, "removed job "+jobGone)
	require.NotContains(t, out, "removed job "+jobLive)
	require.Contains(t, out, "executor tm-1: live (")
	require.Positive(t, hits)
	m.Start()
	requireTree(t, m, gone, false)
	requireTree(t, m, live, true)
}

// A job id reused after its verdict keeps the state written after it.
func TestGCKeepsStateWrittenAfterTheVerdict(t *testing.T) {
	m := mountFS(t)
	old := flinkTree(t, m, jobGone, 60)
	m.Unmount()
	mustCLI(t, "job", "--store", m.Store, "gone", jobGone)
	m.Start()
	// The id comes back (application mode with HA reuses it) and writes anew.
	fresh := fmt.Sprintf("tm_tm-1/localState/aid_%s/jid_%s/vtx_%s_sti_1/chk_1/new.sst", holdAlloc, jobGone, holdVertex)
	data := pseudoRandom(1<<20, 61)
	putFileWithDirs(t, m.Path(fresh), data)
	m.Unmount()
	out := mustCLI(t, "gc", "--store", m.Store, "--grace", "0")
	require.Contains(t, out, "removed job "+jobGone)
	m.Start()
	requireContent(t, m.Path(fresh), data)
	for p := range old {
		_, err := os.Lstat(m.Path(p))
		require.True(t, os.IsNotExist(err), "%s written before the verdict should be gone", p)
	}
}

// On a mounted store, verdicts and gc go through the daemon's control
// socket, and what gc removes disappears from the mount at once.
func TestGCThroughTheDaemon(t *testing.T) {
	m := mountFS(t)
	gone := flinkTree(t, m, jobGone, 70)
	live := flinkTree(t, m, jobLive, 80)
	// The kernel has these in its caches now.
	requireTree(t, m, gone, true)

	info, err := os.Stat(filepath.Join(m.Store, "control.sock"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the control socket is for the store's owner only")

	require.Contains(t, mustCLI(t, "jobs", "--store", m.Store), jobGone)
	mustCLI(t, "job", "--store", m.Store, "gone", jobGone)
	out := mustCLI(t, "gc", "--store", m.Store, "--grace", "0")
	require.Contains(t, out, "removed job "+jobGone)
	requireTree(t, m, gone, false)
	requireTree(t, m, live, true)
	m.Restart()
	requireTree(t, m, gone, false)
	requireTree(t, m, live, true)
}

// Bad input to the CLI gets one clear line and changes nothing.
func TestGCBadInput(t *testing.T) {
	m := mountFS(t)
	files := flinkTree(t, m, jobGone, 90)
	for _, args := range [][]string{
		{"job", "--store", m.Store, "gone", "not-a-job-id"},
		{"job", "--store", m.Store, "maybe", jobGone},
		{"job", "--store", m.Store, "gone", jobLive}, // no state of it here
		{"gc", "--store", m.Store, "--grace", "-1s"},
		{"gc", "--store", m.Store, "--flink-url", "notaurl"},
		{"job", "--store", m.Store, "withdraw"},
		{"gc", "--store", filepath.Join(m.Store, "nope")},
		{"executor", "--store", m.Store, "gone", "../tm-1"},
		{"executor", "--store", m.Store, "gone", "tm_tm-1/blobStorage"},
		{"executor", "--store", m.Store, "gone", ""},
		{"executor", "--store", m.Store, "maybe", "tm-1"},
		{"executor", "--store", m.Store, "gone", "tm-2"}, // no tree of it here
		{"executor", "--store", m.Store, "withdraw"},
		{"executors", "--store", m.Store, "tm-1"},
	} {
		before := mustCLI(t, "executors", "--store", m.Store, "--json")
		out, err := statefs(args...)
		require.Error(t, err, "statefs %v", args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(out), "\n")+1, "one line for %v: %q", args, out)
		require.Equal(t, before, mustCLI(t, "executors", "--store", m.Store, "--json"), "statefs %v changed an executor's record", args)
	}
	requireTree(t, m, files, true)
}

// An idle TaskManager of a session cluster, between jobs, keeps its
// working directory (its blobs, RocksDB's native library) while Flink
// lists it, after its last job is collected and with no grace period; once
// Flink stops listing it, its tree goes after the grace period. The
// verdicts show in statefs executors and statefs gc --dry-run; the
// operator's word shows at once and is withdrawn.
func TestGCKeepsARegisteredTaskManagersTree(t *testing.T) {
	var registered atomic.Bool
	registered.Store(true)
	flink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/jobs/" + jobGone:
			fmt.Fprint(w, `{"jid":"`+jobGone+`","state":"FINISHED"}`)
		case "/taskmanagers":
			list := `{"id":"tm-other","path":"pekko.tcp://flink@10.0.0.2:6122/user/rpc/taskmanager_0","freeSlots":2}`
			if registered.Load() {
				list += `,{"id":"tm-idle","path":"pekko.tcp://flink@10.0.0.1:6122/user/rpc/taskmanager_0","freeSlots":2}`
			}
			fmt.Fprint(w, `{"taskmanagers":[`+list+`]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer flink.Close()
	m := mountFS(t)
	job := flinkTreeOn(t, m, "tm-idle", jobGone, 140)
	own := map[string][]byte{
		"tm_tm-idle/blobStorage/incoming/temp-00000001":            pseudoRandom(64<<10, 141),
		"tm_tm-idle/tmp/rocksdb-lib-5f1c/librocksdbjni-linux64.so": pseudoRandom(256<<10, 142),
		"tm_tm-idle/slotAllocationSnapshots/" + holdAlloc + ".bin": []byte("slot 0"),
	}
	for p, b := range own {
		putFileWithDirs(t, m.Path(p), b)
	}
	waitAllSealed(t, m)

	out := mustCLI(t, "gc", "--store", m.Store, "--grace", "0", "--flink-url", flink.URL)
	require.Contains(t, out, "removed job "+jobGone)
	require.Contains(t, out, "executor tm-idle: live (")
	require.NotContains(t, out, "removed executor")
	requireTree(t, m, job, false)
	requireTree(t, m, own, true)
	require.Regexp(t, `(?m)^tm-idle +live +\S+ +- +\S+ +1 +operator: nothing said; flink `+flink.URL+`: registered TaskManager$`, mustCLI(t, "executors", "--store", m.Store))

	// The operator's word shows at once; live wins over it.
	mustCLI(t, "executor", "--store", m.Store, "gone", "tm-idle")
	require.Regexp(t, `(?m)^tm-idle +live +\S+ +gone at \S+ `, mustCLI(t, "executors", "--store", m.Store))
	out = mustCLI(t, "gc", "--store", m.Store, "--grace", "0", "--flink-url", flink.URL)
	require.NotContains(t, out, "removed executor")
	mustCLI(t, "executor", "--store", m.Store, "withdraw", "tm-idle")
	var executors []index.Executor
	cliJSON(t, &executors, "executors", "--store", m.Store, "--json")
	require.Len(t, executors, 1)
	require.Equal(t, index.VerdictUnknown, executors[0].Operator, "a withdrawn word stays: %+v", executors[0])

	registered.Store(false)
	dry := mustCLI(t, "gc", "--store", m.Store, "--grace", "1h", "--flink-url", flink.URL, "--dry-run")
	require.Contains(t, dry, "executor tm-idle: gone (")
	require.Contains(t, dry, "not among its 1 registered TaskManagers")
	require.Regexp(t, `executor tm-idle: gone \(.*\); gone since \S+, collectable after \S+ \(--gc-grace 1h0m0s\)`, dry)
	require.NotContains(t, dry, "would remove executor")
	out = mustCLI(t, "gc", "--store", m.Store, "--grace", "1h", "--flink-url", flink.URL)
	require.NotContains(t, out, "removed executor")
	requireTree(t, m, own, true)
	require.Regexp(t, `(?m)^tm-idle +gone +`, mustCLI(t, "executors", "--store", m.Store))

	out = mustCLI(t, "gc", "--store", m.Store, "--grace", "0", "--flink-url", flink.URL)
	require.Contains(t, out, "removed executor tm-idle")
	requireTree(t, m, own, false)
	_, err := os.Lstat(m.Path("tm_tm-idle"))
	require.True(t, os.IsNotExist(err), "tm_tm-idle should be gone: %v", err)
	require.Equal(t, "[]\n", mustCLI(t, "executors", "--store", m.Store, "--json"))
}

// The daemon's periodic collector removes a job once the operator says it
// is gone.
func TestGCPeriodicInTheDaemon(t *testing.T) {
	m := mountFS(t, "--gc-interval", "100ms", "--gc-grace", "0")
	gone := flinkTree(t, m, jobGone, 100)
	live := flinkTree(t, m, jobLive, 110)
	mustCLI(t, "job", "--store", m.Store, "gone", jobGone)
	// The job has two roots (its local state and its RocksDB instance),
	// which a run removes one after the other.
	deadline := time.Now().Add(15 * time.Second)
	for left := len(gone); left > 0; {
		left = 0
		for p := range gone {
			if _, err := os.Lstat(m.Path(p)); !os.IsNotExist(err) {
				left++
			}
		}
		require.True(t, time.Now().Before(deadline), "the periodic collector left %d files of the gone job:\n%s", left, m.Log())
		time.Sleep(50 * time.Millisecond)
	}
	requireTree(t, m, live, true)
}

// DESIGN invariant 3 on a live mount: writers keep writing and deleting
// files whose chunks are the chunks of a job being collected, while gc runs
// through the daemon again and again; every surviving file reads back
// exactly, before and after a restart.
func TestGCWhileWritersDeduplicate(t *testing.T) {
	m := mountFS(t, "--seal-delay", "0")
	blobs := make([][]byte, 6)
	for i := range blobs {
		blobs[i] = pseudoRandom(1<<20+i*512, int64(200+i))
	}
	// The gone job holds every blob, so its collection makes their chunks
	// garbage while the writers deduplicate against them.
	dir := subtaskDir(holdAlloc, jobGone) + "/chk_1"
	require.NoError(t, os.MkdirAll(m.Path(dir), 0o755))
	for i, b := range blobs {
		putFile(t, m.Path(dir, fmt.Sprintf("%d.sst", i)), b, 0o644)
	}
	waitAllSealed(t, m)
	mustCLI(t, "job", "--store", m.Store, "gone", jobGone)
	require.NoError(t, os.Mkdir(m.Path("work"), 0o755))

	deadline := time.Now().Add(4 * time.Second)
	var wg sync.WaitGroup
	survivors := make([]map[string]int, 3)
	errs := make(chan error, 4)
	for w := range survivors {
		survivors[w] = map[string]int{}
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				name := m.Path("work", fmt.Sprintf("w%d-%d", w, i))
				b := (w + i) % len(blobs)
				if err := os.WriteFile(name, blobs[b], 0o644); err != nil {
					errs <- err
					return
				}
				survivors[w][name] = b
				if i%3 != 0 {
					if err := os.Remove(name); err != nil {
						errs <- err
						return
					}
					delete(survivors[w], name)
				}
			}
		})
	}
	runs := 0
	for time.Now().Before(deadline) {
		mustCLI(t, "gc", "--store", m.Store, "--grace", "0")
		runs++
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	require.Greater(t, runs, 1)
	verify := func(when string) {
		for _, files := range survivors {
			for name, b := range files {
				got, err := os.ReadFile(name)
				require.NoError(t, err, "%s %s", name, when)
				requireSameBytes(t, blobs[b], got, name+" "+when)
			}
		}
	}
	waitAllSealed(t, m)
	mustCLI(t, "gc", "--store", m.Store, "--grace", "0")
	dropCache(t, m.Path("work"))
	verify("after gc")
	m.Restart()
	verify("after restart")
}

// The tree of an executor whose TaskManager is said gone, whose jobs are
// all gone and collected, and that nothing writes any more (a TaskManager
// pod name that never comes back), goes too; a tree that still holds a
// job's state stays.
func TestGCRemovesAbandonedExecutorTrees(t *testing.T) {
	m := mountFS(t)
	old := flinkTreeOn(t, m, "tm-old", jobGone, 300)
	current := flinkTreeOn(t, m, "tm-new", jobLive, 310)
	// The executors' own files: slots to re-offer after a restart.
	for tree, dir := range map[*map[string][]byte]string{&old: "tm_tm-old", &current: "tm_tm-new"} {
		slot := dir + "/slotAllocationSnapshots/0.bin"
		putFileWithDirs(t, m.Path(slot), []byte("slot 0"))
		(*tree)[slot] = []byte("slot 0")
	}
	m.Unmount()
	mustCLI(t, "job", "--store", m.Store, "gone", jobGone)
	for _, rid := range []string{"tm-old", "tm-new"} {
		mustCLI(t, "executor", "--store", m.Store, "gone", rid)
	}
	out := mustCLI(t, "gc", "--store", m.Store, "--grace", "0")
	require.Contains(t, out, "removed executor tm-old")
	require.NotContains(t, out, "removed executor tm-new")
	m.Start()
	requireTree(t, m, old, false)
	_, err := os.Lstat(m.Path("tm_tm-old"))
	require.True(t, os.IsNotExist(err), "tm_tm-old should be gone: %v", err)
	requireTree(t, m, current, true)
}

// A gc killed in the middle of removing a job, and run again, leaves a
// store that fsck finds consistent, and the job gone.
func TestGCKilledMidRunResumes(t *testing.T) {
	m := mountFS(t)
	dir := subtaskDir(holdAlloc, jobGone)
	for c := range 20 {
		chk := m.Path(dir, fmt.Sprintf("chk_%d", c))
		require.NoError(t, os.MkdirAll(chk, 0o755))
		for f := range 100 {
			putFile(t, filepath.Join(chk, fmt.Sprintf("%06d.sst", f)), []byte(fmt.Sprintf("%d/%d", c, f)), 0o644)
		}
	}
	m.Unmount()
	mustCLI(t, "job", "--store", m.Store, "gone", jobGone)

	// Kill gc later and later until a kill lands in the middle of the
	// removal: some of the job's files gone, some left. The removal starts
	// once the run has opened the store and planned (a tenth of a second
	// or more), and takes about a second.
	left := 2000
	for try := 0; left == 2000; try++ {
		require.Less(t, try, 100, "no kill landed while gc was removing")
		cmd := exec.Command(binary, "gc", "--store", m.Store, "--grace", "0")
		require.NoError(t, cmd.Start())
		time.Sleep(time.Duration(try*20) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		out, err := statefs("fsck", "--store", m.Store)
		require.NoError(t, err, "fsck after a killed gc:\n%s", out)
		m.Start()
		left = 0
		filepath.WalkDir(m.Path(dir), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				left++
			}
			return nil
		})
		m.Unmount()
	}
	require.Positive(t, left, "gc finished before the kill; nothing was interrupted")
	t.Logf("a killed gc left %d of the job's 2000 files", left)

	mustCLI(t, "gc", "--store", m.Store, "--grace", "0")
	out, err := statefs("fsck", "--store", m.Store)
	require.NoError(t, err, "fsck after the re-run:\n%s", out)
	m.Start()
	_, err = os.Lstat(m.Path(dir))
	require.True(t, os.IsNotExist(err), "the job's state should be gone: %v", err)
}

// A collector whose oracle cannot answer says so: the daemon's start-up
// log states its configuration, each run logs a warning naming the job and
// the failure and counts as unanswered, not ok, and statefs gc exits 1
// naming the job; the job's state stays.
func TestGCUnansweredIsNotOK(t *testing.T) {
	down := "http://" + freeAddr(t) // nothing listens there
	addr := freeAddr(t)
	m := mountFS(t, "--gc-interval", "100ms", "--gc-grace", "0", "--flink-url", down, "--metrics-addr", addr)
	files := flinkTree(t, m, jobGone, 120)
	require.Contains(t, m.Log(), "collector on")
	require.Contains(t, m.Log(), down)
	require.Eventually(t, func() bool {
		return scrapeMetrics(t, addr).value("statefs_gc_runs_total", "unanswered") >= 1
	}, 30*time.Second, 50*time.Millisecond, "no unanswered run counted:\n%s", tail(m.Log(), 3000))
	require.Zero(t, scrapeMetrics(t, addr).value("statefs_gc_runs_total", "ok"), "a run with an unreachable oracle counted ok")
	require.Contains(t, m.Log(), "no oracle could answer about a job")
	require.Contains(t, m.Log(), jobGone)
	require.Contains(t, m.Log(), "no oracle could answer about an executor")
	m.Unmount()

	r := runCLI(t, time.Minute, "gc", "--store", m.Store, "--gc-grace", "0", "--flink-url", down)
	require.Equal(t, 1, r.code, "statefs gc with an unreachable oracle:\n%s%s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, "job "+jobGone+": no oracle could answer")
	require.Contains(t, r.stderr, "executor tm-1: no oracle could answer")
	require.Contains(t, r.stderr, "unreachable")
	m.Start()
	requireTree(t, m, files, true)
}

// The operator's word shows in statefs jobs as soon as it is said, and a
// withdrawn word is gone from it: a withdrawn "gone" collects nothing.
// Beside it, jobs says what each job's state takes of the disk, as du does,
// in the table and in --json, offline and through the daemon.
func TestJobVerdictShowsAndWithdraws(t *testing.T) {
	m := mountFS(t)
	files := flinkTree(t, m, jobGone, 130)
	m.Unmount()
	var du store.DiskUsage
	cliJSON(t, &du, "du", "--store", m.Store, "--json")
	i := slices.IndexFunc(du.Groups, func(g store.GroupUsage) bool { return g.Group == jobGone })
	require.GreaterOrEqual(t, i, 0, "du lists no job %s: %+v", jobGone, du.Groups)
	require.Positive(t, du.Groups[i].PhysicalBytes)
	require.Regexp(t, fmt.Sprintf(`(?m)^%s .* %d +$`, jobGone, du.Groups[i].PhysicalBytes), mustCLI(t, "jobs", "--store", m.Store, "--bytes"))
	require.Regexp(t, `(?m)^`+jobGone+` .* [0-9.]+ [KM]iB +$`, mustCLI(t, "jobs", "--store", m.Store))
	requireJobDiskBytes(t, m, du.Groups[i].PhysicalBytes)
	mustCLI(t, "job", "--store", m.Store, "gone", jobGone)
	require.Regexp(t, jobGone+` +unknown +- +gone at `, mustCLI(t, "jobs", "--store", m.Store))
	mustCLI(t, "job", "--store", m.Store, "withdraw", jobGone)
	require.Regexp(t, jobGone+` +unknown +- +- `, mustCLI(t, "jobs", "--store", m.Store))
	out := mustCLI(t, "gc", "--store", m.Store, "--gc-grace", "0")
	require.NotContains(t, out, "removed job "+jobGone)
	m.Start()
	requireTree(t, m, files, true)
	cliJSON(t, &du, "du", "--store", m.Store, "--json")
	i = slices.IndexFunc(du.Groups, func(g store.GroupUsage) bool { return g.Group == jobGone })
	require.GreaterOrEqual(t, i, 0, "du through the daemon lists no job %s: %+v", jobGone, du.Groups)
	requireJobDiskBytes(t, m, du.Groups[i].PhysicalBytes)
}

// requireJobDiskBytes checks that statefs jobs --json gives jobGone's share
// of the disk as want.
func requireJobDiskBytes(t *testing.T, m *Mount, want int64) {
	t.Helper()
	var jobs []struct {
		ID        string `json:"id"`
		DiskBytes *int64 `json:"disk_bytes"`
	}
	cliJSON(t, &jobs, "jobs", "--store", m.Store, "--json")
	require.Len(t, jobs, 1)
	require.Equal(t, jobGone, jobs[0].ID)
	require.NotNil(t, jobs[0].DiskBytes, "statefs jobs --json gives no disk_bytes")
	require.Equal(t, want, *jobs[0].DiskBytes, "statefs jobs --json's disk_bytes, want du's physical bytes")
}

// A dry run says of a gone job within its grace period why it stays: since
// when it has been gone, and from when the grace period lets it go, in the
// table and in --json.
func TestGCDryRunSaysWhenAGoneJobIsCollectable(t *testing.T) {
	m := mountFS(t)
	files := flinkTree(t, m, jobGone, 140)
	m.Unmount()
	mustCLI(t, "job", "--store", m.Store, "gone", jobGone)

	var r gc.Report
	cliJSON(t, &r, "gc", "--store", m.Store, "--gc-grace", "1h", "--dry-run", "--json")
	require.Len(t, r.Verdicts, 1)
	v := r.Verdicts[0]
	require.Equal(t, index.VerdictGone, v.Verdict)
	require.False(t, v.Since.IsZero(), "a gone verdict without since: %+v", v)
	require.Equal(t, v.Since.Add(time.Hour), v.CollectableAt, "collectable_at, want since + --gc-grace")
	require.Empty(t, r.Collected)

	out := mustCLI(t, "gc", "--store", m.Store, "--gc-grace", "1h", "--dry-run")
	require.Contains(t, out, fmt.Sprintf("job %s: gone (%s); gone since %s, collectable after %s (--gc-grace 1h0m0s)\n",
		jobGone, v.Evidence, v.Since.Format(time.RFC3339), v.CollectableAt.Format(time.RFC3339)))

	// Past the grace period the job is collected, and the line says no more.
	out = mustCLI(t, "gc", "--store", m.Store, "--gc-grace", "0s", "--dry-run")
	require.Contains(t, out, "would remove job "+jobGone)
	require.NotContains(t, out, "collectable after")
	m.Start()
	requireTree(t, m, files, true)
}
