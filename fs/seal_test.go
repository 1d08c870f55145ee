package fs

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/store"
)

// The last close of a file whose content is in staging schedules its seal;
// the seal commits the content as a manifest, deletes the staging file and
// reports how long it took.
func TestSealCommitsClosedContent(t *testing.T) {
	t.Parallel()
	var sealed atomic.Int32
	k := newKernel(t, Options{OnSeal: func(*store.PreparedSeal, time.Duration) { sealed.Add(1) }})
	e, fh, errno := k.create(root, rootNode, "000003.log", 0o644)
	if errno != 0 {
		t.Fatalf("create: %v", errno)
	}
	if _, errno := k.write(e.node, fh, 0, []byte("record")); errno != 0 {
		t.Fatalf("write: %v", errno)
	}
	if k.armed(e.attr.Ino) {
		t.Errorf("a seal was scheduled while the file was open")
	}
	k.release(e.node, fh)
	if !k.armed(e.attr.Ino) {
		t.Fatalf("the last close scheduled no seal")
	}
	staging := k.store.StagingPath(k.mustInode(e.attr.Ino).Staging)
	k.sealNow(e.attr.Ino)
	rec := k.mustInode(e.attr.Ino)
	if rec.Staging != 0 || rec.Size != 6 {
		t.Errorf("after the seal: staging %d, size %d; want sealed, 6", rec.Staging, rec.Size)
	}
	if _, err := os.Stat(staging); !os.IsNotExist(err) {
		t.Errorf("the staging file is still there after the seal: %v", err)
	}
	if n := sealed.Load(); n != 1 {
		t.Errorf("Options.Sealed was told of %d seals, want 1", n)
	}
	if got := k.readFile(e.node, 64); string(got) != "record" {
		t.Errorf("sealed content reads %q", got)
	}
}

// A seal gives up while any handle is open on the file, reader or writer,
// without reading the file: the last release schedules a new one.
func TestSealWaitsForTheLastHandle(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	e := k.writeFile(rootNode, "000004.log", make([]byte, 4*store.InlineMax)) // chunked when sealed
	ino := e.attr.Ino
	k.disarm(ino)
	for _, flags := range []uint32{syscall.O_RDONLY, syscall.O_WRONLY} {
		fh, _, errno := k.open(root, e.node, flags)
		if errno != 0 {
			t.Fatalf("open (flags %#o): %v", flags, errno)
		}
		k.sealNow(ino)
		if k.mustInode(ino).Staging == 0 {
			t.Errorf("sealed while a handle (flags %#o) was open", flags)
		}
		if n := k.chunkFiles(); n != 0 {
			t.Errorf("a seal while a handle (flags %#o) was open stored %d chunks", flags, n)
		}
		k.release(e.node, fh)
		if !k.armed(ino) {
			t.Errorf("the last release (flags %#o) scheduled no seal", flags)
		}
		k.disarm(ino)
	}
	k.sealNow(ino)
	if k.mustInode(ino).Staging != 0 || k.chunkFiles() == 0 {
		t.Errorf("not sealed into chunks once every handle was closed")
	}
}

// A seal that fails (its staging file is unreadable) leaves the content in
// staging and is scheduled again.
func TestFailedSealIsTriedAgain(t *testing.T) {
	storetest.LeaveDamaged(t, "it removes a staging file")
	t.Parallel()
	k := newKernel(t, Options{})
	e := k.writeFile(rootNode, "000005.log", []byte("record"))
	ino := e.attr.Ino
	k.disarm(ino)
	rec := k.mustInode(ino)
	if err := os.Remove(k.store.StagingPath(rec.Staging)); err != nil {
		t.Fatal(err)
	}
	k.sealNow(ino)
	if k.mustInode(ino).Staging != rec.Staging {
		t.Errorf("a failed seal changed the content")
	}
	if !k.armed(ino) {
		t.Errorf("a failed seal was not scheduled again")
	}
}

