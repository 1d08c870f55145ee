package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// White-box. A takeover played without a mount: a server of generation 1
// serves a connection, the kernel keeps its node ids and handles, and a
// server of generation 2 over the same store and the same handle table
// gets the kernel's next requests, as after a crash of the first.

// handleMemory is a memory file as the keeper makes for the handle table.
func handleMemory(t *testing.T) *os.File {
	t.Helper()
	fd, err := unix.MemfdCreate("handles", 0)
	if err != nil {
		t.Fatalf("memfd_create: %v", err)
	}
	f := os.NewFile(uintptr(fd), "handles")
	t.Cleanup(func() { f.Close() })
	return f
}

func connection(t *testing.T, mem *os.File, gen uint64) *Connection {
	t.Helper()
	c, err := NewConnection(mem, gen)
	if err != nil {
		t.Fatalf("NewConnection: %v", err)
	}
	return c
}

// takeover serves dir with a first server, runs before in it, then ends it
// (its handles stay open, as the kernel keeps them) and returns the
// kernel of a second server of the same connection.
func takeover(t *testing.T, before func(k *kernel)) *kernel {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	mem := handleMemory(t)
	k1 := serveKernel(t, dir, Options{Passthrough: true}, connection(t, mem, 1))
	before(k1)
	k1.close()
	return serveKernel(t, dir, Options{Passthrough: true}, connection(t, mem, 2))
}

// A server refuses a handle table that servers of another layout keep,
// before it reads a slot of it.
func TestHandleTableOfAnotherLayoutIsRefused(t *testing.T) {
	mem := handleMemory(t)
	c := connection(t, mem, 1)
	c.handles.head.layout.Store(ConnectionLayout + 1)
	_, err := NewConnection(mem, 2)
	want := fmt.Sprintf("handle table: the connection's servers keep it in layout %d, this one reads layout %d", ConnectionLayout+1, ConnectionLayout)
	if err == nil || err.Error() != want {
		t.Errorf("NewConnection: %v, want %q", err, want)
	}
}

func TestNodeIDIsTheInodeNumber(t *testing.T) {
	k := newKernel(t, Options{})
	e, errno := k.mkdir(root, rootNode, "d", 0o755)
	if errno != 0 {
		t.Fatal(errno)
	}
	if e.node != e.attr.Ino {
		t.Fatalf("node id %d of inode %d: a new server could not know it", e.node, e.attr.Ino)
	}
}

func TestTakeoverKeepsAnOpenWriter(t *testing.T) {
	var dir, f entry
	var fh uint64
	k := takeover(t, func(k *kernel) {
		dir = k.mkdirAll("tm_1/localState")
		var errno syscall.Errno
		if f, fh, errno = k.create(root, dir.node, "wal", 0o644); errno != 0 {
			t.Fatalf("create: %v", errno)
		}
		if _, errno := k.write(f.node, fh, 0, []byte("hello")); errno != 0 {
			t.Fatalf("write: %v", errno)
		}
	})
	if k.resumed.Reopened != 1 || k.resumed.Lost != 0 {
		t.Fatalf("resumed %+v, want the one open handle reopened", k.resumed)
	}
	// The kernel goes on with the node id and handle the first server gave.
	if _, errno := k.write(f.node, fh, 5, []byte(" world")); errno != 0 {
		t.Fatalf("write through the handle of the first server: %v", errno)
	}
	if a, errno := k.getattr(f.node); errno != 0 || a.Size != 11 {
		t.Fatalf("getattr of the first server's node: size %d, %v; want 11", a.Size, errno)
	}
	// Not sealed while the kernel holds it open for writing.
	k.sealNow(f.node)
	if rec := k.mustInode(f.node); rec.Staging == 0 {
		t.Fatal("sealed while the kernel holds a handle open for writing")
	}
	k.release(f.node, fh)
	k.sealNow(f.node)
	if rec := k.mustInode(f.node); rec.Staging != 0 {
		t.Fatal("not sealed once the kernel released its handle")
	}
	if got := k.readFile(f.node, 64); string(got) != "hello world" {
		t.Fatalf("read %q, want %q", got, "hello world")
	}
}

func TestTakeoverRevivesADirectoryWithItsPath(t *testing.T) {
	var d entry
	k := takeover(t, func(k *kernel) { d = k.mkdirAll("tm_1/localState/aid_x") })
	// A request on a node id the new server never gave out.
	if _, errno := k.mkdir(root, d.node, "jid_y", 0o755); errno != 0 {
		t.Fatalf("mkdir in a directory of the first server: %v", errno)
	}
	n := k.fs.knownNode(d.node)
	if n == nil {
		t.Fatal("the revived directory is not known to the filesystem")
	}
	if p := n.Path(nil); p != "tm_1/localState/aid_x" {
		t.Fatalf("the revived directory's path is %q: whose state is made in it would be judged by it", p)
	}
}

