package csi

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// notServingError says the daemon's mount is not there or does not answer.
type notServingError struct{ reason string }

func (e *notServingError) Error() string { return e.reason }

// checkServing returns nil if dir is a FUSE mountpoint whose daemon answers:
// the mount on top at dir (the one a stat of dir reaches) is a FUSE mount,
// and it answers statfs. Publishing into a directory that is not mounted
// would put a pod's state on the wrong disk, so nothing is published or
// bound again unless this holds.
func checkServing(dir string) error {
	var st unix.Stat_t
	err := answers(dir)
	if err == nil {
		err = unix.Stat(dir, &st)
	}
	if err != nil {
		return &notServingError{fmt.Sprintf("statefs mount %s does not answer: %v", dir, err)}
	}
	mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(dir))
	if err != nil {
		return fmt.Errorf("reading the mount table: %w", err)
	}
	for _, m := range mounts {
		if unix.Mkdev(uint32(m.Major), uint32(m.Minor)) == st.Dev {
			if !strings.HasPrefix(m.FSType, "fuse") {
				return &notServingError{fmt.Sprintf("%s is a %s mount, not statefs's FUSE mount", dir, m.FSType)}
			}
			return nil
		}
	}
	return &notServingError{fmt.Sprintf("statefs is not mounted on %s", dir)}
}

// targetState is what a target path holds.
type targetState int

const (
	unmounted targetState = iota // nothing is mounted there (or the path is missing)
	bound                        // a live bind of the volume's root
	stale                        // a mount whose FUSE daemon is gone: access gives ENOTCONN
	foreign                      // another mount
)

// stateOf says what target holds, given root, the volume's directory in
// the daemon's mount. A live bind is recognized by device and inode: a bind
// of root shows root's.
func stateOf(target, root string) (targetState, error) {
	mounted, err := isMountpoint(target)
	if err != nil || !mounted {
		return unmounted, err
	}
	if errors.Is(answers(target), unix.ENOTCONN) {
		return stale, nil
	}
	var st, rst unix.Stat_t
	if err := unix.Stat(target, &st); err != nil {
		return unmounted, fmt.Errorf("target %s: %w", target, err)
	}
	if unix.Stat(root, &rst) == nil && st.Dev == rst.Dev && st.Ino == rst.Ino {
		return bound, nil
	}
	return foreign, nil
}

// answers asks the filesystem at path for its statistics. Unlike a stat,
// which the kernel may answer from its attribute cache for a while, statfs
// always reaches a FUSE daemon, so a dead one shows at once: ENOTCONN.
func answers(path string) error {
	var st unix.Statfs_t
	return unix.Statfs(path, &st)
}

// isMountpoint says whether something is mounted at path, from the mount
// table: a stat would fail on a stale mount.
func isMountpoint(path string) (bool, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(path))
	if err != nil {
		return false, fmt.Errorf("reading the mount table: %w", err)
	}
	return len(mounts) > 0, nil
}

// bind mounts src onto target, read-only if asked. A read-only bind takes
// a second mount call: the kernel ignores MS_RDONLY when it creates a bind.
func bind(src, target string, readOnly bool) error {
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding %s onto %s: %w", src, target, err)
	}
	if !readOnly {
		return nil
	}
	// Keep the flags the bind inherited (nosuid, nodev, ...): a remount
	// without them would ask to clear them.
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		unix.Unmount(target, unix.MNT_DETACH)
		return fmt.Errorf("making %s read-only: %w", target, err)
	}
	keep := uintptr(st.Flags) & (unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME)
	if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|keep, ""); err != nil {
		unix.Unmount(target, unix.MNT_DETACH)
		return fmt.Errorf("making %s read-only: %w", target, err)
	}
	return nil
}

// unmountAll unmounts everything mounted at target, mounts stacked by
// earlier runs included. A mount the kernel calls busy is detached lazily:
// the kubelet unpublishes only once the pod's processes are gone.
func unmountAll(target string) error {
	for range 16 {
		mounted, err := isMountpoint(target)
		if err != nil || !mounted {
			return err
		}
		if err := unix.Unmount(target, 0); err != nil {
			if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
				return fmt.Errorf("unmounting %s: %w", target, err)
			}
		}
	}
	return fmt.Errorf("unmounting %s: still mounted after 16 unmounts", target)
}

// detachStale detaches the stale mounts at target until it
// answers: lazily, since a dead FUSE connection may still have users.
func detachStale(target string) error {
	for range 16 {
		if !errors.Is(answers(target), unix.ENOTCONN) {
			return nil
		}
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("detaching stale %s: %w", target, err)
		}
	}
	return fmt.Errorf("detaching stale %s: still stale after 16 detaches", target)
}

// removeTarget removes the directory publishing created at target. A
// missing one is fine: unpublishing twice is.
func removeTarget(target string) error {
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing target %s: %w", target, err)
	}
	return nil
}
