package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// collectorMetrics are the rows of workload 7, statefs's alone.
type collectorMetrics struct {
	seconds, overlap, chunks, swept, alone, during, ratio *Metric
}

// gcReport is the part of `statefs gc --json` the harness reads.
type gcReport struct {
	Swept struct{ Chunks, Objects int } `json:"swept"`
}

// collector runs workload 7: `statefs gc` on a mounted store whose chunks
// are about half garbage, while a copy-in runs, measured against the same
// copy-in alone.
func (b *bench) collector() []*Workload {
	s := b.cfg.Collector
	w := newWorkload(7, "Collector", b.cfg.reps(s.Reps))
	w.Setup = fmt.Sprintf("statefs only. A fresh store gets %d files of %d MiB (random bytes) in the checkpoint directories of two jobs, half each; "+
		"`statefs job gone` marks one job gone. A copy-in of %d checkpoints of workload 1 runs alone, then again with "+
		"`statefs gc --grace 0s` (through the daemon's socket) started once a tenth of it is written; the copy-in's throughput "+
		"while gc runs is the bytes it wrote while both ran over that time, compared with the time the copy-in alone took for the same bytes. "+
		"The target's 1,000,000 chunks would take 1 TB here (chunks average 1 MiB): the next table times gc over that many small ones.",
		s.Files, s.FileMiB, s.CopyCheckpoints)
	m := collectorMetrics{
		seconds: w.metric("gc run", "s", false, nil),
		overlap: w.metric("of which the copy-in was writing", "s", false, nil),
		chunks:  w.metric("chunks and objects in the store before gc", "files", false, nil),
		swept:   w.metric("chunks and objects freed", "files", false, nil),
		alone:   w.metric("copy-in alone, over the same bytes", "MB/s", true, nil),
		during:  w.metric("copy-in while gc runs", "MB/s", true, nil),
		ratio:   w.metric("copy-in while gc runs / alone", "×", true, valueGoal(">=", 0.7, "≥ 0.7")),
	}
	src, err := b.checkpointSource()
	if err != nil {
		w.fail(err)
	} else {
		b.eachRep(w, []target{b.statefs}, func(target) error { return b.collectorOnce(w, src, m) })
		w.note("per repetition, copy-in while gc runs / alone: %s, over windows of %s s: with windows this short, the stalls of "+
			"fdatasync on 64 MiB files make the ratio noisy", joinNumbers(m.ratio.Samples[statefs]), joinNumbers(m.overlap.Samples[statefs]))
	}
	w.finish(&b.caches)
	return []*Workload{w, b.collectorAtScale()}
}

func (b *bench) collectorOnce(w *Workload, src *checkpointSource, m collectorMetrics) error {
	t := b.statefs
	root, err := t.Open()
	if err != nil {
		return err
	}
	defer t.Close()
	if err := b.writeJobs(root); err != nil {
		return err
	}
	if err := t.Settle(); err != nil {
		return err
	}
	if out, err := exec.Command(t.bin, "job", "--store", t.store, "gone", flinkID("gone job")).CombinedOutput(); err != nil {
		return fmt.Errorf("statefs job gone: %v\n%s", err, out)
	}
	alone := &progress{}
	if err := b.coldStart(src); err != nil {
		return err
	}
	if _, err := b.copyCheckpoints(src, root, 100, alone); err != nil {
		return err
	}
	if err := t.Settle(); err != nil {
		return err
	}
	before, err := t.Stats()
	if err != nil {
		return err
	}
	if err := b.coldStart(src); err != nil {
		return err
	}
	gc, err := b.gcDuringCopyIn(src, root)
	if err != nil {
		return err
	}
	aloneRate := alone.Rate(gc.fromBytes, gc.toBytes)
	m.seconds.add(statefs, gc.seconds)
	m.overlap.add(statefs, gc.overlap)
	m.chunks.add(statefs, float64(before.Chunks+before.Objects))
	m.swept.add(statefs, float64(gc.swept))
	m.alone.add(statefs, aloneRate)
	m.during.add(statefs, gc.during)
	m.ratio.add(statefs, gc.during/aloneRate)
	b.logf("  gc %.2f s over %d chunks and objects (%d freed); copy-in %.0f MB/s alone, %.0f MB/s during gc", gc.seconds, before.Chunks+before.Objects, gc.swept, aloneRate, gc.during)
	return b.sweepAgain(w)
}

// coldStart readies a copy-in: it writes out what is dirty and drops the
// caches, so that the copy does not pay for earlier writes, then reads the
// source into the page cache, as if it were on a disk of its own.
func (b *bench) coldStart(src *checkpointSource) error {
	b.caches.Drop()
	_, err := readTree(src.root)
	return err
}

