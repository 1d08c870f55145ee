package fs

import (
	"encoding/binary"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/statefs/statefs/index"
)

// Connection is what a server is told of the FUSE connection it serves
// under a keeper: which server it is, the table of the kernel's file
// handles that the keeper holds for every server (handleTable), and, on a
// kernel that cannot send requests again, the table of the requests read
// and not yet answered (unansweredTable).
type Connection struct {
	// Generation counts the servers of the connection, from 1.
	Generation uint64
	handles    *handleTable
	layer      *resumer
	// unanswered records the requests read and not answered yet; nil
	// unless RecordUnanswered. staleNodes and staleNames are what those
	// that earlier servers left were on (FailUnanswered,
	// InvalidateUnanswered).
	unanswered *unansweredTable
	staleNodes []uint64
	staleNames []staleName
}

// NewConnection maps the handle table kept in f for the server of
// generation gen.
func NewConnection(f *os.File, gen uint64) (*Connection, error) {
	t, err := openHandleTable(f, gen)
	if err != nil {
		return nil, err
	}
	return &Connection{Generation: gen, handles: t}, nil
}

// Since is when the connection was made, in nanoseconds since the epoch:
// every reply record written since is this connection's (fs.Options.ConnectedAt).
func (c *Connection) Since() int64 { return c.handles.head.connectedAt.Load() }

// InUse lists the inodes the kernel holds file handles on that earlier
// servers gave out: the store must keep them (their content and, for one
// with no name left, their record) and seal none of them until the kernel
// releases its handles.
func (c *Connection) InUse() []uint64 {
	var inos []uint64
	for _, i := range c.handles.open() {
		if ino := c.handles.slots[i].ino; ino&viewInoBits == 0 {
			inos = append(inos, ino)
		}
	}
	return inos
}

// Resumed is what a server did to take over a connection.
type Resumed struct {
	Reopened int // handles of earlier servers opened again
	// Lost counts the handles that could not be: their requests fail with
	// EIO until the kernel releases them, and their inodes are neither
	// sealed nor reaped until then.
	Lost int
	// Failed counts the requests earlier servers read and left unanswered
	// that this one answered with EIO, on a kernel that cannot send them
	// again (Connection.FailUnanswered).
	Failed int
}

// Resume opens again, in this server, every file handle the kernel holds
// from earlier servers, each with its own flags, before the server reads
// its first request; the kernel's numbers for them stay valid. Call it
// after the server's INIT (NewServer) and before Serve.
func (c *Connection) Resume() Resumed {
	return c.layer.reopen()
}

// resumer is the RawFileSystem layer that lets a server serve a connection
// other servers served before it (DESIGN.md, "Nodes and handles across
// servers"):
//
//   - every file handle the kernel is given is a slot of the handle table,
//     and each request's handle is turned into go-fuse's handle for it;
//   - a server that resumes a connection makes again the node of every
//     node id it does not know (revive), counts the lookups its node bridge
//     granted, and passes on no FORGET beyond them: the kernel forgets
//     lookups earlier servers granted too;
//   - an inode whose open handles the kernel was given a passthrough
//     backing id for keeps that id for every open until its last such
//     handle is released: the kernel allows one backing file per inode
//     while passthrough handles are open on it.
type resumer struct {
	fuse.RawFileSystem
	fs      *FS
	table   *handleTable
	resumed bool // earlier servers served the connection

	server *fuse.Server

	// grants counts, by node id, the lookups the node bridge granted in
	// this server; resumed only.
	grants [grantShards]grantShard
	// reviveMu makes one node again at a time: a request on a node being
	// made waits, and finds it whole (revive).
	reviveMu sync.Mutex
	// stripes order an open of an inode and the release of a handle on it,
	// each with what it does with an earlier server's backing id; taken
	// before openOrder's.
	stripes [openStripes]sync.Mutex

	mu sync.Mutex
	// backing is, by inode, the backing id an earlier server gave the
	// kernel, and how many handles the kernel holds with it.
	backing map[uint64]*oldBacking
	// pinned holds the open state of inodes the kernel has handles on that
	// could not be opened again, by slot: none of them is sealed or reaped
	// until the kernel releases the handle.
	pinned map[uint32]*file
}

