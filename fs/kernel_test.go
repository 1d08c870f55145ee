package fs

import (
	"fmt"
	iofs "io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/store"
)

// White-box. kernel plays the kernel's side of a mount with no mount: it
// sends requests to what the server serves (NodeFS: go-fuse's node bridge
// over the tree that New returns), as /dev/fuse would, and records the
// notifications the tree sends back. The tests of this package need
// neither /dev/fuse nor root; the tests in /test mount the real binary.
type kernel struct {
	t     *testing.T
	fs    *FS
	store *store.Store
	raw   fuse.RawFileSystem
	// resumed is what its server did to take over the connection.
	resumed Resumed

	closeOnce sync.Once

	mu    sync.Mutex
	notes []string // the notifications sent, as notifyLog formats them

	onEntry func() // if set, called before an entry notification is logged; set before any request
}

// rootNode is the FUSE node id of the mount's root.
const rootNode = fuse.FUSE_ROOT_ID

// newKernel opens a store in a temporary directory and serves it with
// opts (openKernel).
func newKernel(t *testing.T, opts Options) *kernel {
	t.Helper()
	return openKernel(t, filepath.Join(t.TempDir(), "store"), opts)
}

// openKernel opens the store in dir, its index checked after every commit
// and the whole store when the test ends (storetest.CheckAtEnd), and
// serves it with opts. The seal delay defaults to an hour, so that
// nothing seals unless a test says so (sealNow). The filesystem is shut
// down and the store closed by close, or at the end of the test.
func openKernel(t *testing.T, dir string, opts Options) *kernel {
	t.Helper()
	return serveKernel(t, dir, opts, nil)
}

// serveKernel is openKernel for the server of connection c (nil: none),
// which resumes it (Connection.Resume) if an earlier server served it.
func serveKernel(t *testing.T, dir string, opts Options, c *Connection) *kernel {
	t.Helper()
	storetest.CheckAtEnd(t, dir)
	var inUse []uint64
	if c != nil {
		inUse = c.InUse()
	}
	s, unsealed, err := store.OpenKeeping(dir, inUse)
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	s.Index.Strict = storetest.Strict(t)
	if opts.SealDelay == 0 {
		opts.SealDelay = time.Hour
	}
	k := &kernel{t: t, store: s}
	if c != nil {
		opts.ConnectedAt = c.Since()
	}
	f, tree := New(s, opts, unsealed)
	k.fs = f
	mo := MountOptions(false, DefaultCacheTimeout, false)
	mo.ServerCallbacks = (*notifyLog)(k)
	k.raw = NodeFS(tree, mo, c)
	t.Cleanup(k.close)
	if c != nil && c.Generation > 1 {
		k.resumed = c.Resume()
	}
	return k
}

// close shuts the filesystem down and closes the store, once.
func (k *kernel) close() {
	k.closeOnce.Do(func() {
		k.fs.Shutdown()
		if err := k.store.Close(); err != nil {
			k.t.Errorf("closing the store: %v", err)
		}
	})
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// notifyLog is kernel as go-fuse's ServerCallbacks.
type notifyLog kernel

func (l *notifyLog) note(format string, args ...any) fuse.Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notes = append(l.notes, sprintf(format, args...))
	return fuse.OK
}

func (l *notifyLog) DeleteNotify(parent, child uint64, name string) fuse.Status {
	return l.note("delete %d %s", parent, name)
}

func (l *notifyLog) EntryNotify(parent uint64, name string) fuse.Status {
	if l.onEntry != nil {
		l.onEntry()
	}
	return l.note("entry %d %s", parent, name)
}

func (l *notifyLog) InodeNotify(node uint64, off, length int64) fuse.Status {
	return l.note("inode %d", node)
}

func (l *notifyLog) InodeRetrieveCache(node uint64, offset int64, dest []byte) (int, fuse.Status) {
	return 0, fuse.ENOSYS
}

func (l *notifyLog) InodeNotifyStoreCache(node uint64, offset int64, data []byte) fuse.Status {
	return fuse.ENOSYS
}

// notified returns the notifications sent so far, and forgets them.
func (k *kernel) notified() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := k.notes
	k.notes = nil
	return n
}

// waitNotified waits up to a second for notification want, sent from a
// goroutine of the tree's own.
func (k *kernel) waitNotified(want string) {
	k.t.Helper()
	var seen []string
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		seen = append(seen, k.notified()...)
		if slices.Contains(seen, want) {
			return
		}
	}
	k.t.Fatalf("no notification %q; sent: %q", want, seen)
}

