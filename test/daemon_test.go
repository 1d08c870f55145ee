package test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A daemon killed without unmounting leaves a dead mount (ENOTCONN) on its
// mountpoint; the next daemon detaches it and serves there, as a restarted
// container must.
func TestMountOverDeadMount(t *testing.T) {
	m := mountFS(t)
	data := []byte("written before the kill")
	writeSynced(t, m.Path("f"), data)
	if _, err := os.Stat(m.Dir); err != nil { // the kernel caches the root's attributes
		t.Fatal(err)
	}
	m.kill()
	var st unix.Statfs_t
	if err := unix.Statfs(m.Dir, &st); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("statfs of the dead mount: %v, want ENOTCONN", err)
	}
	m.Start() // at once: a stat of the root may still succeed from the cache
	requireContent(t, m.Path("f"), data)
}

// A second daemon on a live mount is refused in one line that says what
// is there, and the first one serves on.
func TestMountOverLiveMount(t *testing.T) {
	m := mountFS(t)
	writeSynced(t, m.Path("f"), []byte("served"))
	other := filepath.Join(t.TempDir(), "store")
	r := runCLI(t, time.Minute, "mount", "--store", other, m.Dir)
	requireOneLineError(t, r, "already a FUSE mount")
	requireContent(t, m.Path("f"), []byte("served"))
}

// SIGTERM stops a daemon whose mount is bound elsewhere (a CSI volume)
// within its grace: the bind goes stale instead of keeping the daemon
// serving it for ever, and the next daemon serves the mountpoint again.
func TestStopWithBinds(t *testing.T) {
	m := mountFS(t)
	data := []byte("seen through the bind")
	writeSynced(t, m.Path("f"), data)
	bind := t.TempDir()
	if err := unix.Mount(m.Dir, bind, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(bind, unix.MNT_DETACH) })
	requireContent(t, filepath.Join(bind, "f"), data)
	start := time.Now()
	m.Unmount() // fails the test unless the daemon exits 0 within 30 s
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the daemon took %v to stop", took)
	}
	if _, err := os.Stat(filepath.Join(bind, "f")); !errors.Is(err, syscall.ENOTCONN) {
		t.Errorf("stat through the bind after the daemon stopped: %v, want ENOTCONN", err)
	}
	m.Start()
	requireContent(t, m.Path("f"), data)
}
