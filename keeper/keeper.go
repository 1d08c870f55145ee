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
// A keeper hands its connection to another keeper, a new binary, without
// a gap: to a `statefs mount` that asks on the keeper's socket, or to its
// own binary, executed again in its place on SIGHUP (handover.go, reexec.go).
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
	"maps"
	"net"
	"os"
	"os/exec"
	"os/signal"
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
	// Socket is the unix socket on which the keeper takes requests to hand
	// its connection over, and on which Run first asks for a keeper
	// serving already; "" for none.
	Socket string
	// Layout names the layout of the state the servers leave each other
	// beyond the keeper's own: a keeper hands its connection over only to
	// a binary whose servers read the same.
	Layout string
	// Vacant, if set, checks that Mountpoint may be mounted on; Run calls
	// it before it mounts, not when it takes a connection over.
	Vacant func() error
}

// ServerFailed is Run's error when the first server of a connection the
// keeper mounted, or took over, exits before it serves: it met bad input
// the keeper could not see, and said so. The mount is gone again, or left
// to the keeper it was taken from.
type ServerFailed struct {
	State *os.ProcessState
}

func (e *ServerFailed) Error() string {
	return "the server exited before it served: " + e.State.String()
}

// Run serves cfg.Mountpoint with one server after another until ctx is
// done (then it unmounts as Stop does, waits for the server to exit and
// returns nil), the mount is unmounted from outside (nil), the first
// server fails (*ServerFailed), the servers die in a crash loop (an error
// of one line; the connection is ended and the mount detached), or it has
// handed the connection to another keeper and ctx is done (nil; the mount
// stays). The connection is the one a keeper executing this process again
// handed over (HandoverEnvVar), or taken over from the keeper that answers
// on cfg.Socket (an error of one line if that keeper refuses), or a new
// mount.
func Run(ctx context.Context, cfg Config) error {
	if fd, ok := os.LookupEnv(probeEnvVar); ok {
		return answerProbe(fd, cfg)
	}
	if unix.Geteuid() != 0 {
		return ErrNotRoot
	}
	// SIGHUP is the keeper's from the start: its default action would end
	// the process, and the mount with it, before serve takes it.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	k := &keeper{cfg: cfg, files: map[string]*os.File{}, requests: make(chan *takeOverRequest), hup: hup}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	k.exe = exe
	h, files, again, err := reexecuted()
	if err != nil {
		return err
	}
	if again {
		if err := k.adopt(h, files); err != nil {
			return err
		}
		k.tookOver(h)
	} else if c, serving := dialKeeper(cfg.Socket); serving {
		if err := k.takeOver(ctx, c); err != nil {
			c.Close()
			k.closeFiles()
			if ctx.Err() != nil {
				slog.Info("the take-over was interrupted before the connection came; the keeper on the socket serves on", "socket", cfg.Socket)
				return nil
			}
			return err
		}
	} else if err := k.mount(); err != nil {
		return err
	}
	defer k.closeFiles()
	defer k.conn.close()
	defer k.unlisten()
	defer func() {
		if k.from != nil { // the keeper it came from serves on
			k.from.Close()
		}
	}()
	return k.serve(ctx)
}

// mount mounts a new connection and makes the memfds.
func (k *keeper) mount() error {
	if k.cfg.Vacant != nil {
		if err := k.cfg.Vacant(); err != nil {
			return err
		}
	}
	c, err := mount(k.cfg.Mountpoint, k.cfg.Options)
	if err != nil {
		return fmt.Errorf("mounting %s: %w", k.cfg.Mountpoint, err)
	}
	k.conn, k.mounted = c, true
	if k.init, err = memfd(initFile); err != nil {
		c.unmount()
		c.close()
		return err
	}
	for _, name := range k.cfg.Files {
		if k.files[name], err = memfd(name); err != nil {
			c.unmount()
			c.close()
			k.closeFiles()
			return err
		}
	}
	return nil
}

