package fs

import (
	"context"
	"sync/atomic"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/index"
)

func (n *node) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	st := n.fs.acquire(n.ino())
	defer n.fs.release(st)
	rec, err := n.fs.setattr(st, &n.warm, in, n.fs.request(ctx))
	if err != nil {
		return errno(err)
	}
	// After st.mu is released: fillAttr may stat the open staging file.
	if err := n.fs.fillAttr(rec, &out.Attr); err != nil {
		_, err = n.fs.loadAttr(n.ino(), "", &out.Attr)
		return errno(err)
	}
	return 0
}

// setattr applies in to st's inode and returns the new record; warm is the
// node's page cache flag, cleared by a change of size. The reply to the
// kernel's request unique is recorded with the change.
func (f *FS) setattr(st *file, warm *atomic.Bool, in *fuse.SetAttrIn, unique uint64) (*index.Inode, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var unsealed bool
	if size, ok := in.GetSize(); ok {
		warm.Store(false)
		var err error
		if unsealed, err = f.truncate(st, size); err != nil {
			return nil, err
		}
	}
	var rec *index.Inode
	err := f.store.Index.Update(func(tx *index.Tx) (err error) {
		if rec, err = tx.Inode(st.ino); err != nil {
			return err
		}
		applyAttr(rec, in)
		if err := tx.PutInode(rec); err != nil {
			return err
		}
		return recordReply(tx, unique, 0)
	})
	if err != nil {
		return nil, err
	}
	if rec.Staging != 0 && (in.Valid&(fuse.FATTR_ATIME|fuse.FATTR_MTIME) != 0 || unsealed) {
		// The staging file's times are the file's times until it is
		// sealed. A truncate of a staging file set its mtime; one unsealed
		// for the truncate still has the sealed file's.
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if in.Valid&fuse.FATTR_ATIME != 0 {
			ts[0] = unix.NsecToTimespec(rec.Atime)
		}
		if in.Valid&fuse.FATTR_MTIME != 0 || unsealed {
			ts[1] = unix.NsecToTimespec(rec.Mtime)
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, f.store.StagingPath(rec.Staging), ts, 0); err != nil {
			return nil, err
		}
		st.gen++
	}
	return rec, nil
}

// applyAttr sets on rec what in asks for, and the ctime. Changing the owner
// of a regular file clears its setuid bit, and its setgid bit where that
// means set-group-ID, as on a local filesystem.
func applyAttr(rec *index.Inode, in *fuse.SetAttrIn) {
	now := index.Now()
	if mode, ok := in.GetMode(); ok {
		rec.Mode = rec.Mode&syscall.S_IFMT | mode
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok {
		rec.Uid = uid
	}
	if gok {
		rec.Gid = gid
	}
	// As the kernel's own filesystems do (chown_common): every
	// non-directory, FIFOs, sockets and devices too, loses the bits.
	kill := in.Valid&fuse.FATTR_KILL_SUIDGID != 0 || ((uok || gok) && in.Valid&fuse.FATTR_MODE == 0)
	if kill && !rec.IsDir() {
		rec.Mode &^= syscall.S_ISUID
		if rec.Mode&syscall.S_IXGRP != 0 {
			rec.Mode &^= syscall.S_ISGID
		}
	}
	if t, ok := in.GetATime(); ok {
		rec.Atime = t.UnixNano()
	}
	if t, ok := in.GetMTime(); ok {
		rec.Mtime = t.UnixNano()
	}
	if _, ok := in.GetSize(); ok {
		rec.Mtime = now
	}
	rec.Ctime = now
}

// truncate cuts or extends st's inode content to size, moving sealed
// content to a staging file first, and reports whether it did. Called with
// st.mu held.
func (f *FS) truncate(st *file, size uint64) (unsealed bool, err error) {
	var rec *index.Inode
	err = f.store.Index.View(func(tx *index.Tx) (err error) {
		rec, err = tx.Inode(st.ino)
		return err
	})
	if err != nil {
		return false, err
	}
	switch {
	case rec.IsDir():
		return false, syscall.EISDIR
	case !rec.IsRegular():
		return false, syscall.EINVAL
	}
	if st.staging == nil && rec.Staging == 0 && size > 0 && f.store.Full() {
		return false, syscall.ENOSPC // sealed content would take new space in staging
	}
	st.gen++
	switch {
	case st.staging != nil:
		err = st.staging.Truncate(int64(size))
	case rec.Staging != 0:
		err = unix.Truncate(f.store.StagingPath(rec.Staging), int64(size))
	default:
		// Open readers of the sealed content read the staging file now.
		err, unsealed = f.unseal(st, rec, size, st.opens > 0), true
	}
	if err == nil && st.opens == 0 {
		f.scheduleSeal(st.ino)
	}
	return unsealed && err == nil, err
}
