package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// lifeTuning runs workload 9's database as Flink runs RocksDB: no WAL (a
// checkpoint flushes the memtables instead) and compactions on. Memtables
// and SST files of 1 MiB and a 4 MiB level 1 make every round flush and
// compact, so that compactions rewrite SSTs the kept checkpoints hold.
var lifeTuning = []string{
	"--write_buffer_size=1048576",
	"--target_file_size_base=1048576",
	"--max_bytes_for_level_base=4194304",
	"--cache_size=1048576",
	"--compression_type=snappy",
	"--sync=false",
	"--disable_wal=1",
	"--threads=1",
}

// keptCheckpoints is how many checkpoints workload 9 keeps, the newest, as
// Flink's local recovery keeps the latest completed ones and removes the
// rest.
const keptCheckpoints = 3

// keptInfoLogs is how many of RocksDB's old info logs (LOG.old.*) workload
// 9 keeps in the database directory after each round, as RocksDB does
// under Flink's default state.backend.rocksdb.log.max-file-num of 4 (the
// current LOG and 3 old ones). db_bench and ldb reopen the database every
// round, each open starting a new LOG, where Flink keeps one instance
// open; without this the directory would grow by two files a round, and
// so would the checkpoint's listing of it.
const keptInfoLogs = 3

// lifeMetrics are the rows of workload 9.
type lifeMetrics struct {
	w                                          *Workload // for notes
	early, late, lateOverEarly, rounds, sealed *Metric
	written, used, cpu, cpuPerGB               *Metric
}

// subtaskLife runs workload 9: one subtask's RocksDB instance living
// through many checkpoints, to show what a long life costs that one round
// does not: checkpoints that slow down as the store grows, bytes written
// twice, space kept for SSTs compactions dropped, and the daemon's CPU.
func (b *bench) subtaskLife() []*Workload {
	s := b.cfg.Life
	w := newWorkload(9, "A subtask's life", b.cfg.reps(s.Reps))
	dev, devErr := blockDeviceOf(b.dir)
	devName := "the work dir's disk"
	if devErr == nil {
		devName = dev.name
	}
	tenth := max(1, s.Rounds/10)
	w.Setup = fmt.Sprintf("The live RocksDB of one subtask as Flink runs it, on the bare disk, on go-fuse's loopback (which keeps "+
		"no state of its own: what a FUSE mount alone costs each operation) and on statefs. db_bench fillrandom then overwrite "+
		"of %d keys (values of %d bytes) into tm_bench/tmp/job_…_op_…_uuid_…/db (the overwrite gives the database the shape of its "+
		"levels before the first round), then %d rounds of: db_bench --use_existing_db=1 overwrite of %d keys; "+
		"`ldb --db=DB checkpoint --checkpoint_dir=…/vtx_…_sti_0/chk_N` (hard links), timed; removal (rm -rf) of every checkpoint "+
		"but the newest %d, and of every old info log (LOG.old.*) but the newest %d, as under Flink's default "+
		"state.backend.rocksdb.log.max-file-num (db_bench and ldb reopen the database every round, and every open starts a new LOG). "+
		"Tuning: %s (compactions on, so they rewrite SSTs the kept checkpoints hold). Early and late are the medians of the "+
		"checkpoint times of the first and the last %d rounds. Bytes written are %s's (/proc/diskstats: sectors written × 512) "+
		"from a sync after the fill and its seal to a sync after the last round once statefs sealed everything; they are the whole "+
		"disk's, so the bench must run alone on the machine. Disk used is the tree's allocated blocks at the end (statefs: the "+
		"store, index included, reserve aside), with no collector run. statefs's CPU is its server's (the keeper's child) utime + stime "+
		"(/proc/PID/stat) over the same span, per GB of files it sealed over the span by its statefs_sealed_bytes_total (for this "+
		"workload the daemon runs with --metrics-addr on the loopback interface, read before and after the span); with a statefs "+
		"that does not count them, the bytes the bare disk took over the span (the SSTs, MANIFESTs and OPTIONS the rounds wrote) "+
		"stand in, and a note says so.",
		s.Keys, s.ValueSize, s.Rounds, s.WritesPerRound, keptCheckpoints, keptInfoLogs, strings.Join(lifeTuning, " "), tenth, devName)
	m := lifeMetrics{
		early:         w.metric("time per checkpoint, early", "ms", false, nil),
		late:          w.metric("time per checkpoint, late", "ms", false, ratioGoal("<=", 1.5, native)),
		lateOverEarly: w.metric("time per checkpoint, late / early", "×", false, valueGoal("<=", 1.1, "≤ 1.1 (statefs)")),
		rounds:        w.metric("all rounds", "s", false, nil),
		sealed:        w.metric("sealed, after the last round", "s", false, nil),
		written:       w.metric("bytes written to the disk", "MB", false, ratioGoal("<=", 1.05, native)),
		used:          w.metric("disk used at the end, no collector run", "MB", false, ratioGoal("<=", 1.2, native)),
		cpu:           w.metric("daemon CPU, rounds and seals", "s", false, nil),
		cpuPerGB:      w.metric("daemon CPU per GB sealed", "s/GB", false, nil),
	}
	m.w = w
	if addr, err := freeLocalAddr(); err != nil {
		w.note("statefs served no metrics: %v", err)
	} else {
		b.statefs.metricsAddr = addr
		defer func() { b.statefs.metricsAddr = "" }()
	}
	if devErr != nil {
		w.note("the disk's bytes written were not measured: %v", devErr)
	}
	if err := requireTools("db_bench", "ldb"); err != nil {
		w.fail(err)
	} else {
		var disk *blockDevice
		if devErr == nil {
			disk = &dev
		}
		var nativeWritten int64 // in this repetition: the bare disk runs first
		b.eachRep(w, b.targets(), func(t target) error {
			return b.lifeOnce(t, disk, m, &nativeWritten)
		})
	}
	if rss := b.statefs.TakePeakRSS(); rss > 0 {
		w.note("statefs's peak RSS (VmHWM of its server, read before it stopped): %.0f MiB", mib(rss))
	}
	w.finish(&b.caches)
	return []*Workload{w}
}

