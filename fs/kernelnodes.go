package fs

import (
	"slices"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/statefs/statefs/index"
)

// The kernel holds a node for each inode it looked up and has not
// forgotten. statefs needs that node to tell the kernel of a change it
// makes itself (a collection, a restore, a seal), and to know whether a
// FORGET is still to come for an inode that lost its last name.
//
// A lookup makes a new node before go-fuse registers it, and go-fuse
// keeps the node it registered first for the same inode instead. Which
// one the kernel ends up with is decided after the lookup returns: if the
// kernel forgets the old node in between, the new one is registered.
// known keeps that new node as a latecomer (the newest two: lookups of
// one inode by two of its names at once make two), and the first question
// about the inode after the old node is gone finds which of them is live.
// (Inode.Forgotten is deprecated for OnForget, which cannot tell a node
// go-fuse dropped from a live one: statefs needs both.)

// latecomerSettled bounds how long go-fuse takes to register or drop the
// node a lookup made, after the lookup returned it. A latecomer neither
// registered nor forgotten after it is one go-fuse dropped.
const latecomerSettled = time.Minute

// latecomersKept is how many latecomers an inode keeps, the newest: one a
// lookup, and one a lookup by another name at the same time. Every lookup
// of a known inode (a READDIRPLUS of its directory too) makes one, so what
// they take stays bounded by the inodes the kernel knows.
const latecomersKept = 2

// latecomer is a node made by a lookup of an inode the kernel held
// another node of.
type latecomer struct {
	node *gofs.Inode
	made time.Time
}

// known records that a lookup made node n for inode ino.
func (f *FS) known(ino uint64, n *gofs.Inode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old := f.heldNode(ino); old == nil || old == n {
		f.kernelKnows[ino] = n
		delete(f.latecomers, ino)
	} else {
		ls := f.latecomers[ino]
		if len(ls) == latecomersKept {
			ls = append(ls[:0], ls[1:]...)
		}
		now := time.Now()
		f.latecomers[ino] = append(ls, latecomer{n, now})
		f.sweepLatecomers(now)
	}
	f.evictIfMany()
}

// knownNode is the node the kernel holds for inode ino, if any.
func (f *FS) knownNode(ino uint64) *gofs.Inode {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heldNode(ino)
}

// heldNode is knownNode with f.mu held. A latecomer go-fuse registered
// takes the place of the node it was made beside.
func (f *FS) heldNode(ino uint64) *gofs.Inode {
	if n := f.kernelKnows[ino]; n != nil && !n.Forgotten() {
		return n
	}
	for i, l := range f.latecomers[ino] {
		if !l.node.Forgotten() {
			f.kernelKnows[ino] = l.node
			f.dropLatecomer(ino, i)
			return l.node
		}
	}
	return nil
}

// dropLatecomer removes the i-th latecomer of inode ino; f.mu held.
func (f *FS) dropLatecomer(ino uint64, i int) {
	if ls := slices.Delete(f.latecomers[ino], i, i+1); len(ls) > 0 {
		f.latecomers[ino] = ls
	} else {
		delete(f.latecomers, ino)
	}
}

// sweepLatecomers forgets the latecomers that settled without being
// registered, once twice as many inodes have latecomers as after the last
// sweep; f.mu held.
func (f *FS) sweepLatecomers(now time.Time) {
	if len(f.latecomers) < f.sweepLatecomersAt {
		return
	}
	settled := now.Add(-latecomerSettled)
	for ino, ls := range f.latecomers {
		ls = slices.DeleteFunc(ls, func(l latecomer) bool { return l.node.Forgotten() && l.made.Before(settled) })
		if len(ls) > 0 {
			f.latecomers[ino] = ls
		} else {
			delete(f.latecomers, ino)
		}
	}
	f.sweepLatecomersAt = 2*len(f.latecomers) + 1024
}

// reapAtForget reports whether the kernel holds a node for inode ino, which
// has no name left, and if so has the kernel's FORGET of it reap the inode.
func (f *FS) reapAtForget(ino uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.heldNode(ino) == nil {
		return false
	}
	f.nameless[ino] = struct{}{}
	return true
}

// forgotten records that the kernel dropped node n of inode ino, and
// reaps the inode if a reap waited for that (reapAtForget) and the kernel
// holds no other node of it. Any other FORGET costs no index read.
func (f *FS) forgotten(n *gofs.Inode, ino uint64) {
	f.mu.Lock()
	_, reap := f.nameless[ino]
	late := slices.IndexFunc(f.latecomers[ino], func(l latecomer) bool { return l.node == n })
	switch {
	case f.kernelKnows[ino] == n:
		delete(f.kernelKnows, ino)
	case late >= 0:
		f.dropLatecomer(ino, late)
	default:
		reap = false // a node go-fuse dropped for the one it registered first
	}
	if reap && f.heldNode(ino) != nil {
		reap = false // its FORGET reaps
	} else if reap {
		delete(f.nameless, ino)
	}
	f.mu.Unlock()
	if !reap {
		return
	}
	var rec *index.Inode
	err := f.store.Index.View(func(tx *index.Tx) (err error) {
		rec, err = tx.Inode(ino)
		return err
	})
	if err == nil { // the collector may have reaped it already
		f.reapIfUnused(rec)
	}
}
