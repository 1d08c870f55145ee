package fs

import (
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/index"
)

// White-box: splitTime gives the kernel seconds and non-negative
// nanoseconds, flooring the seconds of a time before 1970.
func TestSplitTime(t *testing.T) {
	for _, c := range []struct {
		name string
		ns   int64
		sec  int64
		nsec uint32
	}{
		{"the epoch", 0, 0, 0},
		{"a whole second", 3e9, 3, 0},
		{"seconds and nanoseconds", 1_796_139_574_432_731_976, 1_796_139_574, 432_731_976},
		{"one nanosecond", 1, 0, 1},
		{"one nanosecond before the epoch", -1, -1, 999_999_999},
		{"a second and a half before the epoch", -1_500_000_000, -2, 500_000_000},
		{"a whole second before the epoch", -2e9, -2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			sec, nsec := splitTime(c.ns)
			if int64(sec) != c.sec || nsec != c.nsec {
				t.Errorf("splitTime(%d) = (%d, %d), want (%d, %d)", c.ns, int64(sec), nsec, c.sec, c.nsec)
			}
			if back := int64(sec)*1e9 + int64(nsec); back != c.ns {
				t.Errorf("splitTime(%d) comes back as %d", c.ns, back)
			}
		})
	}
}

// White-box: the attributes of an inode whose content is sealed (or that
// has none) are its record's: 512-byte blocks rounded up from the size, a
// block size of 4096, times split for the kernel.
func TestFillAttrFromTheRecord(t *testing.T) {
	at := time.Date(2026, 11, 30, 5, 17, 0, 123, time.UTC).UnixNano()
	for _, c := range []struct {
		name   string
		rec    index.Inode
		blocks uint64
	}{
		{"an empty file has no blocks", index.Inode{Mode: syscall.S_IFREG | 0o644, Nlink: 1}, 0},
		{"one byte takes a block", index.Inode{Mode: syscall.S_IFREG | 0o600, Nlink: 1, Size: 1}, 1},
		{"512 bytes take one block", index.Inode{Mode: syscall.S_IFREG | 0o600, Nlink: 3, Size: 512}, 1},
		{"513 bytes take two", index.Inode{Mode: syscall.S_IFREG | 0o4755, Nlink: 1, Size: 513}, 2},
		{"a directory's size counts too", index.Inode{Mode: syscall.S_IFDIR | 0o2775, Nlink: 5, Size: 4096}, 8},
		{"a symlink's size is its target's length", index.Inode{Mode: syscall.S_IFLNK | 0o777, Nlink: 1, Size: 11, Target: "../chk_1/01"}, 1},
		{"a device keeps its number", index.Inode{Mode: syscall.S_IFCHR | 0o600, Nlink: 1, Rdev: 0x0103}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := c.rec
			rec.Ino, rec.Uid, rec.Gid = 42, 1000, 2000
			rec.Atime, rec.Mtime, rec.Ctime, rec.Btime = at, at+1, at+2, at-1
			var a fuse.Attr
			if err := (&FS{}).fillAttr(&rec, &a); err != nil {
				t.Fatal(err)
			}
			want := fuse.Attr{Ino: 42, Size: rec.Size, Blocks: c.blocks, Mode: rec.Mode, Nlink: rec.Nlink,
				Owner: fuse.Owner{Uid: 1000, Gid: 2000}, Rdev: rec.Rdev, Blksize: 4096}
			want.Atime, want.Atimensec = splitTime(at)
			want.Mtime, want.Mtimensec = splitTime(at + 1)
			want.Ctime, want.Ctimensec = splitTime(at + 2)
			if a != want {
				t.Errorf("fillAttr:\n got %+v\nwant %+v", a, want)
			}
		})
	}
}

