package keeper_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/statefs/statefs/internal/testenv"
	"github.com/statefs/statefs/keeper"
)

// A keeper of its own process, for the tests of SIGHUP: keeperVar names
// its mountpoint, socketVar its socket, and layoutFileVar a file holding
// its Layout, which a test changes before SIGHUP so that the binary
// executed again offers another.
const (
	keeperVar     = "KEEPER_TEST_KEEPER"
	socketVar     = "KEEPER_TEST_SOCKET"
	layoutFileVar = "KEEPER_TEST_LAYOUT_FILE"
	dialVar       = "KEEPER_TEST_DIAL"
	// removeVar makes the binary, run to say what it would serve with,
	// remove its own file, so that the keeper's exec of it fails.
	removeVar = "KEEPER_TEST_REMOVE_AFTER_PROBE"
)

func keep() int {
	if socket := os.Getenv(dialVar); socket != "" {
		return dial(socket)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	cfg := config(os.Getenv(keeperVar), os.Getenv(socketVar))
	layout, err := os.ReadFile(os.Getenv(layoutFileVar))
	if err != nil {
		fmt.Fprintln(os.Stderr, "keeper:", err)
		return 1
	}
	cfg.Layout = strings.TrimSpace(string(layout))
	if err := keeper.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "keeper:", err)
		return 1
	}
	if _, probed := os.LookupEnv("STATEFS_KEEPER_PROBE"); probed && os.Getenv(removeVar) != "" {
		os.Remove(os.Args[0])
	}
	return 0
}

// dial asks the keeper on socket for its connection as a keeper would,
// with an offer that fits, and prints the answer.
func dial(socket string) int {
	c, err := net.Dial("unixpacket", socket)
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	defer c.Close()
	fmt.Fprintf(c, `{"offer":{"handover":1,"layout":"1","mountpoint":%q}}`, os.Getenv(keeperVar))
	b := make([]byte, 1<<16)
	n, _ := c.Read(b)
	fmt.Printf("%s", b[:n])
	return 0
}

// reading runs clients that read "f" by path and through a handle opened
// before, and stat it, until the returned stop is called, which returns
// the errors they saw (at most 10) and how many rounds they made.
func reading(t *testing.T, mnt string) (stop func() ([]error, int64)) {
	t.Helper()
	f := filepath.Join(mnt, "f")
	held, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	var (
		done     atomic.Bool
		rounds   atomic.Int64
		mu       sync.Mutex
		failures []error
		clients  sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 10 {
			failures = append(failures, err)
		}
	}
	for range 2 {
		clients.Go(func() {
			buf := make([]byte, len(content))
			for !done.Load() {
				if _, err := os.Stat(f); err != nil {
					fail(err)
				}
				if b, err := os.ReadFile(f); err != nil || !bytes.Equal(b, content) {
					fail(fmt.Errorf("read by path: %d bytes, %v", len(b), err))
				}
				if n, err := held.ReadAt(buf, 0); n != len(content) || !bytes.Equal(buf, content) {
					fail(fmt.Errorf("read of the held file: %d bytes, %v", n, err))
				}
				rounds.Add(1)
			}
		})
	}
	return func() ([]error, int64) {
		done.Store(true)
		clients.Wait()
		held.Close()
		return failures, rounds.Load()
	}
}

// generation is what the server serving mnt says its generation is.
func generation(mnt string) string {
	b, _ := os.ReadFile(filepath.Join(mnt, "generation"))
	return strings.TrimSpace(string(b))
}

