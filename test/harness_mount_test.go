// Package test holds the integration tests: each one mounts the real statefs
// binary on a temp dir and drives it through real syscalls.
//
// The harness lives in the files named harness_*: this file mounts the
// daemon and watches it (its log, status.json, /metrics, the mount table);
// harness_files_test.go makes and checks files and trees;
// harness_command_test.go runs the statefs command. flink_test.go writes
// state in Flink's layout beside its tests.
package test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/internal/testenv"
)

// binary is the statefs executable built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "statefs-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "statefs")
	build := exec.Command("go", "build", "-o", binary, "../cmd/statefs")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building statefs:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Flags the tests mount with.
var (
	// sealDelayZero makes the daemon seal files as soon as they are closed,
	// so a kill lands while files are being sealed.
	sealDelayZero = []string{"--seal-delay", "0"}
	// holdArgs mount with deletes held and a short decision window.
	holdArgs = []string{"--hold-deletes", "--hold-window", "500ms", "--seal-delay", "0"}
)

// process is a statefs command running in the background: its output, and
// its exit once it comes.
type process struct {
	cmd  *exec.Cmd // nil once the command's exit was seen
	log  *bytes.Buffer
	done chan error // receives the command's exit, once
}

// launch starts cmd with its stdout and stderr going to p.log.
func (p *process) launch(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	p.cmd, p.log = cmd, &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.done = make(chan error, 1)
	go func(c *exec.Cmd, done chan error) { done <- c.Wait() }(cmd, p.done)
}