func TestTakeoverForgetsNoMoreThanItGranted(t *testing.T) {
	var d entry
	k := takeover(t, func(k *kernel) {
		d = k.mkdirAll("a")
		for range 5 {
			k.lookup(rootNode, "a")
		}
	})
	// The kernel forgets every lookup it holds, most granted by the first
	// server: a bridge that took them all would panic on an underflow.
	k.lookup(rootNode, "a")
	k.forget(d.node, 7)
	k.forget(d.node, 1) // one this server never granted
	if _, errno := k.lookup(rootNode, "a"); errno != 0 {
		t.Fatalf("lookup after the forgets: %v", errno)
	}
}

func TestTakeoverOfAHandleOnANamelessFile(t *testing.T) {
	var f entry
	var fh uint64
	k := takeover(t, func(k *kernel) {
		var errno syscall.Errno
		if f, fh, errno = k.create(root, rootNode, "sst", 0o644); errno != 0 {
			t.Fatalf("create: %v", errno)
		}
		k.write(f.node, fh, 0, []byte("kept"))
		if errno := k.unlink(rootNode, "sst"); errno != 0 {
			t.Fatalf("unlink: %v", errno)
		}
	})
	if got, errno := k.read(f.node, fh, 0, 16); errno != 0 || string(got) != "kept" {
		t.Fatalf("read of the unlinked open file after the takeover: %q, %v", got, errno)
	}
	k.release(f.node, fh)
	k.forget(f.node, 1)
	if _, err := k.inode(f.node); err == nil {
		t.Fatal("the nameless file outlived its last handle and its FORGET")
	}
}

func TestTakeoverRefusesAHandleNoServerGave(t *testing.T) {
	var f entry
	k := takeover(t, func(k *kernel) { f = k.writeFile(rootNode, "f", []byte("x")) })
	k.lookup(rootNode, "f")
	if _, errno := k.read(f.node, 2<<32|7, 0, 1); errno != syscall.EBADF {
		t.Fatalf("read through a handle no server gave: %v, want EBADF", errno)
	}
}

func TestTakeoverAnswersAResentCreateWithItsHandle(t *testing.T) {
	const unique = 40
	var f entry
	var fh uint64
	k := takeover(t, func(k *kernel) {
		h := root.header(rootNode)
		h.Unique = unique
		var out fuse.CreateOut
		st := k.raw.Create(nil, &fuse.CreateIn{InHeader: h, Flags: syscall.O_RDWR | syscall.O_CREAT | syscall.O_EXCL, Mode: 0o644}, "f", &out)
		if st != fuse.OK {
			t.Fatalf("create: %v", st)
		}
		f, fh = entry{out.NodeId, out.Attr}, out.Fh
	})
	// The first server died before its answer reached the kernel, which
	// sends the create again.
	h := root.header(rootNode)
	h.Unique = unique | 1<<63
	var out fuse.CreateOut
	st := k.raw.Create(nil, &fuse.CreateIn{InHeader: h, Flags: syscall.O_RDWR | syscall.O_CREAT | syscall.O_EXCL, Mode: 0o644}, "f", &out)
	if st != fuse.OK || out.NodeId != f.node || out.Fh != fh {
		t.Fatalf("resent create: %v, node %d handle %#x; want OK, node %d handle %#x", st, out.NodeId, out.Fh, f.node, fh)
	}
	if _, errno := k.write(f.node, out.Fh, 0, []byte("x")); errno != 0 {
		t.Fatalf("write through the answered handle: %v", errno)
	}
	k.release(f.node, out.Fh)
	if k.resumed.Reopened != 1 {
		t.Fatalf("resumed %+v", k.resumed)
	}
}

func TestTakeoverCountsTheLookupsOfReaddirplus(t *testing.T) {
	var a entry
	k := takeover(t, func(k *kernel) { a = k.writeFile(rootNode, "a", []byte("x")) })
	// One READDIRPLUS of the root: a lookup of "a" the kernel counts.
	var open fuse.OpenOut
	if st := k.raw.OpenDir(nil, &fuse.OpenIn{InHeader: root.header(rootNode)}, &open); st != fuse.OK {
		t.Fatalf("opendir: %v", st)
	}
	list := fuse.NewDirEntryList(make([]byte, 64<<10), 0)
	if st := k.raw.ReadDirPlus(nil, &fuse.ReadIn{InHeader: root.header(rootNode), Fh: open.Fh, Size: 64 << 10}, list); st != fuse.OK {
		t.Fatalf("readdirplus: %v", st)
	}
	k.raw.ReleaseDir(&fuse.ReleaseIn{InHeader: root.header(rootNode), Fh: open.Fh})
	if k.fs.knownNode(a.node) == nil {
		t.Fatal("readdirplus made no node of the entry")
	}
	// Its FORGET reaches the bridge, which drops the node.
	k.forget(a.node, 1)
	if k.fs.knownNode(a.node) != nil {
		t.Fatal("the FORGET of a lookup readdirplus granted was dropped: the node stays for ever")
	}
}

