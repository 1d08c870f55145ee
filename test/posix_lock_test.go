package test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestPosixFlock: RocksDB's LOCK file. flock locks belong to the open file
// description, so a second open() conflicts even within one process.
func TestPosixFlock(t *testing.T) {
	m := mountFS(t)
	p := m.Path("LOCK")
	putFile(t, p, nil, 0o644)
	open := func() *os.File {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		return f
	}
	a, b := open(), open()

	require.NoError(t, unix.Flock(int(a.Fd()), unix.LOCK_EX|unix.LOCK_NB))
	requireSysErr(t, unix.Flock(int(b.Fd()), unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
	requireSysErr(t, unix.Flock(int(b.Fd()), unix.LOCK_SH|unix.LOCK_NB), unix.EWOULDBLOCK)
	require.NoError(t, unix.Flock(int(a.Fd()), unix.LOCK_UN))
	require.NoError(t, unix.Flock(int(b.Fd()), unix.LOCK_EX|unix.LOCK_NB))
	requireSysErr(t, unix.Flock(int(a.Fd()), unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)

	// Closing the holder releases it.
	require.NoError(t, b.Close())
	require.NoError(t, unix.Flock(int(a.Fd()), unix.LOCK_EX|unix.LOCK_NB))
	require.NoError(t, unix.Flock(int(a.Fd()), unix.LOCK_UN))

	// Shared locks coexist and keep out an exclusive one.
	c, d := open(), open()
	require.NoError(t, unix.Flock(int(c.Fd()), unix.LOCK_SH|unix.LOCK_NB))
	require.NoError(t, unix.Flock(int(d.Fd()), unix.LOCK_SH|unix.LOCK_NB))
	requireSysErr(t, unix.Flock(int(a.Fd()), unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
}

// TestPosixFcntlLock: POSIX record locks held by another process (the test
// binary re-executed, see holdLockInChild).
func TestPosixFcntlLock(t *testing.T) {
	m := mountFS(t)
	p := m.Path("LOCK")
	putFile(t, p, make([]byte, 1000), 0o644)
	holder := holdLockInChild(t, p, 0, 100)

	f, err := os.OpenFile(p, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	lock := func(typ int16, start, length int64) *unix.Flock_t {
		return &unix.Flock_t{Type: typ, Whence: io.SeekStart, Start: start, Len: length}
	}

	// A conflicting write lock and a conflicting read lock are refused.
	requireSysErr(t, unix.FcntlFlock(f.Fd(), unix.F_SETLK, lock(unix.F_WRLCK, 0, 0)), unix.EAGAIN, unix.EACCES)
	requireSysErr(t, unix.FcntlFlock(f.Fd(), unix.F_SETLK, lock(unix.F_RDLCK, 50, 10)), unix.EAGAIN, unix.EACCES)

	// F_GETLK names the holder.
	q := lock(unix.F_WRLCK, 10, 5)
	require.NoError(t, unix.FcntlFlock(f.Fd(), unix.F_GETLK, q))
	require.Equal(t, int16(unix.F_WRLCK), q.Type, "F_GETLK does not report the conflicting lock")
	require.Equal(t, int32(holder.cmd.Pid), q.Pid, "F_GETLK reports the wrong holder")
	require.Equal(t, int64(0), q.Start)
	require.Equal(t, int64(100), q.Len)

	// A range that does not overlap is free.
	q = lock(unix.F_WRLCK, 100, 50)
	require.NoError(t, unix.FcntlFlock(f.Fd(), unix.F_GETLK, q))
	require.Equal(t, int16(unix.F_UNLCK), q.Type)
	require.NoError(t, unix.FcntlFlock(f.Fd(), unix.F_SETLK, lock(unix.F_WRLCK, 100, 50)))

	// When the holder exits, its lock goes.
	holder.release()
	require.NoError(t, unix.FcntlFlock(f.Fd(), unix.F_SETLK, lock(unix.F_WRLCK, 0, 0)))
	q = lock(unix.F_WRLCK, 0, 0)
	require.NoError(t, unix.FcntlFlock(f.Fd(), unix.F_GETLK, q))
	require.Equal(t, int16(unix.F_UNLCK), q.Type, "own locks never conflict")

	// Now this process holds it and a child cannot take it.
	exe, err := os.Executable()
	require.NoError(t, err)
	out, err := runLockChild(exe, p)
	require.Error(t, err, "a child took a lock this process holds: %s", out)
	require.Contains(t, out, "F_SETLK")
}

// The POSIX lock tests need a lock held by another process. The test binary
// re-executes itself with lockChildEnv set; init then takes the lock, says
// "locked" on stdout and holds it until stdin is closed, before TestMain runs.
const lockChildEnv = "STATEFS_POSIX_LOCK_CHILD" // "path:start:len"

func init() {
	spec := os.Getenv(lockChildEnv)
	if spec == "" {
		return
	}
	if err := holdPosixLock(spec); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func holdPosixLock(spec string) error {
	i := strings.LastIndexByte(spec, ':')
	j := strings.LastIndexByte(spec[:i], ':')
	start, err := strconv.ParseInt(spec[j+1:i], 10, 64)
	if err != nil {
		return err
	}
	length, err := strconv.ParseInt(spec[i+1:], 10, 64)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(spec[:j], os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: start, Len: length}
	if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk); err != nil {
		return fmt.Errorf("F_SETLK: %w", err)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	return nil
}

// lockHolder is another process holding a POSIX write lock on a file range.
type lockHolder struct {
	cmd   *os.Process
	stdin io.WriteCloser
	done  chan error
}

// holdLockInChild starts a child process that takes an F_SETLK write lock on
// [start, start+length) of path and keeps it until release.
func holdLockInChild(t testing.TB, path string, start, length int64) *lockHolder {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d:%d", lockChildEnv, path, start, length))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	h := &lockHolder{cmd: cmd.Process, stdin: stdin, done: make(chan error, 1)}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	go func() { h.done <- cmd.Wait() }()
	t.Cleanup(h.release)
	require.Equal(t, "locked\n", line, "lock-holding child failed")
	return h
}

// release lets the child exit, which drops its lock, and waits for it.
func (h *lockHolder) release() {
	if h.stdin == nil {
		return
	}
	h.stdin.Close()
	h.stdin = nil
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		h.cmd.Kill()
		<-h.done
	}
}

// runLockChild runs the lock-taking child on the whole of path and returns
// its output; it fails when the lock cannot be taken.
func runLockChild(exe, path string) (string, error) {
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:0:0", lockChildEnv, path))
	out, err := cmd.CombinedOutput()
	return string(out), err
}
