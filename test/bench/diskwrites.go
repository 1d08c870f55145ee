package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// blockDevice is the disk that holds a directory, by its name in
// /proc/diskstats. Its counters are the whole disk's: a partition's writes
// count, and so do those of every other writer on the machine.
type blockDevice struct{ name string }

// blockDeviceOf finds the disk holding dir. The directory's device number
// names it when the filesystem sits on a block device (ext4, xfs); where it
// does not (btrfs hands out anonymous numbers), the source device of the
// mount does. A partition maps to the disk it is part of, whose directory
// in /sys holds the partition's.
func blockDeviceOf(dir string) (blockDevice, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return blockDevice{}, err
	}
	sys, err := sysBlockDir(st.Dev)
	if err != nil {
		source, _ := mountOf(dir)
		var dev syscall.Stat_t
		if serr := syscall.Stat(source, &dev); serr != nil || dev.Mode&syscall.S_IFMT != syscall.S_IFBLK {
			return blockDevice{}, fmt.Errorf("%s: neither its device number nor its mount's source (%q) is a block device: %w", dir, source, err)
		}
		if sys, err = sysBlockDir(dev.Rdev); err != nil {
			return blockDevice{}, err
		}
	}
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		sys = filepath.Dir(sys)
	}
	d := blockDevice{name: filepath.Base(sys)}
	_, err = d.BytesWritten()
	return d, err
}

// sysBlockDir is the directory /sys/dev/block/MAJOR:MINOR leads to.
func sysBlockDir(dev uint64) (string, error) {
	return filepath.EvalSymlinks(fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(dev), unix.Minor(dev)))
}

// BytesWritten is the disk's sectors written since boot, in bytes: field 10
// of its line in /proc/diskstats, in sectors of 512 bytes whatever the
// disk's own sector size.
func (d blockDevice) BytesWritten() (int64, error) {
	for _, line := range lines("/proc/diskstats") {
		f := strings.Fields(line)
		if len(f) < 10 || f[2] != d.name {
			continue
		}
		sectors, err := strconv.ParseInt(f[9], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/diskstats, %s: %w", d.name, err)
		}
		return sectors * 512, nil
	}
	return 0, fmt.Errorf("/proc/diskstats has no line for %s", d.name)
}
