package main

import (
	"sync/atomic"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/statefs/statefs/fs"
	"github.com/statefs/statefs/internal/testenv"
)

// slowForget is a root whose OnForget, which go-fuse calls at unmount after
// its serve loops have ended, takes a while, as statefs's does when it
// reads the index.
type slowForget struct {
	gofs.Inode
	forgotten atomic.Bool
}

func (n *slowForget) OnForget() {
	time.Sleep(200 * time.Millisecond)
	n.forgotten.Store(true)
}

// The daemon closes the store once served is closed, so served must wait
// for the unmount callbacks that read it. It used to follow
// fuse.Server.Wait, which returns before them, and the daemon died of
// SIGSEGV reading an index table badger had unmapped (TestFullDisk, once).
func TestServedAfterUnmountCallbacks(t *testing.T) {
	testenv.RequireFUSE(t)
	root := &slowForget{}
	opts := fs.MountOptions(false, fs.DefaultCacheTimeout, false)
	server, served, _, err := serveFUSE(t.TempDir(), fs.NodeFS(root, opts, nil), &opts.MountOptions, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Unmount(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("served was not closed within 10s of the unmount")
	}
	if !root.forgotten.Load() {
		t.Fatal("served was closed before the root's OnForget returned: the store would close under it")
	}
}
