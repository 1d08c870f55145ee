package gc_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/flinkid"
)

// testJob is a valid Flink job id.
const testJob = "a1b2c3d4e5f60718293a4b5c6d7e8f90"

// stubOracle answers with a fixed verdict and counts the questions.
type stubOracle struct {
	name    string
	verdict index.Verdict
	calls   atomic.Int64
	askedAt atomic.Int64 // UnixNano of the last call
}

func (s *stubOracle) Name() string { return s.name }

func (s *stubOracle) Judge(ctx context.Context, job string) gc.JobVerdict {
	s.calls.Add(1)
	now := time.Now()
	s.askedAt.Store(now.UnixNano())
	return gc.JobVerdict{Job: job, Verdict: s.verdict, Evidence: s.name + " says " + s.verdict.String(), Oracle: s.name, At: now}
}

func TestCombine(t *testing.T) {
	U, L, G := index.VerdictUnknown, index.VerdictLive, index.VerdictGone
	for _, tc := range []struct {
		name    string
		answers []index.Verdict
		want    index.Verdict
		oracle  string // names of the oracles that gave the merged verdict
	}{
		{"no oracle", nil, U, ""},
		{"unknown", []index.Verdict{U}, U, "o0"},
		{"live", []index.Verdict{L}, L, "o0"},
		{"gone", []index.Verdict{G}, G, "o0"},
		{"unknown and gone", []index.Verdict{U, G}, G, "o1"},
		{"gone and unknown", []index.Verdict{G, U}, G, "o0"},
		{"gone then live: a live run wins", []index.Verdict{G, L}, L, "o1"},
		{"live then gone: a live run wins", []index.Verdict{L, G}, L, "o0"},
		{"all three", []index.Verdict{U, G, L}, L, "o2"},
		{"two unknown", []index.Verdict{U, U}, U, "o0,o1"},
		{"two gone", []index.Verdict{G, U, G}, G, "o0,o2"},
		{"two live", []index.Verdict{L, G, L}, L, "o0,o2"},
		{"out-of-range verdict counts as nothing", []index.Verdict{index.Verdict(9)}, U, ""},
		{"out-of-range verdict and gone", []index.Verdict{index.Verdict(9), G}, G, "o1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var oracles []gc.Oracle
			var stubs []*stubOracle
			for i, v := range tc.answers {
				s := &stubOracle{name: "o" + string(rune('0'+i)), verdict: v}
				stubs = append(stubs, s)
				oracles = append(oracles, s)
			}
			got := gc.Combine(context.Background(), testJob, oracles...)
			if got.Verdict != tc.want {
				t.Errorf("verdict %v, want %v (evidence %q)", got.Verdict, tc.want, got.Evidence)
			}
			if got.Oracle != tc.oracle {
				t.Errorf("oracle %q, want %q", got.Oracle, tc.oracle)
			}
			if got.Job != testJob {
				t.Errorf("job %q, want %q", got.Job, testJob)
			}
			for _, s := range stubs {
				if n := s.calls.Load(); n != 1 {
					t.Errorf("%s asked %d times, want 1", s.name, n)
				}
				if !strings.Contains(got.Evidence, s.name+" says "+s.verdict.String()) {
					t.Errorf("evidence %q lacks %s's", got.Evidence, s.name)
				}
				if asked := time.Unix(0, s.askedAt.Load()); got.At.After(asked) {
					t.Errorf("At %v is after %s was asked (%v): state written in between would count as before the verdict", got.At, s.name, asked)
				}
			}
			if len(stubs) == 0 && got.Evidence == "" {
				t.Error("no evidence for an unknown verdict without oracles")
			}
		})
	}
}

// failingOracle cannot answer.
type failingOracle struct{}

func (failingOracle) Name() string { return "down" }

func (failingOracle) Judge(ctx context.Context, job string) gc.JobVerdict {
	return gc.JobVerdict{Job: job, Evidence: "down: unreachable", Failure: "unreachable", At: time.Now()}
}

