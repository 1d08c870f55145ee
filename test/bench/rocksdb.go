package main

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// dbBenchTuning makes a small database behave like a large one: small
// memtables and SST files give flushes and compactions, and a 1 MiB block
// cache sends reads to the file system instead of RocksDB's memory.
var dbBenchTuning = []string{
	"--write_buffer_size=4194304",
	"--target_file_size_base=4194304",
	"--max_bytes_for_level_base=16777216",
	"--cache_size=1048576",
	"--compression_type=snappy",
	"--threads=1",
	"--histogram=1",
}

// dbBenchmarks are the rows of workload 2: the four benchmarks the targets
// name, with a synced WAL where they write, and fillrandom without the
// sync, where the cost FUSE adds to every write shows.
var dbBenchmarks = []string{"fillrandom", "overwrite", "readrandom", "readseq", noSyncRow}

const noSyncRow = "fillrandom, WAL not fsync'd"

// dbResult is one benchmark's line of db_bench output.
type dbResult struct {
	OpsPerSec float64
	P99Micros float64
}

// rocksDBMetrics are the rows of workloads 2 and 3.
type rocksDBMetrics struct {
	ops, p99   map[string]*Metric
	checkpoint *Metric
}

// rocksDB runs workload 2 (db_bench on each target) and, on the database
// it leaves, workload 3 (ldb checkpoints between writes).
func (b *bench) rocksDB() []*Workload {
	s := b.cfg.RocksDB
	reps := b.cfg.reps(s.Reps)
	w2 := newWorkload(2, "Live RocksDB", reps)
	w3 := newWorkload(3, "Checkpoint by hard links", reps)
	w2.Setup = fmt.Sprintf("db_bench with the database in tm_bench/tmp/job_…_op_…_uuid_…/db: fillrandom then overwrite of %d keys "+
		"(values of %d bytes) with --sync=true (every write fsyncs the WAL), then, after dropping the caches, "+
		"readrandom of %d reads and readseq in %d passes over the database in a second run (one pass reads each key once, "+
		"about 26,000 reads in 30 ms natively: too short to time alone, so readseq's ops/s are all the passes' reads over their time, "+
		"and its p99 the highest of the passes'); last, fillrandom of %d keys without --sync on a second database. "+
		"Tuning: %s. ops/s and the p99 of --histogram=1.",
		s.Keys, s.ValueSize, s.Reads, s.SeqPasses, s.NoSyncKeys, strings.Join(dbBenchTuning, " "))
	w3.Setup = fmt.Sprintf("On the database workload 2 left: %d times, db_bench overwrite of %d keys (no sync), then "+
		"`ldb --db=DB checkpoint --checkpoint_dir=…/vtx_…_sti_0/chk_N` (opens the database, links its SSTs, closes it), timed.",
		s.Checkpoints, s.WritesBetween)
	m := rocksDBMetrics{ops: map[string]*Metric{}, p99: map[string]*Metric{},
		checkpoint: w3.metric("time per checkpoint", "ms", false, ratioGoal("<=", 1.5, native))}
	for _, name := range dbBenchmarks {
		m.ops[name] = w2.metric(name, "ops/s", true, ratioGoal(">=", 0.95, native))
	}
	for _, name := range dbBenchmarks {
		m.p99[name] = w2.metric(name+" p99", "µs", false, nil)
	}
	if err := requireTools("db_bench", "ldb"); err != nil {
		w2.fail(err)
	} else {
		b.eachRep(w2, b.keeperTargets(), func(t target) error { return b.rocksDBOnce(t, m) })
	}
	if w2.Error != "" {
		w3.fail(fmt.Errorf("workload 2 did not finish"))
	}
	b.servingRSS["2 and 3"] = b.statefs.TakePeakRSS()
	w2.finish(&b.caches)
	w3.finish(&b.caches)
	return []*Workload{w2, w3}
}

func requireTools(names ...string) error {
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			return fmt.Errorf("%s not found (install the Debian package rocksdb-tools)", name)
		}
	}
	return nil
}

func (b *bench) rocksDBOnce(t target, m rocksDBMetrics) error {
	root, err := t.Open()
	if err != nil {
		return err
	}
	defer t.Close()
	s := b.cfg.RocksDB
	db, noSyncDB := rocksDBDir(root, "rocksdb"), rocksDBDir(root, "rocksdb-nosync")
	common, err := b.dbFlags(db, s.Keys)
	if err != nil {
		return err
	}
	noSyncCommon, err := b.dbFlags(noSyncDB, s.NoSyncKeys)
	if err != nil {
		return err
	}
	results := map[string]dbResult{}
	for _, run := range []struct {
		flags []string
		args  []string
		row   string // the row of its one benchmark, if not named after it
	}{
		{common, []string{"--benchmarks=fillrandom,overwrite", "--sync=true", "--seed=1"}, ""},
		{common, []string{"--benchmarks=readrandom" + strings.Repeat(",readseq", max(s.SeqPasses, 1)), "--use_existing_db=1",
			fmt.Sprintf("--reads=%d", s.Reads), "--seed=2"}, ""},
		{noSyncCommon, []string{"--benchmarks=fillrandom", "--sync=false", "--seed=3"}, noSyncRow},
	} {
		b.caches.Drop()
		out, err := dbBench(run.flags, run.args...)
		if err != nil {
			return err
		}
		for name, r := range out {
			results[cmp.Or(run.row, name)] = r
		}
	}
	for _, name := range dbBenchmarks {
		r := results[name]
		m.ops[name].add(t.Name(), r.OpsPerSec)
		m.p99[name].add(t.Name(), r.P99Micros)
		b.logf("  %s %.0f ops/s, p99 %.0f µs", name, r.OpsPerSec, r.P99Micros)
	}
	return b.checkpointsOnce(t, root, db, common, m.checkpoint)
}

