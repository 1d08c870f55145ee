package fs

import (
	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/statefs/statefs/index"
)

// DefaultMaxKernelInodes is how many inodes the kernel may hold the daemon
// to by default: go-fuse keeps a node, some 400 bytes with statefs's own
// bookkeeping, for every inode the kernel knows, and the kernel keeps
// every inode it looked up until memory runs short. A tree of a million
// files, all stat'ed, would otherwise hold the daemon to some 400 MiB.
const DefaultMaxKernelInodes = 1 << 16

// evictIfMany starts an eviction when the kernel knows more inodes than
// Options.MaxKernelInodes, or has the one under way run again: a lookup
// answered while it asks the kernel to drop names is not in its count.
// Called with f.mu held.
func (f *FS) evictIfMany() {
	if max := f.opts.MaxKernelInodes; max == 0 || len(f.kernelKnows) <= max {
		return
	}
	if f.evicting {
		f.evictAgain = true
		return
	}
	f.evicting = true
	go f.evict()
}

// evict asks the kernel to drop the names of a tenth of the inodes it
// knows, taken at random among those no handle has open (FUSE's entry
// invalidation), and again while lookups take the count past the bound
// meanwhile. The kernel then evicts those it holds no other name or use
// of and FORGETs them, which drops their nodes; the next access looks
// them up again. It runs on a goroutine of its own: the kernel takes the
// directory's lock to drop a name, which a FUSE request may hold while it
// waits for the daemon's answer.
func (f *FS) evict() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		f.evictAgain = false
		want := len(f.kernelKnows) - f.opts.MaxKernelInodes*9/10
		victims := make([]*gofs.Inode, 0, max(want, 0))
		for ino, n := range f.kernelKnows { // a map's order: at random
			if len(victims) >= want {
				break
			}
			if ino != index.RootIno && f.files[ino] == nil {
				victims = append(victims, n)
			}
		}
		f.mu.Unlock()
		for _, n := range victims {
			if name, parent := n.Parent(); parent != nil {
				parent.NotifyEntry(name)
			}
		}
		f.mu.Lock()
		if !f.evictAgain {
			f.evicting = false
			return
		}
	}
}
