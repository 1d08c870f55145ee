package fs

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// handleTable records every file handle the kernel holds on the
// connection, in a memory file the keeper owns and each server maps, so
// that it outlives the server that made the handles. The kernel's handle
// number says where its record is: the low 32 bits are the slot, the high
// ones the generation of the server that gave it out, so a number never
// reaches another handle's slot by accident. A slot says which inode the
// handle is open on, with which flags and which passthrough backing id,
// and which handle of go-fuse's serves it in this server: a request costs
// one read of shared memory to find it.
//
// A server writes a slot's fields before it publishes the slot (gen, last),
// and frees a slot by clearing gen first, so a server killed at any point
// leaves each slot either whole or free. One server at a time maps the
// table: the keeper starts the next only once the last has died.
type handleTable struct {
	mem   []byte
	head  *tableHead
	slots []handleSlot
	gen   uint64 // this server's generation

	mu   sync.Mutex // guards free and allocation of head.used
	free []uint32
}

// ConnectionLayout is the layout of what a server leaves the next server
// of its connection: this table, the table of unanswered requests
// (unansweredTable), and the reply records (index.Reply) that answer
// requests sent again. Change it when any of them changes. A keeper hands
// its connection over only to a binary of its own layout
// (keeper.Config.Layout), and a server refuses a table of another.
const ConnectionLayout = 1

// tableHead is the start of the memory file.
type tableHead struct {
	// used is one past the highest slot ever taken: only those are read.
	used atomic.Uint64
	// connectedAt is when the connection's first server began, in
	// nanoseconds since the epoch (Connection.Since).
	connectedAt atomic.Int64
	// layout is the ConnectionLayout of the connection's first server.
	layout atomic.Uint64
	_      [5]uint64
}

// handleSlot is one handle's record; 64 bytes.
type handleSlot struct {
	// gen is the generation of the server that gave the handle to the
	// kernel, 0 for a free slot.
	gen atomic.Uint64
	// bridgeFh is the handle of go-fuse's node bridge that serves it in
	// this server; 0 when it could not be opened again.
	bridgeFh  atomic.Uint64
	ino       uint64
	unique    uint64 // the request that opened it
	flags     uint32 // its open flags
	backingID int32  // the passthrough backing id the kernel was given, 0 for none
	dir       uint32 // 1 for a directory handle
	openFlags uint32 // the FOPEN flags the kernel was given
	_         [16]byte
}

// handleSlots bounds the handles the kernel may hold at once. The memory
// file is sparse: only the slots used take memory.
const handleSlots = 1 << 20

const tableSize = int(unsafe.Sizeof(tableHead{})) + handleSlots*int(unsafe.Sizeof(handleSlot{}))

// openHandleTable maps the table kept in f for the server of generation
// gen.
func openHandleTable(f *os.File, gen uint64) (*handleTable, error) {
	if gen == 0 || gen >= 1<<31 {
		return nil, fmt.Errorf("handle table: generation %d out of range", gen)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("handle table: %w", err)
	}
	if st.Size < int64(tableSize) {
		if err := f.Truncate(int64(tableSize)); err != nil {
			return nil, fmt.Errorf("handle table: %w", err)
		}
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, tableSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("handle table: %w", err)
	}
	t := &handleTable{mem: mem, gen: gen, head: (*tableHead)(unsafe.Pointer(&mem[0]))}
	if t.head.layout.CompareAndSwap(0, ConnectionLayout); t.head.layout.Load() != ConnectionLayout {
		layout := t.head.layout.Load()
		unix.Munmap(mem)
		return nil, fmt.Errorf("handle table: the connection's servers keep it in layout %d, this one reads layout %d", layout, ConnectionLayout)
	}
	// Set by the first server, before it reads a request; a later one
	// finds it, unless the first died before (it committed nothing then).
	t.head.connectedAt.CompareAndSwap(0, time.Now().UnixNano())
	off := unsafe.Sizeof(tableHead{})
	t.slots = unsafe.Slice((*handleSlot)(unsafe.Pointer(&mem[off])), handleSlots)
	for i := range t.head.used.Load() {
		if t.slots[i].gen.Load() == 0 {
			t.free = append(t.free, uint32(i))
		}
	}
	return t, nil
}

// open lists the slots of the handles the kernel holds, given out by
// earlier servers.
func (t *handleTable) open() []uint32 {
	var open []uint32
	for i := range t.head.used.Load() {
		if g := t.slots[i].gen.Load(); g != 0 && g != t.gen {
			open = append(open, uint32(i))
		}
	}
	return open
}

// add records a handle this server opens and returns the number the kernel
// gets for it.
func (t *handleTable) add(ino, unique uint64, flags uint32, dir bool, bridgeFh uint64, out *fuse.OpenOut) (uint64, error) {
	t.mu.Lock()
	var i uint32
	if n := len(t.free); n > 0 {
		i, t.free = t.free[n-1], t.free[:n-1]
	} else if used := t.head.used.Load(); used < handleSlots {
		i = uint32(used)
		t.head.used.Store(used + 1)
	} else {
		t.mu.Unlock()
		return 0, fmt.Errorf("%d file handles open at once: %w", handleSlots, unix.ENFILE)
	}
	t.mu.Unlock()
	s := &t.slots[i]
	s.ino, s.unique, s.flags, s.backingID, s.openFlags = ino, unique, flags, out.BackingID, out.OpenFlags
	s.dir = 0
	if dir {
		s.dir = 1
	}
	s.bridgeFh.Store(bridgeFh)
	s.gen.Store(t.gen)
	return t.gen<<32 | uint64(i), nil
}

// slot returns the slot of the kernel's handle fh, or nil if fh names no
// handle the kernel holds.
func (t *handleTable) slot(fh uint64) (*handleSlot, uint32) {
	i := uint32(fh)
	if uint64(i) >= t.head.used.Load() {
		return nil, 0
	}
	s := &t.slots[i]
	if g := s.gen.Load(); g == 0 || g != fh>>32 {
		return nil, 0
	}
	return s, i
}

// remove frees slot i, whose handle the kernel released.
func (t *handleTable) remove(i uint32) {
	t.slots[i].gen.Store(0)
	t.mu.Lock()
	t.free = append(t.free, i)
	t.mu.Unlock()
}
