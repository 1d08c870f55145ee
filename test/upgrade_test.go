package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// previousBinary is statefs built from the commit before HEAD, the binary
// the tests of an upgrade start from, built from git once per test binary
// into the directory TestMain removes. The binary under test is the
// working tree's: in a tree with changes not committed, the upgrade is
// from HEAD~1 to those. A shallow clone is deepened by one commit first. Its sources go to the same
// directory every time (one build at a time holds a lock on it), so that
// go's build cache, which keys a package by its directory, serves every
// package the two commits share.
var previousBinary = sync.OnceValues(func() (string, error) {
	rev, err := exec.Command("git", "-C", "..", "rev-parse", "--verify", "--quiet", "HEAD~1").Output()
	if err != nil {
		exec.Command("git", "-C", "..", "fetch", "--quiet", "--deepen=1").Run()
		rev, err = exec.Command("git", "-C", "..", "rev-parse", "--verify", "--quiet", "HEAD~1").Output()
	}
	if err != nil {
		return "", fmt.Errorf("the repository has no commit before HEAD, even after git fetch --deepen=1 (a shallow clone without its remote?): the upgrade tests build statefs of HEAD~1")
	}
	src := filepath.Join(os.TempDir(), "statefs-test-previous")
	lock, err := os.OpenFile(src+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", err
	}
	if err := os.RemoveAll(src); err != nil {
		return "", err
	}
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("sh", "-c", `git -C .. archive "$0" | tar -x -C "$1"`, strings.TrimSpace(string(rev)), src)
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive of %s: %w\n%s", rev, err, out)
	}
	bin := filepath.Join(filepath.Dir(binary), "statefs-previous")
	build := exec.Command("go", "build", "-o", bin, "./cmd/statefs")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building statefs of %s: %w\n%s", rev, err, out)
	}
	return bin, nil
})

func previous(t *testing.T) string {
	t.Helper()
	start := time.Now()
	bin, err := previousBinary()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("statefs of the previous commit: %v to build", time.Since(start).Round(time.Millisecond))
	return bin
}

// upgradeLoad is what clients do across an upgrade: a writer that appends
// to a file it keeps open and fsyncs each record, loops of names, and a
// loop that stats a file written before.
type upgradeLoad struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	errs     []error
	appended appendLog
	stats    atomic.Int64
}

func startUpgradeLoad(t *testing.T, m *Mount) *upgradeLoad {
	t.Helper()
	writeSynced(t, m.Path("before"), []byte("written before the upgrade"))
	ctx, cancel := context.WithCancel(context.Background())
	l := &upgradeLoad{cancel: cancel}
	run := func(name string, load func(ctx context.Context) error) {
		l.wg.Go(func() {
			if err := load(ctx); err != nil {
				l.mu.Lock()
				l.errs = append(l.errs, fmt.Errorf("%s: %w", name, err))
				l.mu.Unlock()
			}
		})
	}
	run("appender", func(ctx context.Context) error { return l.appended.run(ctx, m.Path("append.log")) })
	run("names", func(ctx context.Context) error { return nameLoop(ctx, m.Path("names")) })
	run("stat", func(ctx context.Context) error {
		for ctx.Err() == nil {
			if _, err := os.Stat(m.Path("before")); err != nil {
				return err
			}
			l.stats.Add(1)
		}
		return nil
	})
	l.waitProgress(t, "the load to start")
	return l
}

// acked is how many records the appender's fsyncs acknowledged.
func (l *upgradeLoad) acked() int {
	l.appended.mu.Lock()
	defer l.appended.mu.Unlock()
	return l.appended.acked
}

// waitProgress waits until the appender has fsynced and the stat loop
// stated 20 more times each.
func (l *upgradeLoad) waitProgress(t *testing.T, what string) {
	t.Helper()
	acked, stats := l.acked(), l.stats.Load()
	for deadline := time.Now().Add(20 * time.Second); l.acked() < acked+20 || l.stats.Load() < stats+20; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s in vain for %s: %d records fsynced, %d stats", what, l.acked()-acked, l.stats.Load()-stats)
		}
	}
}

// check stops the load: every call of every client succeeded, and the
// append log holds every record an fsync acknowledged.
func (l *upgradeLoad) check(t *testing.T, m *Mount) {
	t.Helper()
	l.cancel()
	l.wg.Wait()
	for _, err := range l.errs {
		t.Error(err)
	}
	got, err := os.ReadFile(m.Path("append.log"))
	if want := l.appended.content(); err != nil || string(got) != string(want) {
		t.Errorf("append.log: %d bytes (%v), want the %d fsync'd ones exactly", len(got), err, len(want))
	}
	requireContent(t, m.Path("before"), []byte("written before the upgrade"))
}

