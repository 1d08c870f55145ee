package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statefs/statefs/index"
)

// A TaskManager pod's life with statefs as its sidecar and the store on the
// pod's own disk (deploy/kubernetes/flink-taskmanager-sidecar.yaml), played
// on this machine: the daemon runs as the sidecar's command line does, on a
// store in a directory that stands in for the claim; the TaskManager writes
// Flink 2-shaped state through the mount; the pod stops (SIGTERM, as the
// kubelet stops a sidecar); the disk is attached on another node (the
// store copied to another directory) and the pod starts there. Between,
// the TaskManager's container dies and the sidecar serves on. Its state,
// owners and job records are all there, and the collector inside the pod,
// asking the JobManager, removes a finished job's state, ForSt's included.
func TestPodWithItsStoreMovesToAnotherNode(t *testing.T) {
	const pod = "flink-taskmanager-0"
	var finished atomic.Bool
	jobManager := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/taskmanagers" { // the pod's TaskManager, registered throughout
			fmt.Fprintf(w, `{"taskmanagers":[{"id":%q}]}`, pod)
			return
		}
		state := "RUNNING"
		if r.URL.Path == "/jobs/"+jobGone && finished.Load() {
			state = "FINISHED"
		}
		fmt.Fprintf(w, `{"jid":%q,"state":%q}`, filepath.Base(r.URL.Path), state)
	}))
	defer jobManager.Close()
	sidecar := func() []string {
		return []string{"--allow-other", "--metrics-addr", freeAddr(t), "--gc-interval", "200ms", "--gc-grace", "0", "--flink-url", jobManager.URL}
	}

	// On the first node: the TaskManager writes its local state, a live
	// RocksDB and a live asynchronous ForSt database, for two jobs.
	claim := filepath.Join(t.TempDir(), "claim", "store")
	require.NoError(t, os.MkdirAll(filepath.Dir(claim), 0o755))
	first := mountStore(t, claim, sidecar()...)
	files := map[string][]byte{}
	goneFiles := map[string][]byte{}
	for job, seed := range map[string]int64{jobGone: 60, jobLive: 70} {
		state := flinkTreeOn(t, first, pod, job, seed)
		forst, cache := forstTreeOn(t, first, pod, job, seed+5)
		maps.Copy(state, forst)
		maps.Copy(files, state)
		maps.Copy(files, cache)
		if job == jobGone {
			maps.Copy(goneFiles, state)
		}
	}
	// The TaskManager's container dies with files open and a write under
	// way; the sidecar keeps serving, and the restarted container finds
	// what was written.
	tm := exec.Command("sh", "-c", "exec 3>>tm_"+pod+"/log; echo started >&3; exec sleep 60")
	tm.Dir = first.Dir
	require.NoError(t, tm.Start())
	require.Eventually(t, func() bool { b, _ := os.ReadFile(first.Path("tm_"+pod, "log")); return len(b) > 0 },
		5*time.Second, 20*time.Millisecond, "the TaskManager wrote nothing")
	require.NoError(t, tm.Process.Kill())
	tm.Wait()
	files["tm_"+pod+"/log"] = []byte("started\n")
	requireTree(t, first, files, true)

	waitAllSealed(t, first)
	jobsBefore := podJobs(t, first)
	require.Len(t, jobsBefore, 2)
	first.Unmount() // SIGTERM, and the daemon's exit, as the kubelet waits for it

	// The disk, attached on another node.
	moved := filepath.Join(t.TempDir(), "claim", "store")
	require.NoError(t, os.MkdirAll(filepath.Dir(moved), 0o755))
	out, err := exec.Command("cp", "-a", claim, moved).CombinedOutput()
	require.NoError(t, err, "copying the store: %s", out)
	second := mountStore(t, moved, sidecar()...)
	requireTree(t, second, files, true)
	require.Equal(t, jobsBefore, podJobs(t, second), "the job records after the move")

	// The job finishes: the collector in the pod removes its state, and
	// only its.
	finished.Store(true)
	require.Eventually(t, func() bool {
		for p := range goneFiles {
			if _, err := os.Lstat(second.Path(p)); !os.IsNotExist(err) {
				return false
			}
		}
		return true
	}, 15*time.Second, 100*time.Millisecond, "the collector in the pod left the finished job's state:\n%s", second.Log())
	requireAbsent(t, second.Path("tm_"+pod, "tmp", jobGone))
	for p, b := range files {
		if _, gone := goneFiles[p]; !gone {
			requireContent(t, second.Path(p), b)
		}
	}
}

// podJobs is what `statefs jobs --json` says of m's jobs that a move of
// the store keeps: their executors, allocations and first writes.
func podJobs(t *testing.T, m *Mount) map[string]string {
	t.Helper()
	var jobs []index.Job
	raw := mustCLI(t, "jobs", "--store", m.Store, "--json")
	require.NoError(t, json.Unmarshal([]byte(raw), &jobs), "%s", raw)
	out := map[string]string{}
	for _, j := range jobs {
		out[j.ID] = fmt.Sprintf("executors %v, allocations %v, first write %d", j.Executors, j.Allocations, j.FirstWrite)
	}
	return out
}
