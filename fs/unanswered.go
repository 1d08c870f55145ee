package fs

import (
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// unansweredTable records the unique ids of the requests a server has
// read and may not have answered yet, in a memory file the keeper owns, so
// that the next server of the connection can answer them with an error
// when the kernel cannot send them again (FUSE_NOTIFY_RESEND, Linux 6.9):
// a request the kernel waits for an answer to would otherwise wait until
// the mount ends. Answering an id is always safe then. The kernel never
// reuses an id on a connection, and a reply to one it no longer waits for
// is refused (ENOENT) and changes nothing; while no server reads, the
// kernel waits only for the requests the dead server read. So the table
// may list more than was left unanswered; what matters is that every
// request still unanswered is in it, which holds within two bounds: a
// request that finds every slot taken (more than inFlightSlots in flight)
// is in no slot, and one in no slot is answered only if its id is within
// the window of the highest recorded. Beyond them its caller waits until
// the mount ends, as with no table.
//
// A request is written in a slot of inFlight while the server works on it,
// and into the ring of the last ones done when its layer returns; its
// answer is written by go-fuse after that, and the ring keeps it until
// recentSlots requests later. go-fuse reads a request before the layer
// sees it, so a request in that gap is in no slot: the next server answers
// as well every id within window of the highest recorded, on both sides
// (ids rise as the kernel queues requests, and the server reads them
// nearly in that order). Clearing the table keeps that highest id, so
// that a server that reads the requests queued while none served and dies
// before it records one leaves them in the window too; with nothing ever
// recorded, the window starts at the kernel's first id.
//
// A slot also says which node the request is on and which names it
// changes: the dead server may have changed them before it died, and the
// kernel, given an error, keeps what it cached of them (a name it looked
// up as missing, for --cache-timeout), so the next server tells it to drop
// those (Connection.InvalidateUnanswered).
//
// Claiming and clearing a slot are single atomic operations on shared
// memory, no system call: a server killed at any point leaves each slot
// either empty or holding an id. A slot's node and names are written after
// its claim: a server killed between leaves the names of the slot's
// previous request, whose invalidation costs the kernel a lookup and is
// otherwise harmless. One server at a time records into the table, as for
// the handle table.
type unansweredTable struct {
	mem      []byte
	inFlight []unansweredSlot
	recent   []atomic.Uint64 // the ring of the last requests done
	next     atomic.Uint64   // where the next claim looks first
	done     atomic.Uint64   // requests done, the ring's position
}

// unansweredSlot is one request in flight; 576 bytes.
type unansweredSlot struct {
	unique atomic.Uint64 // 0: a free slot
	node   uint64        // the node the request is on
	// names are the entries it changes (a rename's two), parent 0 for
	// none.
	names [2]slotName
	// For a RELEASE or RELEASEDIR, the kernel's handle number and the
	// request that opened it (the handle table's unique); 0 otherwise.
	fh, opened uint64
}

type slotName struct {
	parent uint64
	len    uint64
	name   [256]byte
}

const (
	// inFlightSlots bounds the requests recorded at once: a request that
	// finds every slot taken (more threads waiting on the mount at once)
	// is not recorded.
	inFlightSlots = 1 << 11
	// recentSlots is how many requests done the ring keeps.
	recentSlots = 1 << 10
	// unansweredWindow is how many ids on each side of the highest
	// recorded one the next server answers: requests read and not yet
	// recorded, or answered after their last record was overwritten.
	unansweredWindow = 1 << 10

	unansweredSize = inFlightSlots*int(unsafe.Sizeof(unansweredSlot{})) + recentSlots*8
)

// idStep is the distance between two requests' ids: the kernel numbers
// ordinary requests with even ids and an INTERRUPT with the id of the
// request it interrupts plus one (FUSE_INT_REQ_BIT, Linux 5.0 or later).
const idStep = 2

// openUnansweredTable maps the table kept in f.
func openUnansweredTable(f *os.File) (*unansweredTable, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("unanswered requests table: %w", err)
	}
	if st.Size < int64(unansweredSize) {
		if err := f.Truncate(int64(unansweredSize)); err != nil {
			return nil, fmt.Errorf("unanswered requests table: %w", err)
		}
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, unansweredSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("unanswered requests table: %w", err)
	}
	slots := unsafe.Slice((*unansweredSlot)(unsafe.Pointer(&mem[0])), inFlightSlots)
	ring := unsafe.Pointer(&mem[inFlightSlots*int(unsafe.Sizeof(unansweredSlot{}))])
	return &unansweredTable{mem: mem, inFlight: slots, recent: unsafe.Slice((*atomic.Uint64)(ring), recentSlots)}, nil
}

