package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/internal/storetest"
)

// The security properties of the daemon, its mount and its store, one per
// test: each fails without the property it names.

// nobody is the unprivileged user the tests act as.
const nobody = 65534

// The tests run system calls as another user in a child: the test binary,
// copied where that user can run it, re-executed with asUserEnv set; init
// runs the calls (one per line of the variable: OP PATH [ARG]) and prints
// one result per line, "ok" or the errno's number, before TestMain runs.
const asUserEnv = "STATEFS_SECURITY_AS_USER"

func init() {
	ops := os.Getenv(asUserEnv)
	if ops == "" {
		return
	}
	for _, line := range strings.Split(ops, "\n") {
		fmt.Println(childOp(strings.Fields(line)))
	}
	os.Exit(0)
}

// childOp runs one call and says how it ended.
func childOp(f []string) string {
	arg := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	p := arg(1)
	var err error
	switch f[0] {
	case "read":
		_, err = os.ReadFile(p)
	case "write": // a byte at the end, without O_TRUNC
		var fd int
		if fd, err = unix.Open(p, unix.O_WRONLY|unix.O_APPEND, 0); err == nil {
			_, err = unix.Write(fd, []byte("x"))
			unix.Close(fd)
		}
	case "truncate":
		err = unix.Truncate(p, 1)
	case "create":
		var fd int
		if fd, err = unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644); err == nil {
			unix.Close(fd)
		}
	case "unlink":
		err = unix.Unlink(p)
	case "mkdir":
		err = unix.Mkdir(p, 0o755)
	case "rmdir":
		err = unix.Rmdir(p)
	case "readdir":
		_, err = os.ReadDir(p)
	case "stat":
		var st unix.Stat_t
		err = unix.Stat(p, &st)
	case "rename":
		err = unix.Rename(p, arg(2))
	case "chmod":
		err = unix.Chmod(p, 0o777)
	case "chown":
		err = unix.Chown(p, nobody, nobody)
	case "chownto", "lchownto", "fchownto": // PATH UID GID, -1 leaves one as it is
		uid, _ := strconv.Atoi(arg(2))
		gid, _ := strconv.Atoi(arg(3))
		switch f[0] {
		case "chownto":
			err = unix.Chown(p, uid, gid)
		case "lchownto":
			err = unix.Lchown(p, uid, gid)
		default:
			var fd int
			if fd, err = unix.Open(p, unix.O_RDONLY, 0); err == nil {
				err = unix.Fchown(fd, uid, gid)
				unix.Close(fd)
			}
		}
	case "utimes": // to a time of our choosing: only the owner may
		ts := []unix.Timespec{{Sec: 1}, {Sec: 1}}
		err = unix.UtimesNano(p, ts)
	case "touch": // to now: whoever may write may
		err = unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}, 0)
	case "setxattr":
		err = unix.Setxattr(p, "user.statefs-test", []byte("v"), 0)
	case "api": // GET path on the control socket p
		return childAPI(p, arg(2))
	default:
		return "unknown op " + f[0]
	}
	return resultOf(err)
}

func resultOf(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if e, ok := err.(*os.PathError); ok {
		err = e.Err
	}
	if e, ok := err.(*os.SyscallError); ok {
		err = e.Err
	}
	if e, ok := err.(syscall.Errno); ok {
		errno = e
		return strconv.Itoa(int(errno))
	}
	return "error: " + strings.ReplaceAll(err.Error(), "\n", " ")
}

// childAPI asks the control socket at socket for path: "ok" for 200, the
// connect errno, or "refused: ..." when the daemon closes the connection.
func childAPI(socket, path string) string {
	c, err := net.Dial("unix", socket)
	if err != nil {
		if op, ok := err.(*net.OpError); ok {
			return resultOf(op.Err)
		}
		return resultOf(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: statefs\r\nConnection: close\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "refused: " + err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return "ok"
	}
	return "status " + strconv.Itoa(resp.StatusCode)
}

// asUser runs ops (one "OP PATH [ARG]" each) as uid and gid nobody, with no
// supplementary groups, and returns one result per op.
func asUser(t *testing.T, ops ...string) []string {
	t.Helper()
	return asUserIn(t, nil, ops...)
}

// asUserIn is asUser with supplementary groups.
func asUserIn(t *testing.T, groups []uint32, ops ...string) []string {
	t.Helper()
	exe := userExecutable(t)
	cmd := exec.Command(exe)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), asUserEnv+"="+strings.Join(ops, "\n"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: append([]uint32{}, groups...)}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child as uid %d: %s", nobody, out)
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, got, len(ops), "child output: %s", out)
	return got
}

