package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// sealedTuning gives workload 8 RocksDB's own shape of a large database:
// 64 MiB memtables and SST files and a 256 MiB level 1 (RocksDB's
// defaults, which ldb opens it with too), written without a WAL or
// fsync, and an 8 MiB block cache, far smaller than the database, so that
// reads go to the file system.
var sealedTuning = []string{
	"--write_buffer_size=67108864",
	"--target_file_size_base=67108864",
	"--max_bytes_for_level_base=268435456",
	"--cache_size=8388608",
	"--compression_type=snappy",
	"--sync=false",
	"--disable_wal=1",
	"--threads=1",
	"--histogram=1",
}

// sealedMetrics are the rows of workload 8.
type sealedMetrics struct {
	size, sealed                       *Metric
	cold, coldP99                      *Metric
	restored, restoredP99, restoreWall *Metric
}

// sealedRocksDB runs workload 8: a RocksDB database several times larger
// than its block cache, written, sealed, and read back with cold caches
// after a restart of the daemon, both where it was written and after a
// restore from a checkpoint of it, as Flink restores from local state.
func (b *bench) sealedRocksDB() []*Workload {
	s := b.cfg.Sealed
	w := newWorkload(8, "Sealed RocksDB larger than the caches", b.cfg.reps(s.Reps))
	w.Setup = fmt.Sprintf("db_bench fillrandom of %d keys (values of %d bytes) then flush and waitforcompaction, with the "+
		"database in tm_bench/tmp/job_…_op_…_uuid_…/db (the first row is the size of its SSTs); statefs then seals it all (\"sealed\" "+
		"is how long that took after the fill). Cold readrandom: restart the FUSE daemon, drop the caches, then db_bench --use_existing_db=1 "+
		"readrandom of %d reads. Restore: `ldb --db=DB checkpoint --checkpoint_dir=…/vtx_…_sti_0/chk_1` (hard links), wait for the "+
		"seal again, restart the daemon, drop the caches, then, timed together, hard-link every file of chk_1 into a new instance "+
		"directory tm_bench/tmp/job_…/db (as Flink restores from local state) and run the same readrandom (same keys) on it; its "+
		"ops/s are db_bench's, which leave out opening the database, the wall time is link, open and read together. "+
		"Tuning: %s. ops/s and the p99 of --histogram=1.",
		s.Keys, s.ValueSize, s.Reads, strings.Join(sealedTuning, " "))
	m := sealedMetrics{
		size:        w.metric("SST files after the fill", "MB", false, nil),
		sealed:      w.metric("sealed, after the fill ended", "s", false, nil),
		cold:        w.metric("cold readrandom", "ops/s", true, ratioGoal(">=", 0.95, native)),
		coldP99:     w.metric("cold readrandom p99", "µs", false, ratioGoal("<=", 1.25, native)),
		restored:    w.metric("readrandom on the restored instance", "ops/s", true, ratioGoal(">=", 0.95, native)),
		restoredP99: w.metric("readrandom on the restored instance p99", "µs", false, nil),
		restoreWall: w.metric("restore: link + open + readrandom", "s", false, ratioGoal("<=", 1.1, native)),
	}
	if err := requireTools("db_bench", "ldb"); err != nil {
		w.fail(err)
	} else {
		b.eachRep(w, b.keeperTargets(), func(t target) error { return b.sealedOnce(t, m) })
	}
	if rss := b.statefs.TakePeakRSS(); rss > 0 {
		w.note("statefs's peak RSS (VmHWM of its servers, read before each stopped): %.0f MiB", mib(rss))
	}
	w.finish(&b.caches)
	return []*Workload{w}
}

// sealedFlags are the db_bench flags for workload 8's database at db,
// whose parent it makes.
func (b *bench) sealedFlags(db string) ([]string, error) {
	s := b.cfg.Sealed
	flags := []string{"--db=" + db, fmt.Sprintf("--num=%d", s.Keys), fmt.Sprintf("--value_size=%d", s.ValueSize)}
	return append(flags, sealedTuning...), os.MkdirAll(filepath.Dir(db), 0o755)
}