const grantShards = 64

type grantShard struct {
	mu sync.Mutex
	n  map[uint64]uint64
}

type oldBacking struct {
	id    int32
	users int
}

var _ = (fuse.RawFileSystem)((*resumer)(nil))

func newResumer(inner fuse.RawFileSystem, f *FS, c *Connection) *resumer {
	r := &resumer{RawFileSystem: inner, fs: f, table: c.handles, resumed: c.Generation > 1,
		backing: map[uint64]*oldBacking{}, pinned: map[uint32]*file{}}
	for i := range r.grants {
		r.grants[i].n = map[uint64]uint64{}
	}
	c.layer = r
	return r
}

func (r *resumer) Init(s *fuse.Server) {
	r.server = s
	r.RawFileSystem.Init(s)
}

// resent reports whether a request is one the kernel sent again to this
// server after an earlier one read it and died (FUSE_NOTIFY_RESEND).
func resent(h *fuse.InHeader) bool { return h.Unique&resentUnique != 0 }

// Open flags of the resumer's own, which no open(2) sets, for the opens it
// makes again at a takeover (FS.open):
const (
	// reopenCached: the kernel was given the handle without a backing id,
	// so it serves it through its page cache, and the new one must not ask
	// for passthrough either.
	reopenCached = 1 << 31
	// reopening: the kernel holds the handle already; the checks of a new
	// open for writing (a full disk) do not apply.
	reopening = 1 << 30
)

// serverCaller is the caller of the requests a server makes itself.
var serverCaller = fuse.Caller{Owner: fuse.Owner{Uid: 0, Gid: 0}}

// reopen opens every handle of earlier servers again (Connection.Resume).
func (r *resumer) reopen() Resumed {
	var res Resumed
	for _, i := range r.table.open() {
		s := &r.table.slots[i]
		if s.backingID != 0 {
			b := r.backing[s.ino]
			if b == nil {
				b = &oldBacking{id: s.backingID}
				r.backing[s.ino] = b
			}
			b.users++
		}
		in := fuse.OpenIn{InHeader: fuse.InHeader{NodeId: s.ino, Caller: serverCaller},
			Flags: s.flags&^(syscall.O_CREAT|syscall.O_EXCL|syscall.O_TRUNC) | reopening}
		if s.backingID == 0 {
			in.Flags |= reopenCached
		}
		var out fuse.OpenOut
		st := r.revive(s.ino)
		if st.Ok() {
			if s.dir != 0 {
				st = r.RawFileSystem.OpenDir(nil, &in, &out)
			} else {
				st = r.RawFileSystem.Open(nil, &in, &out)
			}
		}
		if !st.Ok() {
			slog.Error("a file handle the kernel holds could not be opened again; its requests fail until it is closed", "inode", s.ino, "flags", s.flags, "err", syscall.Errno(st))
			s.bridgeFh.Store(0)
			if s.dir == 0 && s.ino&viewInoBits == 0 {
				r.pinned[i] = r.fs.pin(s.ino)
			}
			res.Lost++
			continue
		}
		s.bridgeFh.Store(out.Fh)
		res.Reopened++
	}
	return res
}

// viewInoBits are set in the number of every inode of the views, never in
// one the index hands out.
const viewInoBits = 1<<63 | 1<<62

func (r *resumer) shard(id uint64) *grantShard { return &r.grants[id%grantShards] }

// known reports whether the node bridge of this server knows node id.
func (r *resumer) known(id uint64) bool {
	if !r.resumed || id == fuse.FUSE_ROOT_ID {
		return true
	}
	sh := r.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.n[id] > 0
}

func (r *resumer) granted(id uint64) {
	if !r.resumed || id == 0 {
		return
	}
	sh := r.shard(id)
	sh.mu.Lock()
	sh.n[id]++
	sh.mu.Unlock()
}

// node makes sure the node bridge knows node id.
func (r *resumer) node(id uint64) fuse.Status {
	if r.known(id) {
		return fuse.OK
	}
	return r.revive(id)
}