// The attributes of a file whose content is in staging come from the
// staging file, which the kernel writes directly with passthrough: its
// size, blocks, atime and mtime, and the later of its mtime (a write's
// time) and the record's ctime.
func TestAttrOfStagingContentIsTheStagingFiles(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	e, fh, errno := k.create(root, rootNode, "000042.sst", 0o644)
	if errno != 0 {
		t.Fatalf("create: %v", errno)
	}
	if _, errno := k.write(e.node, fh, 0, make([]byte, 5000)); errno != 0 {
		t.Fatalf("write: %v", errno)
	}
	rec := k.mustInode(e.attr.Ino)
	if rec.Staging == 0 || rec.Size != 0 {
		t.Fatalf("a new file's record: staging %d, size %d; want staging content and size 0", rec.Staging, rec.Size)
	}
	path := k.store.StagingPath(rec.Staging)
	past := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
	mtime := past.Add(time.Second)
	if err := os.Chtimes(path, past, mtime); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}

	check := func(when string, mtime time.Time, ctime int64) {
		t.Helper()
		a, errno := k.getattr(e.node)
		if errno != 0 {
			t.Fatalf("getattr %s: %v", when, errno)
		}
		if a.Size != 5000 || a.Blocks != uint64(st.Blocks) {
			t.Errorf("getattr %s: size %d, blocks %d; want the staging file's %d and %d", when, a.Size, a.Blocks, 5000, st.Blocks)
		}
		if got := a.AccessTime(); !got.Equal(past) {
			t.Errorf("getattr %s: atime %v, want the staging file's %v", when, got, past)
		}
		if got := a.ModTime(); !got.Equal(mtime) {
			t.Errorf("getattr %s: mtime %v, want the staging file's %v", when, got, mtime)
		}
		if got := a.ChangeTime().UnixNano(); got != ctime {
			t.Errorf("getattr %s: ctime %d, want %d", when, got, ctime)
		}
	}
	// Written before the record changed: the record's ctime. Open: stat
	// through the handle's descriptor.
	check("while open", mtime, rec.Ctime)
	k.release(e.node, fh)
	check("once closed", mtime, rec.Ctime)

	// Written after: the write's time.
	written := time.Unix(0, rec.Ctime).Add(time.Hour)
	if err := os.Chtimes(path, past, written); err != nil {
		t.Fatal(err)
	}
	check("written after the record changed", written, written.UnixNano())

	// A record changed after that (a chmod) has the later ctime.
	later := written.UnixNano() + int64(time.Hour)
	if err := k.store.Index.Update(func(tx *index.Tx) error {
		rec, err := tx.Inode(e.attr.Ino)
		if err != nil {
			return err
		}
		rec.Ctime = later
		return tx.PutInode(rec)
	}); err != nil {
		t.Fatal(err)
	}
	check("with a later ctime in the record", written, later)
}

// Once sealed, a file's attributes are its record's again: the size and
// times the seal took from the staging file, so a stat shows the same
// times before and after, and blocks from the size.
func TestAttrOfSealedContentIsTheRecords(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	e := k.writeFile(rootNode, "MANIFEST-000001", make([]byte, 5000))
	rec := k.mustInode(e.attr.Ino)
	atime := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
	mtime := time.Unix(0, rec.Ctime).Add(time.Hour) // written after the record's change
	if err := os.Chtimes(k.store.StagingPath(rec.Staging), atime, mtime); err != nil {
		t.Fatal(err)
	}
	before, errno := k.getattr(e.node)
	if errno != 0 {
		t.Fatalf("getattr: %v", errno)
	}
	k.notified()
	k.sealNow(e.attr.Ino)
	if got, want := k.notified(), sprintf("inode %d", e.node); !slices.Contains(got, want) {
		t.Errorf("sealing notified %q; want %q: the kernel keeps the staging file's blocks", got, want)
	}
	if rec = k.mustInode(e.attr.Ino); rec.Staging != 0 {
		t.Fatalf("not sealed: staging %d", rec.Staging)
	}
	a, errno := k.getattr(e.node)
	if errno != 0 {
		t.Fatalf("getattr: %v", errno)
	}
	if a.Size != 5000 || a.Blocks != 10 {
		t.Errorf("sealed: size %d, blocks %d; want 5000 and 10", a.Size, a.Blocks)
	}
	if got := a.ModTime(); !got.Equal(mtime) {
		t.Errorf("sealed: mtime %v, want the staging file's last one, %v", got, mtime)
	}
	if !a.AccessTime().Equal(before.AccessTime()) || !a.ChangeTime().Equal(before.ChangeTime()) {
		t.Errorf("sealed: atime %v, ctime %v; want %v and %v as before the seal",
			a.AccessTime(), a.ChangeTime(), before.AccessTime(), before.ChangeTime())
	}
}

// Opening a sealed file for writing moves its content to a staging file
// and changes no time: a stat shows the same times as before, and the
// kernel is told to drop the blocks it had.
func TestUnsealKeepsTheTimes(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	e := k.writeFile(rootNode, "CURRENT", []byte("MANIFEST-000001\n"))
	k.sealNow(e.attr.Ino)
	before, errno := k.getattr(e.node)
	if errno != 0 {
		t.Fatalf("getattr: %v", errno)
	}
	time.Sleep(10 * time.Millisecond) // a new staging file would have later times
	k.notified()
	fh, _, errno := k.open(root, e.node, syscall.O_RDWR)
	if errno != 0 {
		t.Fatalf("open: %v", errno)
	}
	defer k.release(e.node, fh)
	if rec := k.mustInode(e.attr.Ino); rec.Staging == 0 {
		t.Fatalf("opening for writing did not unseal")
	}
	k.waitNotified(sprintf("inode %d", e.node))
	after, errno := k.getattr(e.node)
	if errno != 0 {
		t.Fatalf("getattr: %v", errno)
	}
	for _, c := range []struct {
		name          string
		before, after time.Time
	}{
		{"atime", before.AccessTime(), after.AccessTime()},
		{"mtime", before.ModTime(), after.ModTime()},
		{"ctime", before.ChangeTime(), after.ChangeTime()},
	} {
		if !c.after.Equal(c.before) {
			t.Errorf("%s %v after the unseal, want %v as before", c.name, c.after, c.before)
		}
	}
}
