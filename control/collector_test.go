package control_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/index"
)

// notFoundFlink is a Flink REST API that knows no job; its one
// TaskManager, tm-1, runs.
func notFoundFlink(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/taskmanagers" { // the TaskManager runs on
			io.WriteString(w, `{"taskmanagers":[{"id":"tm-1"}]}`)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A job every oracle knows nothing of is named in a warning by the first
// run that finds it, and again only once a day; the run's summary counts
// it, and counts collected jobs and executors' trees apart.
func TestUnknownJobsWarnedDaily(t *testing.T) {
	f := newFixture(t)
	f.Write(chk(jobA)+"/_task_state_snapshot", text(100, 1), 0, true)
	var log bytes.Buffer
	first := time.Now()
	now := first
	srv := &control.Server{Store: f.S, Log: slog.New(slog.NewTextHandler(&log, nil)), Now: func() time.Time { return now }}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client, err := control.Dial(f.S.Dir)
	if err != nil {
		t.Fatal(err)
	}
	req := control.GCRequest{FlinkURLs: []string{notFoundFlink(t)}}
	for _, step := range []struct {
		after time.Duration // since the first run
		warn  bool
	}{
		{0, true},
		{time.Hour, false},
		{23 * time.Hour, false},
		{24 * time.Hour, true},
		{25 * time.Hour, false},
		{48 * time.Hour, true},
	} {
		log.Reset()
		now = first.Add(step.after)
		report, err := client.GC(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if len(report.Unknown) != 1 || report.Unknown[0].Job != jobA {
			t.Fatalf("after %s: report's unknown jobs = %+v, want job A", step.after, report.Unknown)
		}
		warned := strings.Count(log.String(), "level=WARN") == 1 && strings.Contains(log.String(), "knows nothing of a job") &&
			strings.Contains(log.String(), "job="+jobA)
		if warned != step.warn || strings.Count(log.String(), "level=WARN") > 1 {
			t.Errorf("after %s: warned = %v, want %v; log:\n%s", step.after, warned, step.warn, log.String())
		}
		if !strings.Contains(log.String(), "jobs_collected=0 executors_collected=0") || !strings.Contains(log.String(), "unknown=1") {
			t.Errorf("after %s: the run's summary lacks its counts: %s", step.after, log.String())
		}
	}
	// The operator's word ends it: no more warning, none in the report.
	if err := client.SetVerdict(context.Background(), control.VerdictRequest{Job: jobA, Verdict: index.VerdictLive}); err != nil {
		t.Fatal(err)
	}
	log.Reset()
	now = now.Add(72 * time.Hour)
	report, err := client.GC(context.Background(), req)
	if err != nil || len(report.Unknown) != 0 || strings.Contains(log.String(), "level=WARN") {
		t.Errorf("after the operator's live: report %+v, %v, log %s; want no unknown job, no warning", report.Unknown, err, log.String())
	}
}
