package main

// White-box: the smoke test runs the harness in-process with tiny sizes, so
// that `go test ./...` keeps it from rotting; the real numbers come from
// `make bench`.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/statefs/statefs/internal/testenv"
)

// TestSmokeRun runs every workload once at tiny sizes and checks that the
// JSON holds each of them with a positive number for every target it
// measures: a workload that silently measured nothing fails it.
func TestSmokeRun(t *testing.T) {
	testenv.RequireFUSE(t)
	testenv.RequireRocksDBTools(t)
	repo, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig(repo, t.TempDir())
	report, err := run(cfg, repo, testLog{t})
	if report == nil {
		t.Fatal(err)
	}
	if perr := publish(cfg, report, markdown(report)); perr != nil {
		t.Fatal(perr)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, markdown(report))
	}
	var fromJSON Report
	b, err := os.ReadFile(cfg.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &fromJSON); err != nil {
		t.Fatal(err)
	}
	for _, problem := range incomplete(&fromJSON) {
		t.Error(problem)
	}
	if t.Failed() {
		t.Logf("tables:\n%s", markdown(&fromJSON))
	}
}

// tinyConfig sizes every workload to take seconds.
func tinyConfig(repo, dir string) config {
	c := defaultConfig(repo)
	c.Dir, c.JSON, c.Markdown = dir, filepath.Join(dir, "result.json"), filepath.Join(dir, "result.md")
	c.Reps = 1
	c.CopyIn = copyInSize{Checkpoints: 2, SSTs: 10, SSTMiB: 2, Reps: 1}
	c.RocksDB = rocksDBSize{Keys: 2000, NoSyncKeys: 2000, ValueSize: 400, Reads: 2000, SeqPasses: 2, Checkpoints: 2, WritesBetween: 200, Reps: 1}
	c.Metadata = metadataSize{Files: 300, Dirs: 10, Reps: 1}
	c.Restart = restartSize{Inodes: 1000, Reps: 1}
	c.Collector = collectorSize{Files: 10, FileMiB: 1, CopyCheckpoints: 2, Reps: 1, Chunks: 2000, ChunksPerFile: 100}
	c.Sealed = sealedSize{Keys: 20000, ValueSize: 400, Reads: 2000, Reps: 1}
	c.Life = lifeSize{Keys: 5000, WritesPerRound: 500, ValueSize: 400, Rounds: 5, Reps: 1}
	return c
}

// incomplete lists what a report lacks: a workload that is missing or
// failed, a metric without a positive median for each target it measures
// (and for statefs always), a goal that could not be judged.
func incomplete(r *Report) []string {
	var problems []string
	seen := map[int]bool{}
	for _, w := range r.Workloads {
		seen[w.ID] = true
		if w.Error != "" {
			problems = append(problems, fmt.Sprintf("workload %d failed: %s", w.ID, w.Error))
		}
		if len(w.Metrics) == 0 {
			problems = append(problems, fmt.Sprintf("workload %d has no metrics", w.ID))
		}
		for _, m := range w.Metrics {
			problems = append(problems, incompleteMetric(w, m)...)
		}
	}
	for id := 1; id <= lastWorkload; id++ {
		if !seen[id] {
			problems = append(problems, fmt.Sprintf("workload %d is missing", id))
		}
	}
	return problems
}

func incompleteMetric(w *Workload, m *Metric) []string {
	var problems []string
	want := []string{statefs}
	if m.Goal != nil && m.Goal.Against != "" {
		want = comparedTargets(w.ID)
	}
	for _, t := range want {
		if _, ok := m.Median[t]; !ok {
			problems = append(problems, fmt.Sprintf("workload %d, %s: no %s value", w.ID, m.Name, t))
		}
	}
	for t, v := range m.Median {
		if !(v > 0) {
			problems = append(problems, fmt.Sprintf("workload %d, %s: %s median is %v", w.ID, m.Name, t, v))
		}
	}
	if m.Goal != nil && m.Met == nil {
		problems = append(problems, fmt.Sprintf("workload %d, %s: target %q not judged", w.ID, m.Name, m.Goal.Text))
	}
	if m.Goal != nil && slices.Contains(keeperWorkloads, w.ID) && m.KeeperMet == nil {
		problems = append(problems, fmt.Sprintf("workload %d, %s: keeper against no keeper not judged", w.ID, m.Name))
	}
	return problems
}

// comparedTargets are the targets workload id runs statefs against, where
// it does.
func comparedTargets(id int) []string {
	switch {
	case slices.Contains(keeperWorkloads, id):
		return append(slices.Clone(targetNames), noKeeper)
	case id <= 5:
		return targetNames
	case id == 9:
		return []string{native, statefs}
	}
	return []string{statefs}
}

