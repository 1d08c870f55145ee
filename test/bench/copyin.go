package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// checkpointSource is a RocksDB instance's checkpoints on its own disk, as
// workload 1 copies them in: each a directory of SST files of incompressible
// bytes (as compressed SST blocks are) plus MANIFEST, OPTIONS and CURRENT,
// consecutive ones sharing all their SSTs but one.
type checkpointSource struct {
	root    string
	dirs    []string // one per checkpoint, oldest first
	logical int64    // bytes of all checkpoints together
	unique  int64    // bytes of distinct content among them
}

// makeCheckpointSource writes the SST files once and hard-links them into
// each checkpoint directory, as RocksDB's own checkpoints do.
func makeCheckpointSource(root string, size copyInSize) (*checkpointSource, error) {
	src := &checkpointSource{root: root}
	ssts := filepath.Join(root, "sst")
	if err := freshDir(root); err != nil {
		return nil, err
	}
	if err := os.Mkdir(ssts, 0o755); err != nil {
		return nil, err
	}
	sstBytes := int64(size.SSTMiB) << 20
	for n := 1; n < size.Checkpoints+size.SSTs; n++ {
		if err := writeRandomFile(filepath.Join(ssts, sstName(n)), sstBytes, uint64(n)); err != nil {
			return nil, err
		}
		src.unique += sstBytes
	}
	for c := 1; c <= size.Checkpoints; c++ {
		dir := filepath.Join(root, fmt.Sprintf("chk_%d", c))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, err
		}
		for n := c; n < c+size.SSTs; n++ {
			if err := os.Link(filepath.Join(ssts, sstName(n)), filepath.Join(dir, sstName(n))); err != nil {
				return nil, err
			}
			src.logical += sstBytes
		}
		small, err := writeCheckpointMetadata(dir, c)
		if err != nil {
			return nil, err
		}
		src.logical += small
		src.unique += small
		src.dirs = append(src.dirs, dir)
	}
	return src, nil
}

func sstName(n int) string { return fmt.Sprintf("%06d.sst", n) }

// writeCheckpointMetadata writes the small files of checkpoint c, each
// different from every other checkpoint's, and returns their bytes.
func writeCheckpointMetadata(dir string, c int) (int64, error) {
	manifest := fmt.Sprintf("MANIFEST-%06d", c)
	if err := writeRandomFile(filepath.Join(dir, manifest), 16<<10, uint64(1_000_000+c)); err != nil {
		return 0, err
	}
	var options strings.Builder
	fmt.Fprintf(&options, "# RocksDB option file, checkpoint %d\n[Version]\n  rocksdb_version=7.8.3\n", c)
	for i := 0; i < 150; i++ {
		fmt.Fprintf(&options, "  option_%03d=%d\n", i, i*c)
	}
	files := map[string]string{
		fmt.Sprintf("OPTIONS-%06d", c): options.String(),
		"CURRENT":                      manifest + "\n",
	}
	total := int64(16 << 10)
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return 0, err
		}
		total += int64(len(content))
	}
	return total, nil
}

// checkpointSource makes the source of workloads 1 and 7 the first time
// one of them needs it.
func (b *bench) checkpointSource() (*checkpointSource, error) {
	if b.source != nil {
		return b.source, nil
	}
	s := b.cfg.CopyIn
	b.logf("writing the checkpoint source: %d SSTs of %d MiB", s.Checkpoints+s.SSTs-1, s.SSTMiB)
	src, err := makeCheckpointSource(filepath.Join(b.cfg.Dir, "source"), s)
	b.source = src
	return src, err
}

// copyInMetrics are the rows of workloads 1 and 4.
type copyInMetrics struct {
	throughput, sealed, usedOverUnique, usedOverLogical, physicalOverUnique *Metric
	restore, restoreCompressible, usedCompressible                          *Metric
}