// revive makes the node of id in the node bridge, and the nodes of its
// parents up to one the bridge knows if it is a directory, so that its
// path is whole: a directory's path says who owns what is made in it. The
// node counts as known only once its path is whole; if that fails, the
// lookups made are given back and the request fails.
func (r *resumer) revive(id uint64) fuse.Status {
	r.reviveMu.Lock()
	defer r.reviveMu.Unlock()
	if r.known(id) {
		return fuse.OK
	}
	var out fuse.EntryOut
	if st := r.RawFileSystem.Lookup(nil, &fuse.InHeader{NodeId: id, Caller: serverCaller}, ".", &out); !st.Ok() {
		return st
	}
	made := []uint64{id}
	for child := id; out.Attr.Mode&syscall.S_IFMT == syscall.S_IFDIR && child != index.RootIno && child&viewInoBits == 0; {
		var parent fuse.EntryOut
		if st := r.RawFileSystem.Lookup(nil, &fuse.InHeader{NodeId: child, Caller: serverCaller}, "..", &parent); !st.Ok() {
			slog.Error("the parent of a directory the kernel holds could not be found", "inode", child, "err", syscall.Errno(st))
			for _, n := range made {
				r.RawFileSystem.Forget(n, 1)
			}
			return fuse.EIO
		}
		if r.known(parent.NodeId) {
			// Linked to a parent whose path is whole; the lookup of it
			// was this server's own, not the kernel's.
			r.RawFileSystem.Forget(parent.NodeId, 1)
			break
		}
		made = append(made, parent.NodeId)
		child, out = parent.NodeId, parent
	}
	for _, n := range made {
		r.granted(n)
	}
	return fuse.OK
}

func (r *resumer) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if st := r.node(h.NodeId); !st.Ok() {
		return st
	}
	st := r.RawFileSystem.Lookup(cancel, h, name, out)
	if st.Ok() {
		r.granted(out.NodeId)
	}
	return st
}

// Forget passes on no more lookups than this server's bridge granted: the
// rest were granted by earlier servers.
func (r *resumer) Forget(id, n uint64) {
	if r.resumed && id != fuse.FUSE_ROOT_ID {
		sh := r.shard(id)
		sh.mu.Lock()
		g := sh.n[id]
		n = min(n, g)
		if g -= n; g == 0 {
			delete(sh.n, id)
		} else {
			sh.n[id] = g
		}
		sh.mu.Unlock()
		if n == 0 {
			return
		}
	}
	r.RawFileSystem.Forget(id, n)
}

// direntPlusSize is the size of the kernel's struct fuse_dirent before
// the name: inode, offset, name length and type.
const direntPlusSize = 24

func (r *resumer) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if st := r.handle(&in.InHeader, &in.Fh); !st.Ok() {
		return st
	}
	st := r.RawFileSystem.ReadDirPlus(cancel, in, out)
	if st.Ok() && r.resumed {
		// Each entry with a node id is a lookup the kernel counts.
		buf := out.Bytes()
		entry := int(unsafe.Sizeof(fuse.EntryOut{}))
		for len(buf) >= entry+direntPlusSize {
			id := binary.NativeEndian.Uint64(buf)
			nameLen := int(binary.NativeEndian.Uint32(buf[entry+16:]))
			r.granted(id)
			size := entry + direntPlusSize + (nameLen+7)&^7
			buf = buf[min(size, len(buf)):]
		}
	}
	return st
}

// handle makes sure the node of a request is known and turns the kernel's
// file handle *fh into the bridge's.
func (r *resumer) handle(h *fuse.InHeader, fh *uint64) fuse.Status {
	if st := r.node(h.NodeId); !st.Ok() {
		return st
	}
	if *fh == 0 {
		return fuse.OK
	}
	s, _ := r.table.slot(*fh)
	if s == nil {
		return fuse.EBADF
	}
	b := s.bridgeFh.Load()
	if b == 0 {
		return fuse.EIO // a handle that could not be opened again
	}
	*fh = b
	return fuse.OK
}

// stripe is the lock of inode id's opens and releases.
func (r *resumer) stripe(id uint64) *sync.Mutex { return &r.stripes[id%openStripes] }

