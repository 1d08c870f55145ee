package fs

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/store"
)

// White-box: an open writes unless it is O_RDONLY, whatever other flags
// come with it.
func TestWritable(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags uint32
		want  bool
	}{
		{"read-only", syscall.O_RDONLY, false},
		{"read-only with other flags", syscall.O_RDONLY | syscall.O_NOATIME | syscall.O_CLOEXEC, false},
		{"write-only", syscall.O_WRONLY, true},
		{"read-write", syscall.O_RDWR, true},
		{"appending", syscall.O_WRONLY | syscall.O_APPEND, true},
		{"read-only truncating is not a writer", syscall.O_RDONLY | syscall.O_TRUNC, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := writable(c.flags); got != c.want {
				t.Errorf("writable(%#o) = %v, want %v", c.flags, got, c.want)
			}
		})
	}
}

// The page cache survives from one open of sealed content to the next
// (FOPEN_KEEP_CACHE) once the kernel has read it, and never across a
// change of content: a writable open or a truncate makes the next reader
// start afresh (DESIGN, "The read path", 2).
func TestKeepCacheOnlyWhileWarm(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	e := k.writeFile(rootNode, "000012.sst", []byte("sorted"))
	ino := e.attr.Ino
	k.sealNow(ino)
	readOpen := func() bool {
		t.Helper()
		fh, flags, errno := k.open(root, e.node, syscall.O_RDONLY)
		if errno != 0 {
			t.Fatalf("open: %v", errno)
		}
		k.release(e.node, fh)
		return flags&fuse.FOPEN_KEEP_CACHE != 0
	}
	steps := []struct {
		name   string
		before func()
		keep   bool
	}{
		{"the first open after the lookup", nil, false},
		{"the next", nil, true},
		{"and the next", nil, true},
		{"after a writable open", func() {
			fh, _, errno := k.open(root, e.node, syscall.O_WRONLY)
			if errno != 0 {
				t.Fatalf("open for writing: %v", errno)
			}
			k.release(e.node, fh)
			k.sealNow(ino)
		}, false},
		{"the next after that", nil, true},
		{"after a truncate", func() {
			if _, errno := k.setattr(root, e.node, setAttrIn(fuse.FATTR_SIZE, func(in *fuse.SetAttrInCommon) { in.Size = 3 })); errno != 0 {
				t.Fatalf("truncate: %v", errno)
			}
			k.sealNow(ino)
		}, false},
		{"the next after the truncate", nil, true},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		if got := readOpen(); got != s.keep {
			t.Errorf("%s: keep cache %v, want %v", s.name, got, s.keep)
		}
	}
	// An open of staging content never keeps the cache, and cools the node.
	if _, errno := k.setattr(root, e.node, setAttrIn(fuse.FATTR_SIZE, func(in *fuse.SetAttrInCommon) { in.Size = 2 })); errno != 0 {
		t.Fatalf("truncate: %v", errno)
	}
	if readOpen() {
		t.Errorf("an open of staging content kept the cache")
	}
	k.sealNow(ino)
	if readOpen() {
		t.Errorf("the first open of sealed content after staging kept the cache")
	}
}

// A handle opened on sealed content reads the staging file once a writer
// has made one: it sees the writer's bytes (DESIGN, "The read path", 3).
func TestReaderSeesTheWritersBytes(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	e := k.writeFile(rootNode, "OPTIONS-000005", []byte("old content"))
	k.sealNow(e.attr.Ino)
	reader, _, errno := k.open(root, e.node, syscall.O_RDONLY)
	if errno != 0 {
		t.Fatalf("open for reading: %v", errno)
	}
	defer k.release(e.node, reader)
	if got, _ := k.read(e.node, reader, 0, 64); string(got) != "old content" {
		t.Fatalf("read %q before the writer", got)
	}
	writer, _, errno := k.open(root, e.node, syscall.O_WRONLY)
	if errno != 0 {
		t.Fatalf("open for writing: %v", errno)
	}
	if _, errno := k.write(e.node, writer, 0, []byte("new")); errno != 0 {
		t.Fatalf("write: %v", errno)
	}
	if got, _ := k.read(e.node, reader, 0, 64); string(got) != "new content" {
		t.Errorf("the reader read %q after the write, want %q", got, "new content")
	}
	k.release(e.node, writer)
	if got, _ := k.read(e.node, reader, 0, 64); string(got) != "new content" {
		t.Errorf("the reader read %q after the writer closed, want %q", got, "new content")
	}
}