// userExecutable is a copy of the test binary that nobody can run (the go
// tool builds it in a directory only root can enter), removed with the test.
func userExecutable(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	b, err := os.ReadFile(self)
	require.NoError(t, err)
	exe := filepath.Join(t.TempDir(), "statefs-test")
	require.NoError(t, os.WriteFile(exe, b, 0o755))
	openUp(t, exe)
	return exe
}

// openUp lets other users reach path by making the directories above it
// searchable (the test's temp directories are 0700).
func openUp(t *testing.T, path string) {
	t.Helper()
	for dir := filepath.Dir(path); dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		st := lstatOf(t, dir)
		if st.Mode&0o011 != 0o011 {
			require.NoError(t, os.Chmod(dir, os.FileMode(st.Mode&0o777|0o011)))
		}
	}
}

func errnoResult(e syscall.Errno) string { return strconv.Itoa(int(e)) }

// The control socket is 0600 and root's, and the daemon answers only root
// and its own user even when the mode would let others connect (a chmod by
// mistake, or the moment between the socket's creation and its chmod).
func TestSecurityControlSocket(t *testing.T) {
	m := mountFS(t)
	socket := filepath.Join(m.Store, control.SocketName)
	st := lstatOf(t, socket)
	require.Equal(t, uint32(unix.S_IFSOCK|0o600), st.Mode, "control socket mode %#o", st.Mode)
	require.Equal(t, uint32(0), st.Uid)

	// Let nobody reach the socket's directory: only the socket's own mode
	// stands in the way.
	openUp(t, socket)
	require.Equal(t, []string{errnoResult(syscall.EACCES)}, asUser(t, "api "+socket+" /jobs"), "nobody connected to the 0600 socket")

	require.NoError(t, os.Chmod(socket, 0o666))
	got := asUser(t, "api "+socket+" /jobs")
	require.True(t, strings.HasPrefix(got[0], "refused"), "nobody was answered on a 0666 socket: %s", got[0])
	waitLogLine(t, m, 20*time.Second, "refused a connection from another user")

	// Root still is.
	mustCLI(t, "jobs", "--store", m.Store)
}

// Every change inside .statefs fails with EROFS, for files, directories and
// the view's top alike, and nothing moves into or out of it.
func TestSecurityStatefsReadOnly(t *testing.T) {
	m := mountFS(t)
	chk := subtaskDir(holdAlloc, jobLive) + "/chk_1"
	putFileWithDirs(t, m.Path(chk, "_task_state_snapshot"), []byte("s"))
	putFile(t, m.Path("outside"), []byte("o"), 0o644)
	v := func(p ...string) string { return m.Path(append([]string{".statefs"}, p...)...) }
	jobDir := v("jobs", jobLive)
	_, err := os.Stat(jobDir)
	require.NoError(t, err, "the job's view")
	ts := []unix.Timespec{{Sec: 1}, {Sec: 1}}

	for _, tc := range []struct {
		name string
		err  error
		also []syscall.Errno // besides EROFS
	}{
		{"create in .statefs", unix.Mknod(v("new"), unix.S_IFREG|0o644, 0), nil},
		{"create in a job", os.WriteFile(filepath.Join(jobDir, "new"), nil, 0o644), nil},
		{"mkdir", unix.Mkdir(v("jobs", "new"), 0o755), nil},
		{"symlink", unix.Symlink("x", v("link")), nil},
		{"unlink", unix.Unlink(v("status.json")), nil},
		{"rmdir", unix.Rmdir(v("jobs")), nil},
		{"rmdir a job", unix.Rmdir(jobDir), nil},
		{"rename inside", unix.Rename(v("status.json"), v("s.json")), nil},
		{"rename out", unix.Rename(v("stats.json"), m.Path("stolen")), nil},
		{"rename in", unix.Rename(m.Path("outside"), v("outside")), nil},
		{"rename over", unix.Rename(m.Path("outside"), v("status.json")), nil},
		{"link in", unix.Link(m.Path("outside"), v("outside")), nil},
		{"link out", unix.Link(v("status.json"), m.Path("status-link")), []syscall.Errno{syscall.EPERM, syscall.EXDEV}},
		{"chmod", unix.Chmod(v("status.json"), 0o666), nil},
		{"chmod dir", unix.Chmod(v("jobs"), 0o777), nil},
		{"chown", unix.Chown(v("status.json"), nobody, nobody), nil},
		{"utimes", unix.UtimesNano(v("status.json"), ts), nil},
		{"truncate", unix.Truncate(v("status.json"), 0), nil},
		{"open for writing", func() error {
			fd, err := unix.Open(v("status.json"), unix.O_WRONLY, 0)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}(), nil},
		{"setxattr", unix.Setxattr(v("status.json"), "user.x", []byte("y"), 0), nil},
		{"setxattr dir", unix.Setxattr(jobDir, "user.x", []byte("y"), 0), nil},
		{"removexattr", unix.Removexattr(v("status.json"), "user.x"), []syscall.Errno{syscall.ENODATA}},
		{"rmdir the view", unix.Rmdir(v()), []syscall.Errno{syscall.EBUSY, syscall.EPERM}},
		{"rename the view", unix.Rename(v(), m.Path("view")), []syscall.Errno{syscall.EBUSY, syscall.EPERM}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, tc.err, "succeeded inside .statefs")
			requireSysErr(t, tc.err, append([]syscall.Errno{syscall.EROFS}, tc.also...)...)
		})
	}
	// Nothing moved.
	requireContent(t, m.Path("outside"), []byte("o"))
	for _, p := range []string{"stolen", "status-link", "view"} {
		requireAbsent(t, m.Path(p))
	}
	for _, p := range []string{v("status.json"), v("stats.json"), jobDir} {
		_, err := os.Stat(p)
		require.NoError(t, err)
	}
}

