package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/statefs/statefs/store"
)

// target is where a workload writes: the bare disk, go-fuse's loopback of a
// directory on it, or statefs with its store on it.
type target interface {
	Name() string
	// Open makes a fresh, empty tree (mounting it if it is a mount) and
	// returns its root.
	Open() (string, error)
	// Remount restarts the daemon on the same tree, so that nothing it
	// holds in memory serves the next phase. The bare disk does nothing.
	Remount() error
	// Settle waits until what was written has its final form on the disk:
	// for statefs, every closed file is sealed.
	Settle() error
	// DiskUsage is what the tree takes on the disk: its allocated blocks
	// (statefs: the whole store, index included), hard links counted once.
	DiskUsage() (int64, error)
	// Close unmounts and removes the tree.
	Close() error
}

const (
	native   = "native"
	loopback = "loopback"
	statefs  = "statefs"
	// noKeeper is statefs serving in the one process that mounts: no
	// keeper, so no handle table shared between servers and no reply
	// records. Workloads 2, 3, 5 and 8 run it beside statefs, which is
	// what the keeper costs.
	noKeeper = "statefs --keeper=false"
)

// targetNames in the order every table shows them and every repetition
// runs them; noKeeper runs after them where it runs.
var targetNames = []string{native, loopback, statefs}

// nativeTarget is a plain directory on the disk.
type nativeTarget struct{ dir string }

func (t *nativeTarget) Name() string { return native }

func (t *nativeTarget) Open() (string, error) { return t.dir, freshDir(t.dir) }

func (t *nativeTarget) Remount() error { return nil }

func (t *nativeTarget) Settle() error { return nil }

func (t *nativeTarget) DiskUsage() (int64, error) { return diskUsage(t.dir) }

func (t *nativeTarget) Close() error { return os.RemoveAll(t.dir) }

// loopbackTarget is go-fuse's example loopback filesystem serving a plain
// directory: the cost of FUSE alone. go-fuse turns on FUSE passthrough for
// its open files by itself where the kernel allows it.
type loopbackTarget struct {
	bin     string
	backing string
	mnt     string
	logs    string
	started int // daemons started, to name their logs
	d       *daemon
}

// loopbackArgs are the flags the loopback runs with: the mount syscall
// itself instead of fusermount.
var loopbackArgs = []string{"-directmountstrict"}

// loopbackMounted is what the loopback prints once it is mounted and about
// to catch SIGTERM. A SIGTERM before that kills it while go-fuse may hold a
// file open on its own mount, and it hangs in exit.
const loopbackMounted = "Mounted!"

func (t *loopbackTarget) Name() string { return loopback }

func (t *loopbackTarget) Open() (string, error) {
	if err := freshDir(t.backing); err != nil {
		return "", err
	}
	if err := freshDir(t.mnt); err != nil {
		return "", err
	}
	return t.mnt, t.mount(t.ready)
}

// mount starts the daemon and waits until ready says it serves and the
// daemon says it is mounted.
func (t *loopbackTarget) mount(ready func() bool) (err error) {
	t.started++
	log := filepath.Join(t.logs, fmt.Sprintf("loopback-%03d.log", t.started))
	args := append(append([]string{}, loopbackArgs...), t.mnt, t.backing)
	t.d, err = startDaemon(t.bin, args, t.mnt, log, func() bool { return ready() && logContains(log, loopbackMounted) })
	return err
}

func (t *loopbackTarget) ready() bool { return isMounted(t.mnt) }

func (t *loopbackTarget) Remount() error {
	if err := t.stop(); err != nil {
		return err
	}
	return t.mount(t.ready)
}

func (t *loopbackTarget) stop() error {
	if t.d == nil {
		return nil
	}
	d := t.d
	t.d = nil
	return d.Stop()
}

func (t *loopbackTarget) Settle() error { return nil }

func (t *loopbackTarget) DiskUsage() (int64, error) { return diskUsage(t.backing) }

func (t *loopbackTarget) Close() error {
	err := t.stop()
	if rmErr := os.RemoveAll(t.backing); err == nil {
		err = rmErr
	}
	return err
}

// statefsTarget is `statefs mount --store STORE MNT` with a fresh store.
// It keeps the highest peak RSS of its servers (daemon.PeakRSS) since the
// last TakePeakRSS.
type statefsTarget struct {
	name string // statefs, or noKeeper
	tag  string // names its work dir and its daemons' logs
	bin  string
	args []string // extra mount flags
	// metricsAddr, when set, is the --metrics-addr of the daemons mounted
	// from then on, for a workload that reads the daemon's counters.
	metricsAddr string
	store       string
	mnt         string
	logs        string
	started     int // daemons started, to name their logs
	d           *daemon
	peakRSS     int64
}

func (t *statefsTarget) Name() string { return t.name }

func (t *statefsTarget) Open() (string, error) {
	if err := os.RemoveAll(t.store); err != nil {
		return "", err
	}
	if err := freshDir(t.mnt); err != nil {
		return "", err
	}
	return t.mnt, t.mount(t.ready)
}