func TestTakeoverKeepsACachedHandleCached(t *testing.T) {
	var f entry
	var fh uint64
	k := takeover(t, func(k *kernel) {
		// With no server to register a backing file with, the kernel
		// is given no backing id: it serves the handle through its page
		// cache, whatever the filesystem chose.
		var errno syscall.Errno
		if f, fh, errno = k.create(root, rootNode, "f", 0o644); errno != 0 {
			t.Fatalf("create: %v", errno)
		}
	})
	st := k.fs.lookupFile(f.node)
	if st == nil || st.cached != 1 {
		t.Fatal("the handle the kernel serves through its page cache was opened again for passthrough: the kernel would refuse every passthrough open of the inode")
	}
	k.release(f.node, fh)
}

func TestTakeoverGoesOnWithAListing(t *testing.T) {
	var fh, off uint64
	var before []string
	k := takeover(t, func(k *kernel) {
		for i := range 10 {
			k.writeFile(rootNode, fmt.Sprintf("f%02d", i), []byte("x"))
		}
		var open fuse.OpenOut
		if st := k.raw.OpenDir(nil, &fuse.OpenIn{InHeader: root.header(rootNode)}, &open); st != fuse.OK {
			t.Fatalf("opendir: %v", st)
		}
		fh = open.Fh
		before, off = readDirAt(t, k, fh, 0)
	})
	after, _ := readDirAt(t, k, fh, off)
	if len(before) == 0 || len(after) == 0 || slices.Contains(before, after[0]) {
		t.Fatalf("the listing before the takeover gave %v, after it %v: the kernel would list names twice", before, after)
	}
	k.raw.ReleaseDir(&fuse.ReleaseIn{InHeader: root.header(rootNode), Fh: fh})
}

// readDirAt reads one small batch of the root's listing from offset off
// through handle fh, and returns its names and the offset after them.
func readDirAt(t *testing.T, k *kernel, fh, off uint64) ([]string, uint64) {
	t.Helper()
	list := fuse.NewDirEntryList(make([]byte, 200), off)
	if st := k.raw.ReadDir(nil, &fuse.ReadIn{InHeader: root.header(rootNode), Fh: fh, Offset: off, Size: 200}, list); st != fuse.OK {
		t.Fatalf("readdir at %d: %v", off, st)
	}
	es, err := fuse.ParseDirEntries(list.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names, off = append(names, e.Name), e.Off
	}
	return names, off
}

func TestTakeoverRevivesOneDirectoryAtOnce(t *testing.T) {
	for range 20 {
		var d entry
		k := takeover(t, func(k *kernel) { d = k.mkdirAll("a/b/c/d/e/f/g") })
		// Requests on a node id the new server never gave out, at once:
		// none may go on before its path is whole.
		var wg sync.WaitGroup
		paths := make([]string, 4)
		for i := range paths {
			wg.Go(func() {
				e, errno := k.mkdir(root, d.node, fmt.Sprint("n", i), 0o755)
				if errno == 0 {
					if n := k.fs.knownNode(e.node); n != nil {
						paths[i] = n.Path(nil)
					}
				}
			})
		}
		wg.Wait()
		for i, p := range paths {
			if want := fmt.Sprint("a/b/c/d/e/f/g/n", i); p != want {
				t.Fatalf("a directory made in a revived one has the path %q, not %q: its owner is judged by it", p, want)
			}
		}
		k.close()
	}
}

func TestTakeoverLeavesNoLookupOfItsOwn(t *testing.T) {
	var a entry
	var subs []entry
	k := takeover(t, func(k *kernel) {
		a = k.mkdirAll("a")
		for _, n := range []string{"b", "c", "d"} {
			e, errno := k.mkdir(root, a.node, n, 0o755)
			if errno != 0 {
				t.Fatal(errno)
			}
			subs = append(subs, e)
		}
	})
	for _, e := range subs {
		if _, errno := k.getattr(e.node); errno != 0 {
			t.Fatalf("getattr of a directory of the first server: %v", errno)
		}
	}
	// The kernel drops them all, each FORGET with what it holds.
	for _, e := range append(subs, a) {
		k.forget(e.node, 1)
	}
	if k.fs.knownNode(a.node) != nil {
		t.Fatal("the parent's node outlives the kernel's FORGET: the lookups made to revive its children stay")
	}
}