// compressibleCheckpoint is workload 4's second checkpoint: as many files
// of the same sizes as a checkpoint of workload 1's source, of text that
// compresses (writeCompressibleFile) instead of random bytes. It lives in
// the source's tree, so that coldStart reads it into the page cache too.
type compressibleCheckpoint struct {
	dir   string
	bytes int64
}

// compressibleSource writes workload 4's compressible checkpoint the
// first time it is asked for.
func (b *bench) compressibleSource(src *checkpointSource) (*compressibleCheckpoint, error) {
	if b.compressible != nil {
		return b.compressible, nil
	}
	s := b.cfg.CopyIn
	c := &compressibleCheckpoint{dir: filepath.Join(src.root, "compressible", "chk_1")}
	b.logf("writing the compressible checkpoint: %d files of %d MiB", s.SSTs, s.SSTMiB)
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, err
	}
	size := int64(s.SSTMiB) << 20
	for n := 1; n <= s.SSTs; n++ {
		if err := writeCompressibleFile(filepath.Join(c.dir, sstName(n)), size, uint64(2_000_000+n)); err != nil {
			return nil, err
		}
		c.bytes += size
	}
	b.compressible = c
	return c, nil
}

// copyInAndRestore runs workload 1 (copy ten checkpoints in) and, on what
// it leaves, workload 4 (read the newest back with cold caches).
func (b *bench) copyInAndRestore() []*Workload {
	s := b.cfg.CopyIn
	reps := b.cfg.reps(s.Reps)
	w1 := newWorkload(1, "Checkpoint copy-in", reps)
	w4 := newWorkload(4, "Restore", reps)
	m := copyInMetrics{
		throughput:          w1.metric("copy-in throughput", "MB/s", true, ratioGoal(">=", 1.0, native)),
		sealed:              w1.metric("sealed, after the copy ended", "s", false, nil),
		usedOverUnique:      w1.metric("disk used / unique bytes written", "×", false, valueGoal("<=", 1.05, "≤ 1.05 (statefs)")),
		usedOverLogical:     w1.metric("disk used / all bytes written", "×", false, nil),
		physicalOverUnique:  w1.metric("stats.json physical_bytes / unique bytes", "×", false, nil),
		restore:             w4.metric("restore throughput", "MB/s", true, ratioGoal(">=", 0.95, native)),
		restoreCompressible: w4.metric("restore throughput, compressible content", "MB/s", true, nil),
		usedCompressible:    w4.metric("compressible checkpoint: disk used / its bytes", "×", false, nil),
	}
	src, err := b.checkpointSource()
	var text *compressibleCheckpoint
	if err == nil {
		text, err = b.compressibleSource(src)
	}
	if err == nil {
		w1.Setup = fmt.Sprintf("%d checkpoints, each %d SST files of %d MiB (random bytes) plus MANIFEST, OPTIONS and CURRENT, "+
			"consecutive ones sharing %d of their %d SSTs: %.2f GB written, %.2f GB of it unique. "+
			"Each file is copied the way RocksDB copies a checkpoint it cannot hard-link (read/write in 1 MiB blocks, fdatasync per file as RocksDB's CopyFile does by default, fsync of the directory) "+
			"into tm_bench/localState/aid_…/jid_…/vtx_…_sti_0/chk_N. The source stands in for RocksDB's own disk: it is read once into the page cache "+
			"after the caches are dropped, so the copy costs the target disk only its writes. Throughput is bytes over the copy's time; "+
			"\"sealed\" is how long statefs took after that to seal everything; disk used is the target's allocated blocks after that "+
			"(statefs: the whole store, index included, but not the free-space reserve of up to 128 MiB the daemon keeps for its index on a full disk).",
			s.Checkpoints, s.SSTs, s.SSTMiB, s.SSTs-1, s.SSTs, float64(src.logical)/1e9, float64(src.unique)/1e9)
		w4.Setup = fmt.Sprintf("Reads every file of the newest checkpoint workload 1 left (%d files, %.0f MB) in 1 MiB blocks, "+
			"after restarting the FUSE daemon (as a restarted TaskManager finds it) and dropping the caches. "+
			"Then the same for a checkpoint of compressible content (no target: what compression costs a restore): "+
			"%d files of %d MiB of text (lines of a hex key and a value of random lower-case letters written twice, which zstd "+
			"at its fastest level shrinks to about two fifths), copied in the same way after workload 1's checkpoints and sealed; its "+
			"disk used is how much the target's allocated blocks grew by once it was sealed, over its bytes.",
			s.SSTs+3, float64(int64(s.SSTs)*int64(s.SSTMiB)<<20)/1e6, s.SSTs, s.SSTMiB)
		b.eachRep(w1, b.targets(), func(t target) error { return b.copyInOnce(t, src, text, m) })
	}
	if err != nil {
		w1.fail(err)
	}
	if w1.Error != "" {
		w4.fail(fmt.Errorf("workload 1 did not finish"))
	}
	b.servingRSS["1 and 4"] = b.statefs.TakePeakRSS()
	w1.finish(&b.caches)
	w4.finish(&b.caches)
	return []*Workload{w1, w4}
}