// opened records a handle the bridge opened and gives the kernel its slot.
// The caller holds the inode's stripe.
func (r *resumer) opened(h *fuse.InHeader, flags uint32, dir bool, out *fuse.OpenOut) fuse.Status {
	if r.resumed && out.BackingID != 0 {
		r.mu.Lock()
		if b := r.backing[h.NodeId]; b != nil {
			// The kernel keeps the backing file earlier servers gave it
			// for this inode; the bridge's own id stays unused.
			out.BackingID = b.id
			b.users++
		}
		r.mu.Unlock()
	}
	fh, err := r.table.add(h.NodeId, h.Unique&^resentUnique, flags, dir, out.Fh, out)
	if err != nil {
		slog.Error("cannot record a file handle", "inode", h.NodeId, "err", err)
		r.release(nil, &fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: h.NodeId, Caller: serverCaller}, Fh: out.Fh}, out.BackingID, dir)
		return fuse.Status(syscall.ENFILE)
	}
	out.Fh = fh
	return fuse.OK
}

// release ends the bridge's handle of in (its Fh is the bridge's), and
// the kernel's use with it of an earlier server's backing id. The caller
// holds the inode's stripe.
func (r *resumer) release(cancel <-chan struct{}, in *fuse.ReleaseIn, backingID int32, dir bool) {
	if in.Fh != 0 {
		if dir {
			r.RawFileSystem.ReleaseDir(in)
		} else {
			r.RawFileSystem.Release(cancel, in)
		}
	}
	if backingID == 0 {
		return
	}
	id := in.NodeId
	r.mu.Lock()
	b := r.backing[id]
	last := false
	if b != nil && b.id == backingID {
		b.users--
		if last = b.users == 0; last {
			delete(r.backing, id)
		}
	}
	r.mu.Unlock()
	if last && r.server != nil {
		if e := r.server.UnregisterBackingFd(backingID); e != 0 {
			slog.Warn("closing a passthrough backing id of an earlier server", "inode", id, "id", backingID, "err", e)
		}
	}
}

// reopened finds the handle an earlier server opened for a request the
// kernel sent again: the open was done, its answer never given.
func (r *resumer) reopened(h *fuse.InHeader) (uint64, *handleSlot) {
	if !resent(h) {
		return 0, nil
	}
	unique := h.Unique &^ resentUnique
	for _, i := range r.table.open() {
		if s := &r.table.slots[i]; s.unique == unique {
			return s.gen.Load()<<32 | uint64(i), s
		}
	}
	return 0, nil
}

// answerOpen answers an open from the handle of slot s, numbered fh, as
// it was answered when it was made.
func answerOpen(fh uint64, s *handleSlot, out *fuse.OpenOut) fuse.Status {
	if s.bridgeFh.Load() == 0 {
		return fuse.EIO // could not be opened again
	}
	out.Fh, out.BackingID, out.OpenFlags = fh, s.backingID, s.openFlags
	return fuse.OK
}

func (r *resumer) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return r.open(cancel, in, out, false)
}

func (r *resumer) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return r.open(cancel, in, out, true)
}

func (r *resumer) open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut, dir bool) fuse.Status {
	if st := r.node(in.NodeId); !st.Ok() {
		return st
	}
	if fh, s := r.reopened(&in.InHeader); s != nil && s.ino == in.NodeId {
		return answerOpen(fh, s, out)
	}
	in.Flags &^= reopenCached | reopening // never the kernel's
	mu := r.stripe(in.NodeId)
	mu.Lock()
	defer mu.Unlock()
	var st fuse.Status
	if dir {
		st = r.RawFileSystem.OpenDir(cancel, in, out)
	} else {
		st = r.RawFileSystem.Open(cancel, in, out)
	}
	if !st.Ok() {
		return st
	}
	return r.opened(&in.InHeader, in.Flags, dir, out)
}

func (r *resumer) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if st := r.node(in.NodeId); !st.Ok() {
		return st
	}
	if fh, s := r.reopened(&in.InHeader); s != nil {
		// Made and opened by an earlier server: the answer is its entry
		// and that handle.
		if st := r.Lookup(cancel, &in.InHeader, name, &out.EntryOut); !st.Ok() {
			return st
		}
		return answerOpen(fh, s, &out.OpenOut)
	}
	st := r.RawFileSystem.Create(cancel, in, name, out)
	if !st.Ok() {
		return st
	}
	r.granted(out.NodeId)
	h := in.InHeader
	h.NodeId = out.NodeId // the handle is on the new file, which no earlier server knew
	return r.opened(&h, in.Flags, false, &out.OpenOut)
}