// user is the caller of a request.
type user struct{ uid, gid uint32 }

var root = user{0, 0}

func (u user) header(node uint64) fuse.InHeader {
	return fuse.InHeader{NodeId: node, Caller: fuse.Caller{Owner: fuse.Owner{Uid: u.uid, Gid: u.gid}}}
}

func errnoOf(s fuse.Status) syscall.Errno { return syscall.Errno(s) }

// entry is what a LOOKUP, MKDIR, CREATE and the like answer.
type entry struct {
	node uint64 // FUSE node id
	attr fuse.Attr
}

func (k *kernel) lookup(parent uint64, name string) (entry, syscall.Errno) {
	var out fuse.EntryOut
	h := root.header(parent)
	st := k.raw.Lookup(nil, &h, name, &out)
	if st == fuse.OK && out.NodeId == 0 {
		return entry{}, syscall.ENOENT // a negative entry
	}
	return entry{out.NodeId, out.Attr}, errnoOf(st)
}

// walk looks up path, a path from the root, and fails the test if it
// does not resolve.
func (k *kernel) walk(path string) entry {
	k.t.Helper()
	e := entry{node: rootNode}
	for _, name := range strings.Split(path, "/") {
		var errno syscall.Errno
		if e, errno = k.lookup(e.node, name); errno != 0 {
			k.t.Fatalf("lookup %s (at %s): %v", path, name, errno)
		}
	}
	return e
}

func (k *kernel) mkdir(u user, parent uint64, name string, mode uint32) (entry, syscall.Errno) {
	var out fuse.EntryOut
	st := k.raw.Mkdir(nil, &fuse.MkdirIn{InHeader: u.header(parent), Mode: mode}, name, &out)
	return entry{out.NodeId, out.Attr}, errnoOf(st)
}

// mkdirAll makes every directory of path, as root with mode 0755, and
// fails the test if one cannot be made.
func (k *kernel) mkdirAll(path string) entry {
	k.t.Helper()
	e := entry{node: rootNode}
	for _, name := range strings.Split(path, "/") {
		next, errno := k.lookup(e.node, name)
		if errno == syscall.ENOENT {
			next, errno = k.mkdir(root, e.node, name, 0o755)
		}
		if errno != 0 {
			k.t.Fatalf("mkdir %s (at %s): %v", path, name, errno)
		}
		e = next
	}
	return e
}

func (k *kernel) mknod(parent uint64, name string, mode, rdev uint32) (entry, syscall.Errno) {
	var out fuse.EntryOut
	st := k.raw.Mknod(nil, &fuse.MknodIn{InHeader: root.header(parent), Mode: mode, Rdev: rdev}, name, &out)
	return entry{out.NodeId, out.Attr}, errnoOf(st)
}

// create creates and opens name for writing; fh is the handle.
func (k *kernel) create(u user, parent uint64, name string, mode uint32) (e entry, fh uint64, errno syscall.Errno) {
	var out fuse.CreateOut
	st := k.raw.Create(nil, &fuse.CreateIn{InHeader: u.header(parent), Flags: syscall.O_RDWR, Mode: mode}, name, &out)
	return entry{out.NodeId, out.Attr}, out.Fh, errnoOf(st)
}

// writeFile creates name in directory parent (as root, mode 0644) with
// content data and closes it, failing the test on any error.
func (k *kernel) writeFile(parent uint64, name string, data []byte) entry {
	k.t.Helper()
	e, fh, errno := k.create(root, parent, name, 0o644)
	if errno != 0 {
		k.t.Fatalf("create %s: %v", name, errno)
	}
	if _, errno := k.write(e.node, fh, 0, data); errno != 0 {
		k.t.Fatalf("write %s: %v", name, errno)
	}
	k.release(e.node, fh)
	return e
}

func (k *kernel) open(u user, node uint64, flags uint32) (fh uint64, openFlags uint32, errno syscall.Errno) {
	var out fuse.OpenOut
	st := k.raw.Open(nil, &fuse.OpenIn{InHeader: u.header(node), Flags: flags}, &out)
	return out.Fh, out.OpenFlags, errnoOf(st)
}

func (k *kernel) write(node, fh uint64, off uint64, data []byte) (uint32, syscall.Errno) {
	h := root.header(node)
	n, st := k.raw.Write(nil, &fuse.WriteIn{InHeader: h, Fh: fh, Offset: off, Size: uint32(len(data))}, data)
	return n, errnoOf(st)
}

