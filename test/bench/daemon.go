package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/statefs/statefs/internal/testenv"
)

// daemon is one running FUSE server process (statefs or the loopback)
// serving mnt. Its output goes to a log file in the work dir.
type daemon struct {
	cmd  *exec.Cmd
	mnt  string
	log  string
	done chan error
}

// startDaemon runs bin with args and waits until ready reports true,
// polling every millisecond, so the wait measures when the mount serves to
// within that. The daemon gets SIGTERM if the harness dies, and unmounts.
func startDaemon(bin string, args []string, mnt, logPath string, ready func() bool) (*daemon, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	d := &daemon{cmd: exec.Command(bin, args...), mnt: mnt, log: logPath, done: make(chan error, 1)}
	d.cmd.Stdout, d.cmd.Stderr = logFile, logFile
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { d.done <- d.cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for !ready() {
		select {
		case err := <-d.done:
			return nil, fmt.Errorf("%s exited before serving %s: %v\n%s", bin, mnt, err, d.tail())
		default:
		}
		if time.Now().After(deadline) {
			d.kill()
			return nil, fmt.Errorf("%s did not serve %s within 60s\n%s", bin, mnt, d.tail())
		}
		time.Sleep(time.Millisecond)
	}
	return d, nil
}

// Stop sends SIGTERM and waits for the daemon to unmount and exit 0.
func (d *daemon) Stop() error {
	d.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-d.done:
	case <-time.After(time.Minute):
		d.kill()
		err = errors.New("did not exit within a minute of SIGTERM")
	}
	if isMounted(d.mnt) {
		syscall.Unmount(d.mnt, syscall.MNT_DETACH)
		err = errors.Join(err, errors.New("left its mount behind"))
	}
	if err != nil {
		return fmt.Errorf("stopping %s on %s: %w\n%s", d.cmd.Path, d.mnt, err, d.tail())
	}
	return nil
}

// kill ends a daemon that does not stop by itself: SIGKILL, then a forced
// unmount. The forced unmount aborts the FUSE connection, which is the only
// way out for a daemon one of whose threads waits for an answer from its
// own mount (say, closing a file on it while exiting).
func (d *daemon) kill() {
	d.cmd.Process.Kill()
	syscall.Unmount(d.mnt, syscall.MNT_FORCE)
	syscall.Unmount(d.mnt, syscall.MNT_DETACH)
	<-d.done
}

// server is the process that serves the mount: the daemon's child when it
// has one (statefs mount is a keeper that holds the FUSE connection and
// runs its server as a child), else the daemon itself (the loopback, or
// statefs mount --keeper=false). Between a server's death and its
// successor's start, the daemon has no child and this is the keeper.
func (d *daemon) server() int {
	if pid, ok := testenv.ChildOf(d.cmd.Process.Pid); ok {
		return pid
	}
	return d.cmd.Process.Pid
}

// PeakRSS is the high-water resident set size (VmHWM) of the process that
// serves the mount, in bytes; a keeper's own is apart (KeeperPeakRSS).
func (d *daemon) PeakRSS() (int64, error) {
	return procStatusBytes(d.server(), "VmHWM")
}

// KeeperPeakRSS is VmHWM of the process the harness started, in bytes: for
// statefs, the keeper, which holds the connection and serves nothing.
func (d *daemon) KeeperPeakRSS() (int64, error) {
	return procStatusBytes(d.cmd.Process.Pid, "VmHWM")
}

// CPUSeconds is the CPU time the serving process has used so far, user
// and system (utime and stime of /proc/<pid>/stat). It must be read while
// it runs: once it is reaped, /proc forgets it.
func (d *daemon) CPUSeconds() (float64, error) {
	return procCPUSeconds(d.server())
}

// clockTicks is the unit of the times in /proc/<pid>/stat: USER_HZ, which
// Linux fixes at 100 for user space whatever the kernel's own tick rate.
const clockTicks = 100

// procCPUSeconds reads utime and stime of /proc/<pid>/stat: fields 14 and
// 15, counted after the command name, which is in parentheses and may hold
// spaces.
func procCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(b[i+1:])) // from field 3, the state
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(fields))
	}
	var ticks [2]int64
	for j, f := range fields[11:13] {
		if ticks[j], err = strconv.ParseInt(f, 10, 64); err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	return float64(ticks[0]+ticks[1]) / clockTicks, nil
}

// procStatusBytes reads a "kB" field of /proc/<pid>/status.
func procStatusBytes(pid int, field string) (int64, error) {
	for _, line := range lines(fmt.Sprintf("/proc/%d/status", pid)) {
		var kib int64
		if _, err := fmt.Sscanf(line, field+": %d kB", &kib); err == nil {
			return kib << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// logContains reports whether the daemon's log holds s.
func logContains(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

// tail is the end of the daemon's log, for error messages.
func (d *daemon) tail() string {
	b, _ := os.ReadFile(d.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// isMounted reports whether dir is a FUSE mountpoint.
func isMounted(dir string) bool {
	for _, line := range lines("/proc/self/mountinfo") {
		mnt, _, fstype, ok := parseMountinfo(line)
		if ok && mnt == dir && strings.HasPrefix(fstype, "fuse") {
			return true
		}
	}
	return false
}

// detachStale unmounts every FUSE mount left under dir by a run that died,
// so the work dir can be cleaned.
func detachStale(dir string) {
	for _, line := range lines("/proc/self/mountinfo") {
		mnt, _, fstype, ok := parseMountinfo(line)
		if ok && strings.HasPrefix(fstype, "fuse") && within(mnt, dir) {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	}
}
