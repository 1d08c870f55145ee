package fs

import (
	"fmt"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// readdirplus lists directory node as READDIRPLUS does, in replies of
// bufSize bytes, and calls between (if not nil) after the first reply.
func (k *kernel) readdirplus(node uint64, bufSize int, between func()) map[string]fuse.EntryOut {
	k.t.Helper()
	var open fuse.OpenOut
	if st := k.raw.OpenDir(nil, &fuse.OpenIn{InHeader: root.header(node)}, &open); st != fuse.OK {
		k.t.Fatalf("opendir: %v", st)
	}
	defer k.raw.ReleaseDir(&fuse.ReleaseIn{InHeader: root.header(node), Fh: open.Fh})
	got := map[string]fuse.EntryOut{}
	var off uint64
	for first := true; ; first = false {
		buf := make([]byte, bufSize)
		list := fuse.NewDirEntryList(buf, off)
		in := fuse.ReadIn{InHeader: root.header(node), Fh: open.Fh, Offset: off, Size: uint32(len(buf))}
		if st := k.raw.ReadDirPlus(nil, &in, list); st != fuse.OK {
			k.t.Fatalf("readdirplus: %v", st)
		}
		es, outs, err := fuse.ParseDirLookupEntries(list.Bytes())
		if err != nil {
			k.t.Fatalf("readdirplus of node %d: %v", node, err)
		}
		if len(es) == 0 {
			return got
		}
		for i, e := range es {
			got[e.Name] = outs[i]
			off = e.Off
		}
		if first && between != nil {
			between()
		}
	}
}

// READDIRPLUS answers each name with the attributes a LOOKUP of it gives,
// for sealed and staging content alike, across replies and batches; a
// name replaced after the listing began is answered with the inode it
// names now, as a LOOKUP would.
func TestReaddirplusAnswersAsLookup(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{SealDelay: time.Millisecond})
	dir, errno := k.mkdir(root, rootNode, "d", 0o755)
	if errno != 0 {
		t.Fatal(errno)
	}
	const files = 3*dirBatch + 7
	for i := range files {
		e := k.writeFile(dir.node, fmt.Sprintf("f%04d", i), []byte(fmt.Sprint(i)))
		k.waitSealed(e.attr.Ino)
	}
	// The next two files stay in staging: a seal delay of a millisecond
	// could fire before disarm under the race detector.
	k.fs.opts.SealDelay = time.Hour
	staging := k.writeFile(dir.node, "staging", []byte("not sealed yet"))
	k.disarm(staging.attr.Ino)
	replaced := fmt.Sprintf("f%04d", files-1)
	other := k.writeFile(dir.node, "other", []byte("the new content"))
	k.disarm(other.attr.Ino)
	got := k.readdirplus(dir.node, 4096, func() {
		if errno := k.rename(dir.node, "other", dir.node, replaced, 0); errno != 0 {
			t.Fatalf("rename: %v", errno)
		}
	})
	if len(got) != files+4 { // ., .., staging, other and the files
		t.Errorf("READDIRPLUS gave %d names, want %d", len(got), files+4)
	}
	if out := got["other"]; out.NodeId != 0 {
		t.Errorf("other, renamed away after the listing began, was answered with inode %d, not as a name that is gone", out.Attr.Ino)
	}
	for name, out := range got {
		if name == "." || name == ".." || name == "other" {
			continue
		}
		want, errno := k.lookup(dir.node, name)
		if errno != 0 {
			t.Errorf("lookup %s: %v", name, errno)
			continue
		}
		if out.Attr.Ino != want.attr.Ino || out.Attr.Size != want.attr.Size || out.Attr.Mode != want.attr.Mode ||
			out.Attr.Nlink != want.attr.Nlink || out.Attr.Mtime != want.attr.Mtime {
			t.Errorf("%s: READDIRPLUS gave ino %d size %d mode %o nlink %d mtime %d; LOOKUP gives ino %d size %d mode %o nlink %d mtime %d",
				name, out.Attr.Ino, out.Attr.Size, out.Attr.Mode, out.Attr.Nlink, out.Attr.Mtime,
				want.attr.Ino, want.attr.Size, want.attr.Mode, want.attr.Nlink, want.attr.Mtime)
		}
	}
	if out := got[replaced]; out.Attr.Ino != other.attr.Ino {
		t.Errorf("%s, replaced after the listing began, was answered with inode %d, want %d", replaced, out.Attr.Ino, other.attr.Ino)
	}
	if k.mustInode(staging.attr.Ino).Staging == 0 {
		t.Errorf("the file meant to be in staging was sealed")
	}
	if out := got["staging"]; out.Attr.Size != uint64(len("not sealed yet")) {
		t.Errorf("staging file: size %d, want %d", out.Attr.Size, len("not sealed yet"))
	}
}