// begin records request unique, on node, as read and unanswered, and
// returns its slot for name and end; inFlightSlots when every slot is
// taken.
func (t *unansweredTable) begin(unique, node uint64) uint32 {
	start := t.next.Add(1)
	for i := range uint64(inFlightSlots) {
		slot := uint32((start + i) % inFlightSlots)
		if s := &t.inFlight[slot]; s.unique.CompareAndSwap(0, unique) {
			s.node = node
			s.names[0].parent, s.names[1].parent = 0, 0
			s.fh, s.opened = 0, 0
			return slot
		}
	}
	return inFlightSlots
}

// name records the i-th name (0 or 1) the request of slot changes: name in
// directory parent.
func (t *unansweredTable) name(slot uint32, i int, parent uint64, name string) {
	if slot == inFlightSlots {
		return
	}
	n := &t.inFlight[slot].names[i]
	n.len = uint64(copy(n.name[:], name))
	n.parent = parent
}

// releasing records that the request of slot releases the kernel's handle
// fh, which request opened made.
func (t *unansweredTable) releasing(slot uint32, fh, opened uint64) {
	if slot == inFlightSlots {
		return
	}
	t.inFlight[slot].fh, t.inFlight[slot].opened = fh, opened
}

// end moves the request of slot to the ring of those done: its answer is
// about to be written. The ring has it before the slot is freed.
func (t *unansweredTable) end(slot uint32) {
	if slot == inFlightSlots {
		return
	}
	t.recent[(t.done.Add(1)-1)%recentSlots].Store(t.inFlight[slot].unique.Load())
	t.inFlight[slot].unique.Store(0)
}

