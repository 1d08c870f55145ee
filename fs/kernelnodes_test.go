package fs

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/statefs/statefs/index"
)

// A lookup of a directory the kernel holds a node of makes a new node.
// When the kernel forgets the old one before go-fuse registers the new one
// (a FORGET and a LOOKUP run side by side, as after the kernel drops its
// caches), the new one is the kernel's node, and a change statefs makes
// itself reaches the kernel through it; also when two lookups made a node
// each and go-fuse registered the first.
func TestLatecomerBecomesTheKernelsNode(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	d := k.mkdirAll("d")
	ino := d.attr.Ino
	old, rootInode := k.fs.knownNode(ino), k.fs.knownNode(index.RootIno)
	if old == nil || rootInode == nil {
		t.Fatal("the kernel's nodes of the root and of a directory it made are unknown")
	}

	// The steps of the LOOKUPs and the FORGET, in the order that loses the
	// old node: two lookups make their nodes while the kernel holds old,
	// the FORGET drops old, and go-fuse registers the first lookup's node
	// (and would drop the second's for it).
	made := func() *gofs.Inode {
		n := rootInode.NewInode(context.Background(), &node{fs: k.fs}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: ino})
		k.fs.known(ino, n)
		return n
	}
	fresh := made()
	made()
	k.forget(d.node, 1)
	if !old.Forgotten() {
		t.Fatal("the FORGET did not drop the first node")
	}
	rootInode.AddChild("d", fresh, true)

	if got := k.fs.knownNode(ino); got != fresh {
		t.Fatalf("the kernel's node of the directory is %v, want the one the lookup made", got)
	}
	k.notified()
	k.fs.attrsChanged(ino)
	if notes := k.notified(); len(notes) != 1 || !strings.HasPrefix(notes[0], "inode ") {
		t.Fatalf("a change of the directory's attributes sent %q, want one inode notification", notes)
	}
}

// Nodes that lookups made of inodes the kernel held, and that go-fuse
// dropped, are not kept once they have settled, and an inode looked up
// again and again keeps only the newest few.
func TestDroppedLatecomersAreForgotten(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	const files = 10
	for i := range files {
		if _, errno := k.mknod(rootNode, fmt.Sprintf("f%d", i), 0o100644, 0); errno != 0 {
			t.Fatal(errno)
		}
		k.walk(fmt.Sprintf("f%d", i)) // a second node, which go-fuse drops
	}
	latecomers := func() int {
		k.fs.mu.Lock()
		defer k.fs.mu.Unlock()
		return len(k.fs.latecomers)
	}
	if n := latecomers(); n != files {
		t.Fatalf("%d latecomers after a second lookup of %d files, want one each", n, files)
	}
	again := k.walk("f1").attr.Ino
	for range 5 {
		k.walk("f1")
	}
	k.fs.mu.Lock()
	if n := len(k.fs.latecomers[again]); n != latecomersKept {
		k.fs.mu.Unlock()
		t.Fatalf("a file looked up 7 times keeps %d latecomers, want %d", n, latecomersKept)
	}
	for _, ls := range k.fs.latecomers {
		for i := range ls {
			ls[i].made = ls[i].made.Add(-latecomerSettled - time.Second)
		}
	}
	k.fs.sweepLatecomersAt = 0
	k.fs.mu.Unlock()
	k.walk("f0") // one more, which sweeps
	if n := latecomers(); n != 1 {
		t.Fatalf("%d latecomers after a sweep, want only the one just made", n)
	}
	for i := range files {
		if k.fs.knownNode(k.walk(fmt.Sprintf("f%d", i)).attr.Ino) == nil {
			t.Fatalf("the kernel's node of f%d is unknown after the sweep", i)
		}
	}
}