// apiCall sends one request to the daemon's control socket as root.
func apiCall(t *testing.T, m *Mount, method, path string, body []byte) (int, string) {
	t.Helper()
	client := socketClient(m)
	req, err := http.NewRequest(method, "http://statefs"+path, bytes.NewReader(body))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func socketClient(m *Mount) *http.Client {
	socket := filepath.Join(m.Store, control.SocketName)
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
}

// untouched is what describeTree must find unchanged in a directory outside
// the store and the mount: every entry's type, mode and size, and every
// file's content.
const untouched = factSize | factContent

// No argument of the CLI and no request on the control socket makes statefs
// act on a path outside its mount: '..', absolute paths elsewhere, and
// symlinks in the tree that point out are refused, the held tree stays
// held, and the directory they point at is untouched.
func TestSecurityPathsStayInside(t *testing.T) {
	m := mountFS(t, holdArgs...)
	outside := t.TempDir()
	putFile(t, filepath.Join(outside, "victim"), []byte("keep"), 0o644)
	require.NoError(t, os.Mkdir(filepath.Join(outside, "dir"), 0o755))
	before := describeTree(t, outside, untouched)

	writeCheckpoint(t, m, subtaskDir(holdAlloc, jobLive), 1, 1)
	waitAllSealed(t, m)
	require.NoError(t, os.RemoveAll(m.Path("tm_tm-1/localState/aid_"+holdAlloc)))
	hold := waitHolds(t, m, 1)[0].ID
	require.NoError(t, os.Symlink(outside, m.Path("tm_tm-1/escape")))
	relOutside, err := filepath.Rel(m.Dir, outside)
	require.NoError(t, err)

	for _, args := range [][]string{
		{"restore", hold, filepath.Join(outside, "new")},
		{"restore", hold, m.Dir + "/../" + filepath.Base(outside) + "/new"},
		{"restore", hold, m.Dir + "/" + relOutside + "/new"},
		{"restore", hold, "../escape"},
		{"restore", hold, relOutside + "/new"},
		{"restore", hold, "tm_tm-1/escape/new"},
		{"restore", hold, m.Path("tm_tm-1/escape/new")},
		{"restore", hold, m.Path("tm_tm-1/escape/dir/new")},
		{"restore", "../../" + hold, "tm_tm-1/escape/new"},
		{"inspect", "../" + filepath.Base(outside)},
		{"inspect", outside},
		{"inspect", "tm_tm-1/escape/victim"},
		{"inspect", "tm_tm-1/escape/../../victim"},
		{"du", "--by", "../job"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			full := append([]string{args[0], "--store", m.Store}, args[1:]...)
			if args[0] == "du" {
				full = append([]string{"du", "--store", m.Store}, args[1:]...)
			}
			r := runCLI(t, time.Minute, full...)
			require.NotZero(t, r.code, "statefs %q succeeded: %s%s", full, r.stdout, r.stderr)
			require.NotContains(t, r.stdout+r.stderr, "panic")
		})
	}
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/restore", `{"hold":"` + hold + `","dest":"../../` + filepath.Base(outside) + `"}`},
		{"POST", "/restore", `{"hold":"` + hold + `","dest":"` + outside + `/new"}`},
		{"POST", "/restore", `{"hold":"` + hold + `","dest":"tm_tm-1/escape/new"}`},
		{"GET", "/inspect?path=" + outside, ""},
		{"GET", "/inspect?path=..%2F..%2Fetc", ""},
		{"GET", "/inspect?path=tm_tm-1%2Fescape%2Fvictim", ""},
	} {
		code, body := apiCall(t, m, req.method, req.path, []byte(req.body))
		require.True(t, code >= 400 && code < 500, "%s %s %s: %d %s", req.method, req.path, req.body, code, body)
	}
	require.Len(t, holds(t, m), 1, "the held tree left the attic")
	require.Equal(t, before, describeTree(t, outside, untouched), "the directory outside changed")
	m.Unmount()
	mustCLI(t, "fsck", "--store", m.Store)
}