// unanswered lists, in increasing order, the ids the servers before this
// one may have left unanswered: those in flight, those done last, and
// those within unansweredWindow of the highest of them (of the kernel's
// first id if none was ever recorded). Call it before the server reads a
// request: it lists this server's own too.
func (t *unansweredTable) unanswered() []uint64 {
	var ids []uint64
	for i := range t.inFlight {
		if id := t.inFlight[i].unique.Load(); id != 0 {
			ids = append(ids, id)
		}
	}
	for i := range t.recent {
		if id := t.recent[i].Load(); id != 0 {
			ids = append(ids, id)
		}
	}
	highest := t.highest() &^ (idStep - 1)
	low := uint64(idStep)
	if highest > low+unansweredWindow*idStep {
		low = highest - unansweredWindow*idStep
	}
	for id := low; id <= highest+unansweredWindow*idStep; id += idStep {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// highest is the highest id in a slot or in the ring; 0 for none.
func (t *unansweredTable) highest() uint64 {
	highest := uint64(0)
	for i := range t.inFlight {
		highest = max(highest, t.inFlight[i].unique.Load())
	}
	for i := range t.recent {
		highest = max(highest, t.recent[i].Load())
	}
	return highest
}

// stale lists the nodes and the names the requests in flight were on.
func (t *unansweredTable) stale() (nodes []uint64, names []staleName) {
	for i := range t.inFlight {
		s := &t.inFlight[i]
		if s.unique.Load() == 0 {
			continue
		}
		nodes = append(nodes, s.node)
		for _, n := range s.names {
			if n.parent != 0 {
				names = append(names, staleName{n.parent, string(n.name[:min(n.len, uint64(len(n.name)))])})
			}
		}
	}
	return nodes, names
}

// releases lists the handles the releases in flight release, each with
// the request that opened it.
func (t *unansweredTable) releases() (fhs, opened []uint64) {
	for i := range t.inFlight {
		if s := &t.inFlight[i]; s.unique.Load() != 0 && s.opened != 0 {
			fhs, opened = append(fhs, s.fh), append(opened, s.opened)
		}
	}
	return fhs, opened
}

// staleName is a name a request in flight may have changed.
type staleName struct {
	parent uint64
	name   string
}

// clear empties the table once what it listed is answered, but for the
// highest id, which it keeps in the ring: the window stays anchored there
// for the requests that follow it (unansweredTable). Answering that id
// again costs an ENOENT. Call it before this server records a request:
// its own go into the ring from the start and overwrite it.
func (t *unansweredTable) clear() {
	highest := t.highest()
	for i := range t.inFlight {
		t.inFlight[i].unique.Store(0)
	}
	for i := range t.recent {
		t.recent[i].Store(0)
	}
	t.recent[0].Store(highest)
}

// RecordUnanswered makes this server record every request it reads, until
// it answers it, in the table the keeper holds in f (unansweredTable), so
// that the next server can answer with an error what this one leaves
// unanswered. Call it before Recording, on a kernel that cannot send those
// requests again (FUSE_NOTIFY_RESEND, Linux 6.9).
func (c *Connection) RecordUnanswered(f *os.File) error {
	t, err := openUnansweredTable(f)
	if err != nil {
		return err
	}
	c.unanswered = t
	return nil
}

// Recording returns raw with the layer that records its requests above it
// if RecordUnanswered was called, and raw itself otherwise (or on a nil
// Connection: no keeper).
func (c *Connection) Recording(raw fuse.RawFileSystem) fuse.RawFileSystem {
	if !c.RecordsUnanswered() {
		return raw
	}
	return &recorder{RawFileSystem: raw, t: c.unanswered, handles: c.handles}
}

// FailUnanswered answers the requests the servers before this one read
// and may have left unanswered, on a kernel that refused to send them
// again, in this order: it releases the file handles that the RELEASE and
// RELEASEDIR requests in its slots were releasing (releaseUnanswered),
// lists the requests (more than were left; see unansweredTable for which),
// has answer answer them (returning how many the kernel still waited
// for), and clears the table. A server that dies on the way leaves the
// table for the next to do it all again: the handles are released
// already, and an id answered already is refused. It keeps the nodes and
// names the requests in its slots were on, for InvalidateUnanswered. Call
// it after Resume and before Serve; it returns how many requests answer
// answered and how many handles it released.
func (c *Connection) FailUnanswered(answer func(ids []uint64) int) (failed, released int) {
	if !c.RecordsUnanswered() {
		return 0, 0
	}
	released = c.releaseUnanswered()
	c.staleNodes, c.staleNames = c.unanswered.stale()
	failed = answer(c.unanswered.unanswered())
	c.unanswered.clear()
	return failed, released
}

// releaseUnanswered releases, in this server, the file handles that the
// RELEASE and RELEASEDIR requests in the table's slots were releasing: the
// kernel forgot them already (it ignores the error the request is then
// answered with), and the handle table would otherwise keep them, and
// their inodes unsealed, until the mount ends. A handle whose slot no
// longer names the open it recorded was released already, its slot given
// to another open since, and is left alone. A release in no slot (one the
// table answers only by its window) is answered and not done: its handle
// stays until the mount ends. It returns how many it released.
func (c *Connection) releaseUnanswered() int {
	released := 0
	fhs, opened := c.unanswered.releases()
	for i, fh := range fhs {
		s, _ := c.handles.slot(fh)
		if s == nil || s.unique != opened[i] {
			continue
		}
		c.layer.releaseSlot(nil, &fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: s.ino, Caller: serverCaller}, Fh: fh}, s.dir != 0)
		released++
	}
	return released
}

