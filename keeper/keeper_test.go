package keeper_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/statefs/statefs/internal/testenv"
	"github.com/statefs/statefs/keeper"
)

// The test binary is its own server: the keeper the test runs starts it
// again, and TestMain serves instead of testing.
func TestMain(m *testing.M) {
	s, err := keeper.Inherited()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if s != nil {
		os.Exit(serve(s))
	}
	if os.Getenv(keeperVar) != "" {
		os.Exit(keep())
	}
	os.Exit(m.Run())
}

// modeVar tells a server how to fail: failFirst makes the first exit
// before it serves, failLater every one after the first, failAll every one;
// holdAll makes every one wait for SIGTERM without serving, and exit 0.
const (
	modeVar   = "KEEPER_TEST_SERVER"
	failFirst = "fail-first"
	failLater = "fail-later"
	failAll   = "fail-all"
	holdAll   = "hold-all"
)

func serve(s *keeper.Session) int {
	switch mode := os.Getenv(modeVar); {
	case mode == failFirst && s.Generation() == 1, mode == failAll:
		fmt.Fprintln(os.Stderr, "server: bad input")
		return 2
	case mode == failLater && s.Generation() > 1:
		return 3
	case mode == holdAll:
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		<-term
		return 0
	}
	srv, err := s.NewServer(&fileFS{RawFileSystem: fuse.NewDefaultRawFileSystem(), generation: s.Generation(), files: files(s)}, options())
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 1
	}
	s.Resend()
	done := make(chan struct{})
	go func() {
		srv.Serve()
		close(done)
	}()
	if err := s.Serving(srv); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 1
	}
	<-done
	return 0
}

// fileNames are the memfds a test keeper may hold for its servers.
var fileNames = []string{"handles", "old-only", "inflight"}

// files says which of fileNames this server inherited, and what each
// holds: the connection's first server writes "gen1" into each, so that a
// later server tells a memfd kept for it from one made anew.
func files(s *keeper.Session) string {
	var held []string
	for _, name := range fileNames {
		f := s.File(name)
		if f == nil {
			continue
		}
		if s.Generation() == 1 {
			f.WriteAt([]byte("gen1"), 0)
		}
		b := make([]byte, 4)
		n, _ := f.ReadAt(b, 0)
		held = append(held, name+"="+string(b[:n]))
	}
	return strings.Join(held, " ")
}

func options() *fuse.MountOptions {
	return &fuse.MountOptions{FsName: "keepertest", Name: "keepertest", MaxWrite: 1 << 16}
}

// content is the one file's, the same from every server.
var content = bytes.Repeat([]byte("served by whichever server runs\n"), 512)

// fileFS is a root directory holding three files: "f", the same from every
// server, "generation", the serving server's generation, and "files", the
// memfds it inherited. Nodes and
// handles are numbers every server knows, so that a server that takes
// over needs no state of the one before. Nothing is cached by the kernel,
// and reads are direct, so that every stat and read of the clients is a
// request.
type fileFS struct {
	fuse.RawFileSystem
	generation uint64
	files      string // the memfds it inherited (files)
}

const (
	fileIno       = 2
	generationIno = 3
	filesIno      = 4
)

// generationSize is the size "generation" has: its content is padded.
const generationSize = 8

func (f *fileFS) data(ino uint64) []byte {
	switch ino {
	case generationIno:
		return fmt.Appendf(nil, "%-*d", generationSize, f.generation)
	case filesIno:
		return []byte(f.files)
	}
	return content
}

func (f *fileFS) attr(ino uint64, a *fuse.Attr) bool {
	switch ino {
	case fuse.FUSE_ROOT_ID:
		*a = fuse.Attr{Ino: ino, Mode: syscall.S_IFDIR | 0o755, Nlink: 2}
	case fileIno, generationIno, filesIno:
		*a = fuse.Attr{Ino: ino, Mode: syscall.S_IFREG | 0o644, Nlink: 1, Size: uint64(len(f.data(ino)))}
	default:
		return false
	}
	return true
}