// testLog sends the harness's progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestIncompleteCatchesEmptyResults checks the smoke test's own check: a
// report whose workload measured nothing, or zero, or lacks a target, is
// flagged.
func TestIncompleteCatchesEmptyResults(t *testing.T) {
	complete := func() *Report {
		r := &Report{}
		for id := 1; id <= lastWorkload; id++ {
			w := newWorkload(id, fmt.Sprint("workload ", id), 1)
			m := w.metric("throughput", "MB/s", true, ratioGoal(">=", 1.0, native))
			for _, target := range targetNames {
				m.add(target, 100)
			}
			if slices.Contains(keeperWorkloads, id) {
				m.add(noKeeper, 100)
			}
			w.finish(&caches{})
			r.Workloads = append(r.Workloads, w)
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		spoil func(*Report)
	}{
		{"workload missing", func(r *Report) { r.Workloads = r.Workloads[1:] }},
		{"workload failed", func(r *Report) { r.Workloads[2].Error = "db_bench exited 1" }},
		{"no metrics", func(r *Report) { r.Workloads[3].Metrics = nil }},
		{"zero median", func(r *Report) { r.Workloads[4].Metrics[0].Median[statefs] = 0 }},
		{"target not measured", func(r *Report) { delete(r.Workloads[0].Metrics[0].Median, native) }},
		{"no keeper not measured", func(r *Report) { delete(r.Workloads[1].Metrics[0].Median, noKeeper) }},
		{"keeper not judged", func(r *Report) { r.Workloads[7].Metrics[0].KeeperMet = nil }},
		{"goal not judged", func(r *Report) { r.Workloads[5].Metrics[0].Met = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := complete()
			if p := incomplete(r); len(p) != 0 {
				t.Fatalf("complete report flagged: %v", p)
			}
			tc.spoil(r)
			if len(incomplete(r)) == 0 {
				t.Error("not flagged")
			}
		})
	}
}

// db_bench's output: one result per benchmark; a benchmark run several
// times in a row is its reads over its time, with the highest p99.
func TestParseDBBench(t *testing.T) {
	out := `readrandom   :      10.105 micros/op 98952 ops/sec 1.011 seconds 100000 operations;   35.5 MB/s (90523 of 100000 found)
Microseconds per read:
Percentiles: P50: 8.47 P75: 11.14 P99: 20.50 P99.9: 52.00 P99.99: 120.00
readseq      :       1.049 micros/op 949815 ops/sec 0.030 seconds 26000 operations;  376.8 MB/s
Percentiles: P50: 0.50 P75: 0.60 P99: 4.00 P99.9: 9.00 P99.99: 20.00
readseq      :       0.500 micros/op 2000000 ops/sec 0.010 seconds 20000 operations;  376.8 MB/s
Percentiles: P50: 0.40 P75: 0.50 P99: 6.00 P99.9: 9.00 P99.99: 20.00
`
	got := parseDBBench(out)
	if r := got["readrandom"]; r.OpsPerSec != 98952 || r.P99Micros != 20.5 {
		t.Errorf("readrandom: %+v", r)
	}
	if r := got["readseq"]; math.Abs(r.OpsPerSec-46000/0.04) > 1 || r.P99Micros != 6 {
		t.Errorf("readseq over two passes: %+v, want %v ops/s and p99 6", r, 46000/0.04)
	}
}

// Workload 8 is in the default run, once, and its sizes are flags.
func TestSealedFlags(t *testing.T) {
	c, err := parseFlags("/repo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.runs(8) || c.reps(c.Sealed.Reps) != 1 {
		t.Errorf("default: workloads %v, workload 8 reps %d; want 8 in them, once", c.Workloads, c.reps(c.Sealed.Reps))
	}
	c, err = parseFlags("/repo", []string{"--workloads", "8", "--sealed-keys", "1000", "--sealed-reads", "10", "--sealed-reps", "0", "--reps", "2"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Sealed.Keys != 1000 || c.Sealed.Reads != 10 || c.reps(c.Sealed.Reps) != 2 || c.runs(1, 2, 3, 4, 5, 6, 7) {
		t.Errorf("parsed %+v, workloads %v", c.Sealed, c.Workloads)
	}
	if _, err := parseFlags("/repo", []string{"--sealed-keys", "0"}); err == nil {
		t.Error("--sealed-keys 0 accepted")
	}
	if _, err := parseFlags("/repo", []string{"--workloads", "10"}); err == nil {
		t.Error("--workloads 10 accepted")
	}
}

// Workload 9 is in the default run, once, and its sizes are flags.
func TestLifeFlags(t *testing.T) {
	c, err := parseFlags("/repo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.runs(9) || c.reps(c.Life.Reps) != 1 {
		t.Errorf("default: workloads %v, workload 9 reps %d; want 9 in them, once", c.Workloads, c.reps(c.Life.Reps))
	}
	c, err = parseFlags("/repo", []string{"--workloads", "9", "--life-rounds", "400", "--life-keys", "1000", "--life-writes", "10"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Life.Rounds != 400 || c.Life.Keys != 1000 || c.Life.WritesPerRound != 10 || c.runs(1, 2, 3, 4, 5, 6, 7, 8) {
		t.Errorf("parsed %+v, workloads %v", c.Life, c.Workloads)
	}
	if _, err := parseFlags("/repo", []string{"--life-rounds", "0"}); err == nil {
		t.Error("--life-rounds 0 accepted")
	}
}

// Early and late are the medians of the first and the last tenth, one
// round each at the least.
func TestEarlyLate(t *testing.T) {
	for _, tc := range []struct {
		took        []float64
		early, late float64
	}{
		{[]float64{5}, 5, 5},
		{[]float64{1, 2, 3, 4, 5}, 1, 5},
		{[]float64{3, 1, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 7, 4}, 2, 5.5},
	} {
		if early, late := earlyLate(tc.took); early != tc.early || late != tc.late {
			t.Errorf("earlyLate(%v) = %v, %v; want %v, %v", tc.took, early, late, tc.early, tc.late)
		}
	}
}

// The compressible checkpoint compresses as its description says: zstd at
// statefs's level (the fastest) leaves at most half of it, and the same
// seed gives the same bytes.
func TestCompressibleContent(t *testing.T) {
	dir := t.TempDir()
	var files [2][]byte
	for i := range files {
		path := filepath.Join(dir, fmt.Sprint(i))
		if err := writeCompressibleFile(path, 4<<20, 7); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = b
	}
	if len(files[0]) != 4<<20 || !bytes.Equal(files[0], files[1]) {
		t.Fatalf("sizes %d and %d, equal %v; want 4 MiB twice, equal", len(files[0]), len(files[1]), bytes.Equal(files[0], files[1]))
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	ratio := float64(len(enc.EncodeAll(files[0], nil))) / float64(len(files[0]))
	t.Logf("zstd (fastest) leaves %.2f of it", ratio)
	if ratio > 0.5 {
		t.Errorf("zstd leaves %.2f of the compressible content, want at most 0.5", ratio)
	}
}

// The disk under a directory is found, and its counter of bytes written
// grows when a file is written and synced there.
func TestBlockDeviceCountsWrites(t *testing.T) {
	dir := t.TempDir()
	dev, err := blockDeviceOf(dir)
	if err != nil {
		t.Skipf("no block device under %s: %v", dir, err)
	}
	before, err := dev.BytesWritten()
	if err != nil {
		t.Fatal(err)
	}
	if err := writeRandomFile(filepath.Join(dir, "f"), 1<<20, 1); err != nil {
		t.Fatal(err)
	}
	syscall.Sync()
	after, err := dev.BytesWritten()
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 1<<20 {
		t.Errorf("%s: %d bytes written over a synced write of 1 MiB", dev.name, after-before)
	}
}

// A process's CPU time is read from /proc/PID/stat.
func TestProcCPUSeconds(t *testing.T) {
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	secs, err := procCPUSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if secs < 0.01 {
		t.Errorf("%v s of CPU after spinning 50 ms", secs)
	}
}

// Of RocksDB's old info logs only the newest are kept, ordered by the time
// in their names, not by their spelling; the rest of the directory stays.
func TestPruneInfoLogs(t *testing.T) {
	db := t.TempDir()
	for _, name := range []string{"LOG", "LOG.old.9", "LOG.old.100", "LOG.old.11", "LOG.old.10", "000012.sst", "MANIFEST-000013"} {
		if err := os.WriteFile(filepath.Join(db, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := pruneInfoLogs(db, 2); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(db)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"000012.sst", "LOG", "LOG.old.100", "LOG.old.11", "MANIFEST-000013"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}

// A counter is summed over its labels in Prometheus's text format, and
// names it only prefixes are not it.
func TestSumCounter(t *testing.T) {
	text := `# HELP statefs_sealed_bytes_total Logical bytes of the files sealed.
# TYPE statefs_sealed_bytes_total counter
statefs_sealed_bytes_total{as="chunks"} 1.5e+06
statefs_sealed_bytes_total{as="inline"} 100
statefs_sealed_bytes_total{as="object"} 2000
statefs_sealed_bytes_total_other 7
statefs_seals_total{as="chunks"} 3
`
	sum, ok, err := sumCounter(strings.NewReader(text), "statefs_sealed_bytes_total")
	if err != nil || !ok || sum != 1_502_100 {
		t.Errorf("sum %v, ok %v, err %v; want 1502100, true, nil", sum, ok, err)
	}
	if _, ok, err := sumCounter(strings.NewReader(text), "statefs_absent_total"); ok || err != nil {
		t.Errorf("absent counter: ok %v, err %v", ok, err)
	}
}

// A row with a target is judged against statefs without its keeper too:
// within 5%, the way the row gets better, and the table and the summary
// show it beside the rest only in a workload that ran it.
func TestKeeperAgainstNoKeeper(t *testing.T) {
	w := newWorkload(2, "Live RocksDB", 1)
	rows := []struct {
		name      string
		higher    bool
		noKeeper  float64 // statefs is at 100
		wantRatio string
		wantGoal  string
		want      string
	}{
		{"faster", true, 90, "1.11×", "≥ 0.95× " + noKeeper, "met"},
		{"within", true, 104, "0.96×", "≥ 0.95× " + noKeeper, "met"},
		{"slower", true, 110, "0.91×", "≥ 0.95× " + noKeeper, "**missed**"},
		{"lower within", false, 96, "1.04×", "≤ 1.05× " + noKeeper, "met"},
		{"lower slower", false, 90, "1.11×", "≤ 1.05× " + noKeeper, "**missed**"},
	}
	for _, r := range rows {
		goal := ratioGoal(">=", 0.95, native)
		if !r.higher {
			goal = ratioGoal("<=", 1.5, native)
		}
		m := w.metric(r.name, "ops/s", r.higher, goal)
		m.add(native, 100)
		m.add(statefs, 100)
		m.add(noKeeper, r.noKeeper)
	}
	untargeted := w.metric("untargeted", "µs", false, nil)
	untargeted.add(statefs, 100)
	untargeted.add(noKeeper, 50)
	other := newWorkload(1, "Checkpoint copy-in", 1)
	o := other.metric("copy-in", "MB/s", true, ratioGoal(">=", 1.0, native))
	o.add(native, 100)
	o.add(statefs, 100)
	for _, wl := range []*Workload{w, other} {
		wl.finish(&caches{})
	}
	if untargeted.KeeperMet != nil || o.KeeperMet != nil {
		t.Errorf("judged a row without a target (%v) or without %s (%v)", untargeted.KeeperMet, noKeeper, o.KeeperMet)
	}
	md := string(markdown(&Report{Workloads: []*Workload{w, other}}))
	for _, r := range rows {
		table := fmt.Sprintf("| %s (ops/s) | 100 | — | 100 | 1.00× | — |", r.name)
		if line := lineWith(md, table); !strings.HasSuffix(line, fmt.Sprintf("| %s | %s | %s |", number(r.noKeeper), r.wantRatio, r.want)) {
			t.Errorf("%s: want a table row ending in %s, %s, %s, got %q", r.name, number(r.noKeeper), r.wantRatio, r.want, line)
		}
		summary := fmt.Sprintf("| 2. Live RocksDB | %s, keeper/no keeper | %s |", r.name, r.wantRatio)
		if line := lineWith(md, summary); !strings.HasSuffix(line, fmt.Sprintf("%s | %s |", r.wantGoal, r.want)) {
			t.Errorf("%s: want a summary row %s, %s, got %q", r.name, r.wantGoal, r.want, line)
		}
	}
	if line := lineWith(md, "| untargeted (µs) |"); !strings.HasSuffix(line, "| 50 | 2.00× |  |") {
		t.Errorf("a row without a target: got %q, want its ratio and no verdict", line)
	}
	if line := lineWith(md, "| copy-in (MB/s) |"); strings.Count(line, "|") != 9 {
		t.Errorf("a workload without %s has its columns: %q", noKeeper, line)
	}
}

// lineWith is the first line of md that starts with prefix.
func lineWith(md, prefix string) string {
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

// --targets picks the targets the repetitions run, statefs always among
// them; eachRep runs those alone, in their order.
func TestTargetsFlag(t *testing.T) {
	for _, bad := range []string{"native,loopback", "statefs,ext4"} {
		if _, err := parseFlags(t.TempDir(), []string{"--targets", bad}); err == nil {
			t.Errorf("--targets %s: no error", bad)
		}
	}
	cfg, err := parseFlags(t.TempDir(), []string{"--targets", "nokeeper,statefs"})
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{cfg: cfg, out: io.Discard}
	b.native, b.loopback = &nativeTarget{}, &loopbackTarget{}
	b.statefs, b.noKeeper = &statefsTarget{name: statefs}, &statefsTarget{name: noKeeper}
	var ran []string
	w := newWorkload(2, "Live RocksDB", 2)
	b.eachRep(w, b.keeperTargets(), func(t target) error { ran = append(ran, t.Name()); return nil })
	if want := []string{statefs, noKeeper, statefs, noKeeper}; !slices.Equal(ran, want) {
		t.Errorf("ran %q, want %q", ran, want)
	}
}
