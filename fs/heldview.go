package fs

import (
	"context"
	"errors"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/statefs/statefs/index"
)

// .statefs/held/ shows the held trees (see package hold), one directory per
// hold named by its id, read-only: ls and cat see the held files, statefs
// restore puts a tree back. Their nodes have inode numbers of their own
// (the index's with the top two bits set), so the kernel never mistakes
// one for the same inode in the executor's tree after a restore.
const heldDirIno = statusDirIno + 101

const heldViewBits = 3 << 62

func heldViewIno(ino uint64) uint64 { return ino | heldViewBits }

type heldDir struct {
	gofs.Inode
	readOnly
	fs *FS
}

var (
	_ = (gofs.NodeLookuper)((*heldDir)(nil))
	_ = (gofs.NodeReaddirer)((*heldDir)(nil))
	_ = (gofs.NodeGetattrer)((*heldDir)(nil))
)

func (d *heldDir) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	readOnlyDirAttr(&out.Attr, heldDirIno)
	return 0
}

// heldIno is the held directory of the attic; 0 while nothing was held.
func (d *heldDir) heldIno() (uint64, error) {
	var ino uint64
	err := d.fs.store.Index.View(func(tx *index.Tx) error {
		held, err := tx.Attic(index.AtticHeld, false)
		if err == nil {
			ino = held.Ino
		}
		return err
	})
	if errors.Is(err, index.ErrNotFound) {
		err = nil
	}
	return ino, err
}

func (d *heldDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	held, err := d.heldIno()
	if err != nil {
		return nil, errno(err)
	}
	return d.fs.heldListing(held, heldDirIno, statusDirIno)
}

func (d *heldDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	shortLived(out)
	held, err := d.heldIno()
	if err != nil {
		return nil, errno(err)
	}
	if held == 0 {
		return nil, syscall.ENOENT
	}
	return d.fs.lookupHeld(ctx, &d.Inode, held, name, out)
}

// heldNode is a file, directory or symlink of a held tree, seen through
// .statefs/held: it reads what the index holds and changes nothing.
type heldNode struct {
	gofs.Inode
	readOnly
	fs  *FS
	ino uint64 // in the index
}

var (
	_ = (gofs.NodeLookuper)((*heldNode)(nil))
	_ = (gofs.NodeReaddirer)((*heldNode)(nil))
	_ = (gofs.NodeGetattrer)((*heldNode)(nil))
	_ = (gofs.NodeReadlinker)((*heldNode)(nil))
	_ = (gofs.NodeOpener)((*heldNode)(nil))
)

func newHeldNode(ctx context.Context, parent *gofs.Inode, f *FS, ino uint64, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	rec, err := f.loadAttr(ino, "", &out.Attr)
	if err != nil {
		return nil, errno(err)
	}
	out.Ino = heldViewIno(ino)
	n := &heldNode{fs: f, ino: ino}
	return parent.NewInode(ctx, n, gofs.StableAttr{Mode: rec.Mode & syscall.S_IFMT, Ino: out.Ino}), 0
}

func (n *heldNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if _, err := n.fs.loadAttr(n.ino, "", &out.Attr); err != nil {
		return errno(err)
	}
	out.Ino = heldViewIno(n.ino)
	out.SetTimeout(viewTimeout)
	return 0
}

func (n *heldNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return n.fs.lookupHeld(ctx, &n.Inode, n.ino, name, out)
}

func (n *heldNode) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	return n.fs.heldListing(n.ino, heldViewIno(n.ino), 0)
}

func (n *heldNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	var target string
	err := n.fs.store.Index.View(func(tx *index.Tx) error {
		rec, err := tx.Inode(n.ino)
		if err == nil {
			target = rec.Target
		}
		return err
	})
	return []byte(target), errno(err)
}

// lookupHeld finds name in held directory dir (an index inode; 0 for none)
// and returns its view node under parent.
func (f *FS) lookupHeld(ctx context.Context, parent *gofs.Inode, dir uint64, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	shortLived(out)
	var ino uint64
	err := f.store.Index.View(func(tx *index.Tx) error {
		d, err := tx.Lookup(dir, name)
		ino = d.Ino
		return err
	})
	if err != nil {
		return nil, errno(err)
	}
	return newHeldNode(ctx, parent, f, ino, out)
}

// heldListing lists held directory dir (an index inode; 0 for none) as
// the view shows it: its entries under their view inode numbers.
func (f *FS) heldListing(dir, self, parent uint64) (gofs.DirStream, syscall.Errno) {
	list := []fuse.DirEntry{{Name: ".", Ino: self, Mode: syscall.S_IFDIR}, {Name: "..", Ino: parent, Mode: syscall.S_IFDIR}}
	if dir != 0 {
		es, err := f.readDir(dir)
		if err != nil {
			return nil, errno(err)
		}
		for _, e := range es {
			list = append(list, fuse.DirEntry{Name: e.Name, Ino: heldViewIno(e.Ino), Mode: e.Mode})
		}
	}
	return gofs.NewListDirStream(list), 0
}

// Open opens a held file for reading, as the executor's tree would, but
// without keeping the page cache: the view's inode is not the tree's.
func (n *heldNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if writable(flags) || flags&syscall.O_TRUNC != 0 {
		return nil, 0, syscall.EROFS
	}
	if n.StableAttr().Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, 0, syscall.EINVAL
	}
	st := n.fs.acquire(n.ino)
	h, _, err := n.fs.open(st, nil, flags, false, false)
	if err != nil {
		n.fs.release(st)
		return nil, 0, errno(err)
	}
	h.inode = &n.Inode
	return h, 0, 0
}
