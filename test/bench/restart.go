package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// inodesPerDir is how many files workload 6 puts in each directory.
const inodesPerDir = 1000

// restartable is a target served by a daemon that the harness can stop and
// start again on the same tree.
type restartable interface {
	target
	stop() error
	mount(ready func() bool) error
	mountpoint() string
	peakRSSNow() (int64, error)
}

func (t *loopbackTarget) mountpoint() string         { return t.mnt }
func (t *loopbackTarget) peakRSSNow() (int64, error) { return t.d.PeakRSS() }

func (t *statefsTarget) mountpoint() string         { return t.mnt }
func (t *statefsTarget) peakRSSNow() (int64, error) { return t.d.PeakRSS() }

// restart runs workload 6: how long a daemon takes from exec to serving
// the first stat of a file with many inodes in its tree, and statefs's
// peak memory while serving workloads 1-5.
func (b *bench) restart() []*Workload {
	s := b.cfg.Restart
	w := newWorkload(6, "Restart", b.cfg.reps(s.Reps))
	w.Setup = fmt.Sprintf("%d empty files (mknod) in directories of %d, written through the mount (the loopback's: straight into its directory); "+
		"then, per repetition: SIGTERM and wait for exit, drop the caches, start the daemon and stat the last file created every millisecond "+
		"until it succeeds.", s.Inodes, inodesPerDir)
	if s.Inodes < 1_000_000 {
		w.Setup += " The targets are set at 1,000,000 inodes (--restart-inodes 1000000, the default); " +
			"this run's verdicts are at a smaller size."
	}
	kills := max(takeoverKills, w.Reps)
	w.Setup += fmt.Sprintf(" Then, with statefs mounted, %d takeovers: SIGKILL of its server (the keeper's child; the keeper starts the next on the same connection), "+
		"%.1f s apart, while one client lstats the files in random order, each once, paced to span the kills, so that each asks the server "+
		"and not the kernel's caches, and another reads a file it keeps open every millisecond. "+
		"A takeover's time runs from the kill to the answer of the first stat started after it; the stalls are the latencies of the stats from the first kill on; "+
		"a client's error fails the run. The loopback has no keeper. "+
		"Peak RSS is the server's (VmHWM); the keeper's own is its own row.", kills, takeoverSpacing.Seconds())
	firstStat := w.metric("exec to first successful stat", "ms", false, valueGoal("<", 1000, "< 1 s (statefs)"))
	rssAtStat := w.metric("daemon peak RSS at first stat", "MiB", false, nil)
	keeperRSS := w.metric("statefs keeper peak RSS at first stat", "MiB", false, nil)
	takeover := takeoverMetrics{
		firstAnswer: w.metric("SIGKILL of the server to first answered stat", "ms", false, valueGoal("<", 100, "< 100 ms (statefs)")),
		p99:         w.metric("stat latency across the takeovers, p99", "ms", false, nil),
		worst:       w.metric("stat latency across the takeovers, highest", "ms", false, nil),
	}
	serving := w.metric("statefs peak RSS while serving workloads 1-5", "MiB", false, valueGoal("<=", 256, "≤ 256 MiB (statefs)"))
	b.recordServingRSS(w, serving)
	populating := w.metric("statefs peak RSS creating and stat'ing the inodes", "MiB", false, valueGoal("<=", 256, "≤ 256 MiB (statefs)"))

	probe := filepath.Join("inodes", dirName((s.Inodes-1)/inodesPerDir), fileName(s.Inodes-1))
	targets := []target{b.loopback, b.statefs}
	defer func() {
		for _, t := range targets {
			t.Close()
		}
	}()
	if err := b.populate(w, populating); err != nil {
		w.fail(err)
	} else {
		b.eachRep(w, targets, func(t target) error {
			return b.restartOnce(t.(restartable), probe, firstStat, rssAtStat, keeperRSS)
		})
		if w.Error == "" {
			b.logf("workload 6: %d takeovers of statefs's server", kills)
			if err := b.takeovers(w, kills, takeover); err != nil {
				w.fail(fmt.Errorf("statefs, takeovers: %w", err))
			}
		}
	}
	w.finish(&b.caches)
	return []*Workload{w}
}