// lifeOnce is workload 9 on one target. disk is nil when the disk's
// counters could not be found; nativeWritten carries the bare disk's bytes
// written to statefs's run of the same repetition (targets() runs the bare
// disk first).
func (b *bench) lifeOnce(t target, disk *blockDevice, m lifeMetrics, nativeWritten *int64) error {
	root, err := t.Open()
	if err != nil {
		return err
	}
	defer t.Close()
	s := b.cfg.Life
	db, parent := rocksDBDir(root, "life"), subtaskDir(root, "life")
	for _, dir := range []string{filepath.Dir(db), parent} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	flags := append([]string{"--db=" + db, fmt.Sprintf("--num=%d", s.Keys), fmt.Sprintf("--value_size=%d", s.ValueSize)}, lifeTuning...)
	sf, isStatefs := t.(*statefsTarget)

	b.caches.Drop()
	if _, err := dbBench(flags, "--benchmarks=fillrandom,overwrite", "--seed=1"); err != nil {
		return err
	}
	if err := t.Settle(); err != nil {
		return err
	}
	syscall.Sync()
	var written, cpu float64
	if disk != nil {
		before, err := disk.BytesWritten()
		if err != nil {
			return err
		}
		written = -float64(before)
	}
	var sealedBytes float64
	var counted bool
	if isStatefs {
		// The counter first, the CPU time after it: a scrape makes the
		// daemon read its whole store, which is not the rounds' work.
		before, ok, err := sf.SealedBytes()
		if err != nil {
			return err
		}
		sealedBytes, counted = -before, ok
		cpuBefore, err := sf.CPUSeconds()
		if err != nil {
			return err
		}
		cpu = -cpuBefore
	}

	start := time.Now()
	took := make([]float64, 0, s.Rounds)
	for i := 1; i <= s.Rounds; i++ {
		if _, err := dbBench(flags, "--benchmarks=overwrite", "--use_existing_db=1",
			fmt.Sprintf("--writes=%d", s.WritesPerRound), fmt.Sprintf("--seed=%d", 100+i)); err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		d, err := ldbCheckpoint(db, filepath.Join(parent, fmt.Sprintf("chk_%d", i)))
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		took = append(took, d.Seconds()*1000)
		if old := i - keptCheckpoints; old >= 1 {
			if err := os.RemoveAll(filepath.Join(parent, fmt.Sprintf("chk_%d", old))); err != nil {
				return fmt.Errorf("round %d: %w", i, err)
			}
		}
		if err := pruneInfoLogs(db, keptInfoLogs); err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
	}
	roundsSecs := since(start)
	ended := time.Now()
	if err := t.Settle(); err != nil {
		return err
	}
	sealedSecs := since(ended)
	syscall.Sync()
	if disk != nil {
		after, err := disk.BytesWritten()
		if err != nil {
			return err
		}
		written += float64(after)
	}
	if isStatefs {
		cpuAfter, err := sf.CPUSeconds()
		if err != nil {
			return err
		}
		cpu += cpuAfter
		after, ok, err := sf.SealedBytes()
		if err != nil {
			return err
		}
		sealedBytes += after
		counted = counted && ok
	}
	used, err := t.DiskUsage()
	if err != nil {
		return err
	}

	early, late := earlyLate(took)
	m.early.add(t.Name(), early)
	m.late.add(t.Name(), late)
	m.lateOverEarly.add(t.Name(), late/early)
	m.rounds.add(t.Name(), roundsSecs)
	m.used.add(t.Name(), float64(used)/1e6)
	if disk != nil {
		m.written.add(t.Name(), written/1e6)
	}
	if !isStatefs {
		if _, isNative := t.(*nativeTarget); isNative {
			*nativeWritten = int64(written)
		}
		b.logf("  checkpoints: early %.1f ms, late %.1f ms; %.0f MB written, %.0f MB used", early, late, written/1e6, float64(used)/1e6)
		return nil
	}
	m.sealed.add(t.Name(), sealedSecs)
	m.cpu.add(t.Name(), cpu)
	switch {
	case counted && sealedBytes > 0:
		m.cpuPerGB.add(t.Name(), cpu/(sealedBytes/1e9))
		m.w.note("statefs sealed %.0f MB of files over the span (statefs_sealed_bytes_total); the bare disk took %.0f MB",
			sealedBytes/1e6, float64(*nativeWritten)/1e6)
	case *nativeWritten > 0:
		m.cpuPerGB.add(t.Name(), cpu/(float64(*nativeWritten)/1e9))
		m.w.note("statefs counted no bytes sealed: CPU per GB is over the %.0f MB the bare disk took over the span", float64(*nativeWritten)/1e6)
	}
	b.logf("  checkpoints: early %.1f ms, late %.1f ms; sealed %.1f s after; %.0f MB written, %.0f MB used; daemon CPU %.1f s",
		early, late, sealedSecs, written/1e6, float64(used)/1e6, cpu)
	return nil
}

// pruneInfoLogs removes all but the newest keep of RocksDB's old info logs
// in db, whose names end in the microseconds they were rotated at.
func pruneInfoLogs(db string, keep int) error {
	old, err := filepath.Glob(filepath.Join(db, "LOG.old.*"))
	if err != nil {
		return err
	}
	slices.SortFunc(old, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b))
	})
	for _, path := range old[:max(0, len(old)-keep)] {
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	return nil
}

// earlyLate are the medians of the first and of the last tenth of took,
// a value each at the least.
func earlyLate(took []float64) (early, late float64) {
	n := max(1, len(took)/10)
	return median(took[:n]), median(took[len(took)-n:])
}