// copyInOnce copies every checkpoint into a fresh tree on t, waits for it
// to settle and measures the disk it takes; then it copies the
// compressible checkpoint in as well and reads back the newest of the
// first ones, then the compressible one.
func (b *bench) copyInOnce(t target, src *checkpointSource, text *compressibleCheckpoint, m copyInMetrics) error {
	root, err := t.Open()
	if err != nil {
		return err
	}
	defer t.Close()
	if err := b.coldStart(src); err != nil {
		return err
	}
	start := time.Now()
	var copied int64
	var newest string
	for i, dir := range src.dirs {
		newest = filepath.Join(subtaskDir(root, "copy-in"), fmt.Sprintf("chk_%d", i+1))
		n, err := copyDir(dir, newest, nil)
		copied += n
		if err != nil {
			return err
		}
	}
	copySeconds := since(start)
	settleStart := time.Now()
	if err := t.Settle(); err != nil {
		return err
	}
	used, err := t.DiskUsage()
	if err != nil {
		return err
	}
	m.throughput.add(t.Name(), mbPerSec(copied, copySeconds))
	m.usedOverUnique.add(t.Name(), float64(used)/float64(src.unique))
	m.usedOverLogical.add(t.Name(), float64(used)/float64(src.logical))
	if sf, ok := t.(*statefsTarget); ok {
		m.sealed.add(t.Name(), since(settleStart))
		st, err := sf.Stats()
		if err != nil {
			return err
		}
		m.physicalOverUnique.add(t.Name(), float64(st.PhysicalBytes)/float64(src.unique))
	}
	b.logf("  copy-in %.0f MB/s, disk used %.2f × unique", mbPerSec(copied, copySeconds), float64(used)/float64(src.unique))

	textChk := filepath.Join(subtaskDir(root, "copy-in-compressible"), "chk_1")
	if _, err := copyDir(text.dir, textChk, nil); err != nil {
		return err
	}
	if err := t.Settle(); err != nil {
		return err
	}
	usedAfter, err := t.DiskUsage()
	if err != nil {
		return err
	}
	m.usedCompressible.add(t.Name(), float64(usedAfter-used)/float64(text.bytes))
	b.logf("  compressible checkpoint: disk used %.2f × its bytes", float64(usedAfter-used)/float64(text.bytes))
	if err := b.restoreOnce(t, newest, m.restore); err != nil {
		return err
	}
	return b.restoreOnce(t, textChk, m.restoreCompressible)
}

// restoreOnce reads the newest checkpoint back after a restart of the
// daemon, with cold caches.
func (b *bench) restoreOnce(t target, newest string, restore *Metric) error {
	if err := t.Remount(); err != nil {
		return err
	}
	b.caches.Drop()
	start := time.Now()
	n, err := readTree(newest)
	if err != nil {
		return err
	}
	rate := mbPerSec(n, since(start))
	restore.add(t.Name(), rate)
	b.logf("  restore %.0f MB/s", rate)
	return nil
}
