package test

import (
	"bufio"
	"bytes"
	endian "encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// requireSysErr fails unless err is one of the errnos in want. Several are
// allowed only where POSIX or Linux permits either answer.
func requireSysErr(t testing.TB, err error, want ...syscall.Errno) {
	t.Helper()
	for _, w := range want {
		if errors.Is(err, w) {
			return
		}
	}
	var got syscall.Errno
	if errors.As(err, &got) {
		t.Fatalf("got errno %d (%v), want one of %v", int(got), got, errnoNames(want))
	}
	t.Fatalf("got %v, want one of %v", err, errnoNames(want))
}

func errnoNames(es []syscall.Errno) []string {
	var s []string
	for _, e := range es {
		s = append(s, fmt.Sprintf("%d (%v)", int(e), e))
	}
	return s
}

// pseudoRandom is n reproducible pseudo-random bytes.
func pseudoRandom(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func putFile(t testing.TB, path string, data []byte, perm os.FileMode) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, data, perm))
}

func fileBytes(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// requireContent compares a file's bytes with want without dumping megabytes
// into the failure message.
func requireContent(t testing.TB, path string, want []byte) {
	t.Helper()
	got := fileBytes(t, path)
	requireSameBytes(t, want, got, path)
}

func requireSameBytes(t testing.TB, want, got []byte, what string) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	if len(want) != len(got) {
		t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("%s: first difference at offset %d: got %#x, want %#x", what, i, got[i], want[i])
		}
	}
}

func lstatOf(t testing.TB, path string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Lstat(path, &st), "lstat %s", path)
	return st
}

func fstatOf(t testing.TB, f *os.File) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(int(f.Fd()), &st))
	return st
}

// dropCache evicts a file's pages from the kernel page cache so that the next
// read is answered by the filesystem, not by pages the kernel kept.
func dropCache(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
}

// rawDirent is one linux_dirent64 record as getdents64 returns it.
type rawDirent struct {
	Ino  uint64
	Off  int64
	Type uint8
	Name string
}

// getdents lists dir with raw getdents64 calls of bufSize bytes each, so
// "." and ".." are seen as the kernel reports them and a small buffer makes
// the filesystem resume from its own offsets many times.
func getdents(t testing.TB, dir string, bufSize int) []rawDirent {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	var out []rawDirent
	buf := make([]byte, bufSize)
	for {
		n, err := unix.Getdents(fd, buf)
		require.NoError(t, err, "getdents %s", dir)
		if n == 0 {
			return out
		}
		for b := buf[:n]; len(b) > 0; {
			reclen := int(endian.NativeEndian.Uint16(b[16:18]))
			require.Greater(t, reclen, 19, "bad rawDirent record length")
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			out = append(out, rawDirent{
				Ino:  endian.NativeEndian.Uint64(b[0:8]),
				Off:  int64(endian.NativeEndian.Uint64(b[8:16])),
				Type: b[18],
				Name: string(name),
			})
			b = b[reclen:]
		}
	}
}

// direntNames is the set of names in ds without "." and "..", failing on a
// name listed twice.
func direntNames(t testing.TB, ds []rawDirent) map[string]rawDirent {
	t.Helper()
	m := map[string]rawDirent{}
	for _, d := range ds {
		if d.Name == "." || d.Name == ".." {
			continue
		}
		_, dup := m[d.Name]
		require.False(t, dup, "readdir listed %q twice", d.Name)
		m[d.Name] = d
	}
	return m
}

// unsealedCount reads .statefs/status.json and returns its "unsealed" count.
func unsealedCount(t testing.TB, m *Mount) int {
	t.Helper()
	raw, err := os.ReadFile(m.Path(".statefs", "status.json"))
	require.NoError(t, err, "reading .statefs/status.json")
	var status map[string]any
	require.NoError(t, json.Unmarshal(raw, &status), "status.json: %s", raw)
	n, ok := status["unsealed"].(float64)
	require.True(t, ok, `status.json has no numeric "unsealed": %s`, raw)
	return int(n)
}

// waitAllSealed polls status.json until no file waits to be sealed.
func waitAllSealed(t testing.TB, m *Mount) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		n := unsealedCount(t, m)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d files still unsealed after 60s\n%s", n, m.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mountSuperOptions is the super-block option field of dir's entry in
// /proc/self/mountinfo (for FUSE: user_id=0,group_id=0,default_permissions,...).
func mountSuperOptions(t testing.TB, dir string) string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	require.NoError(t, err)
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 || fields[4] != dir {
			continue
		}
		for i, f := range fields {
			if f == "-" && i+3 < len(fields) {
				return fields[i+3]
			}
		}
	}
	t.Fatalf("%s not in /proc/self/mountinfo", dir)
	return ""
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