func (f *fileFS) Lookup(_ <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	ino, ok := map[string]uint64{"f": fileIno, "generation": generationIno, "files": filesIno}[name]
	if h.NodeId != fuse.FUSE_ROOT_ID || !ok {
		return fuse.ENOENT
	}
	out.NodeId = ino
	f.attr(ino, &out.Attr)
	return fuse.OK
}

func (f *fileFS) GetAttr(_ <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if !f.attr(in.NodeId, &out.Attr) {
		return fuse.ENOENT
	}
	return fuse.OK
}

func (*fileFS) Open(_ <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if in.NodeId == fuse.FUSE_ROOT_ID {
		return fuse.EISDIR
	}
	// The clients share the keeper's process: a server's exec closes
	// their fds that it inherited, and a FLUSH for them would wait for
	// the very server being started.
	out.Fh, out.OpenFlags = 1, fuse.FOPEN_DIRECT_IO|fuse.FOPEN_NOFLUSH
	return fuse.OK
}

func (f *fileFS) Read(_ <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	data := f.data(in.NodeId)
	off := min(in.Offset, uint64(len(data)))
	end := min(off+uint64(in.Size), uint64(len(data)))
	return fuse.ReadResultData(data[off:end]), fuse.OK
}

func (*fileFS) Release(<-chan struct{}, *fuse.ReleaseIn) {}

// keeperRun is Run in the background, with servers from this test binary.
type keeperRun struct {
	mnt    string
	cancel context.CancelFunc
	done   chan error
}

func startKeeper(t *testing.T, env ...string) *keeperRun {
	t.Helper()
	return runConfig(t, config(t.TempDir(), "", env...))
}

// config is a keeper's Config with servers from this test binary, given
// env, and the socket (none if "").
func config(mnt, socket string, env ...string) keeper.Config {
	return keeper.Config{
		Mountpoint: mnt,
		Options:    options(),
		Server: func() *exec.Cmd {
			cmd := exec.Command("/proc/self/exe") // this binary, even once its file is gone
			cmd.Env = append(os.Environ(), env...)
			cmd.Stderr = os.Stderr
			return cmd
		},
		Files:  []string{"handles"},
		Socket: socket,
		Layout: "1",
	}
}

// runConfig is Run of cfg in the background.
func runConfig(t *testing.T, cfg keeper.Config) *keeperRun {
	t.Helper()
	testenv.RequireFUSE(t)
	r := &keeperRun{mnt: cfg.Mountpoint, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- keeper.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			t.Errorf("Run did not return within 20s of its context's end")
		}
		if mounted(r.mnt) {
			syscall.Unmount(r.mnt, syscall.MNT_DETACH)
		}
	})
	return r
}

// wait is Run's error, within d.
func (r *keeperRun) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(d):
		t.Fatalf("Run did not return within %v", d)
		return nil
	}
}

