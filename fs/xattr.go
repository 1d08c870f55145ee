package fs

import (
	"context"
	"errors"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/index"
)

var (
	_ = (gofs.NodeGetxattrer)((*node)(nil))
	_ = (gofs.NodeSetxattrer)((*node)(nil))
	_ = (gofs.NodeRemovexattrer)((*node)(nil))
	_ = (gofs.NodeListxattrer)((*node)(nil))
)

// xattrErrno is errno for extended attributes: a missing one is ENODATA.
func xattrErrno(err error) syscall.Errno {
	if errors.Is(err, index.ErrNotFound) {
		return syscall.ENODATA
	}
	return errno(err)
}

// fill answers the size-probe protocol of getxattr(2) and listxattr(2):
// an empty dest asks for the size; a short one gets ERANGE.
func fill(dest, v []byte) (uint32, syscall.Errno) {
	if len(dest) == 0 {
		return uint32(len(v)), 0
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if !n.fs.store.Index.MayHaveXattrs(n.ino()) {
		return 0, syscall.ENODATA
	}
	var v []byte
	err := n.fs.store.Index.View(func(tx *index.Tx) (err error) {
		v, err = tx.Xattr(n.ino(), attr)
		return err
	})
	if err != nil {
		return 0, xattrErrno(err)
	}
	return fill(dest, v)
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if attr == "" || len(attr) > nameMax {
		return syscall.ERANGE
	}
	if n.fs.store.Full() {
		return syscall.ENOSPC
	}
	unique := n.fs.request(ctx)
	err := n.fs.store.Index.Update(func(tx *index.Tx) error {
		_, err := tx.Xattr(n.ino(), attr)
		exists := err == nil
		if err != nil && !errors.Is(err, index.ErrNotFound) {
			return err
		}
		if flags&unix.XATTR_CREATE != 0 && exists {
			return syscall.EEXIST
		}
		if flags&unix.XATTR_REPLACE != 0 && !exists {
			return index.ErrNotFound
		}
		if err := tx.SetXattr(n.ino(), attr, data); err != nil {
			return err
		}
		if err := touchCtime(tx, n.ino()); err != nil {
			return err
		}
		return recordReply(tx, unique, 0)
	})
	return xattrErrno(err)
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	unique := n.fs.request(ctx)
	err := n.fs.store.Index.Update(func(tx *index.Tx) error {
		if err := tx.RemoveXattr(n.ino(), attr); err != nil {
			return err
		}
		if err := touchCtime(tx, n.ino()); err != nil {
			return err
		}
		return recordReply(tx, unique, 0)
	})
	return xattrErrno(err)
}

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	if !n.fs.store.Index.MayHaveXattrs(n.ino()) {
		return 0, 0
	}
	var list []byte
	err := n.fs.store.Index.View(func(tx *index.Tx) error {
		return tx.Xattrs(n.ino(), func(name string) {
			list = append(append(list, name...), 0)
		})
	})
	if err != nil {
		return 0, errno(err)
	}
	return fill(dest, list)
}

func touchCtime(tx *index.Tx, ino uint64) error {
	rec, err := tx.Inode(ino)
	if err != nil {
		return err
	}
	rec.Ctime = index.Now()
	return tx.PutInode(rec)
}
