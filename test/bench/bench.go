package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// bench is one run of the harness: its configuration, the three targets,
// and what the workloads share (the checkpoint source, statefs's peak RSS).
type bench struct {
	cfg      config
	dir      string // the work dir, absolute
	repo     string
	out      io.Writer // progress lines
	start    time.Time
	caches   caches
	bin      string // built binaries
	logs     string // daemon logs
	native   *nativeTarget
	loopback *loopbackTarget
	statefs  *statefsTarget
	noKeeper *statefsTarget // statefs --keeper=false, beside statefs where the keeper's cost is measured
	source   *checkpointSource
	// compressible is workload 4's checkpoint of compressible content,
	// written into the source's tree.
	compressible *compressibleCheckpoint
	// servingRSS is statefs's peak RSS while serving each of workloads 1-5,
	// keyed by the workloads' names.
	servingRSS map[string]int64
}

// run builds the binaries, runs the workloads cfg asks for, and returns
// the report; the error joins those of the workloads that failed (their
// tables say where).
func run(cfg config, repo string, out io.Writer) (*Report, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the benchmark needs root: it mounts FUSE filesystems and drops the page cache")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	detachStale(dir)
	b, err := newBench(cfg, dir, repo, out)
	if err != nil {
		return nil, err
	}
	r := &Report{Command: commandText(), Machine: describeMachine(repo, dir)}
	if r.Targets, err = b.describeTargets(dir); err != nil {
		return nil, err
	}
	for _, group := range []struct {
		ids []int
		run func() []*Workload
	}{
		{[]int{1, 4}, b.copyInAndRestore},
		{[]int{2, 3}, b.rocksDB},
		{[]int{5}, b.metadata},
		{[]int{6}, b.restart},
		{[]int{7}, b.collector},
		{[]int{8}, b.sealedRocksDB},
		{[]int{9}, b.subtaskLife},
	} {
		if cfg.runs(group.ids...) {
			r.Workloads = append(r.Workloads, group.run()...)
		}
	}
	r.TookSeconds = time.Since(b.start).Seconds()
	if b.source != nil {
		os.RemoveAll(b.source.root) // rewritten by every run
	}
	var errs []error
	for _, w := range r.Workloads {
		if w.Error != "" {
			errs = append(errs, fmt.Errorf("workload %d (%s): %s", w.ID, w.Title, w.Error))
		}
	}
	return r, errors.Join(errs...)
}

// newBench makes the work dir's layout in dir, absolute, and builds statefs
// and the loopback.
func newBench(cfg config, dir, repo string, out io.Writer) (*bench, error) {
	b := &bench{cfg: cfg, dir: dir, repo: repo, out: out, start: time.Now(),
		bin: filepath.Join(dir, "bin"), logs: filepath.Join(dir, "logs"), servingRSS: map[string]int64{}}
	return b, b.prepare(dir)
}

// prepare makes the work dir's layout and builds statefs and the loopback.
func (b *bench) prepare(dir string) error {
	if err := os.MkdirAll(b.bin, 0o755); err != nil {
		return err
	}
	if err := freshDir(b.logs); err != nil {
		return err
	}
	b.native = &nativeTarget{dir: filepath.Join(dir, "native")}
	b.loopback = &loopbackTarget{bin: filepath.Join(b.bin, "loopback"), logs: b.logs,
		backing: filepath.Join(dir, "loopback", "backing"), mnt: filepath.Join(dir, "loopback", "mnt")}
	b.statefs = b.statefsTarget(statefs, "statefs", b.cfg.StatefsArgs)
	b.noKeeper = b.statefsTarget(noKeeper, "statefs-nokeeper", append(slices.Clone(b.cfg.StatefsArgs), "--keeper=false"))
	b.logf("building statefs and go-fuse's loopback into %s", b.bin)
	for _, pkg := range []struct{ out, pkg string }{
		{b.statefs.bin, "./cmd/statefs"},
		{b.loopback.bin, "github.com/hanwen/go-fuse/v2/example/loopback"},
	} {
		cmd := exec.Command("go", "build", "-o", pkg.out, pkg.pkg)
		cmd.Dir = b.repo
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg.pkg, err, out)
		}
	}
	return nil
}

// statefsTarget is statefs mounted with args, its store and mountpoint
// under the work dir's directory tag.
func (b *bench) statefsTarget(name, tag string, args []string) *statefsTarget {
	return &statefsTarget{name: name, tag: tag, bin: filepath.Join(b.bin, "statefs"), args: args, logs: b.logs,
		store: filepath.Join(b.dir, tag, "store"), mnt: filepath.Join(b.dir, tag, "mnt")}
}

// targets in the order each repetition runs them.
func (b *bench) targets() []target {
	return []target{b.native, b.loopback, b.statefs}
}

// keeperTargets are targets and, last, statefs without its keeper: the
// workloads whose every row statefs must keep within keeperBound of the
// same daemon without the keeper's layers run these.
func (b *bench) keeperTargets() []target {
	return append(b.targets(), b.noKeeper)
}