// Once the filesystem is shut down, no seal runs: the content is sealed
// after the next mount (TestNewSchedulesPendingSeals).
func TestNoSealAfterShutdown(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	e := k.writeFile(rootNode, "000006.log", []byte("record"))
	done := make(chan struct{})
	go func() {
		k.fs.Shutdown()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Shutdown did not return with a seal scheduled")
	}
	k.sealNow(e.attr.Ino)
	if k.mustInode(e.attr.Ino).Staging == 0 {
		t.Errorf("sealed after Shutdown")
	}
	// A seal scheduled now (a release, a truncate) arms no timer: the one
	// Shutdown stopped stays the inode's.
	timer := func() *time.Timer {
		k.fs.sealMu.Lock()
		defer k.fs.sealMu.Unlock()
		return k.fs.sealTimers[e.attr.Ino]
	}
	stopped := timer()
	k.fs.scheduleSeal(e.attr.Ino)
	if timer() != stopped {
		t.Errorf("a seal scheduled after Shutdown armed a new timer")
	}
}

// White-box: scheduling the seal of a file again restarts its wait rather
// than adding a timer, and each armed timer counts once towards what
// Shutdown waits for: Shutdown returns. (No store: no timer fires.)
func TestScheduleSealRestartsTheWait(t *testing.T) {
	f := &FS{opts: Options{SealDelay: time.Hour}, sealTimers: map[uint64]*time.Timer{}}
	for range 3 {
		f.scheduleSeal(100)
		f.scheduleSeal(101)
	}
	if n := len(f.sealTimers); n != 2 {
		t.Errorf("%d seal timers for two inodes scheduled three times each, want 2", n)
	}
	done := make(chan struct{})
	go func() {
		f.Shutdown()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Shutdown did not return: the timers it stopped were not each let go of once")
	}
}

// With a short seal delay, a closed file is sealed by its timer.
func TestSealDelayElapses(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{SealDelay: 10 * time.Millisecond})
	e := k.writeFile(rootNode, "000008.log", []byte("record"))
	k.waitSealed(e.attr.Ino)
	if k.armed(e.attr.Ino) {
		t.Errorf("the timer that sealed the file is still listed")
	}
}

// After a restart, New schedules the seals of the content that was left in
// staging.
func TestNewSchedulesPendingSeals(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "store")
	k := openKernel(t, dir, Options{})
	e := k.writeFile(rootNode, "000011.log", []byte("record"))
	k.close()

	k = openKernel(t, dir, Options{SealDelay: 10 * time.Millisecond})
	k.waitSealed(e.attr.Ino)
	if got := k.readFile(k.walk("000011.log").node, 64); string(got) != "record" {
		t.Errorf("after the restart and the seal: read %q", got)
	}
}

// At most Sealers seals run at once; one that waits for its turn while the
// filesystem shuts down does not run.
func TestSealWaitsForASealer(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{Sealers: 1})
	e := k.writeFile(rootNode, "000013.log", []byte("record"))
	ino := e.attr.Ino
	k.disarm(ino)

	k.fs.sealers <- struct{}{} // another seal runs
	done := make(chan struct{})
	go func() {
		k.sealNow(ino)
		close(done)
	}()
	select {
	case <-done:
		t.Fatalf("a seal ran while the only sealer was busy")
	case <-time.After(100 * time.Millisecond):
	}
	<-k.fs.sealers
	<-done
	if k.mustInode(ino).Staging != 0 {
		t.Fatalf("not sealed once the sealer was free")
	}

	// Again, and shut down while it waits.
	if _, errno := k.setattrSize(e.node, 3); errno != 0 {
		t.Fatalf("truncate: %v", errno)
	}
	k.disarm(ino)
	k.fs.sealers <- struct{}{}
	done = make(chan struct{})
	go func() {
		k.sealNow(ino)
		close(done)
	}()
	time.Sleep(50 * time.Millisecond) // the seal waits for the sealer
	shut := make(chan struct{})
	go func() {
		k.fs.Shutdown()
		close(shut)
	}()
	for !k.fs.closed.Load() {
		time.Sleep(time.Millisecond)
	}
	<-k.fs.sealers
	<-done
	<-shut
	if k.mustInode(ino).Staging == 0 {
		t.Errorf("a seal that waited for a sealer ran after Shutdown")
	}
}

// A seal of an inode that is gone meanwhile does nothing.
func TestSealOfAGoneInode(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	e := k.writeFile(rootNode, "000014.log", []byte("record"))
	ino := e.attr.Ino
	k.disarm(ino)
	if _, err := k.fs.Remove(index.RootIno, "000014.log"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := k.inode(ino); err == nil {
		t.Fatalf("the removed file's inode is still there")
	}
	k.sealNow(ino)
	if k.armed(ino) {
		t.Errorf("the seal of a gone inode was scheduled again")
	}
}