// A server killed with SIGKILL, again and again, while clients stat the
// file, read it by path and read it through a handle opened before the
// first kill: the next server takes the connection over, and no client
// sees an error, ENOTCONN least of all. Then the context's end unmounts,
// and Run returns nil once the server exited.
func TestKilledServersAreTakenOver(t *testing.T) {
	r := startKeeper(t)
	f := filepath.Join(r.mnt, "f")
	waitFor(t, 10*time.Second, "the first server to serve", func() bool { _, err := os.Stat(f); return err == nil })
	held, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	var (
		stop     atomic.Bool
		requests atomic.Int64
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
	for range 3 {
		clients.Go(func() {
			buf := make([]byte, len(content))
			for !stop.Load() {
				if _, err := os.Stat(f); err != nil {
					fail(err)
				}
				if b, err := os.ReadFile(f); err != nil || !bytes.Equal(b, content) {
					fail(fmt.Errorf("read by path: %d bytes, %v", len(b), err))
				}
				if n, err := held.ReadAt(buf, 0); n != len(content) || !bytes.Equal(buf, content) {
					fail(fmt.Errorf("read of the held file: %d bytes, %v", n, err))
				}
				requests.Add(1)
			}
		})
	}
	const kills = 4 // a crash loop is 5 quick deaths in a row
	for i := range kills {
		pid := serverPID(t)
		time.Sleep(200 * time.Millisecond) // it has told the keeper it serves
		before := requests.Load()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, fmt.Sprintf("a server after kill %d", i+1), func() bool {
			p, ok := childPID()
			return ok && p != pid && requests.Load() > before+10
		})
	}
	stop.Store(true)
	clients.Wait()
	if len(failures) > 0 {
		t.Errorf("clients saw errors across %d kills (ENOTCONN: %v): %v", kills, slicesAny(failures, syscall.ENOTCONN), failures)
	}
	t.Logf("%d client rounds across %d kills", requests.Load(), kills)

	held.Close()
	r.cancel()
	if err := r.wait(t, 20*time.Second); err != nil {
		t.Errorf("Run after its context ended: %v, want nil", err)
	}
	if mounted(r.mnt) {
		t.Errorf("%s still mounted after Run returned", r.mnt)
	}
	if pid, ok := childPID(); ok {
		t.Errorf("server %d still runs after Run returned", pid)
	}
}

// Servers that die at start after the first one died make a crash loop:
// Run ends the connection, detaches the mount and says so in one line.
func TestCrashLoopEndsTheMount(t *testing.T) {
	r := startKeeper(t, modeVar+"="+failLater)
	f := filepath.Join(r.mnt, "f")
	waitFor(t, 10*time.Second, "the first server to serve", func() bool { _, err := os.Stat(f); return err == nil })
	time.Sleep(200 * time.Millisecond) // it has told the keeper it serves: its death is not a failed start
	if err := syscall.Kill(serverPID(t), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := r.wait(t, 20*time.Second)
	want := "5 servers in a row died within 250ms of serving (last: exit status 3); the mount is ended"
	if err == nil || err.Error() != want {
		t.Errorf("Run: %v, want %q", err, want)
	}
	if mounted(r.mnt) {
		t.Errorf("%s still mounted after a crash loop", r.mnt)
	}
}

// A first server that exits before it serves (bad input the keeper could
// not see) unmounts, and Run gives its exit status.
func TestFirstServerFailing(t *testing.T) {
	r := startKeeper(t, modeVar+"="+failFirst)
	err := r.wait(t, 10*time.Second)
	var failed *keeper.ServerFailed
	if !errors.As(err, &failed) || failed.State.ExitCode() != 2 {
		t.Fatalf("Run: %v, want a ServerFailed of exit status 2", err)
	}
	if mounted(r.mnt) {
		t.Errorf("%s still mounted after the first server failed", r.mnt)
	}
}

// serverPID is the running server's pid: the one child of this process.
func serverPID(t *testing.T) int {
	t.Helper()
	var pid int
	waitFor(t, 10*time.Second, "a server", func() bool {
		var ok bool
		pid, ok = childPID()
		return ok
	})
	return pid
}

// childPID finds a live child of this process in /proc (status, not stat,
// which waits for a process's memory map).
func childPID() (int, bool) {
	entries, _ := os.ReadDir("/proc")
	parent := "PPid:\t" + strconv.Itoa(os.Getpid()) + "\n"
	for _, e := range entries {
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil || !strings.Contains(string(status), parent) || strings.Contains(string(status), "State:\tZ") {
			continue
		}
		pid, _ := strconv.Atoi(e.Name())
		return pid, true
	}
	return 0, false
}

func mounted(mnt string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == mnt {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s in vain", d, what)
		}
	}
}

func slicesAny(errs []error, target error) bool {
	for _, err := range errs {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