// A symlink planted inside the store never takes statefs outside it: the
// daemon refuses a store whose lock file, index, chunk or staging directory
// (or a chunk fan-out directory) is a symlink, instead of truncating the
// file it points at or removing what the directory holds as stale staging
// files; a chunk file that is a symlink reads as corrupt (EIO), never as
// the target's bytes.
func TestSecurityStoreSymlinks(t *testing.T) {
	storetest.LeaveDamaged(t, "it makes a chunk a symlink")
	m := mountFS(t, "--seal-delay", "0", "--seal-as", "chunks")
	content := pseudoRandom(100<<10, 7) // one chunk, not inline
	putFile(t, m.Path("f"), content, 0o644)
	waitAllSealed(t, m)
	m.Unmount()

	outside := t.TempDir()
	putFile(t, filepath.Join(outside, "victim"), []byte("keep"), 0o644)
	putFile(t, filepath.Join(outside, ".tmp-victim"), []byte("keep"), 0o644)
	putFile(t, filepath.Join(outside, "0000000000000005"), []byte("keep"), 0o644)
	before := describeTree(t, outside, untouched)

	for _, name := range []string{"LOCK", "index", "chunks", "staging", "staging/05", "chunks/ab"} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(m.Store, name)
			target := outside
			if name == "LOCK" {
				target = filepath.Join(outside, "victim")
			}
			require.NoError(t, os.Rename(p, p+".moved"))
			require.NoError(t, os.Symlink(target, p))
			r := runCLI(t, 30*time.Second, "mount", "--store", m.Store, m.Dir)
			if r.code == 0 && !r.timedOut {
				t.Errorf("mount served a store whose %s is a symlink", name)
			}
			if r.timedOut || isMounted(m.Dir) {
				syscall.Unmount(m.Dir, syscall.MNT_DETACH)
			}
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Rename(p+".moved", p))
			require.Equal(t, before, describeTree(t, outside, untouched), "the store's %s symlink let statefs change what it points at", name)
		})
	}

	h := cas.Sum(content).String()
	chunk := filepath.Join(m.Store, "chunks", h[:2], h)
	require.NoError(t, os.Remove(chunk))
	require.NoError(t, os.Symlink(filepath.Join(outside, "victim"), chunk))
	m.Start()
	_, err := os.ReadFile(m.Path("f"))
	requireSysErr(t, err, syscall.EIO)
	m.Unmount()
	require.Equal(t, before, describeTree(t, outside, untouched))
}

