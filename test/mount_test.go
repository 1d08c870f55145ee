// Package test holds the integration tests: each one mounts the real statefs
// binary on a temp dir and drives it through real syscalls.
package test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statefs/statefs/control"
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

// Mount is one running `statefs mount` daemon serving Store on Dir.
type Mount struct {
	t     testing.TB
	Store string // the store directory
	Dir   string // the mountpoint
	Args  []string
	Env   []string // added to the daemon's environment, KEY=value
	cmd   *exec.Cmd
	log   *bytes.Buffer
	done  chan error
}

// mountFS starts a daemon on a fresh store in a temp dir and waits until it
// serves. extra arguments go to `statefs mount`. The daemon is stopped and
// the mount removed when the test ends.
func mountFS(t testing.TB, extra ...string) *Mount {
	t.Helper()
	return mountStore(t, filepath.Join(t.TempDir(), "store"), extra...)
}

// mountStore is mountFS with the store at a path of the test's choosing.
func mountStore(t testing.TB, store string, extra ...string) *Mount {
	t.Helper()
	testenv.RequireFUSE(t)
	m := &Mount{t: t, Store: store, Dir: filepath.Join(t.TempDir(), "mnt"), Args: extra}
	if err := os.Mkdir(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
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

// Start runs the daemon on the same store and mountpoint and waits until it
// serves: the mount is live and the control socket answers, which the daemon
// opens only after it has set up the mount (read-ahead included).
func (m *Mount) Start() {
	m.t.Helper()
	// STATEFS_TEST_MOUNT_ARGS adds flags to every mount: make test runs the
	// suite once more with --passthrough=false, the path older kernels take.
	args := append([]string{"mount", "--store", m.Store}, strings.Fields(os.Getenv("STATEFS_TEST_MOUNT_ARGS"))...)
	args = append(args, m.Args...)
	args = append(args, m.Dir)
	m.cmd = exec.Command(binary, args...)
	m.cmd.Env = append(os.Environ(), m.Env...)
	m.log = &bytes.Buffer{}
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	m.done = make(chan error, 1)
	go func(c *exec.Cmd, done chan error) { done <- c.Wait() }(m.cmd, m.done)
	deadline := time.Now().Add(15 * time.Second)
	for !isMounted(m.Dir) || !answers(filepath.Join(m.Store, control.SocketName)) {
		select {
		case err := <-m.done:
			m.cmd = nil
			m.t.Fatalf("statefs mount exited before serving: %v\n%s", err, m.log)
		default:
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("statefs mount did not serve within 15s\n%s", m.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Unmount stops the daemon cleanly (SIGTERM) and checks that it exits 0 and
// leaves no mount behind.
func (m *Mount) Unmount() {
	m.t.Helper()
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-m.done:
		if err != nil {
			m.t.Errorf("statefs mount exited with %v\n%s", err, m.log)
		}
	case <-time.After(30 * time.Second):
		m.cmd.Process.Kill()
		<-m.done
		m.t.Errorf("statefs mount did not exit within 30s of SIGTERM\n%s", m.log)
	}
	m.cmd = nil
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
	m.cmd.Process.Kill()
	<-m.done
	m.cmd = nil
	if err := syscall.Unmount(m.Dir, syscall.MNT_DETACH); err != nil && isMounted(m.Dir) {
		m.t.Fatalf("detaching the dead mount: %v", err)
	}
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

// isMounted reports whether dir is a mountpoint of a statefs FUSE mount.
func isMounted(dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 || fields[4] != dir {
			continue
		}
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) && strings.HasPrefix(fields[i+1], "fuse") {
				return true
			}
		}
	}
	return false
}

// statefs runs the CLI with args and returns its combined output and error.
func statefs(args ...string) (string, error) {
	out, err := exec.Command(binary, args...).CombinedOutput()
	return string(out), err
}
