// Package keeper runs a FUSE filesystem as two processes: the keeper, which
// mounts, owns the connection (the /dev/fuse fd) and outlives the servers
// that serve it, and the server, its child, which answers the kernel's
// requests. When a server dies, by a crash, a signal or an OOM kill, the
// keeper starts the next one at once on the same connection: the kernel
// keeps the requests the dead server read and never answered, and sends
// them again to the next one (FUSE_NOTIFY_RESEND, Linux 6.9 or later), so a
// client sees a stall, not an error.
//
// The keeper side is Run. The server side is Session: Inherited tells a
// process whether a keeper started it, and a Session gives it the
// connection (NewServer), the memfds the keeper holds for it (File), and
// has the kernel send again what the dead server left (Resend), and says
// when it serves (Serving).
//
// A server takes over a live connection without a fork of go-fuse:
// go-fuse's NewServer always reads an INIT request first, so the connection's
// first server records the kernel's INIT in a memfd the keeper holds, and
// every later server replays it into a socket that NewServer reads, then
// puts the real /dev/fuse fd in the socket's place before it serves
// (session.go says how).
//
// The keeper knows nothing of what the servers serve: it imports go-fuse's
// fuse package for the mount options and nothing of statefs's but the crash
// points' names, which it keeps from all but the first server.
package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/internal/crashpoint"
)

// A crash loop is crashLoopDeaths servers in a row that each died before
// serving or within crashLoopLife of it: one that cannot start, or one
// that dies of the first request it is sent again, every time. The keeper
// then ends the connection, so that clients get an error instead of
// waiting for a server that cannot serve. A server that served longer is
// one that died of its own accident (a kill, an OOM), and starts the count
// again: those the keeper replaces for ever.
const (
	crashLoopDeaths = 5
	crashLoopLife   = 250 * time.Millisecond
)

// EnvVar is the environment variable that tells a server what it inherited
// from its keeper (Inherited reads it).
const EnvVar = "STATEFS_KEEPER"

// ErrNotRoot is Run's error when the process may not mount: the keeper
// mounts with mount(2) itself, which needs CAP_SYS_ADMIN.
var ErrNotRoot = errors.New("the keeper mounts the filesystem itself, which needs root (CAP_SYS_ADMIN)")

// Config is what a keeper mounts and how it starts its servers.
type Config struct {
	// Mountpoint is the directory to mount on; it must exist.
	Mountpoint string
	// Options are the mount options every server uses too: the keeper's
	// mount(2) reads them as go-fuse's DirectMount does, and each server
	// negotiates the same INIT reply with them.
	Options *fuse.MountOptions
	// Server returns a new, unstarted server process. The keeper adds the
	// files it inherits, its environment variable and its process
	// attributes (Pdeathsig, its own process group). The keeper's process
	// must hold no file of its own mount open: a server's exec closes the
	// copies it inherited, and the kernel's FLUSH of one would wait for
	// that very server.
	Server func() *exec.Cmd
	// Files names the memfds the keeper makes once and every server
	// inherits (Session.File): state that must outlive a server.
	Files []string
}

// ServerFailed is Run's error when the connection's first server exits
// before it serves: it met bad input the keeper could not see, and said so.
// The mount is gone again.
type ServerFailed struct {
	State *os.ProcessState
}

func (e *ServerFailed) Error() string {
	return "the server exited before it served: " + e.State.String()
}

// Run mounts cfg.Mountpoint, holds the connection and serves it with one
// server after another until ctx is done (then it unmounts as Stop does,
// waits for the server to exit and returns nil), the mount is unmounted
// from outside (nil), the first server fails (*ServerFailed), or the
// servers die in a crash loop (an error of one line; the connection is
// ended and the mount detached).
func Run(ctx context.Context, cfg Config) error {
	if unix.Geteuid() != 0 {
		return ErrNotRoot
	}
	c, err := mount(cfg.Mountpoint, cfg.Options)
	if err != nil {
		return fmt.Errorf("mounting %s: %w", cfg.Mountpoint, err)
	}
	defer c.close()
	k := &keeper{cfg: cfg, conn: c, files: map[string]*os.File{}}
	defer k.closeFiles()
	if k.init, err = memfd("init"); err != nil {
		c.unmount()
		return err
	}
	for _, name := range cfg.Files {
		if k.files[name], err = memfd(name); err != nil {
			c.unmount()
			return err
		}
	}
	return k.serve(ctx)
}

// keeper is Run's state: the connection, the files servers inherit, and
// the deaths it counts.
type keeper struct {
	cfg   Config
	conn  *conn
	init  *os.File // the recorded INIT
	files map[string]*os.File
	// shortLived counts the servers in a row that died within
	// crashLoopLife of serving, or before.
	shortLived int
}

// server is one running server process.
type server struct {
	cmd      *exec.Cmd
	serving  chan struct{} // closed once it said it serves
	servedAt time.Time     // when it said so; read once serving is closed
	exited   chan struct{} // closed once it exited and was waited for
}