// awaitServing waits until serving reports true. It fails the test, naming
// the command as name, if the command exits first or does not serve within
// 15 s.
func (p *process) awaitServing(t testing.TB, name string, serving func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !serving() {
		select {
		case err := <-p.done:
			p.cmd = nil
			t.Fatalf("%s exited before serving: %v\n%s", name, err, p.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not serve within 15s\n%s", name, p.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// terminate sends SIGTERM and waits up to grace for the command to exit,
// and kills it then. It returns an error unless the command exited 0 in
// time.
func (p *process) terminate(grace time.Duration) error {
	defer func() { p.cmd = nil }()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("exited with %v", err)
		}
		return nil
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("did not exit within %v of SIGTERM", grace)
	}
}

// killAtEnd makes the end of the test kill the command if it still runs,
// and detach mnt if a mount is left there.
func (p *process) killAtEnd(t testing.TB, mnt string) {
	t.Cleanup(func() {
		if p.cmd != nil {
			p.cmd.Process.Kill()
			<-p.done
		}
		if isMounted(mnt) {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
}

// Mount is one running `statefs mount` daemon serving Store on Dir.
type Mount struct {
	t      testing.TB
	Binary string // the statefs executable; "" for the one TestMain built
	Store  string // the store directory
	Dir    string // the mountpoint
	Args   []string
	Env    []string // added to the daemon's environment, KEY=value
	process
}

// mountFS starts a daemon on a fresh store in a temp dir and waits until it
// serves. extra arguments go to `statefs mount`. The daemon is stopped and
// the mount removed when the test ends.
func mountFS(t testing.TB, extra ...string) *Mount {
	t.Helper()
	return mountStore(t, filepath.Join(t.TempDir(), "store"), extra...)
}

// mountStore is mountFS with the store at a path of the test's choosing.
// When the test ends, after the daemon is stopped, the store is checked as
// `statefs fsck --verify` checks it (storetest.CheckAtEnd), unless the test
// damages it on purpose and says so (storetest.LeaveDamaged).
func mountStore(t testing.TB, store string, extra ...string) *Mount {
	t.Helper()
	return startMount(&Mount{t: t, Store: store, Args: extra})
}

// startMount is mountStore of m, whose Store, Args and Binary are set.
func startMount(m *Mount) *Mount {
	t := m.t
	t.Helper()
	testenv.RequireFUSE(t)
	m.Dir = filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	storetest.CheckAtEnd(t, m.Store) // registered first, so it runs after the unmount
	m.Start()
	t.Cleanup(func() {
		if m.cmd != nil {
			m.Unmount()
		}
	})
	return m
}

// Path joins rel onto the mountpoint.
func (m *Mount) Path(rel ...string) string {
	return filepath.Join(append([]string{m.Dir}, rel...)...)
}

// mountArgs are the arguments of the daemon's `statefs mount`.
// STATEFS_TEST_MOUNT_ARGS adds flags to every mount: make test runs the
// suite once more with --passthrough=false, the path older kernels take.
func (m *Mount) mountArgs() []string {
	args := append([]string{"mount", "--store", m.Store}, strings.Fields(os.Getenv("STATEFS_TEST_MOUNT_ARGS"))...)
	args = append(args, m.Args...)
	return append(args, m.Dir)
}

// Start runs the daemon on the same store and mountpoint and waits until it
// serves: the mount is live and the control socket answers, which the daemon
// opens only after it has set up the mount (read-ahead included).
func (m *Mount) Start() {
	m.t.Helper()
	cmd := exec.Command(cmp.Or(m.Binary, binary), m.mountArgs()...)
	cmd.Env = append(os.Environ(), m.Env...)
	m.launch(m.t, cmd)
	m.awaitServing(m.t, "statefs mount", func() bool {
		return isMounted(m.Dir) && answers(filepath.Join(m.Store, control.SocketName))
	})
}

// Unmount stops the daemon cleanly (SIGTERM) and checks that it exits 0 and
// leaves no mount behind.
func (m *Mount) Unmount() {
	m.t.Helper()
	if m.cmd == nil {
		return
	}
	if err := m.terminate(30 * time.Second); err != nil {
		m.t.Errorf("statefs mount %v\n%s", err, m.log)
	}
	if isMounted(m.Dir) {
		syscall.Unmount(m.Dir, syscall.MNT_DETACH)
		m.t.Errorf("mount still present after the daemon exited")
	}
}

// Kill SIGKILLs the daemon, as a crash would, and detaches the dead mount.
func (m *Mount) Kill() {
	m.t.Helper()
	if m.cmd == nil {
		return
	}
	m.kill()
	if err := syscall.Unmount(m.Dir, syscall.MNT_DETACH); err != nil && isMounted(m.Dir) {
		m.t.Fatalf("detaching the dead mount: %v", err)
	}
}

// kill SIGKILLs the whole daemon: its keeper, and the server, which dies
// with it; it returns once both are gone, the connection with them.
func (m *Mount) kill() {
	m.t.Helper()
	server, hasServer := testenv.ChildOf(m.cmd.Process.Pid)
	m.cmd.Process.Kill()
	<-m.done
	m.cmd = nil
	for deadline := time.Now().Add(10 * time.Second); hasServer && alive(server); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			m.t.Fatalf("the server %d still runs 10s after its keeper was killed", server)
		}
	}
}

// ServerPID is the pid of the daemon's server, the child of the process
// the test started (its keeper); it fails the test if there is none
// within 10 s.
func (m *Mount) ServerPID() int {
	m.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if pid, ok := testenv.ChildOf(m.cmd.Process.Pid); ok {
			return pid
		}
	}
	m.t.Fatalf("statefs mount (pid %d) has no server process\n%s", m.cmd.Process.Pid, m.log)
	return 0
}

// alive reports whether pid runs (a zombie has closed its files).
func alive(pid int) bool {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	return err == nil && !strings.Contains(string(status), "State:\tZ")
}

// Restart stops the daemon cleanly and mounts the same store again.
func (m *Mount) Restart() {
	m.t.Helper()
	m.Unmount()
	m.Start()
}

// Log is what the daemon has printed so far.
func (m *Mount) Log() string { return m.log.String() }

// answers reports whether a unix socket accepts connections.
func answers(socket string) bool {
	c, err := net.Dial("unix", socket)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// guardStall turns a hung filesystem into a test failure instead of a hung
// test binary: unless stop is called within limit, the daemon gets SIGQUIT,
// which makes it print every goroutine's stack into its log (shown when
// Unmount or a check fails) and exit; the kernel then fails the stuck
// syscalls with ENOTCONN. A daemon that ignores SIGQUIT is killed 5s later.
func guardStall(t testing.TB, m *Mount, limit time.Duration, what string) (stop func()) {
	t.Helper()
	p := m.cmd.Process
	timer := time.AfterFunc(limit, func() {
		// The server serves; its keeper, when there is one, only waits.
		quit := p.Pid
		if server, ok := testenv.ChildOf(p.Pid); ok {
			quit = server
		}
		t.Errorf("%s: still running after %v: the filesystem is stuck; sent SIGQUIT to the daemon (pid %d) for a goroutine dump", what, limit, quit)
		syscall.Kill(quit, syscall.SIGQUIT)
		time.Sleep(5 * time.Second)
		p.Kill()
	})
	stop = func() { timer.Stop() }
	t.Cleanup(stop)
	return stop
}

// smallDisk mounts a tmpfs of mib MiB in a temp dir, for a store that is
// to run out of space. It is unmounted when the test ends (after the
// daemon, whose cleanup was registered later).
func smallDisk(t *testing.T, mib int) string {
	t.Helper()
	testenv.RequireFUSE(t) // root, as the mount needs
	disk := t.TempDir()
	if err := unix.Mount("tmpfs", disk, "tmpfs", 0, fmt.Sprintf("size=%dm", mib)); err != nil {
		t.Fatalf("mounting a %d MiB tmpfs for the store: %v", mib, err)
	}
	t.Cleanup(func() { unix.Unmount(disk, unix.MNT_DETACH) })
	return disk
}

// waitLogLine waits up to within for a line of the daemon's log that holds
// every one of parts. A line the daemon wrote reaches the test's copy of
// its log a moment later, so checks of the log poll.
func waitLogLine(t testing.TB, m *Mount, within time.Duration, parts ...string) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, line := range strings.Split(m.Log(), "\n") {
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
				return
			}
		}
	}
	t.Fatalf("the daemon logged no line that says %q within %v:\n%s", parts, within, tail(m.Log(), 4000))
}