// A second keeper of the same socket takes a serving keeper's connection
// over while clients read, one through a handle opened before: no client
// sees an error, the new keeper's first server continues the generations
// (2), and the old keeper, its server gone, returns nil at its context's
// end without unmounting; the new keeper then listens on the socket and
// unmounts at its own end.
func TestTakeOverKeepsTheConnection(t *testing.T) {
	mnt, socket := t.TempDir(), filepath.Join(t.TempDir(), "keeper.sock")
	old := runConfig(t, config(mnt, socket))
	waitFor(t, 10*time.Second, "the first server to serve", func() bool { return generation(mnt) == "1" })
	waitFor(t, 10*time.Second, "the keeper to listen", func() bool { _, err := os.Stat(socket); return err == nil })
	oldServer := serverPID(t)
	stop := reading(t, mnt)
	time.Sleep(100 * time.Millisecond)

	taker := runConfig(t, config(mnt, socket))
	waitFor(t, 10*time.Second, "the taking-over keeper's server", func() bool { return generation(mnt) == "2" })
	time.Sleep(100 * time.Millisecond)
	failures, rounds := stop()
	if len(failures) > 0 {
		t.Errorf("clients saw errors across the take-over: %v", failures)
	}
	t.Logf("%d client rounds across the take-over", rounds)
	if alive(oldServer) {
		t.Errorf("the old keeper's server %d still runs after the take-over", oldServer)
	}

	old.cancel()
	if err := old.wait(t, 10*time.Second); err != nil {
		t.Errorf("the old keeper's Run: %v, want nil", err)
	}
	if generation(mnt) != "2" {
		t.Fatalf("the mount is not served after the old keeper's end: generation %q", generation(mnt))
	}
	if !answers(socket) {
		t.Errorf("nothing answers on %s after the take-over", socket)
	}
	taker.cancel()
	if err := taker.wait(t, 20*time.Second); err != nil {
		t.Errorf("the new keeper's Run: %v, want nil", err)
	}
	if mounted(mnt) {
		t.Errorf("%s still mounted after the new keeper's end", mnt)
	}
	if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is left after the mount's end: %v", err)
	}
}

// The memfds pass between keepers by name: one the taking-over keeper
// knows and the serving one did not make is made, and one the serving
// keeper held that the taking-over one does not know is kept (its servers
// inherit it as it was) and passed on.
func TestTakeOverCarriesTheFilesByName(t *testing.T) {
	mnt, socket := t.TempDir(), filepath.Join(t.TempDir(), "keeper.sock")
	older := config(mnt, socket)
	older.Files = []string{"handles", "old-only"}
	first := runConfig(t, older)
	waitFor(t, 10*time.Second, "the first server to serve", func() bool { return generation(mnt) == "1" })
	waitFor(t, 10*time.Second, "the keeper to listen", func() bool { _, err := os.Stat(socket); return err == nil })

	newer := config(mnt, socket)
	newer.Files = []string{"handles", "inflight"}
	runConfig(t, newer)
	waitFor(t, 10*time.Second, "the taking-over keeper's server", func() bool { return generation(mnt) == "2" })
	// The first keeper listens until it hears that the second's server
	// serves; the third keeper's request must not be for it.
	first.cancel()
	if err := first.wait(t, 20*time.Second); err != nil {
		t.Fatalf("the first keeper's Run: %v", err)
	}
	runConfig(t, config(mnt, socket))
	waitFor(t, 10*time.Second, "the third keeper's server", func() bool { return generation(mnt) == "3" })
	b, err := os.ReadFile(filepath.Join(mnt, "files"))
	if want := "handles=gen1 old-only=gen1 inflight="; err != nil || string(b) != want {
		t.Errorf("the third keeper's server inherited %q (%v), want %q", b, err, want)
	}
}

// A take-over that cannot work is refused with one line and changes
// nothing: the serving keeper's server serves on.
func TestTakeOverRefused(t *testing.T) {
	mnt, socket := t.TempDir(), filepath.Join(t.TempDir(), "keeper.sock")
	runConfig(t, config(mnt, socket))
	waitFor(t, 10*time.Second, "the first server to serve", func() bool { return generation(mnt) == "1" })
	waitFor(t, 10*time.Second, "the keeper to listen", func() bool { _, err := os.Stat(socket); return err == nil })
	server := serverPID(t)
	for _, tc := range []struct {
		name   string
		change func(*keeper.Config)
		want   string
	}{
		{"another mountpoint", func(c *keeper.Config) { c.Mountpoint = "/elsewhere" },
			"the store is in use: this keeper serves it on " + mnt + ", not /elsewhere"},
		{"another layout", func(c *keeper.Config) { c.Layout = "2" },
			`the new binary's servers keep the connection's state in layout "2", this keeper's in "1"`},
		{"options that shape the connection", func(c *keeper.Config) { c.Options.AllowOther, c.Options.MaxWrite = true, 1<<17 },
			"mount options that shape the connection differ from the serving keeper's: allow_other (serving: unset; new: set), max_read (serving: 65536; new: 131072)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(mnt, socket)
			tc.change(&cfg)
			// A take-over that is not refused serves until the context ends.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := keeper.Run(ctx, cfg)
			want := "the keeper on " + socket + " refused the take-over: " + tc.want
			if err == nil || err.Error() != want {
				t.Errorf("Run: %v\nwant %s", err, want)
			}
			if p, _ := childPID(); p != server || generation(mnt) != "1" {
				t.Errorf("after a refused take-over: server %d, generation %q; want %d, 1", p, generation(mnt), server)
			}
		})
	}
}