// describeTargets says how each target runs, with what the daemons report
// about FUSE passthrough.
func (b *bench) describeTargets(dir string) (map[string]string, error) {
	lbPassthrough, err := b.probeLoopbackPassthrough(filepath.Join(dir, "probe"))
	if err != nil {
		return nil, err
	}
	if _, err := b.statefs.Open(); err != nil {
		return nil, err
	}
	st, err := b.statefs.Status()
	if cerr := b.statefs.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	b.statefs.TakePeakRSS() // this daemon served no workload
	described := map[string]string{
		native: "a plain directory on the disk",
		loopback: fmt.Sprintf("go-fuse's example/loopback serving a plain directory, run as `loopback %s MNT DIR` "+
			"(its fixed options: entry and attribute timeout 1 s; go-fuse hands open files to the kernel itself when it can; the harness waits for its \"Mounted!\"): "+
			"FUSE passthrough %s", strings.Join(loopbackArgs, " "), onOff(lbPassthrough, "(the kernel got a backing file on open)", "(no backing file on open)")),
		statefs: fmt.Sprintf("`statefs %s` with a fresh store per repetition (defaults otherwise: seal delay 2s, 1 sealer): "+
			"FUSE passthrough %s per .statefs/status.json", strings.Join(b.statefs.mountArgs(), " "), onOff(st.Passthrough, "", "")),
	}
	if b.cfg.runs(keeperWorkloads...) && b.cfg.runsTarget(noKeeper) {
		described[noKeeper] = fmt.Sprintf("`statefs %s` (workloads %s only): the same daemon serving in the one process that mounts, "+
			"without the keeper that statefs runs by default and what a server does for it (the handle table it shares with later servers, "+
			"a reply record with every mutating request); \"keeper/no keeper\" is statefs's median over this one's, and \"≤ %.0f%%\" "+
			"judges it on the rows that have a target",
			strings.Join(b.noKeeper.mountArgs(), " "), joinInts(keeperWorkloads), keeperBound*100)
	}
	return described, nil
}

// keeperWorkloads are the workloads that run noKeeper beside statefs.
var keeperWorkloads = []int{2, 3, 5, 8}

func joinInts(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}

func onOff(on bool, ifOn, ifOff string) string {
	if on {
		return strings.TrimSpace("on " + ifOn)
	}
	return strings.TrimSpace("off " + ifOff)
}

// probeLoopbackPassthrough mounts the loopback with -debug on a scratch
// directory, opens a file on it, and reports whether the kernel was given a
// backing file for it, which is how FUSE passthrough starts.
func (b *bench) probeLoopbackPassthrough(dir string) (bool, error) {
	backing, mnt, logPath := filepath.Join(dir, "backing"), filepath.Join(dir, "mnt"), filepath.Join(b.logs, "loopback-probe.log")
	for _, d := range []string{backing, mnt} {
		if err := freshDir(d); err != nil {
			return false, err
		}
	}
	os.Remove(logPath)
	args := append(append([]string{"-debug"}, loopbackArgs...), mnt, backing)
	d, err := startDaemon(b.loopback.bin, args, mnt, logPath,
		func() bool { return isMounted(mnt) && logContains(logPath, loopbackMounted) })
	if err != nil {
		return false, err
	}
	werr := os.WriteFile(filepath.Join(mnt, "probe"), []byte("probe"), 0o644)
	_, rerr := os.ReadFile(filepath.Join(mnt, "probe"))
	if err := errors.Join(werr, rerr, d.Stop()); err != nil {
		return false, err
	}
	log, err := os.ReadFile(logPath)
	if err != nil {
		return false, err
	}
	os.RemoveAll(dir)
	return regexp.MustCompile(`backing=\d+ PASSTHROUGH`).Match(log), nil
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.out, "[%6.1fs] %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, args...))
}

// eachRep runs one repetition of a workload per target that --targets
// names, interleaved: native, loopback, statefs, then again. It stops at
// the first error.
func (b *bench) eachRep(w *Workload, targets []target, once func(t target) error) {
	targets = slices.DeleteFunc(slices.Clone(targets), func(t target) bool { return !b.cfg.runsTarget(t.Name()) })
	for rep := 1; rep <= w.Reps; rep++ {
		for _, t := range targets {
			b.logf("workload %d, rep %d/%d, %s", w.ID, rep, w.Reps, t.Name())
			if err := once(t); err != nil {
				w.fail(fmt.Errorf("%s, rep %d: %w", t.Name(), rep, err))
				b.logf("workload %d failed: %v", w.ID, err)
				return
			}
		}
	}
}

// commandText is how the harness was invoked, for the report.
func commandText() string {
	return strings.Join(append([]string{"go run ./test/bench"}, os.Args[1:]...), " ")
}

// since is the seconds since start.
func since(start time.Time) float64 { return time.Since(start).Seconds() }

// mbPerSec is bytes over seconds in MB/s (10^6 bytes).
func mbPerSec(bytes int64, seconds float64) float64 { return float64(bytes) / 1e6 / seconds }