// Content longer than the inline limit is sealed into chunks, and every
// range of it reads back as written.
func TestSealedChunksReadBack(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	k.store.SetSealAs(store.AsChunks)
	data := make([]byte, 3<<20+12345) // many times store.InlineMax
	rand.NewChaCha8([32]byte{1}).Read(data)
	e := k.writeFile(rootNode, "000077.sst", data)
	k.sealNow(e.attr.Ino)
	if rec := k.mustInode(e.attr.Ino); rec.Staging != 0 || rec.Size != uint64(len(data)) {
		t.Fatalf("not sealed: staging %d, size %d", rec.Staging, rec.Size)
	}
	if m, err := k.fs.manifest(e.attr.Ino); err != nil || m.Inline != nil || len(m.Extents) < 2 {
		t.Fatalf("%d bytes (inline up to %d) were not cut into chunks: %+v, %v", len(data), store.InlineMax, m, err)
	}
	fh, _, errno := k.open(root, e.node, syscall.O_RDONLY)
	if errno != 0 {
		t.Fatalf("open: %v", errno)
	}
	defer k.release(e.node, fh)
	for _, c := range []struct {
		name      string
		off, size int
	}{
		{"the start", 0, 4096},
		{"across chunk boundaries", 1<<20 - 100, 2 << 20},
		{"the tail, asked for more", len(data) - 10, 4096},
		{"past the end", len(data) + 1, 4096},
	} {
		got, errno := k.read(e.node, fh, uint64(c.off), c.size)
		if errno != 0 {
			t.Errorf("read %s: %v", c.name, errno)
			continue
		}
		want := data[min(c.off, len(data)):min(c.off+c.size, len(data))]
		if !bytes.Equal(got, want) {
			t.Errorf("read %s: %d bytes that differ from the %d written", c.name, len(got), len(want))
		}
	}
}

// A damaged chunk fails the read with EIO, never wrong bytes (DESIGN
// invariant 5).
func TestDamagedChunkReadsAsEIO(t *testing.T) {
	storetest.LeaveDamaged(t, "it flips a byte of a chunk")
	t.Parallel()
	k := newKernel(t, Options{})
	k.store.SetSealAs(store.AsChunks)
	data := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{2}).Read(data)
	e := k.writeFile(rootNode, "000078.sst", data)
	k.sealNow(e.attr.Ino)
	damaged := 0
	err := filepath.WalkDir(filepath.Join(k.store.Dir, "chunks"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, fi.Size()-1); err != nil {
			return err
		}
		b[0] ^= 0xff
		damaged++
		_, err = f.WriteAt(b, fi.Size()-1)
		return err
	})
	if err != nil || damaged == 0 {
		t.Fatalf("damaging the chunks: %v (%d damaged)", err, damaged)
	}
	fh, _, errno := k.open(root, e.node, syscall.O_RDONLY)
	if errno != 0 {
		t.Fatalf("open: %v", errno)
	}
	defer k.release(e.node, fh)
	if got, errno := k.read(e.node, fh, uint64(len(data)-4096), 4096); errno != syscall.EIO {
		t.Errorf("read of a damaged chunk's tail: %d bytes, %v; want EIO", len(got), errno)
	}
}

