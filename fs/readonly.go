package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// readOnly refuses every change to a node of the .statefs view with EROFS.
// Embedded next to gofs.Inode: without these, go-fuse would answer some of
// them (unlink, rmdir) with a silent success.
type readOnly struct{}

var (
	_ = (gofs.NodeMkdirer)((*readOnly)(nil))
	_ = (gofs.NodeCreater)((*readOnly)(nil))
	_ = (gofs.NodeMknoder)((*readOnly)(nil))
	_ = (gofs.NodeSymlinker)((*readOnly)(nil))
	_ = (gofs.NodeLinker)((*readOnly)(nil))
	_ = (gofs.NodeUnlinker)((*readOnly)(nil))
	_ = (gofs.NodeRmdirer)((*readOnly)(nil))
	_ = (gofs.NodeRenamer)((*readOnly)(nil))
	_ = (gofs.NodeSetattrer)((*readOnly)(nil))
	_ = (gofs.NodeSetxattrer)((*readOnly)(nil))
	_ = (gofs.NodeRemovexattrer)((*readOnly)(nil))
)

func (readOnly) Mkdir(context.Context, string, uint32, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Create(context.Context, string, uint32, uint32, *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (readOnly) Mknod(context.Context, string, uint32, uint32, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Symlink(context.Context, string, string, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Link(context.Context, gofs.InodeEmbedder, string, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (readOnly) Unlink(context.Context, string) syscall.Errno { return syscall.EROFS }
func (readOnly) Rmdir(context.Context, string) syscall.Errno  { return syscall.EROFS }

func (readOnly) Rename(context.Context, string, gofs.InodeEmbedder, string, uint32) syscall.Errno {
	return syscall.EROFS
}

func (readOnly) Setattr(context.Context, gofs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (readOnly) Setxattr(context.Context, string, []byte, uint32) syscall.Errno { return syscall.EROFS }
func (readOnly) Removexattr(context.Context, string) syscall.Errno              { return syscall.EROFS }
