package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// collectedRecord is one record of statefs jobs --collected --json.
type collectedRecord struct {
	At       time.Time `json:"at"`
	Job      string    `json:"job"`
	Executor string    `json:"executor"`
	Verdict  string    `json:"verdict"`
	Evidence string    `json:"evidence"`
	Why      string    `json:"why"`
	Names    int       `json:"names"`
	Files    int       `json:"files"`
	Bytes    int64     `json:"bytes"`
}

// collectedJSON runs statefs jobs --collected --json on store, holds its
// output to the style of every --json, and returns its records.
func collectedJSON(t *testing.T, store string) []collectedRecord {
	t.Helper()
	r := runCLI(t, 30*time.Second, "jobs", "--store", store, "--collected", "--json")
	require.Zero(t, r.code, "statefs jobs --collected --json: %s", r.stderr)
	require.Empty(t, printedJSONProblems("jobs --collected --json", r.stdout), "%s", r.stdout)
	var recs []collectedRecord
	cliJSON(t, &recs, "jobs", "--store", store, "--collected", "--json")
	return recs
}

// What the collector removes is logged and listed by statefs jobs
// --collected, through the daemon and offline; a job every oracle knows
// nothing of is named and kept, unless the operator opts in to
// --collect-unknown-after.
func TestJobsCollectedAfterGC(t *testing.T) {
	var registered atomic.Bool // tm-1, registered until the first run, then gone too
	registered.Store(true)
	flink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/jobs/"+jobGone {
			fmt.Fprint(w, `{"jid":"`+jobGone+`","state":"FINISHED"}`)
			return
		}
		if r.URL.Path == "/taskmanagers" {
			if registered.Load() {
				fmt.Fprint(w, `{"taskmanagers":[{"id":"tm-1"}]}`)
			} else {
				fmt.Fprint(w, `{"taskmanagers":[]}`)
			}
			return
		}
		http.NotFound(w, r) // jobLive: forgotten by Flink
	}))
	defer flink.Close()
	m := mountFS(t)
	gone := flinkTree(t, m, jobGone, 130)
	unknown := flinkTree(t, m, jobLive, 140)
	require.Empty(t, collectedJSON(t, m.Store), "nothing collected yet")

	r := runCLI(t, time.Minute, "gc", "--store", m.Store, "--grace", "0", "--flink-url", flink.URL)
	require.Zero(t, r.code, "statefs gc: %s%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "removed job "+jobGone)
	require.Contains(t, r.stderr, "job "+jobLive+": every oracle answers it knows nothing of it")
	require.Regexp(t, `msg="collector removed" job=`+jobGone+` verdict=gone .*names=\d+ files=\d+ bytes=\d+`, m.Log())
	require.Contains(t, m.Log(), "knows nothing of a job")
	requireTree(t, m, gone, false)
	requireTree(t, m, unknown, true)
	registered.Store(false)

	table := mustCLI(t, "jobs", "--store", m.Store, "--collected")
	require.Contains(t, table, jobGone)
	require.Contains(t, table, "FINISHED")
	require.NotContains(t, table, jobLive)
	recs := collectedJSON(t, m.Store)
	require.Len(t, recs, 1, "%+v", recs)
	rec := recs[0]
	require.Equal(t, jobGone, rec.Job)
	require.Equal(t, "gone", rec.Verdict)
	require.Contains(t, rec.Evidence, "FINISHED")
	require.Contains(t, rec.Why, "gone since")
	require.Positive(t, rec.Names)
	require.Positive(t, rec.Files)
	require.Positive(t, rec.Bytes)
	require.WithinDuration(t, time.Now(), rec.At, time.Minute)
	var view []collectedRecord
	require.NoError(t, json.Unmarshal(fileBytes(t, m.Path(".statefs", "collected.json")), &view))
	require.Equal(t, recs, view, ".statefs/collected.json")

	// Offline, the same; and the operator's opt-in collects the unknown
	// job, then the executor's tree no job holds any more.
	m.Unmount()
	require.Equal(t, recs, collectedJSON(t, m.Store))
	out := mustCLI(t, "gc", "--store", m.Store, "--grace", "0", "--flink-url", flink.URL, "--collect-unknown-after", "1ms")
	require.Contains(t, out, "removed job "+jobLive)
	require.Contains(t, out, "unknown to every oracle")
	recs = collectedJSON(t, m.Store)
	require.GreaterOrEqual(t, len(recs), 2, "%+v", recs)
	require.Equal(t, jobLive, recs[1].Job)
	require.Equal(t, "unknown", recs[1].Verdict)
	require.Contains(t, recs[1].Evidence, "404")
	require.Len(t, recs, 3, "%+v", recs)
	require.Equal(t, "tm-1", recs[2].Executor)
	require.Equal(t, "gone", recs[2].Verdict)
	require.Contains(t, recs[2].Evidence, "not among its 0 registered TaskManagers")
	require.Contains(t, out, "removed executor tm-1")
	m.Start()
	requireTree(t, m, unknown, false)
}