// On an --allow-other mount another user gets exactly what the modes say
// (default_permissions): reading, writing, truncating, listing, creating
// and removing in files and directories of each mode, the sticky bit, and
// the owner-only changes (chmod, chown, setting times).
func TestSecurityAllowOther(t *testing.T) {
	m := mountFS(t, "--allow-other")
	openUp(t, m.Path("x"))
	for _, f := range []struct {
		path string
		mode os.FileMode
		dir  bool
	}{
		{"d700", 0o700, true}, {"d755", 0o755, true}, {"d777", 0o777, true}, {"d1777", 0o1777 | os.ModeSticky, true},
		{"f600", 0o600, false}, {"f644", 0o644, false}, {"f666", 0o666, false}, {"f755", 0o755, false},
		{"d700/f", 0o644, false}, {"d755/f", 0o644, false}, {"d777/f", 0o644, false}, {"d1777/f", 0o666, false},
	} {
		if f.dir {
			require.NoError(t, os.Mkdir(m.Path(f.path), 0o700))
		} else {
			putFile(t, m.Path(f.path), []byte("root's"), 0o600)
		}
		require.NoError(t, os.Chmod(m.Path(f.path), f.mode))
	}
	ok, eacces, eperm := "ok", errnoResult(syscall.EACCES), errnoResult(syscall.EPERM)
	cases := []struct{ op, want string }{
		{"read f600", eacces},
		{"read f644", ok},
		{"read f755", ok},
		{"write f644", eacces},
		{"write f755", eacces},
		{"write f666", ok},
		{"truncate f644", eacces},
		{"truncate f666", ok},
		{"touch f644", eacces},
		{"touch f666", ok},
		{"utimes f666", eperm},
		{"chmod f666", eperm},
		{"chown f666", eperm},
		{"setxattr f644", eacces},
		{"setxattr f666", ok},
		{"readdir d700", eacces},
		{"stat d700/f", eacces},
		{"read d700/f", eacces},
		{"readdir d755", ok},
		{"read d755/f", ok},
		{"create d755/new", eacces},
		{"unlink d755/f", eacces},
		{"mkdir d755/new", eacces},
		{"rename d755/f d777/moved", eacces},
		{"create new-in-root", eacces},
		{"unlink f644", eacces},
		{"rmdir d755", eacces},
		{"create d777/mine", ok},
		{"unlink d777/f", ok},
		{"rename d777/mine d777/mine2", ok},
		{"create d1777/mine", ok},
		{"unlink d1777/f", eperm},
		{"rename d1777/f d1777/g", eperm},
		{"unlink d1777/mine", ok},
	}
	var ops, want []string
	for _, c := range cases {
		f := strings.Fields(c.op)
		for i := 1; i < len(f); i++ {
			f[i] = m.Path(f[i])
		}
		ops = append(ops, strings.Join(f, " "))
		want = append(want, c.want)
	}
	got := asUser(t, ops...)
	for i, c := range cases {
		require.Equal(t, want[i], got[i], "as uid %d: %s", nobody, c.op)
	}
	// What they did is theirs; what they could not do did not happen.
	st := lstatOf(t, m.Path("d777", "mine2"))
	require.Equal(t, uint32(nobody), st.Uid)
	require.Equal(t, uint32(nobody), st.Gid)
	requireContent(t, m.Path("f644"), []byte("root's"))
	requireContent(t, m.Path("f666"), []byte("r")) // written to, then truncated to 1 byte
	requireAbsent(t, m.Path("d777", "f"))
	requireContent(t, m.Path("d1777", "f"), []byte("root's"))
}

// The control API bounds what a client can make the daemon do: a body over
// the limit gets 413 and changes nothing, and a crowd of concurrent
// requests and idle half-open connections neither wedges the daemon nor
// its filesystem.
func TestSecurityControlLimits(t *testing.T) {
	m := mountFS(t)
	chk := subtaskDir(holdAlloc, jobLive) + "/chk_1"
	putFileWithDirs(t, m.Path(chk, "f"), []byte("x"))

	big := `{"job":"` + jobLive + `","verdict":"gone","pad":"` + strings.Repeat("x", 1<<20) + `"}`
	code, body := apiCall(t, m, "POST", "/job", []byte(big))
	require.Equal(t, http.StatusRequestEntityTooLarge, code, body)
	var jobs []struct {
		Operator string `json:"operator"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustCLI(t, "jobs", "--store", m.Store, "--json")), &jobs))
	require.Len(t, jobs, 1)
	require.Empty(t, jobs[0].Operator, "an oversized request changed the job")

	// Half-open connections: a request line and no more.
	var idle []net.Conn
	for range 50 {
		c, err := net.Dial("unix", filepath.Join(m.Store, control.SocketName))
		require.NoError(t, err)
		fmt.Fprintf(c, "POST /job HTTP/1.1\r\nHost: statefs\r\nContent-Length: 1000\r\n\r\n{")
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	client := socketClient(m)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := []string{"/du?by=job", "/jobs", "/holds", "/inspect?path=tm_tm-1"}[i%4]
			resp, err := client.Get("http://statefs" + path)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				codes[-1]++
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[resp.StatusCode]++
		}()
	}
	wg.Wait()
	t.Logf("answers to 200 concurrent requests: %v", codes)
	require.Zero(t, codes[-1], "requests failed: %v", codes)
	require.NotZero(t, codes[http.StatusOK], "no request was served: half-open connections hold the slots? %v", codes)
	for c := range codes {
		require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, c, "answers: %v", codes)
	}
	// Still serving: the API and the filesystem.
	code, body = apiCall(t, m, "GET", "/jobs", nil)
	require.Equal(t, http.StatusOK, code, body)
	putFile(t, m.Path("after"), []byte("still writable"), 0o644)
	requireContent(t, m.Path("after"), []byte("still writable"))
}