// InvalidateUnanswered tells the kernel to drop what it caches of the
// nodes and the names that the requests in the table's slots were on when
// FailUnanswered answered them (attributes, content, a directory's
// listing, an entry): the dead server may have changed them, and the
// kernel, given an error, keeps what it had. It drops them for every
// request in a slot, answered already or not, which costs the kernel a
// lookup at most. Run it once the server serves, not before: to drop a
// name, the kernel takes its directory's lock, which a request waiting
// for this server may hold. It returns how many nodes and names it
// dropped.
func (c *Connection) InvalidateUnanswered(srv *fuse.Server) (nodes, names int) {
	for _, n := range c.staleNodes {
		if srv.InodeNotify(n, 0, 0).Ok() {
			nodes++
		}
	}
	for _, e := range c.staleNames {
		if srv.EntryNotify(e.parent, e.name).Ok() {
			names++
		}
	}
	return nodes, names
}

// RecordsUnanswered reports whether RecordUnanswered was called.
func (c *Connection) RecordsUnanswered() bool { return c != nil && c.unanswered != nil }

// ClearUnanswered empties the table without answering what it lists, for
// a server that records on a kernel that sends those requests again
// (keeper.Session.Resend succeeded: a kernel older by its release that
// has the notification): this server reads and records them anew.
func (c *Connection) ClearUnanswered() {
	if c.RecordsUnanswered() {
		c.unanswered.clear()
	}
}

// recorder is the RawFileSystem layer that writes every request with an
// answer into the unanswered table while the layers below it serve it;
// outermost, so that the least of go-fuse's work lies outside it. A
// FORGET has no answer and is not recorded. It is installed only on a
// kernel that cannot send requests again (Connection.RecordUnanswered):
// on the others no request pays for it.
type recorder struct {
	fuse.RawFileSystem
	t       *unansweredTable
	handles *handleTable
}

// opened is the request that opened the kernel's handle fh; 0 if no handle
// has that number.
func (r *recorder) opened(fh uint64) uint64 {
	if s, _ := r.handles.slot(fh); s != nil {
		return s.unique
	}
	return 0
}

var _ = (fuse.RawFileSystem)((*recorder)(nil))

func (r *recorder) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	s := r.t.begin(h.Unique, h.NodeId)
	st := r.RawFileSystem.Lookup(cancel, h, name, out)
	r.t.end(s)
	return st
}

func (r *recorder) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.GetAttr(cancel, in, out)
	r.t.end(s)
	return st
}

func (r *recorder) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.SetAttr(cancel, in, out)
	r.t.end(s)
	return st
}

func (r *recorder) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	r.t.name(s, 0, in.NodeId, name)
	st := r.RawFileSystem.Mknod(cancel, in, name, out)
	r.t.end(s)
	return st
}

func (r *recorder) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	r.t.name(s, 0, in.NodeId, name)
	st := r.RawFileSystem.Mkdir(cancel, in, name, out)
	r.t.end(s)
	return st
}

func (r *recorder) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	s := r.t.begin(h.Unique, h.NodeId)
	r.t.name(s, 0, h.NodeId, name)
	st := r.RawFileSystem.Unlink(cancel, h, name)
	r.t.end(s)
	return st
}

func (r *recorder) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	s := r.t.begin(h.Unique, h.NodeId)
	r.t.name(s, 0, h.NodeId, name)
	st := r.RawFileSystem.Rmdir(cancel, h, name)
	r.t.end(s)
	return st
}

func (r *recorder) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	r.t.name(s, 0, in.NodeId, oldName)
	r.t.name(s, 1, in.Newdir, newName)
	st := r.RawFileSystem.Rename(cancel, in, oldName, newName)
	r.t.end(s)
	return st
}

func (r *recorder) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	s := r.t.begin(in.Unique, in.Oldnodeid)
	r.t.name(s, 0, in.NodeId, name)
	st := r.RawFileSystem.Link(cancel, in, name, out)
	r.t.end(s)
	return st
}

func (r *recorder) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	s := r.t.begin(h.Unique, h.NodeId)
	r.t.name(s, 0, h.NodeId, name)
	st := r.RawFileSystem.Symlink(cancel, h, target, name, out)
	r.t.end(s)
	return st
}

func (r *recorder) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	s := r.t.begin(h.Unique, h.NodeId)
	b, st := r.RawFileSystem.Readlink(cancel, h)
	r.t.end(s)
	return b, st
}

func (r *recorder) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.Access(cancel, in)
	r.t.end(s)
	return st
}

