package fs

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// killprivRequest is what a case asks of a file: a SETATTR, or an OPEN
// (and its RELEASE) with flags.
type killprivRequest struct {
	setattr fuse.SetAttrIn
	open    bool
	flags   uint32
}

func killprivSetattr(valid uint32, fill func(in *fuse.SetAttrInCommon)) killprivRequest {
	return killprivRequest{setattr: setAttrIn(valid, fill)}
}

func killprivOpen(flags uint32) killprivRequest { return killprivRequest{open: true, flags: flags} }

// Killpriv: statefs negotiates FUSE_HANDLE_KILLPRIV_V2, so the kernel
// leaves clearing set-user-ID and set-group-ID to it. As on a local
// filesystem, a change of owner or group (uid or gid without a mode)
// clears them from every non-directory; so do a truncate the kernel marks
// FATTR_KILL_SUIDGID (an unprivileged caller's) and an open for writing by
// a caller other than root (at the open, as ext4 at the first write:
// writes through passthrough never reach the daemon). Set-group-ID goes
// only where it means that, with group execute; without, it marks
// mandatory locking and stays. The new mode is in the index and in the
// attributes a SETATTR answers with; an open that cleared bits tells the
// kernel its cached mode is stale.
func TestKillpriv(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	const (
		reg = syscall.S_IFREG
		dir = syscall.S_IFDIR
	)
	other := user{1000, 1000}
	chown := func(uid uint32) killprivRequest {
		return killprivSetattr(fuse.FATTR_UID, func(in *fuse.SetAttrInCommon) { in.Uid = uid })
	}
	chgrp := func(gid uint32) killprivRequest {
		return killprivSetattr(fuse.FATTR_GID, func(in *fuse.SetAttrInCommon) { in.Gid = gid })
	}
	for i, c := range []struct {
		name string
		mode uint32 // the file's type and mode before; it is root's
		by   user
		req  killprivRequest
		want uint32
	}{
		{"chown clears setuid, and setgid with group execute", reg | 0o6755, root, chown(1000), reg | 0o755},
		{"chgrp alone clears them too", reg | 0o6755, root, chgrp(7), reg | 0o755},
		{"chown to the same owner clears them too", reg | 0o6755, root,
			killprivSetattr(fuse.FATTR_UID|fuse.FATTR_GID, func(in *fuse.SetAttrInCommon) { in.Uid, in.Gid = 0, 0 }), reg | 0o755},
		{"chown keeps setgid without group execute (mandatory locking)", reg | 0o6745, root, chown(1000), reg | 0o2745},
		{"chown with a mode takes the mode as given", reg | 0o6755, root,
			killprivSetattr(fuse.FATTR_UID|fuse.FATTR_MODE, func(in *fuse.SetAttrInCommon) { in.Uid, in.Mode = 1000, 0o6750 }), reg | 0o6750},
		{"chown of a directory keeps its setgid", dir | 0o2775, root, chown(1000), dir | 0o2775},
		{"chown of a fifo clears setuid, as of every non-directory", syscall.S_IFIFO | 0o4644, root, chown(1000), syscall.S_IFIFO | 0o644},
		{"chgrp of a device clears setuid, and setgid with group execute", syscall.S_IFCHR | 0o6754, root, chgrp(100), syscall.S_IFCHR | 0o754},

		{"an unprivileged truncate (kill flag) clears them", reg | 0o6755, other,
			killprivSetattr(fuse.FATTR_SIZE|fuse.FATTR_KILL_SUIDGID, nil), reg | 0o755},
		{"the kill flag keeps setgid without group execute", reg | 0o6745, other,
			killprivSetattr(fuse.FATTR_SIZE|fuse.FATTR_KILL_SUIDGID, nil), reg | 0o2745},
		{"the kill flag on a directory changes no bits", dir | 0o6755, other,
			killprivSetattr(fuse.FATTR_KILL_SUIDGID, nil), dir | 0o6755},
		{"a truncate without the kill flag (root's) keeps them", reg | 0o6755, root,
			killprivSetattr(fuse.FATTR_SIZE, nil), reg | 0o6755},
		{"the kill flag with a mode clears the bits of the mode given", reg | 0o755, root,
			killprivSetattr(fuse.FATTR_MODE|fuse.FATTR_KILL_SUIDGID, func(in *fuse.SetAttrInCommon) { in.Mode = 0o6775 }), reg | 0o775},

		{"an unprivileged writer clears both", reg | 0o6775, other, killprivOpen(syscall.O_WRONLY), reg | 0o775},
		{"an unprivileged writer clears setuid without any execute", reg | 0o4644, other, killprivOpen(syscall.O_RDWR), reg | 0o644},
		{"an unprivileged writer keeps setgid without group execute", reg | 0o6745, other, killprivOpen(syscall.O_RDWR), reg | 0o2745},
		{"an unprivileged writer keeps setgid with only other execute", reg | 0o2641, other, killprivOpen(syscall.O_WRONLY | syscall.O_APPEND), reg | 0o2641},
		{"an unprivileged writer keeps the sticky bit", reg | 0o1777, other, killprivOpen(syscall.O_WRONLY), reg | 0o1777},
		{"an unprivileged reader keeps them", reg | 0o6775, other, killprivOpen(syscall.O_RDONLY), reg | 0o6775},
		{"root writing keeps them", reg | 0o6775, root, killprivOpen(syscall.O_WRONLY), reg | 0o6775},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("f%d", i)
			var e entry
			var errno syscall.Errno
			switch c.mode & syscall.S_IFMT {
			case reg:
				e = k.writeFile(rootNode, name, []byte("#!/bin/sh\n"))
			case dir:
				e, errno = k.mkdir(root, rootNode, name, 0o755)
			default:
				e, errno = k.mknod(rootNode, name, c.mode&syscall.S_IFMT|0o644, 0x0103)
			}
			if errno != 0 {
				t.Fatalf("making the file: %v", errno)
			}
			if _, errno := k.setattr(root, e.node, setAttrIn(fuse.FATTR_MODE, func(in *fuse.SetAttrInCommon) { in.Mode = c.mode &^ syscall.S_IFMT })); errno != 0 {
				t.Fatalf("chmod: %v", errno)
			}
			before := k.mustInode(e.attr.Ino)
			k.notified()
			if c.req.open {
				fh, _, errno := k.open(c.by, e.node, c.req.flags)
				if errno != 0 {
					t.Fatalf("open: %v", errno)
				}
				k.release(e.node, fh)
			} else {
				a, errno := k.setattr(c.by, e.node, c.req.setattr)
				if errno != 0 {
					t.Fatalf("setattr: %v", errno)
				}
				if a.Mode != c.want {
					t.Errorf("setattr answered mode %o, want %o", a.Mode, c.want)
				}
			}
			rec := k.mustInode(e.attr.Ino)
			if rec.Mode != c.want {
				t.Fatalf("mode after %o, want %o", rec.Mode, c.want)
			}
			if rec.Mode != before.Mode && rec.Ctime <= before.Ctime {
				t.Errorf("clearing the bits kept the ctime")
			}
			if c.req.open && c.want != c.mode {
				k.waitNotified(sprintf("inode %d", e.node))
			}
		})
	}
}