// mountArgs is the command line of `statefs mount` for this target.
func (t *statefsTarget) mountArgs() []string {
	args := append([]string{"mount", "--store", t.store}, t.args...)
	if t.metricsAddr != "" {
		args = append(args, "--metrics-addr", t.metricsAddr)
	}
	return append(args, t.mnt)
}

// mount starts the daemon and waits until ready says it serves.
func (t *statefsTarget) mount(ready func() bool) (err error) {
	t.started++
	log := filepath.Join(t.logs, fmt.Sprintf("%s-%03d.log", t.tag, t.started))
	t.d, err = startDaemon(t.bin, t.mountArgs(), t.mnt, log, ready)
	return err
}

// ready reports whether the daemon serves its status file.
func (t *statefsTarget) ready() bool {
	_, err := t.Status()
	return err == nil
}

func (t *statefsTarget) Remount() error {
	if err := t.stop(); err != nil {
		return err
	}
	return t.mount(t.ready)
}

// stop stops the daemon, keeping its peak RSS first.
func (t *statefsTarget) stop() error {
	if t.d == nil {
		return nil
	}
	if rss, err := t.d.PeakRSS(); err == nil {
		t.peakRSS = max(t.peakRSS, rss)
	}
	d := t.d
	t.d = nil
	return d.Stop()
}

// TakePeakRSS returns the highest VmHWM of the servers stopped since the
// last call, and of the running one, and starts over.
func (t *statefsTarget) TakePeakRSS() int64 {
	if t.d != nil {
		if rss, err := t.d.PeakRSS(); err == nil {
			t.peakRSS = max(t.peakRSS, rss)
		}
	}
	peak := t.peakRSS
	t.peakRSS = 0
	return peak
}

// CPUSeconds is the CPU time the running daemon has used since it started.
func (t *statefsTarget) CPUSeconds() (float64, error) {
	if t.d == nil {
		return 0, fmt.Errorf("statefs is not running")
	}
	return t.d.CPUSeconds()
}

// SealedBytes is the running daemon's statefs_sealed_bytes_total, summed
// over its labels: the logical bytes of the files it sealed since it
// started. ok is false when the daemon serves no metrics (no metricsAddr)
// or counts no such thing.
func (t *statefsTarget) SealedBytes() (sum float64, ok bool, err error) {
	if t.metricsAddr == "" {
		return 0, false, nil
	}
	client := http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get("http://" + t.metricsAddr + "/metrics")
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return sumCounter(resp.Body, "statefs_sealed_bytes_total")
}

// sumCounter adds up every sample of the counter name in Prometheus's
// text format; ok is false when there is none.
func sumCounter(r io.Reader, name string) (sum float64, ok bool, err error) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		rest, found := strings.CutPrefix(s.Text(), name)
		if !found || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %w", name, err)
		}
		sum, ok = sum+v, true
	}
	return sum, ok, s.Err()
}

// freeLocalAddr is a TCP address on the loopback interface that nothing
// listened on a moment ago.
func freeLocalAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// statefsStatus is the part of .statefs/status.json the harness reads.
type statefsStatus struct {
	SealBacklog int  `json:"seal_backlog"`
	OpenFiles   int  `json:"open_files"`
	Passthrough bool `json:"passthrough"`
}

// statefsStats is the part of .statefs/stats.json the harness reads.
type statefsStats struct {
	Chunks        int   `json:"chunks"`
	ChunkFiles    int   `json:"chunk_files"`
	Objects       int   `json:"objects"`
	LogicalBytes  int64 `json:"logical_bytes"`
	PhysicalBytes int64 `json:"physical_bytes"`
}

func (t *statefsTarget) Status() (s statefsStatus, err error) {
	return s, readJSON(filepath.Join(t.mnt, ".statefs", "status.json"), &s)
}

func (t *statefsTarget) Stats() (s statefsStats, err error) {
	return s, readJSON(filepath.Join(t.mnt, ".statefs", "stats.json"), &s)
}

// Settle waits until status.json says no file waits to be sealed.
func (t *statefsTarget) Settle() error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		st, err := t.Status()
		if err != nil {
			return err
		}
		if st.SealBacklog == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("statefs: %d files still waiting to be sealed after 10 minutes", st.SealBacklog)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// DiskUsage leaves out the store's free-space reserve (store.ReserveNames):
// a fixed amount the daemon keeps free for its index on a full disk, not
// a cost of the bytes stored.
func (t *statefsTarget) DiskUsage() (int64, error) {
	used, err := diskUsage(t.store)
	for _, name := range store.ReserveNames {
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join(t.store, name), &st) == nil {
			used -= st.Blocks * 512
		}
	}
	return used, err
}

func (t *statefsTarget) Close() error {
	err := t.stop()
	if rmErr := os.RemoveAll(t.store); err == nil {
		err = rmErr
	}
	return err
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// freshDir makes dir exist and be empty.
func freshDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o755)
}