func (r *recorder) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	s := r.t.begin(h.Unique, h.NodeId)
	n, st := r.RawFileSystem.GetXAttr(cancel, h, attr, dest)
	r.t.end(s)
	return n, st
}

func (r *recorder) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	s := r.t.begin(h.Unique, h.NodeId)
	n, st := r.RawFileSystem.ListXAttr(cancel, h, dest)
	r.t.end(s)
	return n, st
}

func (r *recorder) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.SetXAttr(cancel, in, attr, data)
	r.t.end(s)
	return st
}

func (r *recorder) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	s := r.t.begin(h.Unique, h.NodeId)
	st := r.RawFileSystem.RemoveXAttr(cancel, h, attr)
	r.t.end(s)
	return st
}

func (r *recorder) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	r.t.name(s, 0, in.NodeId, name)
	st := r.RawFileSystem.Create(cancel, in, name, out)
	r.t.end(s)
	return st
}

func (r *recorder) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.Tmpfile(cancel, in, out)
	r.t.end(s)
	return st
}

func (r *recorder) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.Open(cancel, in, out)
	r.t.end(s)
	return st
}

func (r *recorder) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	s := r.t.begin(in.Unique, in.NodeId)
	res, st := r.RawFileSystem.Read(cancel, in, buf)
	r.t.end(s)
	return res, st
}

func (r *recorder) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.Lseek(cancel, in, out)
	r.t.end(s)
	return st
}

func (r *recorder) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.GetLk(cancel, in, out)
	r.t.end(s)
	return st
}

func (r *recorder) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.SetLk(cancel, in)
	r.t.end(s)
	return st
}

func (r *recorder) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.SetLkw(cancel, in)
	r.t.end(s)
	return st
}

func (r *recorder) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	s := r.t.begin(in.Unique, in.NodeId)
	r.t.releasing(s, in.Fh, r.opened(in.Fh))
	r.RawFileSystem.Release(cancel, in)
	r.t.end(s)
}

func (r *recorder) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	s := r.t.begin(in.Unique, in.NodeId)
	n, st := r.RawFileSystem.Write(cancel, in, data)
	r.t.end(s)
	return n, st
}

func (r *recorder) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	s := r.t.begin(in.Unique, in.NodeId)
	n, st := r.RawFileSystem.Writev(cancel, in, data)
	r.t.end(s)
	return n, st
}

func (r *recorder) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	s := r.t.begin(in.Unique, in.NodeId)
	n, st := r.RawFileSystem.CopyFileRange(cancel, in)
	r.t.end(s)
	return n, st
}

func (r *recorder) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.Ioctl(cancel, in, inbuf, out, outbuf)
	r.t.end(s)
	return st
}

func (r *recorder) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.Flush(cancel, in)
	r.t.end(s)
	return st
}

func (r *recorder) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.Fsync(cancel, in)
	r.t.end(s)
	return st
}

func (r *recorder) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.Fallocate(cancel, in)
	r.t.end(s)
	return st
}

func (r *recorder) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.OpenDir(cancel, in, out)
	r.t.end(s)
	return st
}

func (r *recorder) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.ReadDir(cancel, in, out)
	r.t.end(s)
	return st
}

func (r *recorder) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.ReadDirPlus(cancel, in, out)
	r.t.end(s)
	return st
}

func (r *recorder) ReleaseDir(in *fuse.ReleaseIn) {
	s := r.t.begin(in.Unique, in.NodeId)
	r.t.releasing(s, in.Fh, r.opened(in.Fh))
	r.RawFileSystem.ReleaseDir(in)
	r.t.end(s)
}

func (r *recorder) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.FsyncDir(cancel, in)
	r.t.end(s)
	return st
}

func (r *recorder) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	s := r.t.begin(h.Unique, h.NodeId)
	st := r.RawFileSystem.StatFs(cancel, h, out)
	r.t.end(s)
	return st
}

func (r *recorder) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	s := r.t.begin(in.Unique, in.NodeId)
	st := r.RawFileSystem.Statx(cancel, in, out)
	r.t.end(s)
	return st
}