// sealBacklog is the field "seal_backlog" of .statefs/status.json: how many files
// are waiting to be sealed.
func sealBacklog(m *Mount) (int, error) {
	raw, err := os.ReadFile(m.Path(".statefs", "status.json"))
	if err != nil {
		return 0, err
	}
	var status struct {
		SealBacklog *int `json:"seal_backlog"`
	}
	if err := json.Unmarshal(raw, &status); err != nil {
		return 0, fmt.Errorf("%w in %q", err, raw)
	}
	if status.SealBacklog == nil {
		return 0, fmt.Errorf("no field \"seal_backlog\" in %s", raw)
	}
	return *status.SealBacklog, nil
}

// waitAllSealed polls status.json until no file waits to be sealed.
func waitAllSealed(t testing.TB, m *Mount) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := sealBacklog(m)
		require.NoError(t, err, "reading .statefs/status.json")
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d files still waiting to be sealed after 60s\n%s", n, m.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitSealBacklog waits until status.json reports files waiting to be sealed, so
// that the kill that follows lands while sealing is in progress.
func waitSealBacklog(t *testing.T, m *Mount, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		n, err := sealBacklog(m)
		if err != nil {
			t.Errorf("reading .statefs/status.json: %v", err)
			return
		}
		if n > 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("status.json reported no file waiting to be sealed within %v; killing anyway", limit)
}

// freeAddr is a loopback address no one listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// get fetches http://addr/path and returns the status and body.
func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// scrape is one GET /metrics, parsed.
type scrape map[string]*dto.MetricFamily

func scrapeMetrics(t *testing.T, addr string) scrape {
	t.Helper()
	code, body := get(t, addr, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d\n%s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return families
}

// value is the counter's or gauge's value, or the histogram's count, of
// metric name with label op=op (op "" for a metric without labels); 0 if
// the scrape has none.
func (s scrape) value(name, op string) float64 {
	f := s[name]
	if f == nil {
		return 0
	}
	for _, m := range f.GetMetric() {
		if op != "" && !(len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == op) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return 0
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	dir    string // the mountpoint
	fstype string // "" if the line has none
	super  string // the super-block options (for FUSE: user_id=0,group_id=0,...); "" if none
}

// mountTable reads /proc/self/mountinfo.
func mountTable() ([]mountEntry, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var es []mountEntry
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		e := mountEntry{dir: f[4]}
		// The optional fields end at "-"; the type, the source and the
		// super-block options follow.
		if i := slices.Index(f, "-"); i >= 0 {
			if i+1 < len(f) {
				e.fstype = f[i+1]
			}
			if i+3 < len(f) {
				e.super = f[i+3]
			}
		}
		es = append(es, e)
	}
	return es, nil
}

// isMounted reports whether dir is a mountpoint of a statefs FUSE mount.
func isMounted(dir string) bool {
	es, _ := mountTable()
	return slices.ContainsFunc(es, func(e mountEntry) bool { return e.dir == dir && strings.HasPrefix(e.fstype, "fuse") })
}

// requireNotMounted fails when dir is a FUSE mount, and detaches it so the
// failure does not leak into other tests.
func requireNotMounted(t *testing.T, dir string) {
	t.Helper()
	if isMounted(dir) {
		syscall.Unmount(dir, syscall.MNT_DETACH)
		t.Errorf("%s is mounted after a refused `statefs mount`", dir)
	}
}

// mountSuperOptions is the super-block option field of dir's entry in
// /proc/self/mountinfo (for FUSE: user_id=0,group_id=0,default_permissions,...).
func mountSuperOptions(t testing.TB, dir string) string {
	t.Helper()
	es, err := mountTable()
	require.NoError(t, err)
	for _, e := range es {
		if e.dir == dir && e.super != "" {
			return e.super
		}
	}
	t.Fatalf("%s not in /proc/self/mountinfo", dir)
	return ""
}

// mountCount is how many mounts are stacked at dir.
func mountCount(t testing.TB, dir string) int {
	t.Helper()
	es, err := mountTable()
	require.NoError(t, err)
	var n int
	for _, e := range es {
		if e.dir == dir {
			n++
		}
	}
	return n
}

// detachAllUnder detaches every mount below dir, deepest first: the binds
// a failed test leaves keep the daemon's FUSE connection, and so its
// unmount, from finishing.
func detachAllUnder(t testing.TB, dir string) {
	es, err := mountTable()
	if err != nil {
		t.Error(err)
		return
	}
	var points []string
	for _, e := range es {
		if strings.HasPrefix(e.dir, dir+"/") {
			points = append(points, e.dir)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		unix.Unmount(p, unix.MNT_DETACH)
	}
}