// Content that does not compress is sealed as an object; without
// passthrough the daemon reads it, and every range reads back as written.
// With VerifyReads a flipped byte fails the reads of its group with EIO;
// without, the object is read as it is (the scrub finds the damage).
func TestSealedObjectReadBack(t *testing.T) {
	storetest.LeaveDamaged(t, "it flips a byte of an object")
	for _, verify := range []bool{false, true} {
		t.Run(fmt.Sprintf("verify %v", verify), func(t *testing.T) {
			t.Parallel()
			k := newKernel(t, Options{VerifyReads: verify})
			data := make([]byte, 3<<20+12345)
			rand.NewChaCha8([32]byte{3}).Read(data)
			e := k.writeFile(rootNode, "000079.sst", data)
			k.sealNow(e.attr.Ino)
			m, err := k.fs.manifest(e.attr.Ino)
			if err != nil || m.Object == nil {
				t.Fatalf("%d random bytes were not sealed as an object: %+v, %v", len(data), m, err)
			}
			fh, _, errno := k.open(root, e.node, syscall.O_RDONLY)
			if errno != 0 {
				t.Fatalf("open: %v", errno)
			}
			for _, off := range []int{0, 1<<20 - 100, len(data) - 10, len(data) + 1} {
				got, errno := k.read(e.node, fh, uint64(off), 64<<10)
				want := data[min(off, len(data)):min(off+64<<10, len(data))]
				if errno != 0 || !bytes.Equal(got, want) {
					t.Errorf("read at %d: %d bytes, %v; want the %d written", off, len(got), errno, len(want))
				}
			}
			k.release(e.node, fh)
			path := filepath.Join(k.store.Dir, "objects", m.Object.String()[:2], m.Object.String())
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte{data[2<<20] ^ 0xff}, 2<<20)
			f.Close()
			fh, _, errno = k.open(root, e.node, syscall.O_RDONLY)
			if errno != 0 {
				t.Fatalf("open: %v", errno)
			}
			defer k.release(e.node, fh)
			_, errno = k.read(e.node, fh, 2<<20, 4096)
			if verify && errno != syscall.EIO {
				t.Errorf("a verified read of a flipped byte: %v, want EIO", errno)
			}
			if !verify && errno != 0 {
				t.Errorf("an unverified read of a flipped byte: %v", errno)
			}
			if got, errno := k.read(e.node, fh, 0, 4096); errno != 0 || !bytes.Equal(got, data[:4096]) {
				t.Errorf("a read of an intact group: %v", errno)
			}
		})
	}
}

// An open with O_TRUNC empties the file, sealed or in staging, and a
// reader already open sees it empty.
func TestOpenWithTruncEmpties(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	for _, sealed := range []bool{true, false} {
		name := sprintf("sealed %v", sealed)
		e := k.writeFile(rootNode, name, []byte("content"))
		if sealed {
			k.sealNow(e.attr.Ino)
		}
		reader, _, errno := k.open(root, e.node, syscall.O_RDONLY)
		if errno != 0 {
			t.Fatalf("open for reading: %v", errno)
		}
		fh, _, errno := k.open(root, e.node, syscall.O_WRONLY|syscall.O_TRUNC)
		if errno != 0 {
			t.Fatalf("open with O_TRUNC (%s): %v", name, errno)
		}
		if a, _ := k.getattr(e.node); a.Size != 0 {
			t.Errorf("open with O_TRUNC (%s) left size %d", name, a.Size)
		}
		if got, errno := k.read(e.node, reader, 0, 64); errno != 0 || len(got) != 0 {
			t.Errorf("a reader after an O_TRUNC open (%s) read %q, %v", name, got, errno)
		}
		k.release(e.node, fh)
		k.release(e.node, reader)
		if rec := k.mustInode(e.attr.Ino); rec.Staging == 0 {
			t.Errorf("an O_TRUNC open (%s) left the content sealed", name)
		}
	}
}