// dbFlags are the db_bench flags for a database of keys keys at db,
// whose parent it makes.
func (b *bench) dbFlags(db string, keys int) ([]string, error) {
	flags := []string{"--db=" + db, fmt.Sprintf("--num=%d", keys), fmt.Sprintf("--value_size=%d", b.cfg.RocksDB.ValueSize)}
	return append(flags, dbBenchTuning...), os.MkdirAll(filepath.Dir(db), 0o755)
}

// checkpointsOnce is workload 3 on one target: overwrite, checkpoint,
// again.
func (b *bench) checkpointsOnce(t target, root, db string, common []string, checkpoint *Metric) error {
	s := b.cfg.RocksDB
	parent := subtaskDir(root, "rocksdb")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	var took []float64
	for i := 1; i <= s.Checkpoints; i++ {
		if _, err := dbBench(common, "--benchmarks=overwrite", "--use_existing_db=1",
			fmt.Sprintf("--writes=%d", s.WritesBetween), fmt.Sprintf("--seed=%d", 100+i)); err != nil {
			return err
		}
		d, err := ldbCheckpoint(db, filepath.Join(parent, fmt.Sprintf("chk_%d", i)))
		if err != nil {
			return err
		}
		ms := d.Seconds() * 1000
		checkpoint.add(t.Name(), ms)
		took = append(took, ms)
	}
	b.logf("  checkpoints: median %.0f ms", median(took))
	return nil
}

// ldbCheckpoint makes a checkpoint of the database db in the new directory
// dir with `ldb checkpoint`, which opens the database, hard-links its SSTs,
// copies the rest and closes it, and returns how long that took.
func ldbCheckpoint(db, dir string) (time.Duration, error) {
	start := time.Now()
	out, err := exec.Command("ldb", "--db="+db, "checkpoint", "--checkpoint_dir="+dir).CombinedOutput()
	took := time.Since(start)
	if err != nil || !bytes.Contains(out, []byte("OK")) {
		return took, fmt.Errorf("ldb checkpoint: %v\n%s", err, out)
	}
	return took, nil
}

// dbBench runs db_bench and parses each benchmark's ops/s and p99.
func dbBench(common []string, args ...string) (map[string]dbResult, error) {
	cmd := exec.Command("db_bench", append(append([]string{}, common...), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("db_bench %s: %v\n%s\n%s", strings.Join(args, " "), err, tail(stdout.String(), 2000), tail(stderr.String(), 2000))
	}
	results := parseDBBench(stdout.String())
	for _, a := range args {
		list, ok := strings.CutPrefix(a, "--benchmarks=")
		if !ok {
			continue
		}
		for _, name := range strings.Split(list, ",") {
			if r, ok := results[name]; !ok || r.OpsPerSec <= 0 {
				return nil, fmt.Errorf("db_bench printed no result for %s:\n%s", name, tail(stdout.String(), 2000))
			}
		}
	}
	return results, nil
}

var (
	dbBenchLine = regexp.MustCompile(`^(\w+)\s*:\s*[\d.]+ micros/op (\d+) ops/sec(?:\s+([\d.]+) seconds\s+(\d+) operations)?`)
	dbBenchP99  = regexp.MustCompile(`^Percentiles: .*\bP99: ([\d.]+)`)
)

// parseDBBench reads db_bench's output: a result line per benchmark, then,
// with --histogram=1, its percentiles. A benchmark run more than once in
// a row (readseq's passes) is one result: its operations over its
// seconds, and the highest p99.
func parseDBBench(out string) map[string]dbResult {
	type sum struct {
		ops, secs float64
		runs      int
		last      dbResult
	}
	sums := map[string]*sum{}
	current := ""
	s := bufio.NewScanner(strings.NewReader(out))
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		line := s.Text()
		if m := dbBenchLine.FindStringSubmatch(line); m != nil {
			current = m[1]
			x := sums[current]
			if x == nil {
				x = &sum{}
				sums[current] = x
			}
			x.runs++
			x.last.OpsPerSec, _ = strconv.ParseFloat(m[2], 64)
			secs, _ := strconv.ParseFloat(m[3], 64)
			ops, _ := strconv.ParseFloat(m[4], 64)
			x.secs += secs
			x.ops += ops
			continue
		}
		if m := dbBenchP99.FindStringSubmatch(line); m != nil && current != "" {
			p99, _ := strconv.ParseFloat(m[1], 64)
			sums[current].last.P99Micros = max(sums[current].last.P99Micros, p99)
			current = ""
		}
	}
	results := map[string]dbResult{}
	for name, x := range sums {
		r := x.last
		if x.runs > 1 && x.secs > 0 {
			r.OpsPerSec = x.ops / x.secs
		}
		results[name] = r
	}
	return results
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