// sweepAgain runs gc once more after everything settled and notes any
// chunks it still finds to sweep: garbage the timed run left behind.
func (b *bench) sweepAgain(w *Workload) error {
	if err := b.statefs.Settle(); err != nil {
		return err
	}
	report, err := b.gc()
	if err != nil {
		return err
	}
	if report.Swept.Chunks+report.Swept.Objects > 0 {
		w.note("a second gc run after the copy-in settled freed %d more chunks and objects: garbage the timed run did not free", report.Swept.Chunks+report.Swept.Objects)
	}
	return nil
}

// gc runs `statefs gc --grace 0s` through the daemon's socket.
func (b *bench) gc() (gcReport, error) {
	return parseGCReport(exec.Command(b.statefs.bin, "gc", "--store", b.statefs.store, "--grace", "0s", "--json").Output())
}

// parseGCReport reads what `statefs gc --json` printed.
func parseGCReport(out []byte, err error) (gcReport, error) {
	var report gcReport
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return report, fmt.Errorf("statefs gc: %v: %s", err, ee.Stderr)
	}
	if err != nil {
		return report, fmt.Errorf("statefs gc: %w", err)
	}
	if err := json.Unmarshal(out, &report); err != nil {
		return report, fmt.Errorf("statefs gc --json: %w\n%s", err, out)
	}
	return report, nil
}

// writeJobs writes the files of two jobs' checkpoints, alternating.
func (b *bench) writeJobs(root string) error {
	s := b.cfg.Collector
	dirs := []string{filepath.Join(subtaskDir(root, "gone job"), "chk_1"), filepath.Join(subtaskDir(root, "live job"), "chk_1")}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for i := 0; i < s.Files; i++ {
		path := filepath.Join(dirs[i%2], sstName(i))
		if err := writeRandomFile(path, int64(s.FileMiB)<<20, uint64(10_000_000+i)); err != nil {
			return err
		}
	}
	return nil
}

// copyCheckpoints copies the first checkpoints of the source into a live
// job's subtask as chk_<first>, chk_<first+1>, ....
func (b *bench) copyCheckpoints(src *checkpointSource, root string, first int, p *progress) (int64, error) {
	var total int64
	for i, dir := range src.dirs[:min(b.cfg.Collector.CopyCheckpoints, len(src.dirs))] {
		dst := filepath.Join(subtaskDir(root, "live job"), fmt.Sprintf("chk_%d", first+i))
		n, err := copyDir(dir, dst, p)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// gcRun is what one run of gc during a copy-in measured.
type gcRun struct {
	seconds float64 // gc's wall time, process start to exit
	overlap float64 // of those, the seconds the copy-in was still writing
	during  float64 // the copy-in's MB/s over the overlap
	swept   int     // chunks and objects gc freed
	// fromBytes and toBytes are how far the copy-in was at the start and
	// the end of the overlap.
	fromBytes, toBytes float64
}

// gcDuringCopyIn starts the copy-in, starts gc once a tenth of it is
// written, and measures both.
func (b *bench) gcDuringCopyIn(src *checkpointSource, root string) (gcRun, error) {
	p := &progress{}
	total := int64(min(b.cfg.Collector.CopyCheckpoints, len(src.dirs))) * src.logical / int64(len(src.dirs))
	copied := make(chan error, 1)
	go func() {
		_, err := b.copyCheckpoints(src, root, 200, p)
		copied <- err
	}()
	for p.Bytes(time.Now()) < float64(total)/10 {
		select {
		case err := <-copied:
			return gcRun{}, fmt.Errorf("the copy-in ended before a tenth of it was written: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	gcStart := time.Now()
	report, gcErr := b.gc()
	gcEnd := time.Now()
	if err := errors.Join(gcErr, <-copied); err != nil {
		return gcRun{}, err
	}
	if report.Swept.Chunks+report.Swept.Objects == 0 {
		return gcRun{}, fmt.Errorf("statefs gc freed no chunk and no object")
	}
	end := gcEnd
	if last := p.Last(); last.Before(end) {
		end = last
	}
	if !end.After(gcStart) {
		return gcRun{}, fmt.Errorf("the copy-in ended before gc started: make it longer (--gc-copy-checkpoints, --copyin-sst-mib)")
	}
	run := gcRun{
		seconds:   gcEnd.Sub(gcStart).Seconds(),
		overlap:   end.Sub(gcStart).Seconds(),
		swept:     report.Swept.Chunks + report.Swept.Objects,
		fromBytes: p.Bytes(gcStart),
		toBytes:   p.Bytes(end),
	}
	run.during = (run.toBytes - run.fromBytes) / 1e6 / run.overlap
	return run, nil
}