// Tmpfile makes a nameless file and opens it: its handle is recorded as a
// create's.
func (r *resumer) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	if st := r.node(in.NodeId); !st.Ok() {
		return st
	}
	st := r.RawFileSystem.Tmpfile(cancel, in, out)
	if !st.Ok() {
		return st
	}
	r.granted(out.NodeId)
	h := in.InHeader
	h.NodeId = out.NodeId
	return r.opened(&h, in.Flags, false, &out.OpenOut)
}

func (r *resumer) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	r.releaseSlot(cancel, in, false)
}

func (r *resumer) ReleaseDir(in *fuse.ReleaseIn) {
	r.releaseSlot(nil, in, true)
}

func (r *resumer) releaseSlot(cancel <-chan struct{}, in *fuse.ReleaseIn, dir bool) {
	s, i := r.table.slot(in.Fh)
	if s == nil {
		slog.Warn("the kernel released a file handle no server gave it", "inode", in.NodeId, "fh", in.Fh)
		return
	}
	mu := r.stripe(in.NodeId)
	mu.Lock()
	defer mu.Unlock()
	backingID := s.backingID
	in.Fh = s.bridgeFh.Load()
	if in.Fh != 0 {
		if st := r.node(in.NodeId); !st.Ok() {
			in.Fh = 0
		}
	}
	r.release(cancel, in, backingID, dir)
	r.mu.Lock()
	pin := r.pinned[i]
	delete(r.pinned, i)
	r.mu.Unlock()
	if pin != nil {
		r.fs.unpin(pin)
	}
	r.table.remove(i)
}

// The requests below carry a node id, and some a file handle: each makes
// sure the node is known and turns the handle into the bridge's.

func (r *resumer) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	fh := uint64(0)
	if in.Flags()&fuse.FUSE_GETATTR_FH != 0 {
		fh = in.Fh_
	}
	if st := r.handle(&in.InHeader, &fh); !st.Ok() {
		return st
	}
	if fh != 0 {
		in.Fh_ = fh
	}
	return r.RawFileSystem.GetAttr(cancel, in, out)
}

func (r *resumer) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	fh := uint64(0)
	if in.Valid&fuse.FATTR_FH != 0 {
		fh = in.Fh
	}
	if st := r.handle(&in.InHeader, &fh); !st.Ok() {
		return st
	}
	if fh != 0 {
		in.Fh = fh
	}
	return r.RawFileSystem.SetAttr(cancel, in, out)
}

func (r *resumer) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	fh := uint64(0)
	if in.GetattrFlags&fuse.FUSE_GETATTR_FH != 0 {
		fh = in.Fh
	}
	if st := r.handle(&in.InHeader, &fh); !st.Ok() {
		return st
	}
	if fh != 0 {
		in.Fh = fh
	}
	return r.RawFileSystem.Statx(cancel, in, out)
}

func (r *resumer) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if st := r.node(in.NodeId); !st.Ok() {
		return st
	}
	st := r.RawFileSystem.Mknod(cancel, in, name, out)
	if st.Ok() {
		r.granted(out.NodeId)
	}
	return st
}

func (r *resumer) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	if st := r.node(in.NodeId); !st.Ok() {
		return st
	}
	st := r.RawFileSystem.Mkdir(cancel, in, name, out)
	if st.Ok() {
		r.granted(out.NodeId)
	}
	return st
}

func (r *resumer) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	if st := r.node(h.NodeId); !st.Ok() {
		return st
	}
	st := r.RawFileSystem.Symlink(cancel, h, target, name, out)
	if st.Ok() {
		r.granted(out.NodeId)
	}
	return st
}

func (r *resumer) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if st := r.node(in.NodeId); !st.Ok() {
		return st
	}
	if st := r.node(in.Oldnodeid); !st.Ok() {
		return st
	}
	st := r.RawFileSystem.Link(cancel, in, name, out)
	if st.Ok() {
		r.granted(out.NodeId)
	}
	return st
}

