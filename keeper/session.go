package keeper

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Session is a server's side of its keeper: the connection it serves and
// what it inherited with it.
type Session struct {
	in    inheritance
	fuse  *os.File // the connection
	init  *os.File // the recorded INIT
	ready *os.File // the pipe on which the server says it serves; nil once said
	files map[string]*os.File
	sent  Resend
}

// Inherited is the Session a keeper started this process with, or nil,
// nil when no keeper did. The inherited fds are made close-on-exec, so that
// nothing the server runs holds the connection or the keeper's pipe.
var Inherited = sync.OnceValues(inherited)

func inherited() (*Session, error) {
	v, ok := os.LookupEnv(EnvVar)
	if !ok {
		return nil, nil
	}
	s := &Session{files: map[string]*os.File{}}
	if err := json.Unmarshal([]byte(v), &s.in); err != nil || s.in.Generation == 0 {
		return nil, fmt.Errorf("%s=%q is not what a keeper sets", EnvVar, v)
	}
	file := func(fd int, name string) *os.File {
		unix.CloseOnExec(fd)
		return os.NewFile(uintptr(fd), name)
	}
	s.fuse, s.init, s.ready = file(s.in.FUSE, "/dev/fuse"), file(s.in.Init, "init"), file(s.in.Ready, "ready")
	for name, fd := range s.in.Files {
		s.files[name] = file(fd, name)
	}
	return s, nil
}

// Generation is this server's place among the connection's servers: 1 for
// the first.
func (s *Session) Generation() uint64 { return s.in.Generation }

// Resuming reports whether a server served this connection before.
func (s *Session) Resuming() bool { return s.in.Generation > 1 }

// Restarts is how many servers of this connection died before this one.
func (s *Session) Restarts() uint64 { return s.in.Restarts }

// DownSince is when the previous server died; zero for the first server.
func (s *Session) DownSince() time.Time {
	if s.in.DownSince == 0 {
		return time.Time{}
	}
	return time.Unix(0, s.in.DownSince)
}

// File is the memfd the keeper made under name (Config.Files); nil if it
// made none.
func (s *Session) File(name string) *os.File { return s.files[name] }

// initSize is the size of a recorded INIT: the kernel's request as go-fuse
// keeps it, header and body (fuse.InitIn embeds fuse.InHeader).
const initSize = int(unsafe.Sizeof(fuse.InitIn{}))

// NewServer makes the go-fuse server of the inherited connection with fs
// and opts, which must be the options the keeper mounted with. The first
// server reads the kernel's INIT and records it; a later one is handed the
// recorded INIT instead (the kernel sends INIT once per connection), in a
// socket that go-fuse reads and answers, and the connection then takes the
// socket's fd number before anything else reads it. Call Serve, then
// Serving.
func (s *Session) NewServer(fs fuse.RawFileSystem, opts *fuse.MountOptions) (*fuse.Server, error) {
	o := *opts
	// The keeper mounted: go-fuse must only serve the fd it is given.
	o.DirectMount, o.DirectMountStrict = false, false
	if !s.Resuming() {
		srv, err := fuse.NewServer(fs, fmt.Sprintf("/dev/fd/%d", s.fuse.Fd()), &o)
		if err != nil {
			return nil, err
		}
		touchReadBuffersOrWarn(srv)
		in := srv.KernelSettings()
		if _, err := s.init.WriteAt(unsafe.Slice((*byte)(unsafe.Pointer(in)), initSize), 0); err != nil {
			return nil, fmt.Errorf("recording the kernel's INIT: %w", err)
		}
		return srv, nil
	}
	recorded := make([]byte, initSize)
	if _, err := s.init.ReadAt(recorded, 0); err != nil {
		return nil, fmt.Errorf("reading the recorded INIT: %w", err)
	}
	// A blocking socket, so that Go's poller never registers it: its fd
	// number becomes the connection's.
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pair[1]) // go-fuse's INIT reply is dropped with it
	if _, err := unix.Write(pair[1], recorded); err != nil {
		unix.Close(pair[0])
		return nil, fmt.Errorf("replaying the INIT: %w", err)
	}
	srv, err := fuse.NewServer(fs, fmt.Sprintf("/dev/fd/%d", pair[0]), &o)
	if err != nil {
		unix.Close(pair[0])
		return nil, err
	}
	touchReadBuffersOrWarn(srv)
	// go-fuse holds pair[0] now; nothing reads it before Serve.
	if err := unix.Dup3(int(s.fuse.Fd()), pair[0], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("taking over the connection: %w", err)
	}
	return srv, nil
}

// Resend is what Serving did about the requests a dead server left
// unanswered.
type Resend string

const (
	ResendNone    Resend = "none"    // the first server: nothing to resend
	ResendSent    Resend = "sent"    // the kernel queues them again for this server
	ResendRefused Resend = "refused" // a kernel before 6.9: they are lost
)