func (k *keeper) serve(ctx context.Context) error {
	var downSince time.Time
	for generation := uint64(1); ; generation++ {
		s, err := k.start(generation, downSince)
		if err != nil {
			k.conn.abortAndDetach()
			return fmt.Errorf("starting server %d: %w", generation, err)
		}
		select {
		case <-s.exited:
		case <-ctx.Done():
			return k.stop(s)
		}
		served := isClosed(s.serving)
		if k.conn.ended() {
			return nil // unmounted from outside; the server saw its connection end
		}
		if generation == 1 && !served {
			k.conn.unmount()
			return &ServerFailed{State: s.cmd.ProcessState}
		}
		downSince = time.Now()
		if k.died(s, downSince) {
			k.conn.abortAndDetach()
			return fmt.Errorf("%d servers in a row died within %v of serving (last: %s); the mount is ended", crashLoopDeaths, crashLoopLife, s.cmd.ProcessState)
		}
		slog.Warn("the server ended; starting the next on the same connection", "generation", generation, "pid", s.cmd.Process.Pid,
			"how", s.cmd.ProcessState.String(), "served", served)
	}
}

// died counts the death of server s at t and reports a crash loop.
func (k *keeper) died(s *server, t time.Time) bool {
	if isClosed(s.serving) && t.Sub(s.servedAt) >= crashLoopLife {
		k.shortLived = 0
		return false
	}
	k.shortLived++
	return k.shortLived >= crashLoopDeaths
}

// stop ends the mount on ctx's end as a daemon without a keeper ends it
// (Stop), then waits for the server, whose Serve returns once the
// connection ends.
func (k *keeper) stop(s *server) error {
	slog.Info("unmounting", "mountpoint", k.conn.mountpoint)
	Stop(k.conn.mountpoint, k.conn.dev, k.conn.unmountOnce, k.conn.endedChan(s.exited))
	killed := false
	if !k.conn.ended() {
		// fusectl could not end it, and the server holds the fd as well.
		killed = s.cmd.Process.Kill() == nil
	}
	<-s.exited
	if !killed && !s.cmd.ProcessState.Success() {
		return fmt.Errorf("the server ended with %s as the mount stopped", s.cmd.ProcessState)
	}
	return nil
}

// inheritance is what a server inherits, as EnvVar carries it: the numbers
// of its inherited fds and where it stands among the connection's servers.
type inheritance struct {
	FUSE       int            `json:"fuse"`
	Init       int            `json:"init"`
	Ready      int            `json:"ready"`
	Files      map[string]int `json:"files,omitempty"`
	Generation uint64         `json:"generation"`
	Restarts   uint64         `json:"restarts"`
	DownSince  int64          `json:"down_since_unix_nano,omitempty"` // 0: no server died yet
}

// start starts the server of a generation: the connection's fd, the INIT
// memfd, the named memfds and the write end of the pipe on which it says
// it serves become its fds from 3 on (after any the caller gave it).
func (k *keeper) start(generation uint64, downSince time.Time) (*server, error) {
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer readyW.Close()
	cmd := k.cfg.Server()
	first := 3 + len(cmd.ExtraFiles)
	in := inheritance{FUSE: first, Init: first + 1, Ready: first + 2, Generation: generation, Restarts: generation - 1}
	if !downSince.IsZero() {
		in.DownSince = downSince.UnixNano()
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, k.conn.fuse, k.init, readyW)
	for _, name := range k.cfg.Files {
		if in.Files == nil {
			in.Files = map[string]int{}
		}
		in.Files[name] = 3 + len(cmd.ExtraFiles)
		cmd.ExtraFiles = append(cmd.ExtraFiles, k.files[name])
	}
	env, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(serverEnv(cmd.Env, generation), EnvVar+"="+string(env))
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// A dead keeper takes its server with it (the connection is the
	// keeper's), and a terminal's ^C reaches the keeper alone, which
	// stops the mount as a whole.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		readyR.Close()
		return nil, err
	}
	s := &server{cmd: cmd, serving: make(chan struct{}), exited: make(chan struct{})}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer readyR.Close()
		var b [len(servingWord)]byte
		if n, _ := io.ReadFull(readyR, b[:]); string(b[:n]) == servingWord {
			s.servedAt = time.Now()
			close(s.serving)
		}
	}()
	go func() {
		cmd.Wait()
		// The pipe's end comes with the server's, so whether it said it
		// serves is known before its exit is told.
		<-read
		close(s.exited)
	}()
	return s, nil
}

// servingWord is what a server writes on its ready pipe once it serves.
const servingWord = "serving"

// serverEnv is env (nil: the keeper's own) for the server of a generation:
// a crash point arms the connection's first server only, so that a test
// sees one crash and the takeover after it; EnvVar is the keeper's to set.
func serverEnv(env []string, generation uint64) []string {
	if env == nil {
		env = os.Environ()
	}
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == EnvVar || generation > 1 && (name == crashpoint.EnvVar || name == crashpoint.PauseEnvVar)
	})
}

func (k *keeper) closeFiles() {
	if k.init != nil {
		k.init.Close()
	}
	for _, f := range k.files {
		f.Close()
	}
}

// memfd makes a memfd the keeper holds and its servers inherit.
func memfd(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate("statefs-keeper-"+name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