// A take-over whose first server ends before it serves is given back: the
// taking-over keeper's Run gives the server's exit and leaves the mount,
// and the serving keeper serves on with a generation after the failed
// server's.
func TestTakeOverGivenBackWhenItsServerFails(t *testing.T) {
	mnt, socket := t.TempDir(), filepath.Join(t.TempDir(), "keeper.sock")
	runConfig(t, config(mnt, socket))
	waitFor(t, 10*time.Second, "the first server to serve", func() bool { return generation(mnt) == "1" })
	waitFor(t, 10*time.Second, "the keeper to listen", func() bool { _, err := os.Stat(socket); return err == nil })
	stop := reading(t, mnt)

	err := keeper.Run(context.Background(), config(mnt, socket, modeVar+"="+failAll))
	var failed *keeper.ServerFailed
	if !errors.As(err, &failed) || failed.State.ExitCode() != 2 {
		t.Errorf("Run of the taking-over keeper: %v, want a ServerFailed of exit status 2", err)
	}
	waitFor(t, 10*time.Second, "the serving keeper to serve on", func() bool { return generation(mnt) == "3" })
	failures, _ := stop()
	if len(failures) > 0 {
		t.Errorf("clients saw errors across the failed take-over: %v", failures)
	}
}

// A take-over given back leaves the serving keeper's socket as it was: the
// next take-over, and the one after it from the keeper that took over, are
// each answered by the keeper that serves. The socket's open file
// description is shared by every keeper that held it: one put in blocking
// mode leaves an accept(2) of the old keeper waiting in the kernel, which
// takes the next request, and refuses it as a keeper that handed over.
func TestTakeOverAfterOneGivenBack(t *testing.T) {
	mnt, socket := t.TempDir(), filepath.Join(t.TempDir(), "keeper.sock")
	first := runConfig(t, config(mnt, socket))
	waitFor(t, 10*time.Second, "the first server to serve", func() bool { return generation(mnt) == "1" })
	waitFor(t, 10*time.Second, "the keeper to listen", func() bool { _, err := os.Stat(socket); return err == nil })
	var failed *keeper.ServerFailed
	if err := keeper.Run(context.Background(), config(mnt, socket, modeVar+"="+failAll)); !errors.As(err, &failed) {
		t.Fatalf("Run of the keeper whose server fails: %v, want a ServerFailed", err)
	}
	waitFor(t, 10*time.Second, "the serving keeper to serve on", func() bool { return generation(mnt) == "3" })
	second := runConfig(t, config(mnt, socket))
	waitFor(t, 10*time.Second, "the second keeper's server", func() bool { return generation(mnt) == "4" })
	// The first keeper's Run returns once it handed over, and its
	// listener is closed: the third keeper's request is not for it.
	first.cancel()
	if err := first.wait(t, 20*time.Second); err != nil {
		t.Fatalf("the first keeper's Run: %v", err)
	}
	third := runConfig(t, config(mnt, socket))
	for generation(mnt) != "5" {
		select {
		case err := <-third.done:
			t.Fatalf("the third keeper's take-over from the second: %v", err)
		case err := <-second.done:
			t.Fatalf("the second keeper ended before the third took over: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// A take-over interrupted before its first server serves (its context
// ends) is given back, not ended: the taking-over keeper stops its server,
// tells the serving keeper, and returns nil without unmounting; the
// serving keeper serves on.
func TestTakeOverInterruptedIsGivenBack(t *testing.T) {
	mnt, socket := t.TempDir(), filepath.Join(t.TempDir(), "keeper.sock")
	runConfig(t, config(mnt, socket))
	waitFor(t, 10*time.Second, "the first server to serve", func() bool { return generation(mnt) == "1" })
	waitFor(t, 10*time.Second, "the keeper to listen", func() bool { _, err := os.Stat(socket); return err == nil })
	stop := reading(t, mnt)

	taker := runConfig(t, config(mnt, socket, modeVar+"="+holdAll))
	waitFor(t, 10*time.Second, "the taking-over keeper's server", func() bool {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if bytes.Contains(environ, []byte(modeVar+"="+holdAll)) {
				return true
			}
		}
		return false
	})
	taker.cancel()
	if err := taker.wait(t, 20*time.Second); err != nil {
		t.Errorf("the interrupted keeper's Run: %v, want nil", err)
	}
	if !mounted(mnt) {
		t.Fatalf("%s unmounted by an interrupted take-over", mnt)
	}
	waitFor(t, 10*time.Second, "the serving keeper to serve on", func() bool { return generation(mnt) == "3" })
	stop()
}

// The socket hands out the whole mount: it is its keeper's user's alone
// (mode 0600), and a peer of another uid is refused even where the mode
// lets it connect.
func TestHandOverSocketIsTheKeepersUsersAlone(t *testing.T) {
	dir, err := os.MkdirTemp("", "keeper-uid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	mnt, socket := t.TempDir(), filepath.Join(dir, "keeper.sock")
	runConfig(t, config(mnt, socket))
	waitFor(t, 10*time.Second, "the first server to serve", func() bool { return generation(mnt) == "1" })
	// The keeper makes the socket, then gives it its mode.
	waitFor(t, 10*time.Second, "the keeper to listen", func() bool { st, err := os.Stat(socket); return err == nil && st.Mode().Perm() == 0o600 })
	st, err := os.Stat(socket)
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm != 0o600 {
		t.Errorf("the socket's mode is %o, want 600", perm)
	}

	// A copy of this binary that the other user may run, in a directory
	// it may enter.
	bin := filepath.Join(dir, "keeper.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(socket, 0o666); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), keeperVar+"="+mnt, dialVar+"="+socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if want := `{"refused":"the keeper hands over only to its own user"}`; err != nil || string(out) != want {
		t.Errorf("another user asking for the connection: %q, %v; want %q", out, err, want)
	}
	if generation(mnt) != "1" {
		t.Errorf("generation %q after another user asked, want 1", generation(mnt))
	}
}

// keeperProcess is a keeper run as a process of its own, from this test
// binary.
type keeperProcess struct {
	cmd    *exec.Cmd
	mnt    string
	socket string
	layout string // the file its Layout is read from
	log    *syncBuffer
	done   chan error
}

// startKeeperProcess starts this test binary, or bin if not "", as a
// keeper with env, and waits until its first server serves and the keeper
// knows it (it listens on its socket once it does).
func startKeeperProcess(t *testing.T, bin string, env ...string) *keeperProcess {
	t.Helper()
	testenv.RequireFUSE(t)
	p := &keeperProcess{mnt: t.TempDir(), socket: filepath.Join(t.TempDir(), "keeper.sock"), layout: filepath.Join(t.TempDir(), "layout"),
		log: &syncBuffer{}, done: make(chan error, 1)}
	if err := os.WriteFile(p.layout, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(cmp.Or(bin, os.Args[0]), "-test.run=^$")
	p.cmd.Env = append(os.Environ(), keeperVar+"="+p.mnt, socketVar+"="+p.socket, layoutFileVar+"="+p.layout)
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		if mounted(p.mnt) {
			syscall.Unmount(p.mnt, syscall.MNT_DETACH)
		}
	})
	waitFor(t, 10*time.Second, "the first server to serve", func() bool { return generation(p.mnt) == "1" })
	waitFor(t, 10*time.Second, "the keeper to listen", func() bool { _, err := os.Stat(p.socket); return err == nil })
	return p
}

// server is the pid of the process's server.
func (p *keeperProcess) server(t *testing.T) int {
	t.Helper()
	var pid int
	waitFor(t, 10*time.Second, "a server", func() bool {
		var ok bool
		pid, ok = testenv.ChildOf(p.cmd.Process.Pid)
		return ok
	})
	return pid
}

// stop ends the keeper with SIGTERM; it must exit 0 and unmount.
func (p *keeperProcess) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("the keeper after SIGTERM: %v\n%s", err, p.log)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("the keeper did not exit within 20s of SIGTERM\n%s", p.log)
	}
	if mounted(p.mnt) {
		t.Errorf("%s still mounted after the keeper's end", p.mnt)
	}
}

// SIGHUP makes the keeper execute its binary again in its own process,
// while clients read, one through a handle opened before: no client sees
// an error, the keeper's pid stays, and the next server is the new image's
// child, at generation 2.
func TestSIGHUPExecutesTheKeeperAgain(t *testing.T) {
	p := startKeeperProcess(t, "")
	before := p.server(t)
	stop := reading(t, p.mnt)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the server after the keeper's exec", func() bool { return generation(p.mnt) == "2" })
	time.Sleep(100 * time.Millisecond)
	failures, rounds := stop()
	if len(failures) > 0 {
		t.Errorf("clients saw errors across the keeper's exec: %v", failures)
	}
	t.Logf("%d client rounds across the keeper's exec", rounds)
	if after := p.server(t); after == before {
		t.Errorf("the server is %d before and after the keeper's exec", before)
	}
	if !strings.Contains(p.log.String(), fmt.Sprintf("from_pid=%d", p.cmd.Process.Pid)) {
		t.Errorf("the executed keeper does not say it took over from pid %d:\n%s", p.cmd.Process.Pid, p.log)
	}
	p.stop(t)
}

// SIGHUP sent again and again while the keeper executes its binary, and
// before the new image serves, neither ends the keeper nor the mount: a
// SIGHUP in the exec's window is ignored, one after it is the new image's.
func TestSIGHUPDuringTheExecKeepsTheKeeper(t *testing.T) {
	p := startKeeperProcess(t, "")
	var done atomic.Bool
	var hups sync.WaitGroup
	hups.Go(func() {
		for !done.Load() && p.cmd.Process.Signal(syscall.SIGHUP) == nil {
		}
	})
	defer hups.Wait()
	defer done.Store(true)
	deadline := time.After(20 * time.Second)
	for g, _ := strconv.Atoi(generation(p.mnt)); g < 3; g, _ = strconv.Atoi(generation(p.mnt)) {
		select {
		case err := <-p.done:
			t.Fatalf("the keeper ended under SIGHUPs: %v\n%s", err, p.log)
		case <-deadline:
			t.Fatalf("no server of generation 3 within 20s of SIGHUPs\n%s", p.log)
		case <-time.After(time.Millisecond):
		}
	}
	done.Store(true)
	hups.Wait()
	// A SIGTERM that comes in an exec's own window would end the keeper
	// (DESIGN says so): this keeper is ended by the test's cleanup.
	waitFor(t, 20*time.Second, "the keeper to serve after its last exec", func() bool {
		log := p.log.String()
		return strings.Count(log, "executing the keeper's binary again;") == strings.Count(log, "took the FUSE connection over") &&
			generation(p.mnt) != ""
	})
	select {
	case err := <-p.done:
		t.Fatalf("the keeper ended under SIGHUPs: %v\n%s", err, p.log)
	default:
	}
}

// SIGHUP when the binary would not fit (here: its servers' layout is
// another) is refused in one line: the server serves on, the keeper's
// image and the generation stay.
func TestSIGHUPRefusesABinaryThatDoesNotFit(t *testing.T) {
	p := startKeeperProcess(t, "")
	before := p.server(t)
	if err := os.WriteFile(p.layout, []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	want := `SIGHUP: not executing the keeper's binary again; serving on`
	waitFor(t, 10*time.Second, "the keeper's refusal", func() bool { return strings.Contains(p.log.String(), want) })
	if !strings.Contains(p.log.String(), `layout \"2\", this keeper's in \"1\"`) {
		t.Errorf("the refusal does not say why:\n%s", p.log)
	}
	if after := p.server(t); after != before || generation(p.mnt) != "1" {
		t.Errorf("after a refused SIGHUP: server %d (before: %d), generation %q", after, before, generation(p.mnt))
	}
	p.stop(t)
}

// SIGHUP whose exec fails (here: the binary is gone once it said what it
// would serve with) is said in one line, and the keeper starts its next
// server from its own image: the mount goes on, clients see no error.
func TestSIGHUPWhoseExecFailsServesOn(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "keeper.test")
	b, err := os.ReadFile(os.Args[0])
	if err == nil {
		err = os.WriteFile(bin, b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	p := startKeeperProcess(t, bin, removeVar+"=1")
	stop := reading(t, p.mnt)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the next server", func() bool { return generation(p.mnt) == "2" })
	failures, _ := stop()
	if len(failures) > 0 {
		t.Errorf("clients saw errors across the failed exec: %v", failures)
	}
	if want := "executing the keeper's binary again failed; the next server is this keeper's own"; !strings.Contains(p.log.String(), want) {
		t.Errorf("the keeper does not say %q:\n%s", want, p.log)
	}
	p.stop(t)
}

func alive(pid int) bool {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	return err == nil && !strings.Contains(string(status), "State:\tZ")
}

func answers(socket string) bool {
	c, err := net.Dial("unixpacket", socket)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// syncBuffer is a bytes.Buffer a process writes and a test reads at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var _ io.Writer = (*syncBuffer)(nil)
