package fs

import (
	"sync"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// NodeFS is what the FUSE server serves: go-fuse's node bridge over root,
// with the opens and releases of one node taken one at a time.
//
// The bridge keeps one passthrough backing file per node while any handle
// on it is open, and gives it to every handle opened meanwhile; it drops
// it only after the filesystem's Release has returned. Between the two, a
// release that ends the last handle has already scheduled the seal, which
// may commit and delete the staging file, and an open of the file for
// writing then makes a new staging file: an open in that window was given
// the old backing file, and its writes, fsync'd, would go to a deleted
// file (TestAppendsWhileReleasesLag).
// With the two serialised, an open sees either a handle still open, whose
// staging file is the current one, or no backing file at all.
//
// Above it, replies answers a request the kernel sends again from its
// reply record (replies.go), over the root New returns (another root has
// no records). Under a keeper (c not nil), the resumer layer above that
// keeps the kernel's node ids and file handles valid across servers
// (resume.go).
func NodeFS(root gofs.InodeEmbedder, opts *gofs.Options, c *Connection) fuse.RawFileSystem {
	var raw fuse.RawFileSystem = &openOrder{RawFileSystem: gofs.NewNodeFS(root, opts)}
	if n, ok := root.(*node); ok {
		raw = &replies{RawFileSystem: raw, fs: n.fs}
	}
	if c != nil {
		raw = newResumer(raw, root.(*node).fs, c)
	}
	return raw
}

// openStripes is how many locks openOrder spreads the nodes over: two
// nodes that share one wait for each other's opens and releases only.
const openStripes = 256

type openOrder struct {
	fuse.RawFileSystem
	// stripes order the Open and Release requests of a node: a stripe is
	// the first lock either takes, before the node's file mu and all the
	// locks that one comes before.
	stripes [openStripes]sync.Mutex
}

var _ = (fuse.RawFileSystem)((*openOrder)(nil))

func (o *openOrder) node(id uint64) *sync.Mutex { return &o.stripes[id%openStripes] }

func (o *openOrder) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	mu := o.node(in.NodeId)
	mu.Lock()
	defer mu.Unlock()
	return o.RawFileSystem.Open(cancel, in, out)
}

func (o *openOrder) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	mu := o.node(in.NodeId)
	mu.Lock()
	defer mu.Unlock()
	o.RawFileSystem.Release(cancel, in)
}