// A handle on sealed content neither writes nor allocates (EBADF); one on
// staging content does both, and refuses no punch.
func TestWriteAndAllocateNeedStagingContent(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	e := k.writeFile(rootNode, "data", []byte("sealed"))
	k.sealNow(e.attr.Ino)
	fh, _, errno := k.open(root, e.node, syscall.O_RDONLY)
	if errno != 0 {
		t.Fatalf("open: %v", errno)
	}
	if _, errno := k.write(e.node, fh, 0, []byte("x")); errno != syscall.EBADF {
		t.Errorf("write through a handle on sealed content: %v, want EBADF", errno)
	}
	if errno := k.fallocate(e.node, fh, 0, 4096, 0); errno != syscall.EBADF {
		t.Errorf("fallocate through a handle on sealed content: %v, want EBADF", errno)
	}
	k.release(e.node, fh)

	fh, _, errno = k.open(root, e.node, syscall.O_RDWR)
	if errno != 0 {
		t.Fatalf("open for writing: %v", errno)
	}
	defer k.release(e.node, fh)
	if errno := k.fallocate(e.node, fh, 0, 8192, 0); errno != 0 {
		t.Errorf("fallocate: %v", errno)
	}
	if a, _ := k.getattr(e.node); a.Size != 8192 {
		t.Errorf("size after fallocate of 8192 bytes: %d", a.Size)
	}
	if errno := k.fallocate(e.node, fh, 0, 4096, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE); errno != 0 {
		t.Errorf("punching a hole: %v", errno)
	}
	if got, _ := k.read(e.node, fh, 0, 6); !bytes.Equal(got, make([]byte, 6)) {
		t.Errorf("a punched hole reads %q", got)
	}
}

// fsync of a file syncs its staging file's name once, then the file and the
// index; fdatasync the same; fsync of sealed content and of a directory
// syncs the index.
func TestFsync(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	e, fh, errno := k.create(root, rootNode, "000010.log", 0o644)
	if errno != 0 {
		t.Fatalf("create: %v", errno)
	}
	st := k.fs.lookupFile(e.attr.Ino)
	if st.stagingNamed.Load() {
		t.Fatalf("a new staging file counts as named before any fsync")
	}
	for _, flags := range []uint32{fsyncDataOnly, 0} {
		if errno := k.fsync(e.node, fh, flags); errno != 0 {
			t.Errorf("fsync (flags %d): %v", flags, errno)
		}
		if !st.stagingNamed.Load() {
			t.Errorf("fsync (flags %d) left the staging file's name unsynced", flags)
		}
	}
	k.release(e.node, fh)
	if errno := k.fsyncDir(rootNode); errno != 0 {
		t.Errorf("fsync of the root directory: %v", errno)
	}
}

// Every open and create asks the kernel not to send FLUSH at close
// (FOPEN_NOFLUSH): one round trip less per close(2), as a close has
// nothing to write back or report.
func TestClosesSendNoFlush(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	var out fuse.CreateOut
	st := k.raw.Create(nil, &fuse.CreateIn{InHeader: root.header(rootNode), Flags: syscall.O_RDWR, Mode: 0o644}, "CURRENT", &out)
	if st != fuse.OK {
		t.Fatalf("create: %v", st)
	}
	if out.OpenFlags&fuse.FOPEN_NOFLUSH == 0 {
		t.Errorf("create: open flags %#x without FOPEN_NOFLUSH", out.OpenFlags)
	}
	k.release(out.NodeId, out.Fh)
	for _, c := range []struct {
		name  string
		seal  bool
		flags uint32
	}{
		{"staging content, for reading", false, syscall.O_RDONLY},
		{"staging content, for writing", false, syscall.O_WRONLY},
		{"sealed content, for reading", true, syscall.O_RDONLY},
		{"sealed content, for writing", true, syscall.O_RDWR},
	} {
		if c.seal {
			k.sealNow(out.Attr.Ino)
		}
		fh, flags, errno := k.open(root, out.NodeId, c.flags)
		if errno != 0 {
			t.Fatalf("open %s: %v", c.name, errno)
		}
		if flags&fuse.FOPEN_NOFLUSH == 0 {
			t.Errorf("open %s: open flags %#x without FOPEN_NOFLUSH", c.name, flags)
		}
		k.release(out.NodeId, fh)
	}
}
