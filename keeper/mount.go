package keeper

import (
	"bufio"
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// conn is the keeper's FUSE connection: the /dev/fuse fd it holds and the
// mount that fd serves.
type conn struct {
	mountpoint string
	fuse       *os.File // blocking: a server reads it, the keeper never does
	dev        uint64   // the mount's device number, which names the connection in fusectl
	unmounted  sync.Once
	unmountErr error
}

// mount opens /dev/fuse and mounts it on mnt as go-fuse's DirectMount does
// (fuse/mount_linux.go, mountDirect): the same source, type, flags and
// options, so that a server given the fd serves what go-fuse would have
// mounted itself.
func mount(mnt string, o *fuse.MountOptions) (*conn, error) {
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil {
		return nil, err
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	source, fstype, flags, data := mountArgs(o)
	data = append([]string{fmt.Sprintf("fd=%d", fd), fmt.Sprintf("rootmode=%o", st.Mode&unix.S_IFMT)}, data...)
	if err := unix.Mount(source, mnt, fstype, flags, strings.Join(data, ",")); err != nil {
		unix.Close(fd)
		return nil, err
	}
	c := &conn{mountpoint: mnt, fuse: os.NewFile(uintptr(fd), "/dev/fuse")}
	// The mount's root cannot be stat'ed before a server serves it: its
	// device number comes from the mount table.
	if c.dev, err = deviceOf(mnt); err != nil {
		c.unmount()
		c.close()
		return nil, err
	}
	return c, nil
}

// mountArgs are the arguments mount(2) is given for o, but for the fd and
// the root's mode.
func mountArgs(o *fuse.MountOptions) (source, fstype string, flags uintptr, data []string) {
	flags = unix.MS_NOSUID | unix.MS_NODEV
	if o.DirectMountFlags != 0 {
		flags = o.DirectMountFlags
	}
	data = []string{
		fmt.Sprintf("user_id=%d", unix.Geteuid()),
		fmt.Sprintf("group_id=%d", unix.Getegid()),
		fmt.Sprintf("max_read=%d", o.MaxWrite),
	}
	// The kernel takes [no]dev, [no]suid and [no]exec as flags only.
	bits := map[string]struct {
		set bool
		bit uintptr
	}{
		"nodev": {true, unix.MS_NODEV}, "dev": {false, unix.MS_NODEV},
		"nosuid": {true, unix.MS_NOSUID}, "suid": {false, unix.MS_NOSUID},
		"noexec": {true, unix.MS_NOEXEC}, "exec": {false, unix.MS_NOEXEC},
	}
	for _, opt := range o.Options {
		b, ok := bits[opt]
		switch {
		case !ok:
			data = append(data, opt)
		case b.set:
			flags |= b.bit
		default:
			flags &^= b.bit
		}
	}
	if o.AllowOther {
		data = append(data, "allow_other")
	}
	if o.IDMappedMount && !slices.Contains(o.Options, "default_permissions") {
		data = append(data, "default_permissions")
	}
	return cmp.Or(o.FsName, o.Name), "fuse." + o.Name, flags, data
}

// shape is what of o shapes the connection, by name: the arguments
// mount(2) is given, and the options go-fuse makes its answer to the
// kernel's INIT from (fuse/opcode.go, doInit). Every server of a
// connection must negotiate the same INIT reply, so a keeper hands its
// connection over only to one of the same shape.
func shape(o *fuse.MountOptions) map[string]string {
	source, fstype, flags, data := mountArgs(o)
	s := map[string]string{"source": source, "type": fstype}
	for _, f := range []struct {
		name string
		bit  uintptr
	}{{"nosuid", unix.MS_NOSUID}, {"nodev", unix.MS_NODEV}, {"noexec", unix.MS_NOEXEC}, {"ro", unix.MS_RDONLY}} {
		if flags&f.bit != 0 {
			s[f.name] = ""
			flags &^= f.bit
		}
	}
	if flags != 0 {
		s["flags"] = fmt.Sprintf("%#x", flags)
	}
	for _, d := range data {
		name, value, _ := strings.Cut(d, "=")
		s[name] = value
	}
	for name, v := range map[string]any{
		"max_readahead": o.MaxReadAhead, "max_background": o.MaxBackground,
		"congestion_threshold": o.CongestionThreshold, "max_stack_depth": o.MaxStackDepth,
		"locks": o.EnableLocks, "symlink_caching": o.EnableSymlinkCaching, "acl": o.EnableAcl,
		"explicit_data_cache_control": o.ExplicitDataCacheControl,
		"extra_capabilities":          o.ExtraCapabilities, "disabled_capabilities": o.DisabledCapabilities,
	} {
		s[name] = fmt.Sprint(v)
	}
	return s
}

// unmountOnce unmounts; a busy mount is left to Stop, which detaches it.
func (c *conn) unmountOnce() error {
	c.unmounted.Do(func() { c.unmountErr = unix.Unmount(c.mountpoint, 0) })
	return c.unmountErr
}

// unmount unmounts, or detaches a busy mount.
func (c *conn) unmount() {
	if err := c.unmountOnce(); err != nil {
		if err := unix.Unmount(c.mountpoint, unix.MNT_DETACH); err != nil {
			slog.Error("detaching the mount failed", "mountpoint", c.mountpoint, "err", err)
		}
	}
}

// abortAndDetach ends the connection, so that every request waiting and
// every open file fails at once instead of waiting for a server, and
// detaches the mount. Where fusectl is not mounted, the connection ends
// when the keeper closes its fd, its servers being dead.
func (c *conn) abortAndDetach() {
	abort(c.dev)
	if err := unix.Unmount(c.mountpoint, unix.MNT_DETACH); err != nil {
		slog.Error("detaching the mount failed", "mountpoint", c.mountpoint, "err", err)
	}
}

func (c *conn) close() { c.fuse.Close() }

// ended reports whether the connection has ended (unmounted, or aborted):
// the kernel then reports POLLERR on the fd.
func (c *conn) ended() bool {
	fds := []unix.PollFd{{Fd: int32(c.fuse.Fd())}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&unix.POLLERR != 0
}

// endedChan is closed once the connection has ended, or once done is.
func (c *conn) endedChan(done <-chan struct{}) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for !c.ended() {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return ch
}

// deviceOf reads mnt's device number from the mount table: the last mount
// on mnt is the one on top.
func deviceOf(mnt string) (uint64, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var dev uint64
	found := false
	escaped := strings.NewReplacer(`\`, `\134`, " ", `\040`, "\t", `\011`, "\n", `\012`).Replace(mnt)
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		// id parent major:minor root mountpoint ...
		fields := strings.Fields(lines.Text())
		if len(fields) < 5 || fields[4] != escaped {
			continue
		}
		major, minor, _ := strings.Cut(fields[2], ":")
		ma, err1 := strconv.ParseUint(major, 10, 32)
		mi, err2 := strconv.ParseUint(minor, 10, 32)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("mountinfo: bad device %q", fields[2])
		}
		dev, found = unix.Mkdev(uint32(ma), uint32(mi)), true
	}
	if err := lines.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("%s is not in the mount table after mounting it", mnt)
	}
	return dev, nil
}

// abort ends the FUSE connection of the mount with device number dev
// through fusectl, which names a connection's directory by it.
func abort(dev uint64) {
	if dev == 0 {
		return
	}
	path := fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", unix.Minor(dev))
	if err := os.WriteFile(path, []byte("1"), 0); err != nil {
		slog.Warn("could not end the FUSE connection through fusectl; it ends once no process holds it", "err", err)
	}
}

// stopGrace is how long a mount that is still in use (open files, binds of
// it) is served after a stop is asked for.
const stopGrace = 5 * time.Second

// Stop unmounts mnt with unmount and returns once served is closed (the
// filesystem is no longer served), or after stopGrace: a busy mount (open
// files) is detached, and binds of the mount (CSI volumes) keep it served
// after the unmount, which would keep the daemon alive for ever. Then the
// connection is ended through fusectl (dev is the mount's device number; 0:
// unknown); the binds go stale (ENOTCONN) until the next daemon mounts and
// the CSI plugin binds them again. A keeper and a daemon without one stop
// with it alike.
func Stop(mnt string, dev uint64, unmount func() error, served <-chan struct{}) {
	unmounted := make(chan error, 1)
	go func() { unmounted <- unmount() }()
	grace := time.After(stopGrace)
	for {
		select {
		case <-served:
			return
		case err := <-unmounted:
			unmounted = nil
			if err != nil {
				slog.Warn("the mount is busy; detaching it", "err", err)
				if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
					slog.Error("detaching the mount failed", "err", err)
				}
			}
			continue
		case <-grace:
		}
		break
	}
	slog.Warn("the mount is still in use (open files or binds of it); ending its connection", "after", stopGrace)
	abort(dev)
	select {
	case <-served:
	case <-time.After(time.Second):
	}
}