// An unknown verdict keeps the failures of the oracles that could not
// answer, named; a verdict another oracle decided has none.
func TestCombineKeepsFailures(t *testing.T) {
	U, L, G := index.VerdictUnknown, index.VerdictLive, index.VerdictGone
	for _, tc := range []struct {
		name    string
		other   index.Verdict
		failure string
	}{
		{"down and unknown", U, "down: unreachable"},
		{"down and gone", G, ""},
		{"down and live", L, ""},
	} {
		got := gc.Combine(context.Background(), testJob, failingOracle{}, &stubOracle{name: "o", verdict: tc.other})
		if got.Verdict != tc.other || got.Failure != tc.failure {
			t.Errorf("%s: %v, failure %q; want %v, failure %q", tc.name, got.Verdict, got.Failure, tc.other, tc.failure)
		}
	}
}

func TestCombineRefusesInvalidJobID(t *testing.T) {
	gone := &stubOracle{name: "gone", verdict: index.VerdictGone}
	for _, id := range flinkid.InvalidJobIDs {
		got := gc.Combine(context.Background(), id, gone)
		if got.Verdict != index.VerdictUnknown || got.Evidence != "invalid job id" {
			t.Errorf("Combine(%q) = %v %q, want unknown \"invalid job id\"", id, got.Verdict, got.Evidence)
		}
	}
	if n := gone.calls.Load(); n != 0 {
		t.Errorf("oracle asked %d times about invalid ids, want 0", n)
	}
}

// A job id reused after its old run left a result in the job result store:
// the live run on the cluster wins.
func TestCombineRealOraclesLiveWinsOverOldResult(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, testJob+".json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, _ := flinkServer(t, 200, details(testJob, "RUNNING"))
	jrs := &gc.JobResultStore{Dir: dir}
	flink := &gc.FlinkREST{URLs: []string{srv.URL}}

	if v := gc.Combine(context.Background(), testJob, jrs); v.Verdict != index.VerdictGone {
		t.Fatalf("job result store alone: %v, want gone (%s)", v.Verdict, v.Evidence)
	}
	got := gc.Combine(context.Background(), testJob, jrs, flink)
	if got.Verdict != index.VerdictLive || got.Oracle != "flink-rest" {
		t.Errorf("got %v by %q, want live by flink-rest (%s)", got.Verdict, got.Oracle, got.Evidence)
	}
	for _, want := range []string{"jrs: " + filepath.Join(dir, testJob+".json"), "flink " + srv.URL + ": state RUNNING"} {
		if !strings.Contains(got.Evidence, want) {
			t.Errorf("evidence %q lacks %q", got.Evidence, want)
		}
	}
}

// A JobResultStore knows nothing of executors: combined with it alone an
// executor is unknown, and no failure (nothing went wrong); beside a Flink
// that answers, Flink's verdict stands, given the URLs that listed the
// executor before, and the URLs that list it now are the verdict's.
func TestCombineExecutorJobResultStore(t *testing.T) {
	jrs := &gc.JobResultStore{Dir: t.TempDir()}
	got := gc.CombineExecutor(context.Background(), "tm-1", nil, jrs)
	if got.Verdict != index.VerdictUnknown || got.Failure != "" || !strings.Contains(got.Evidence, "job-result-store: knows nothing of executors") {
		t.Errorf("CombineExecutor(jrs) = %+v, want unknown, no failure, saying it knows nothing", got)
	}
	url := tmServer(t, 200, `{"taskmanagers":[]}`)
	flink := &gc.FlinkREST{URLs: []string{url}}
	got = gc.CombineExecutor(context.Background(), "tm-1", []string{url}, jrs, flink)
	if got.Verdict != index.VerdictGone || got.Oracle != "flink-rest" {
		t.Errorf("CombineExecutor(jrs, flink) = %+v, want gone by flink-rest", got)
	}
	listing := tmServer(t, 200, `{"taskmanagers":[{"id":"tm-1"}]}`)
	got = gc.CombineExecutor(context.Background(), "tm-1", nil, jrs, flink, &gc.FlinkREST{URLs: []string{listing}})
	if got.Verdict != index.VerdictLive || len(got.ListedBy) != 1 || got.ListedBy[0] != listing {
		t.Errorf("CombineExecutor(jrs, flink, listing) = %+v, want live, listed by %s", got, listing)
	}
	if got := gc.CombineExecutor(context.Background(), "tm-1", nil); got.Verdict != index.VerdictUnknown || got.Evidence != "no oracle configured" {
		t.Errorf("CombineExecutor() = %+v, want unknown, no oracle configured", got)
	}
}