func (k *kernel) read(node, fh uint64, off uint64, size int) ([]byte, syscall.Errno) {
	buf := make([]byte, size)
	res, st := k.raw.Read(nil, &fuse.ReadIn{InHeader: root.header(node), Fh: fh, Offset: off, Size: uint32(size)}, buf)
	if st != fuse.OK {
		return nil, errnoOf(st)
	}
	b, st := res.Bytes(buf)
	return slices.Clone(b), errnoOf(st)
}

// readFile opens node for reading, reads up to size bytes and closes it.
func (k *kernel) readFile(node uint64, size int) []byte {
	k.t.Helper()
	fh, _, errno := k.open(root, node, syscall.O_RDONLY)
	if errno != 0 {
		k.t.Fatalf("open node %d: %v", node, errno)
	}
	defer k.release(node, fh)
	b, errno := k.read(node, fh, 0, size)
	if errno != 0 {
		k.t.Fatalf("read node %d: %v", node, errno)
	}
	return b
}

func (k *kernel) fallocate(node, fh, off, size uint64, mode uint32) syscall.Errno {
	in := fuse.FallocateIn{InHeader: root.header(node), Fh: fh, Offset: off, Length: size, Mode: mode}
	return errnoOf(k.raw.Fallocate(nil, &in))
}

func (k *kernel) fsync(node, fh uint64, flags uint32) syscall.Errno {
	return errnoOf(k.raw.Fsync(nil, &fuse.FsyncIn{InHeader: root.header(node), Fh: fh, FsyncFlags: flags}))
}

// fsyncDir opens directory node, fsyncs it and closes it.
func (k *kernel) fsyncDir(node uint64) syscall.Errno {
	var open fuse.OpenOut
	if st := k.raw.OpenDir(nil, &fuse.OpenIn{InHeader: root.header(node)}, &open); st != fuse.OK {
		return errnoOf(st)
	}
	defer k.raw.ReleaseDir(&fuse.ReleaseIn{InHeader: root.header(node), Fh: open.Fh})
	return errnoOf(k.raw.FsyncDir(nil, &fuse.FsyncIn{InHeader: root.header(node), Fh: open.Fh}))
}

func (k *kernel) release(node, fh uint64) {
	k.raw.Release(nil, &fuse.ReleaseIn{InHeader: root.header(node), Fh: fh})
}

func (k *kernel) getattr(node uint64) (fuse.Attr, syscall.Errno) {
	var out fuse.AttrOut
	st := k.raw.GetAttr(nil, &fuse.GetAttrIn{InHeader: root.header(node)}, &out)
	return out.Attr, errnoOf(st)
}

func (k *kernel) setattr(u user, node uint64, in fuse.SetAttrIn) (fuse.Attr, syscall.Errno) {
	in.InHeader = u.header(node)
	var out fuse.AttrOut
	st := k.raw.SetAttr(nil, &in, &out)
	return out.Attr, errnoOf(st)
}

func (k *kernel) unlink(parent uint64, name string) syscall.Errno {
	h := root.header(parent)
	return errnoOf(k.raw.Unlink(nil, &h, name))
}

func (k *kernel) rmdir(parent uint64, name string) syscall.Errno {
	h := root.header(parent)
	return errnoOf(k.raw.Rmdir(nil, &h, name))
}

func (k *kernel) rename(parent uint64, name string, newParent uint64, newName string, flags uint32) syscall.Errno {
	in := fuse.RenameIn{InHeader: root.header(parent), Newdir: newParent, Flags: flags}
	return errnoOf(k.raw.Rename(nil, &in, name, newName))
}

func (k *kernel) link(target, parent uint64, name string) (entry, syscall.Errno) {
	var out fuse.EntryOut
	st := k.raw.Link(nil, &fuse.LinkIn{InHeader: root.header(parent), Oldnodeid: target}, name, &out)
	return entry{out.NodeId, out.Attr}, errnoOf(st)
}

func (k *kernel) symlink(parent uint64, target, name string) (entry, syscall.Errno) {
	var out fuse.EntryOut
	h := root.header(parent)
	st := k.raw.Symlink(nil, &h, target, name, &out)
	return entry{out.NodeId, out.Attr}, errnoOf(st)
}

