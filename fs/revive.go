package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/statefs/statefs/index"
)

// A server that takes over a connection meets node ids the kernel was
// given by the server before it. A node id is the inode's number (fs.go's
// ExternalNodeID), so the node is made again from the index: LookupNode
// for the node itself, and, for a directory, LookupParent up its parents
// until one this server knows, so that its path, which says who owns what
// is made in it (owner.Rules), is whole (resume.go does the walking).

var (
	_ = (gofs.NodeLookupNoder)((*node)(nil))
	_ = (gofs.NodeLookupParenter)((*node)(nil))
)

// LookupNode makes the node of inode id, asked of the root. The views'
// fixed nodes are found among the root's children; a node of a view made
// from the index (a job's entry, a held tree's) has no record to be made
// from again, and is stale.
func (n *node) LookupNode(ctx context.Context, id uint64, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if id&viewInoBits != 0 {
		return n.viewNode(id, out)
	}
	rec, err := n.fs.loadAttr(id, "", &out.Attr)
	if err != nil {
		if errno(err) == syscall.ENOENT {
			return nil, syscall.ESTALE
		}
		return nil, errno(err)
	}
	return n.newChild(ctx, rec, out), 0
}

// viewNode finds the fixed view node numbered id: .statefs, a file in it,
// or one of its directories.
func (n *node) viewNode(id uint64, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	status := n.GetChild(statusDirName)
	if status == nil {
		return nil, syscall.ESTALE
	}
	found := status
	if id != statusDirIno {
		found = nil
		for _, ch := range status.Children() {
			if ch.StableAttr().Ino == id {
				found = ch
			}
		}
	}
	if found == nil {
		return nil, syscall.ESTALE
	}
	var a fuse.AttrOut
	if g, ok := found.Operations().(gofs.NodeGetattrer); ok {
		if e := g.Getattr(context.Background(), nil, &a); e != 0 {
			return nil, e
		}
	}
	out.Attr = a.Attr
	return found, 0
}

// LookupParent makes the node of this directory's parent and finds the
// directory's name in it. Only a directory has one parent to name.
func (n *node) LookupParent(ctx context.Context, out *fuse.EntryOut) (*gofs.Inode, string, syscall.Errno) {
	self := n.ino()
	var parent *index.Inode
	var name string
	err := n.fs.store.Index.View(func(tx *index.Tx) error {
		rec, err := tx.Inode(self)
		if err != nil {
			return err
		}
		if rec.Mode&syscall.S_IFMT != syscall.S_IFDIR || self == index.RootIno {
			return syscall.ESTALE
		}
		if parent, err = tx.Inode(rec.Parent); err != nil {
			return err
		}
		err = tx.ReadDir(rec.Parent, func(d index.Dirent) bool {
			if d.Ino == self {
				name = d.Name
			}
			return name == ""
		})
		if err == nil && name == "" {
			err = syscall.ESTALE // not (or no longer) in its parent
		}
		return err
	})
	if err != nil {
		return nil, "", errno(err)
	}
	if err := n.fs.fillAttr(parent, &out.Attr); err != nil {
		return nil, "", errno(err)
	}
	root := n.Root()
	p := root.NewInode(ctx, &node{fs: n.fs}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: parent.Ino})
	if parent.Ino == index.RootIno {
		p = root
	} else {
		n.fs.known(parent.Ino, p)
	}
	return p, name, 0
}