func (r *resumer) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if st := r.node(h.NodeId); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Unlink(cancel, h, name)
}

func (r *resumer) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if st := r.node(h.NodeId); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Rmdir(cancel, h, name)
}

func (r *resumer) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if st := r.node(in.NodeId); !st.Ok() {
		return st
	}
	if st := r.node(in.Newdir); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Rename(cancel, in, oldName, newName)
}

func (r *resumer) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	if st := r.node(h.NodeId); !st.Ok() {
		return nil, st
	}
	return r.RawFileSystem.Readlink(cancel, h)
}

func (r *resumer) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	if st := r.node(in.NodeId); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Access(cancel, in)
}

func (r *resumer) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	if st := r.node(h.NodeId); !st.Ok() {
		return 0, st
	}
	return r.RawFileSystem.GetXAttr(cancel, h, attr, dest)
}

func (r *resumer) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	if st := r.node(h.NodeId); !st.Ok() {
		return 0, st
	}
	return r.RawFileSystem.ListXAttr(cancel, h, dest)
}

func (r *resumer) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	if st := r.node(in.NodeId); !st.Ok() {
		return st
	}
	return r.RawFileSystem.SetXAttr(cancel, in, attr, data)
}

func (r *resumer) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	if st := r.node(h.NodeId); !st.Ok() {
		return st
	}
	return r.RawFileSystem.RemoveXAttr(cancel, h, attr)
}

func (r *resumer) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	if st := r.node(h.NodeId); !st.Ok() {
		return st
	}
	return r.RawFileSystem.StatFs(cancel, h, out)
}

func (r *resumer) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	if st := r.handle(&in.InHeader, &in.Fh); !st.Ok() {
		return nil, st
	}
	return r.RawFileSystem.Read(cancel, in, buf)
}

func (r *resumer) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	if st := r.handle(&in.InHeader, &in.Fh); !st.Ok() {
		return 0, st
	}
	return r.RawFileSystem.Write(cancel, in, data)
}

func (r *resumer) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	if st := r.handle(&in.InHeader, &in.Fh); !st.Ok() {
		return 0, st
	}
	return r.RawFileSystem.Writev(cancel, in, data)
}

func (r *resumer) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	if st := r.handle(&in.InHeader, &in.Fh); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Lseek(cancel, in, out)
}

func (r *resumer) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	if st := r.handle(&in.InHeader, &in.Fh); !st.Ok() {
		return st
	}
	return r.RawFileSystem.GetLk(cancel, in, out)
}

func (r *resumer) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	if st := r.handle(&in.InHeader, &in.Fh); !st.Ok() {
		return st
	}
	return r.RawFileSystem.SetLk(cancel, in)
}

func (r *resumer) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	if st := r.handle(&in.InHeader, &in.Fh); !st.Ok() {
		return st
	}
	return r.RawFileSystem.SetLkw(cancel, in)
}

func (r *resumer) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	if st := r.handle(&in.InHeader, &in.FhIn); !st.Ok() {
		return 0, st
	}
	if st := r.handle(&fuse.InHeader{NodeId: in.NodeIdOut}, &in.FhOut); !st.Ok() {
		return 0, st
	}
	return r.RawFileSystem.CopyFileRange(cancel, in)
}

func (r *resumer) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	if st := r.handle(&in.InHeader, &in.Fh); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Ioctl(cancel, in, inbuf, out, outbuf)
}

func (r *resumer) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	if st := r.handle(&in.InHeader, &in.Fh); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Flush(cancel, in)
}

func (r *resumer) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if st := r.handle(&in.InHeader, &in.Fh); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Fsync(cancel, in)
}

func (r *resumer) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	if st := r.handle(&in.InHeader, &in.Fh); !st.Ok() {
		return st
	}
	return r.RawFileSystem.FsyncDir(cancel, in)
}

func (r *resumer) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	if st := r.handle(&in.InHeader, &in.Fh); !st.Ok() {
		return st
	}
	return r.RawFileSystem.Fallocate(cancel, in)
}

func (r *resumer) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if st := r.handle(&in.InHeader, &in.Fh); !st.Ok() {
		return st
	}
	return r.RawFileSystem.ReadDir(cancel, in, out)
}
