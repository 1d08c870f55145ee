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
)

// testJob is a valid Flink job id.
const testJob = "a1b2c3d4e5f60718293a4b5c6d7e8f90"

// invalidJobIDs are ids no oracle may act on: each would escape a URL path or a
// directory, or is simply not the form Flink prints.
var invalidJobIDs = []string{
	"",
	"../x",
	"a/b",
	"%2e%2e",
	"..",
	".",
	"A1B2C3D4E5F60718293A4B5C6D7E8F90",  // Flink prints lowercase
	"a1b2c3d4e5f60718293a4b5c6d7e8f9",   // 31
	"a1b2c3d4e5f60718293a4b5c6d7e8f900", // 33
	"a1b2c3d4e5f60718293a4b5c6d7e8f9g",
	"a1b2c3d4e5f60718293a4b5c6d7e8/..",
	"a1b2c3d4e5f60718293a4b5c6d7e8f9\x00",
	"a1b2c3d4e5f60718293a4b5c6d7e8f9\n",
	"a1b2c3d4e5f60718293a4b5c6d7e8f9?",
	"a1b2c3d4e5f60718293a4b5c6d7e8%2f",
	"ａ1b2c3d4e5f60718293a4b5c6d7e8f90",
}

func TestValidJobID(t *testing.T) {
	for _, id := range []string{testJob, "00000000000000000000000000000000", "ffffffffffffffffffffffffffffffff", "0123456789abcdef0123456789abcdef"} {
		if !gc.ValidJobID(id) {
			t.Errorf("ValidJobID(%q) = false, want true", id)
		}
	}
	for _, id := range invalidJobIDs {
		if gc.ValidJobID(id) {
			t.Errorf("ValidJobID(%q) = true, want false", id)
		}
	}
}

// stubOracle answers with a fixed verdict and counts the questions.
type stubOracle struct {
	name    string
	verdict gc.Verdict
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
	U, L, G := gc.Unknown, gc.Live, gc.Gone
	for _, tc := range []struct {
		name    string
		answers []gc.Verdict
		want    gc.Verdict
		oracle  string // names of the oracles that gave the merged verdict
	}{
		{"no oracle", nil, U, ""},
		{"unknown", []gc.Verdict{U}, U, "o0"},
		{"live", []gc.Verdict{L}, L, "o0"},
		{"gone", []gc.Verdict{G}, G, "o0"},
		{"unknown and gone", []gc.Verdict{U, G}, G, "o1"},
		{"gone and unknown", []gc.Verdict{G, U}, G, "o0"},
		{"gone then live: a live run wins", []gc.Verdict{G, L}, L, "o1"},
		{"live then gone: a live run wins", []gc.Verdict{L, G}, L, "o0"},
		{"all three", []gc.Verdict{U, G, L}, L, "o2"},
		{"two unknown", []gc.Verdict{U, U}, U, "o0,o1"},
		{"two gone", []gc.Verdict{G, U, G}, G, "o0,o2"},
		{"two live", []gc.Verdict{L, G, L}, L, "o0,o2"},
		{"out-of-range verdict counts as nothing", []gc.Verdict{gc.Verdict(9)}, U, ""},
		{"out-of-range verdict and gone", []gc.Verdict{gc.Verdict(9), G}, G, "o1"},
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

func TestCombineRefusesInvalidJobID(t *testing.T) {
	gone := &stubOracle{name: "gone", verdict: gc.Gone}
	for _, id := range invalidJobIDs {
		got := gc.Combine(context.Background(), id, gone)
		if got.Verdict != gc.Unknown || got.Evidence != "invalid job id" {
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

	if v := gc.Combine(context.Background(), testJob, jrs); v.Verdict != gc.Gone {
		t.Fatalf("job result store alone: %v, want gone (%s)", v.Verdict, v.Evidence)
	}
	got := gc.Combine(context.Background(), testJob, jrs, flink)
	if got.Verdict != gc.Live || got.Oracle != "flink-rest" {
		t.Errorf("got %v by %q, want live by flink-rest (%s)", got.Verdict, got.Oracle, got.Evidence)
	}
	for _, want := range []string{"jrs: " + filepath.Join(dir, testJob+".json"), "flink " + srv.URL + ": state RUNNING"} {
		if !strings.Contains(got.Evidence, want) {
			t.Errorf("evidence %q lacks %q", got.Evidence, want)
		}
	}
}