func (b *bench) sealedOnce(t target, m sealedMetrics) error {
	root, err := t.Open()
	if err != nil {
		return err
	}
	defer t.Close()
	s := b.cfg.Sealed
	db := rocksDBDir(root, "sealed")
	flags, err := b.sealedFlags(db)
	if err != nil {
		return err
	}
	read := []string{"--benchmarks=readrandom", "--use_existing_db=1", fmt.Sprintf("--reads=%d", s.Reads), "--seed=2"}

	// The fill, and the seal.
	b.caches.Drop()
	fill, err := dbBenchFill(flags, "--benchmarks=fillrandom,flush,waitforcompaction", "--seed=1")
	if err != nil {
		return err
	}
	filled := time.Now()
	if err := t.Settle(); err != nil {
		return err
	}
	sealedSecs := since(filled)
	size, err := sstBytes(db)
	if err != nil {
		return err
	}
	m.size.add(t.Name(), float64(size)/1e6)
	if _, ok := t.(*statefsTarget); ok {
		m.sealed.add(t.Name(), sealedSecs)
	}
	b.logf("  fillrandom %.0f ops/s, %.0f MB of SSTs, sealed %.1f s later", fill.OpsPerSec, float64(size)/1e6, sealedSecs)

	// Cold readrandom where it was written.
	if err := t.Remount(); err != nil {
		return err
	}
	b.caches.Drop()
	out, err := dbBench(flags, read...)
	if err != nil {
		return err
	}
	cold := out["readrandom"]
	m.cold.add(t.Name(), cold.OpsPerSec)
	m.coldP99.add(t.Name(), cold.P99Micros)
	b.logf("  cold readrandom %.0f ops/s, p99 %.0f µs", cold.OpsPerSec, cold.P99Micros)

	// A checkpoint, sealed; then the restore from it, timed.
	chk := filepath.Join(subtaskDir(root, "sealed"), "chk_1")
	if err := os.MkdirAll(filepath.Dir(chk), 0o755); err != nil {
		return err
	}
	if _, err := ldbCheckpoint(db, chk); err != nil {
		return err
	}
	if err := t.Settle(); err != nil {
		return err
	}
	if err := t.Remount(); err != nil {
		return err
	}
	restoredDB := rocksDBDir(root, "restored")
	restoredFlags, err := b.sealedFlags(restoredDB)
	if err != nil {
		return err
	}
	b.caches.Drop()
	start := time.Now()
	if err := linkDir(chk, restoredDB); err != nil {
		return err
	}
	out, err = dbBench(restoredFlags, read...)
	if err != nil {
		return err
	}
	wall := since(start)
	r := out["readrandom"]
	m.restored.add(t.Name(), r.OpsPerSec)
	m.restoredP99.add(t.Name(), r.P99Micros)
	m.restoreWall.add(t.Name(), wall)
	b.logf("  restore: readrandom %.0f ops/s, p99 %.0f µs; link + open + read %.2f s", r.OpsPerSec, r.P99Micros, wall)
	return nil
}

// dbBenchFill runs db_bench whose benchmarks are fillrandom followed by
// ones that print no result of their own (flush, waitforcompaction), and
// returns fillrandom's result.
func dbBenchFill(common []string, args ...string) (dbResult, error) {
	cmd := exec.Command("db_bench", append(append([]string{}, common...), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return dbResult{}, fmt.Errorf("db_bench %s: %v\n%s\n%s", strings.Join(args, " "), err, tail(stdout.String(), 2000), tail(stderr.String(), 2000))
	}
	r, ok := parseDBBench(stdout.String())["fillrandom"]
	if !ok || r.OpsPerSec <= 0 {
		return r, fmt.Errorf("db_bench printed no result for fillrandom:\n%s", tail(stdout.String(), 2000))
	}
	return r, nil
}

// sstBytes is the size of the SST files in db.
func sstBytes(db string) (int64, error) {
	entries, err := os.ReadDir(db)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sst") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return 0, err
		}
		total += info.Size()
	}
	return total, nil
}

// linkDir hard-links every file of src into a new directory dst.
func linkDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.Link(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
