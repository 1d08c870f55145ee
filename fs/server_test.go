package fs

import (
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// blockingRelease is a raw filesystem whose Release of a node waits until
// it is let go, and which records the opens it answered.
type blockingRelease struct {
	fuse.RawFileSystem
	release chan struct{}
	opened  chan uint64
}

func (b *blockingRelease) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) { <-b.release }

func (b *blockingRelease) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	b.opened <- in.NodeId
	return fuse.OK
}

// White-box: an open of a node waits for a release of that node under
// way (with its backing file), and an open of another node does not.
func TestOpenWaitsForReleaseOfItsNode(t *testing.T) {
	inner := &blockingRelease{RawFileSystem: fuse.NewDefaultRawFileSystem(), release: make(chan struct{}), opened: make(chan uint64, 2)}
	o := &openOrder{RawFileSystem: inner}
	released := make(chan struct{})
	go func() {
		o.Release(nil, &fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: 5}})
		close(released)
	}()
	time.Sleep(50 * time.Millisecond) // the release is under way
	go o.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: 5}}, &fuse.OpenOut{})
	go o.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: 6}}, &fuse.OpenOut{})
	if got := <-inner.opened; got != 6 {
		t.Fatalf("node %d was opened while its release was under way", got)
	}
	select {
	case got := <-inner.opened:
		t.Fatalf("node %d was opened while its release was under way", got)
	case <-time.After(100 * time.Millisecond):
	}
	close(inner.release)
	<-released
	if got := <-inner.opened; got != 5 {
		t.Fatalf("opened node %d, want 5 once its release was done", got)
	}
}
