package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// metadataMetrics are the rows of workload 5, one per phase.
type metadataMetrics struct {
	create, stat, warmStat, list, unlink, cycle *Metric
}

// metadata runs workload 5: many small files created, stat'ed, listed and
// unlinked, as RocksDB and Flink do with their small files.
func (b *bench) metadata() []*Workload {
	s := b.cfg.Metadata
	w := newWorkload(5, "Metadata", b.cfg.reps(s.Reps))
	w.Setup = fmt.Sprintf("%d files in %d directories, from one goroutine, in phases with the caches dropped between them: "+
		"create (open O_CREAT|O_EXCL, write 4 KiB, close) every file; stat every file; stat every file again at once, the caches kept "+
		"(the loopback's entries are a second old by then, statefs's are cached for --cache-timeout); `ls -lR` of the tree; unlink every file. "+
		"The last row is files over the time of create, the first stat and unlink together.", s.Files, s.Dirs)
	vsLoopback := func() *Goal { return ratioGoal(">=", 1.0, loopback) }
	m := metadataMetrics{
		create:   w.metric("create+write 4 KiB+close", "files/s", true, vsLoopback()),
		stat:     w.metric("stat", "files/s", true, vsLoopback()),
		warmStat: w.metric("stat again, caches kept", "files/s", true, ratioGoal(">=", 0.5, native)),
		list:     w.metric("ls -lR", "entries/s", true, vsLoopback()),
		unlink:   w.metric("unlink", "files/s", true, vsLoopback()),
		cycle:    w.metric("create+stat+unlink", "files/s", true, vsLoopback()),
	}
	b.eachRep(w, b.keeperTargets(), func(t target) error { return b.metadataOnce(t, m) })
	b.servingRSS["5"] = b.statefs.TakePeakRSS()
	w.finish(&b.caches)
	return []*Workload{w}
}

func (b *bench) metadataOnce(t target, m metadataMetrics) error {
	root, err := t.Open()
	if err != nil {
		return err
	}
	defer t.Close()
	s := b.cfg.Metadata
	tree := filepath.Join(root, "meta")
	paths := make([]string, s.Files)
	for d := 0; d < s.Dirs; d++ {
		if err := os.MkdirAll(filepath.Join(tree, fmt.Sprintf("d%03d", d)), 0o755); err != nil {
			return err
		}
	}
	for i := range paths {
		paths[i] = filepath.Join(tree, fmt.Sprintf("d%03d", i%s.Dirs), fmt.Sprintf("f%06d", i))
	}
	var total float64
	for _, phase := range []struct {
		metric *Metric
		run    func() error
	}{
		{m.create, func() error { return createFiles(paths) }},
		{m.stat, func() error { return statFiles(paths) }},
		{m.warmStat, func() error { return statFiles(paths) }},
		{m.list, func() error { return listTree(tree, len(paths)) }},
		{m.unlink, func() error { return unlinkFiles(paths) }},
	} {
		if phase.metric != m.warmStat {
			b.caches.Drop()
		}
		start := time.Now()
		if err := phase.run(); err != nil {
			return err
		}
		took := since(start)
		phase.metric.add(t.Name(), float64(len(paths))/took)
		if phase.metric != m.list && phase.metric != m.warmStat {
			total += took
		}
	}
	m.cycle.add(t.Name(), float64(len(paths))/total)
	b.logf("  create+stat+unlink %.0f files/s", float64(len(paths))/total)
	return nil
}

// createFiles creates each file with 4 KiB of its own content.
func createFiles(paths []string) error {
	block := make([]byte, 4096)
	for i, p := range paths {
		binary.LittleEndian.PutUint64(block, uint64(i))
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = f.Write(block)
		if err := closeAfter(f, err); err != nil {
			return err
		}
	}
	return nil
}

func statFiles(paths []string) error {
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.Size() != 4096 {
			return fmt.Errorf("%s has %d bytes, want 4096", p, st.Size())
		}
	}
	return nil
}

// listTree runs ls -lR and checks that it listed every file.
func listTree(dir string, files int) error {
	out, err := exec.Command("ls", "-lR", dir).Output()
	if err != nil {
		return fmt.Errorf("ls -lR: %w", err)
	}
	listed := 0
	s := bufio.NewScanner(bytes.NewReader(out))
	for s.Scan() {
		if bytes.HasPrefix(s.Bytes(), []byte("-")) {
			listed++
		}
	}
	if listed != files {
		return fmt.Errorf("ls -lR listed %d files, want %d", listed, files)
	}
	return nil
}

func unlinkFiles(paths []string) error {
	for _, p := range paths {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return nil
}
