package fs

import (
	"os"
	"sync"
	"sync/atomic"

	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/store"
)

// file is the open state of one inode: the handles open on it, its open
// staging file, and the generation of its content, which moves on every
// change that could reach the content so that a seal started before the
// change is not committed.
type file struct {
	ino  uint64
	refs int // acquire calls not yet released; guarded by FS.mu
	// mu guards the fields below but the atomics. Lock order: an open's or
	// a release's openOrder stripe, then mu, then any of FS.mu, FS.sealMu,
	// the store's chunk guard and space keeper, and DB.writeMu (an index
	// transaction). No path holds two files' mu at once.
	mu sync.RWMutex

	opens int // open handles
	// cached counts the open handles the kernel serves through its page
	// cache (sealed content, or staging without passthrough). While there is
	// one, no handle may ask for passthrough: the kernel refuses to mix the
	// two modes on one inode.
	cached int
	// objectOpens counts the open handles the kernel serves by passthrough
	// from the object. While there is one, the kernel's backing file of
	// the inode is the object's for every later open, which must all be
	// passthrough too: an unseal then makes the object's own inode the
	// staging file (FS.adopt), so that a writer's bytes land where those
	// readers read, and the object's name gets a copy.
	objectOpens int
	staging     *os.File // the staging file while handles are open on it
	manifest    *manifest.Manifest
	// object is the open object of sealed content that is one, while
	// handles are open on it.
	object *store.ObjectFile
	// adopted is set once an unseal made object's inode the staging file
	// (FS.adopt): it is no longer the object's.
	adopted bool
	gen     uint64
	// stagingNamed is set once the staging directory was synced after the
	// staging file was made.
	stagingNamed atomic.Bool
}

// acquire returns the state of inode ino, creating it, and holds it in the
// map until the matching release. Open handles and scheduled seals each
// hold one acquisition, and so does a running seal. It takes FS.mu, so
// its caller holds no file's mu.
func (f *FS) acquire(ino uint64) *file {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.files[ino]
	if !ok {
		st = &file{ino: ino}
		f.files[ino] = st
	}
	st.refs++
	return st
}

// release ends one acquisition of st.
func (f *FS) release(st *file) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st.refs--
	if st.refs == 0 {
		delete(f.files, st.ino)
	}
}

// lookupFile returns the state of inode ino if it has one.
func (f *FS) lookupFile(ino uint64) *file {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.files[ino]
}

// pin holds inode ino open, as a handle would, for a handle the kernel
// holds that a new server could not open again (resume.go): nothing seals
// or reaps the inode until unpin.
func (f *FS) pin(ino uint64) *file {
	st := f.acquire(ino)
	st.mu.Lock()
	st.opens++
	st.mu.Unlock()
	return st
}

// unpin ends a pin, as the close of its handle would.
func (f *FS) unpin(st *file) {
	st.mu.Lock()
	st.opens--
	last := st.opens == 0
	st.mu.Unlock()
	if last {
		f.afterClose(st.ino, false, true)
	}
	f.release(st)
}