// requireExecutable fails unless process pid runs the file at path.
func requireExecutable(t *testing.T, pid int, path, what string) {
	t.Helper()
	running, err := os.Stat(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(running, want) {
		t.Errorf("%s (pid %d) does not run %s", what, pid, path)
	}
}

// TestUpgradeFromThePreviousCommit upgrades a mount served by statefs of
// the previous commit to this one's, under load, both ways: a new
// `statefs mount` takes the connection over, and SIGHUP makes the keeper
// execute its binary, replaced in place, again. No client sees an error,
// the file kept open for writing takes fsync'd appends before and after,
// the server runs the new binary, and the store is clean at the end
// (fsck --verify).
//
// The commit that changes the hand-over version or the connection layout
// upgrades from none: there the old keeper refuses both ways in one line,
// and serves on.
func TestUpgradeFromThePreviousCommit(t *testing.T) {
	old := previous(t)
	if changed := versionsChanged(t); changed != "" {
		t.Logf("%s since the previous commit: an upgrade from it is refused", changed)
		m := startMount(&Mount{t: t, Binary: old, Store: filepath.Join(t.TempDir(), "store")})
		r := runCLI(t, 30*time.Second, "mount", "--store", m.Store, m.Dir)
		requireOneLineError(t, r, "refused the take-over")
		exe := filepath.Join(t.TempDir(), "statefs")
		copyExecutable(t, old, exe)
		h := startMount(&Mount{t: t, Binary: exe, Store: filepath.Join(t.TempDir(), "store")})
		copyExecutable(t, binary, exe+".new")
		if err := os.Rename(exe+".new", exe); err != nil {
			t.Fatal(err)
		}
		if err := h.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitLogLine(t, h, 20*time.Second, "SIGHUP: not executing the keeper's binary again; serving on")
		writeSynced(t, h.Path("after"), []byte("served on"))
		writeSynced(t, m.Path("after"), []byte("served on"))
		return
	}

	t.Run("take-over", func(t *testing.T) {
		m := startMount(&Mount{t: t, Binary: old, Store: filepath.Join(t.TempDir(), "store")})
		load := startUpgradeLoad(t, m)
		taker := &Mount{t: t, Store: m.Store, Dir: m.Dir}
		taker.Start()
		t.Cleanup(func() {
			if taker.cmd != nil {
				taker.Unmount()
			}
		})
		waitLogLine(t, taker, 20*time.Second, "took the FUSE connection over from its keeper", fmt.Sprintf("from_pid=%d", m.cmd.Process.Pid), "generation=2")
		waitLogLine(t, taker, 20*time.Second, "resumed the FUSE connection", "generation=2")
		waitLogLine(t, m, 20*time.Second, "handed the FUSE connection over", fmt.Sprintf("to_pid=%d", taker.cmd.Process.Pid))
		load.waitProgress(t, "the load after the take-over")
		requireExecutable(t, taker.ServerPID(), binary, "the server after the take-over")
		load.check(t, m)
		if err := m.terminate(20 * time.Second); err != nil {
			t.Errorf("the old keeper after SIGTERM: %v\n%s", err, m.Log())
		}
		if !isMounted(m.Dir) {
			t.Fatalf("%s is not mounted after the old keeper exited", m.Dir)
		}
		requireContent(t, m.Path("before"), []byte("written before the upgrade"))
	})

	t.Run("SIGHUP", func(t *testing.T) {
		exe := filepath.Join(t.TempDir(), "statefs")
		copyExecutable(t, old, exe)
		m := startMount(&Mount{t: t, Binary: exe, Store: filepath.Join(t.TempDir(), "store")})
		load := startUpgradeLoad(t, m)
		copyExecutable(t, binary, exe+".new")
		if err := os.Rename(exe+".new", exe); err != nil {
			t.Fatal(err)
		}
		if err := m.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitLogLine(t, m, 20*time.Second, "took the FUSE connection over from its keeper", fmt.Sprintf("from_pid=%d", m.cmd.Process.Pid), "generation=2")
		waitLogLine(t, m, 20*time.Second, "resumed the FUSE connection", "generation=2")
		load.waitProgress(t, "the load after the keeper's exec")
		requireExecutable(t, m.cmd.Process.Pid, exe, "the keeper after SIGHUP")
		requireExecutable(t, m.ServerPID(), exe, "the server after SIGHUP")
		load.check(t, m)
	})
}

// versionsChanged names what of keeper's hand-over version and fs's
// connection layout differs between the previous commit and this tree, ""
// if neither does.
func versionsChanged(t *testing.T) string {
	t.Helper()
	var changed []string
	for _, v := range []struct{ decl, dir string }{{"const handoverVersion =", "keeper"}, {"const ConnectionLayout =", "fs"}} {
		was, err := exec.Command("git", "-C", "..", "grep", "-h", "-F", "-e", v.decl, "HEAD~1", "--", v.dir).Output()
		if err != nil {
			t.Fatalf("git grep %q in HEAD~1: %v", v.decl, err)
		}
		is, err := exec.Command("git", "-C", "..", "grep", "-h", "-F", "-e", v.decl, "--", v.dir).Output()
		if err != nil {
			t.Fatalf("git grep %q: %v", v.decl, err)
		}
		if string(was) != string(is) {
			changed = append(changed, strings.TrimSpace(string(is)))
		}
	}
	return strings.Join(changed, ", ")
}

// copyExecutable copies the executable from to a new file to.
func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
}