// recordServingRSS reports the highest of statefs's peaks in workloads 1-5.
func (b *bench) recordServingRSS(w *Workload, serving *Metric) {
	if len(b.servingRSS) == 0 {
		w.note("statefs's peak RSS while serving workloads 1-5 was not measured: none of them ran")
		return
	}
	var peak int64
	var each []string
	for name, rss := range b.servingRSS {
		peak = max(peak, rss)
		each = append(each, fmt.Sprintf("workload %s: %.0f MiB", name, mib(rss)))
	}
	sort.Strings(each)
	serving.add(statefs, mib(peak))
	w.note("statefs's peak RSS (VmHWM of each server, the keeper's child, read before it stopped), per workload: %s", strings.Join(each, "; "))
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// populate fills a fresh loopback directory and a fresh statefs store with
// the inodes of workload 6, stats each through statefs, and records the
// daemon's peak memory meanwhile in rss. The loopback keeps running;
// statefs is stopped.
func (b *bench) populate(w *Workload, rss *Metric) error {
	n := b.cfg.Restart.Inodes
	if _, err := b.loopback.Open(); err != nil {
		return err
	}
	if _, err := makeInodes(b.loopback.backing, n); err != nil {
		return err
	}
	root, err := b.statefs.Open()
	if err != nil {
		return err
	}
	b.logf("workload 6: creating %d inodes through statefs", n)
	took, err := makeInodes(root, n)
	if err != nil {
		return err
	}
	statTook, err := inodeDirs(n, func(d int) error {
		for i := d * inodesPerDir; i < min(n, (d+1)*inodesPerDir); i++ {
			if _, err := os.Lstat(filepath.Join(root, "inodes", dirName(d), fileName(i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := b.statefs.Settle(); err != nil {
		return err
	}
	if err := b.statefs.stop(); err != nil {
		return err
	}
	rss.add(statefs, mib(b.statefs.TakePeakRSS()))
	w.note("creating the %d inodes through statefs ran at %.0f files/s (mknod), stat'ing them at %.0f files/s (lstat), %d goroutines each",
		n, float64(n)/took.Seconds(), float64(n)/statTook.Seconds(), runtime.NumCPU())
	return nil
}

// makeInodes creates n empty files under root/inodes, in directories of
// inodesPerDir, from one goroutine per core.
func makeInodes(root string, n int) (time.Duration, error) {
	return inodeDirs(n, func(d int) error { return makeInodeDir(root, d, n) })
}

// inodeDirs calls fn for each directory of n inodes, from one goroutine
// per core, and stops at the first error.
func inodeDirs(n int, fn func(d int) error) (time.Duration, error) {
	start := time.Now()
	dirs := (n + inodesPerDir - 1) / inodesPerDir
	next := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range next {
				mu.Lock()
				failed := firstErr != nil
				mu.Unlock()
				if failed {
					continue // drain, so the sender never blocks
				}
				if err := fn(d); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
				}
			}
		}()
	}
	for d := 0; d < dirs; d++ {
		next <- d
	}
	close(next)
	wg.Wait()
	return time.Since(start), firstErr
}

// makeInodeDir creates directory d and its share of the n files.
func makeInodeDir(root string, d, n int) error {
	dir := filepath.Join(root, "inodes", dirName(d))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := d * inodesPerDir; i < min(n, (d+1)*inodesPerDir); i++ {
		if err := syscall.Mknod(filepath.Join(dir, fileName(i)), syscall.S_IFREG|0o644, 0); err != nil {
			return fmt.Errorf("mknod %s: %w", fileName(i), err)
		}
	}
	return nil
}

func dirName(d int) string  { return fmt.Sprintf("d%04d", d) }
func fileName(i int) string { return fmt.Sprintf("f%07d", i) }

// restartOnce stops the daemon, drops the caches, and times a fresh start
// to the first stat of probe that succeeds.
func (b *bench) restartOnce(t restartable, probe string, firstStat, rssAtStat, keeperRSS *Metric) error {
	if err := t.stop(); err != nil {
		return err
	}
	b.caches.Drop()
	path := filepath.Join(t.mountpoint(), probe)
	var served time.Time
	start := time.Now()
	err := t.mount(func() bool {
		if served.IsZero() {
			if _, err := os.Stat(path); err == nil {
				served = time.Now()
			}
		}
		return !served.IsZero()
	})
	if err != nil {
		return err
	}
	ms := served.Sub(start).Seconds() * 1000
	rss, err := t.peakRSSNow()
	if err != nil {
		return err
	}
	firstStat.add(t.Name(), ms)
	rssAtStat.add(t.Name(), mib(rss))
	b.logf("  first stat after %.0f ms, peak RSS %.0f MiB", ms, mib(rss))
	if sf, ok := t.(*statefsTarget); ok {
		keeper, err := sf.d.KeeperPeakRSS()
		if err != nil {
			return err
		}
		keeperRSS.add(statefs, mib(keeper))
		b.logf("  keeper peak RSS %.1f MiB", mib(keeper))
	}
	return nil
}