// Resend asks the kernel to send this server again every request the dead
// server read and did not answer (FUSE_NOTIFY_RESEND), if it resumes the
// connection. Call it after NewServer and before Serve: the kernel queues
// again every request it is waiting for an answer to, and a request this
// server had read already would be served twice. A kernel that refuses
// (Linux before 6.9) leaves those requests unanswered: their callers wait
// until the mount ends, unless the server recorded them and answers them
// with an error (KernelResends, Fail). Resend warns of a refusal.
func (s *Session) Resend() Resend {
	s.sent = ResendNone
	if s.Resuming() {
		s.sent = ResendSent
		err := errNoResend
		if os.Getenv(NoResendEnvVar) == "" {
			err = s.notifyResend()
		}
		if err != nil {
			s.sent = ResendRefused
			slog.Warn("the kernel resends no request (FUSE_NOTIFY_RESEND needs Linux 6.9)", "err", err)
		}
	}
	return s.sent
}

// NoResendEnvVar, set to anything, makes every server of a keeper behave
// as on a kernel without FUSE_NOTIFY_RESEND (KernelResends is false, and
// Resend sends nothing and reports ResendRefused), so that tests on a
// newer kernel take that path. It is for tests only.
const NoResendEnvVar = "STATEFS_NO_RESEND"

var errNoResend = errors.New(NoResendEnvVar + " is set")

// KernelResends reports whether the kernel can send again the requests a
// dead server read and did not answer (Resend): Linux 6.9 or later, by the
// kernel's release, unless NoResendEnvVar is set. A server must know
// before it serves, to record its requests on a kernel that cannot
// (Fail); a release it cannot read counts as older. A kernel older by its
// number that has the notification all the same (a backport) makes the
// server record what it need not: Resend still succeeds.
func KernelResends() bool {
	if os.Getenv(NoResendEnvVar) != "" {
		return false
	}
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return releaseResends(unix.ByteSliceToString(u.Release[:]))
}

// releaseResends reports whether a Linux release (uname -r) is 6.9 or
// later; false for one it cannot read.
func releaseResends(release string) bool {
	var major, minor int
	if _, err := fmt.Sscanf(release, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 6 || major == 6 && minor >= 9
}

// Fail answers each request of uniques with errno, as the server that read
// it would have answered a failure, and returns how many the kernel still
// waited for: it refuses (ENOENT) an answer to one it does not wait for,
// which changes nothing. Call it before Serve, and only while no other
// server reads or answers on the connection (the one before has exited):
// the kernel then waits only for requests dead servers read, and an
// answer can reach no other.
func (s *Session) Fail(uniques []uint64, errno syscall.Errno) int {
	failed := 0
	for _, u := range uniques {
		h := fuse.OutHeader{Length: uint32(unsafe.Sizeof(fuse.OutHeader{})), Status: -int32(errno), Unique: u}
		b := unsafe.Slice((*byte)(unsafe.Pointer(&h)), unsafe.Sizeof(h))
		_, err := unix.Write(int(s.fuse.Fd()), b)
		for errors.Is(err, syscall.EINTR) {
			_, err = unix.Write(int(s.fuse.Fd()), b)
		}
		switch {
		case err == nil:
			failed++
		case !errors.Is(err, syscall.ENOENT):
			// The connection is gone or refuses answers: so would it
			// the rest.
			slog.Warn("answering the requests a dead server left", "unique", u, "err", err)
			return failed
		}
	}
	return failed
}

// Serving tells the keeper that srv serves; call it once srv.Serve runs.
func (s *Session) Serving(srv *fuse.Server) error {
	if s.ready == nil {
		return errors.New("Serving was called already")
	}
	_, err := io.WriteString(s.ready, servingWord)
	s.ready.Close()
	s.ready = nil
	if err != nil {
		return fmt.Errorf("telling the keeper: %w", err)
	}
	return nil
}

// Resent is what Resend did about the requests the previous server left
// unanswered ("" before Resend).
func (s *Session) Resent() Resend { return s.sent }

// notifyResend writes FUSE_NOTIFY_RESEND: an out header of 16 bytes,
// unique 0, whose error field is the notification's code. The kernel's
// code is +7; go-fuse's constant (fuse.NOTIFY_RESEND) is -7, which the
// kernel refuses.
func (s *Session) notifyResend() error {
	h := fuse.OutHeader{Length: uint32(unsafe.Sizeof(fuse.OutHeader{})), Status: -fuse.NOTIFY_RESEND}
	_, err := unix.Write(int(s.fuse.Fd()), unsafe.Slice((*byte)(unsafe.Pointer(&h)), unsafe.Sizeof(h)))
	if errors.Is(err, syscall.EINTR) {
		_, err = unix.Write(int(s.fuse.Fd()), unsafe.Slice((*byte)(unsafe.Pointer(&h)), unsafe.Sizeof(h)))
	}
	return err
}