// readdir lists directory node: each entry's name and inode number.
func (k *kernel) readdir(node uint64) (map[string]uint64, syscall.Errno) {
	var open fuse.OpenOut
	if st := k.raw.OpenDir(nil, &fuse.OpenIn{InHeader: root.header(node)}, &open); st != fuse.OK {
		return nil, errnoOf(st)
	}
	defer k.raw.ReleaseDir(&fuse.ReleaseIn{InHeader: root.header(node), Fh: open.Fh})
	names := map[string]uint64{}
	var off uint64
	for {
		buf := make([]byte, 64<<10)
		list := fuse.NewDirEntryList(buf, off)
		in := fuse.ReadIn{InHeader: root.header(node), Fh: open.Fh, Offset: off, Size: uint32(len(buf))}
		if st := k.raw.ReadDir(nil, &in, list); st != fuse.OK {
			return nil, errnoOf(st)
		}
		es, err := fuse.ParseDirEntries(list.Bytes())
		if err != nil {
			k.t.Fatalf("readdir of node %d: %v", node, err)
		}
		if len(es) == 0 {
			return names, 0
		}
		for _, e := range es {
			names[e.Name] = e.Ino
			off = e.Off
		}
	}
}

// forget drops the kernel's references to node, as FORGET does.
func (k *kernel) forget(node, lookups uint64) { k.raw.Forget(node, lookups) }

// inode reads inode ino's record from the index.
func (k *kernel) inode(ino uint64) (*index.Inode, error) {
	var rec *index.Inode
	err := k.store.Index.View(func(tx *index.Tx) (err error) {
		rec, err = tx.Inode(ino)
		return err
	})
	return rec, err
}

// mustInode is inode, failing the test on an error.
func (k *kernel) mustInode(ino uint64) *index.Inode {
	k.t.Helper()
	rec, err := k.inode(ino)
	if err != nil {
		k.t.Fatalf("inode %d: %v", ino, err)
	}
	return rec
}

// sealNow runs the seal of inode ino at once, as its timer would, in
// place of the timer: a seal it had scheduled is cancelled first.
func (k *kernel) sealNow(ino uint64) {
	k.disarm(ino)
	k.fs.sealing.Add(1) // what scheduleSealAfter counts for an armed timer
	var noTimer *time.Timer
	k.fs.seal(ino, &noTimer)
}

// armed says whether a seal of inode ino is scheduled.
func (k *kernel) armed(ino uint64) bool {
	k.fs.sealMu.Lock()
	defer k.fs.sealMu.Unlock()
	_, ok := k.fs.sealTimers[ino]
	return ok
}

// disarm cancels the scheduled seal of inode ino, if any, as Shutdown
// does.
func (k *kernel) disarm(ino uint64) {
	k.fs.sealMu.Lock()
	defer k.fs.sealMu.Unlock()
	if t, ok := k.fs.sealTimers[ino]; ok {
		if t.Stop() {
			k.fs.sealing.Done()
		}
		delete(k.fs.sealTimers, ino)
	}
}

// setattrSize truncates node to size, as root.
func (k *kernel) setattrSize(node, size uint64) (fuse.Attr, syscall.Errno) {
	var in fuse.SetAttrIn
	in.Valid, in.Size = fuse.FATTR_SIZE, size
	return k.setattr(root, node, in)
}

// waitSealed waits up to ten seconds for inode ino to be sealed.
func (k *kernel) waitSealed(ino uint64) {
	k.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if rec, err := k.inode(ino); err == nil && rec.Staging == 0 {
			return
		}
	}
	k.t.Fatalf("inode %d was not sealed within ten seconds", ino)
}

func (k *kernel) setxattr(node uint64, attr string, data []byte, flags uint32) syscall.Errno {
	in := fuse.SetXAttrIn{InHeader: root.header(node), Size: uint32(len(data)), Flags: flags}
	return errnoOf(k.raw.SetXAttr(nil, &in, attr, data))
}

func (k *kernel) getxattr(node uint64, attr string, dest []byte) (uint32, syscall.Errno) {
	h := root.header(node)
	n, st := k.raw.GetXAttr(nil, &h, attr, dest)
	return n, errnoOf(st)
}

func (k *kernel) listxattr(node uint64, dest []byte) (uint32, syscall.Errno) {
	h := root.header(node)
	n, st := k.raw.ListXAttr(nil, &h, dest)
	return n, errnoOf(st)
}

func (k *kernel) removexattr(node uint64, attr string) syscall.Errno {
	h := root.header(node)
	return errnoOf(k.raw.RemoveXAttr(nil, &h, attr))
}

// chunkFiles counts the chunk files in the store.
func (k *kernel) chunkFiles() int {
	k.t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(k.store.Dir, "chunks"), func(_ string, d iofs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	if err != nil {
		k.t.Fatalf("counting chunk files: %v", err)
	}
	return n
}