// keeper is Run's state: the connection, the files servers inherit, and
// the deaths it counts.
type keeper struct {
	cfg   Config
	exe   string // the binary SIGHUP executes again
	conn  *conn
	init  *os.File // the recorded INIT
	files map[string]*os.File
	// listenerFile is the socket hand-over requests come on, once the
	// keeper listens; listener takes them.
	listenerFile *os.File
	listener     *net.UnixListener
	requests     chan *takeOverRequest
	hup          chan os.Signal // SIGHUP, from Run's start
	// generation is the last server's (0: none yet); downSince when it
	// stopped.
	generation uint64
	downSince  time.Time
	// served: a server has served the connection, which recorded its
	// INIT. mounted: this keeper mounted it.
	served, mounted bool
	// from is the keeper this one takes the connection over from, until
	// its first server serves or fails.
	from *net.UnixConn
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

// stopGraceServer is how long a server stopped for a hand-over has to
// finish its seals and exit before it is killed.
const stopGraceServer = 30 * time.Second

// ending is how watch saw a server end.
type ending int

const (
	died       ending = iota // it exited of itself
	stopped                  // the keeper stopped it for a hand-over that did not happen
	handedOver               // the keeper handed the connection over
	unmounted                // the keeper stopped the mount (ctx)
	givenBack                // ctx ended a take-over before its first server served
)

func (k *keeper) serve(ctx context.Context) error {
	first := k.generation + 1
	for {
		k.generation++
		s, err := k.start(k.generation, k.downSince)
		if err != nil {
			if k.from != nil {
				k.tellPredecessor(err.Error()) // the keeper it came from serves on
			} else {
				k.conn.abortAndDetach()
			}
			return fmt.Errorf("starting server %d: %w", k.generation, err)
		}
		switch end, err := k.watch(ctx, s); end {
		case unmounted, givenBack:
			return err
		case handedOver:
			for {
				select {
				case <-ctx.Done():
					return nil
				case r := <-k.requests: // accepted before the listener closed
					refuse(r, errors.New("this keeper has handed its connection over"))
				}
			}
		case stopped:
			continue
		}
		served := isClosed(s.serving)
		if k.conn.ended() {
			return nil // unmounted from outside; the server saw its connection end
		}
		if k.generation == first && !served && k.from != nil {
			k.tellPredecessor(s.cmd.ProcessState.String())
			return &ServerFailed{State: s.cmd.ProcessState}
		}
		if k.generation == first && !served && k.mounted {
			k.conn.unmount()
			return &ServerFailed{State: s.cmd.ProcessState}
		}
		k.downSince = time.Now()
		if k.died(s, k.downSince) {
			k.conn.abortAndDetach()
			return fmt.Errorf("%d servers in a row died within %v of serving (last: %s); the mount is ended", crashLoopDeaths, crashLoopLife, s.cmd.ProcessState)
		}
		slog.Warn("the server ended; starting the next on the same connection", "generation", k.generation, "pid", s.cmd.Process.Pid,
			"how", s.cmd.ProcessState.String(), "served", served)
	}
}

// watch waits for server s to end, and meanwhile takes hand-over requests
// and SIGHUP, and listens once a server serves.
func (k *keeper) watch(ctx context.Context, s *server) (ending, error) {
	serving := s.serving
	for {
		select {
		case <-s.exited:
			if serving != nil && isClosed(serving) {
				k.serving() // it served before it died
			}
			return died, nil
		case <-ctx.Done():
			if k.from != nil {
				k.giveBack(s)
				return givenBack, nil
			}
			return unmounted, k.stop(s)
		case <-serving:
			serving = nil
			k.serving()
		case r := <-k.requests:
			if err := k.check(r.offer); err != nil {
				refuse(r, err)
				continue
			}
			k.stopServer(s) // DESIGN's "One server at a time"
			if k.handOver(r) {
				return handedOver, nil
			}
			return stopped, nil
		case <-k.hup:
			if err := k.probe(); err != nil {
				slog.Warn("SIGHUP: not executing the keeper's binary again; serving on", "binary", k.exe, "why", err)
				continue
			}
			if ctx.Err() != nil { // while it probed
				return unmounted, k.stop(s)
			}
			k.stopServer(s)
			err := k.reexec(ctx)
			slog.Error("executing the keeper's binary again failed; the next server is this keeper's own", "binary", k.exe, "err", err)
			return stopped, nil
		}
	}
}

// stopServer stops s as SIGTERM stops a server (it finishes its seals and
// leaves the connection) and waits for it to exit.
func (k *keeper) stopServer(s *server) {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(stopGraceServer):
		slog.Warn("the server did not exit within its grace; killing it", "pid", s.cmd.Process.Pid, "grace", stopGraceServer)
		s.cmd.Process.Kill()
		<-s.exited
	}
	k.downSince = time.Now()
}

// serving is what follows a server's first word that it serves: the
// take-over, if any, is complete, and the keeper listens. A take-over's
// first server that served and died is one that served, so that while
// k.from is set the keeper runs that one server only.
func (k *keeper) serving() {
	k.served = true
	k.tellPredecessor("")
	k.listen()
}

// giveBack ends a take-over that ctx interrupted before its first server
// s served: s stops as for a hand-over (DESIGN's one server at a time), and
// the keeper it came from, told, serves on. The mount stays.
func (k *keeper) giveBack(s *server) {
	k.stopServer(s)
	k.tellPredecessor("the taking-over keeper was stopped before its first server served")
	slog.Info("the take-over was interrupted before its first server served; the keeper it came from serves on", "mountpoint", k.conn.mountpoint)
}

// unlisten stops taking hand-over requests and removes the socket, the
// mount ending with this keeper.
func (k *keeper) unlisten() {
	if k.listener == nil {
		return
	}
	k.listener.Close()
	k.listener = nil
	os.Remove(k.cfg.Socket)
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
	// Every memfd the keeper holds, also one a keeper before it made that
	// this binary does not know: a server takes those it knows.
	for _, name := range slices.Sorted(maps.Keys(k.files)) {
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
	if k.listenerFile != nil {
		k.listenerFile.Close()
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
