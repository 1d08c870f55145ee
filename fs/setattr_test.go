package fs

import (
	"bytes"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/statefs/statefs/index"
)

// setAttrIn is a SETATTR request for the fields valid says.
func setAttrIn(valid uint32, fill func(in *fuse.SetAttrInCommon)) fuse.SetAttrIn {
	var in fuse.SetAttrIn
	in.Valid = valid
	if fill != nil {
		fill(&in.SetAttrInCommon)
	}
	return in
}

// White-box: applyAttr sets what the request asks for, and the ctime.
// What it clears of setuid and setgid is TestKillpriv's.
func TestApplyAttr(t *testing.T) {
	then := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
	old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	const (
		reg = syscall.S_IFREG
		dir = syscall.S_IFDIR
	)
	setTimes := func(in *fuse.SetAttrInCommon) {
		in.Atime, in.Atimensec = uint64(then.Unix()), uint32(then.Nanosecond())
		in.Mtime, in.Mtimensec = uint64(then.Unix()+1), uint32(then.Nanosecond())
	}
	for _, c := range []struct {
		name     string
		mode     uint32 // the record's before
		in       fuse.SetAttrIn
		wantMode uint32
		wantUid  uint32
		wantGid  uint32
		atime    int64 // -1: now
		mtime    int64 // -1: now
	}{
		{"nothing asked changes only the ctime", reg | 0o6755,
			setAttrIn(0, nil), reg | 0o6755, 1000, 1000, old, old},
		{"chmod sets the permission bits and keeps the type", reg | 0o644,
			setAttrIn(fuse.FATTR_MODE, func(in *fuse.SetAttrInCommon) { in.Mode = 0o600 }), reg | 0o600, 1000, 1000, old, old},
		{"chmod may set setuid and setgid", reg | 0o755,
			setAttrIn(fuse.FATTR_MODE, func(in *fuse.SetAttrInCommon) { in.Mode = 0o6755 }), reg | 0o6755, 1000, 1000, old, old},
		{"chmod cannot change the type", reg | 0o644,
			setAttrIn(fuse.FATTR_MODE, func(in *fuse.SetAttrInCommon) { in.Mode = dir | 0o755 }), reg | 0o755, 1000, 1000, old, old},
		{"chown sets the owner and the group", reg | 0o644,
			setAttrIn(fuse.FATTR_UID|fuse.FATTR_GID, func(in *fuse.SetAttrInCommon) { in.Uid, in.Gid = 0, 7 }), reg | 0o644, 0, 7, old, old},
		{"chgrp alone keeps the owner", reg | 0o644,
			setAttrIn(fuse.FATTR_GID, func(in *fuse.SetAttrInCommon) { in.Gid = 7 }), reg | 0o644, 1000, 7, old, old},
		{"atime and mtime are set as given", reg | 0o644,
			setAttrIn(fuse.FATTR_ATIME|fuse.FATTR_MTIME, setTimes), reg | 0o644, 1000, 1000, then.UnixNano(), then.UnixNano() + 1e9},
		{"ATIME_NOW and MTIME_NOW set now", reg | 0o644,
			setAttrIn(fuse.FATTR_ATIME|fuse.FATTR_ATIME_NOW|fuse.FATTR_MTIME|fuse.FATTR_MTIME_NOW, setTimes), reg | 0o644, 1000, 1000, -1, -1},
		{"a size change sets the mtime to now over one given with it", reg | 0o644,
			setAttrIn(fuse.FATTR_SIZE|fuse.FATTR_ATIME|fuse.FATTR_MTIME, setTimes), reg | 0o644, 1000, 1000, then.UnixNano(), -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &index.Inode{Ino: 9, Mode: c.mode, Uid: 1000, Gid: 1000, Nlink: 1, Atime: old, Mtime: old, Ctime: old, Btime: old}
			before := index.Now()
			applyAttr(rec, &c.in)
			after := index.Now()
			if rec.Mode != c.wantMode {
				t.Errorf("mode %o, want %o", rec.Mode, c.wantMode)
			}
			if rec.Uid != c.wantUid || rec.Gid != c.wantGid {
				t.Errorf("owner %d:%d, want %d:%d", rec.Uid, rec.Gid, c.wantUid, c.wantGid)
			}
			isNow := func(ns int64) bool { return ns >= before && ns <= after }
			for _, tm := range []struct {
				name      string
				got, want int64
			}{{"atime", rec.Atime, c.atime}, {"mtime", rec.Mtime, c.mtime}} {
				if tm.want == -1 && !isNow(tm.got) || tm.want != -1 && tm.got != tm.want {
					t.Errorf("%s %d, want %d (-1: now)", tm.name, tm.got, tm.want)
				}
			}
			if !isNow(rec.Ctime) {
				t.Errorf("ctime %d, want now (%d..%d)", rec.Ctime, before, after)
			}
			if rec.Btime != old || rec.Nlink != 1 || rec.Ino != 9 {
				t.Errorf("changed what setattr does not set: %+v", rec)
			}
		})
	}
}

// A truncate of sealed content moves it to a new staging file, cut or
// zero-extended, with a new mtime, and schedules its seal; sealed again, it
// keeps the new content.
func TestTruncateOfSealedContentUnsealsIt(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	e := k.writeFile(rootNode, "CURRENT", []byte("MANIFEST-000007\n"))
	ino := e.attr.Ino
	k.sealNow(ino)
	if rec := k.mustInode(ino); rec.Staging != 0 {
		t.Fatalf("not sealed: staging %d", rec.Staging)
	}
	for _, c := range []struct {
		name string
		size uint64
		want []byte
	}{
		{"cut", 8, []byte("MANIFEST")},
		{"extended with zeros", 10, []byte("MANIFEST\x00\x00")},
		{"emptied", 0, nil},
	} {
		before, errno := k.getattr(e.node)
		if errno != 0 {
			t.Fatalf("getattr: %v", errno)
		}
		time.Sleep(10 * time.Millisecond) // a truncate's mtime is later than the seal's
		a, errno := k.setattr(root, e.node, setAttrIn(fuse.FATTR_SIZE, func(in *fuse.SetAttrInCommon) { in.Size = c.size }))
		if errno != 0 {
			t.Fatalf("truncate %s: %v", c.name, errno)
		}
		if a.Size != c.size {
			t.Errorf("truncate %s answered size %d, want %d", c.name, a.Size, c.size)
		}
		if !a.ModTime().After(before.ModTime()) {
			t.Errorf("truncate %s kept the mtime %v of the sealed file", c.name, a.ModTime())
		}
		if rec := k.mustInode(ino); rec.Staging == 0 {
			t.Errorf("truncate %s: content not in staging", c.name)
		}
		if !k.armed(ino) {
			t.Errorf("truncate %s scheduled no seal", c.name)
		}
		if got := k.readFile(e.node, 64); !bytes.Equal(got, c.want) {
			t.Errorf("truncate %s: read %q, want %q", c.name, got, c.want)
		}
		k.sealNow(ino)
		if rec := k.mustInode(ino); rec.Staging != 0 || rec.Size != c.size {
			t.Errorf("truncate %s, then sealed: staging %d, size %d; want sealed, %d", c.name, rec.Staging, rec.Size, c.size)
		}
		if got := k.readFile(e.node, 64); !bytes.Equal(got, c.want) {
			t.Errorf("truncate %s, then sealed: read %q, want %q", c.name, got, c.want)
		}
	}
}

// A reader of sealed content that stays open across a truncate reads the
// truncated content (from the new staging file), and no seal is scheduled
// while it is open: its release does that.
func TestTruncateUnderAnOpenReader(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	e := k.writeFile(rootNode, "LOG", []byte("hello world"))
	ino := e.attr.Ino
	k.sealNow(ino)
	fh, _, errno := k.open(root, e.node, syscall.O_RDONLY)
	if errno != 0 {
		t.Fatalf("open: %v", errno)
	}
	if _, errno := k.setattr(root, e.node, setAttrIn(fuse.FATTR_SIZE, func(in *fuse.SetAttrInCommon) { in.Size = 5 })); errno != 0 {
		t.Fatalf("truncate: %v", errno)
	}
	if got, errno := k.read(e.node, fh, 0, 64); errno != 0 || string(got) != "hello" {
		t.Errorf("the open reader read %q (%v), want %q", got, errno, "hello")
	}
	if k.armed(ino) {
		t.Errorf("a truncate under an open handle scheduled a seal")
	}
	k.release(e.node, fh)
	if !k.armed(ino) {
		t.Errorf("the last release after a truncate scheduled no seal")
	}
}

// Only regular files have a size to set.
func TestTruncateRefusesWhatIsNotAFile(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	dir := k.mkdirAll("dir")
	link, errno := k.symlink(rootNode, "dir", "link")
	if errno != 0 {
		t.Fatalf("symlink: %v", errno)
	}
	fifo, errno := k.mknod(rootNode, "fifo", syscall.S_IFIFO|0o644, 0)
	if errno != 0 {
		t.Fatalf("mknod: %v", errno)
	}
	for _, c := range []struct {
		name string
		node uint64
		want syscall.Errno
	}{
		{"a directory is EISDIR", dir.node, syscall.EISDIR},
		{"a symlink is EINVAL", link.node, syscall.EINVAL},
		{"a fifo is EINVAL", fifo.node, syscall.EINVAL},
	} {
		_, errno := k.setattr(root, c.node, setAttrIn(fuse.FATTR_SIZE, func(in *fuse.SetAttrInCommon) { in.Size = 1 }))
		if errno != c.want {
			t.Errorf("truncate: %s: got %v", c.name, errno)
		}
	}
}

// utimes of a file whose content is in staging sets the staging file's
// times, which are the file's until it is sealed, and the seal keeps the
// mtime: whether the file is open or not.
func TestUtimesOfStagingContent(t *testing.T) {
	t.Parallel()
	for _, open := range []bool{false, true} {
		k := newKernel(t, Options{})
		e, fh, errno := k.create(root, rootNode, "000009.log", 0o644)
		if errno != 0 {
			t.Fatalf("create: %v", errno)
		}
		if _, errno := k.write(e.node, fh, 0, []byte("record")); errno != 0 {
			t.Fatalf("write: %v", errno)
		}
		if !open {
			k.release(e.node, fh)
		}
		then := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
		a, errno := k.setattr(root, e.node, setAttrIn(fuse.FATTR_MTIME|fuse.FATTR_ATIME, func(in *fuse.SetAttrInCommon) {
			in.Atime, in.Atimensec = uint64(then.Unix()), uint32(then.Nanosecond())
			in.Mtime, in.Mtimensec = uint64(then.Unix()+1), uint32(then.Nanosecond())
		}))
		if errno != 0 {
			t.Fatalf("utimes (open %v): %v", open, errno)
		}
		if !a.AccessTime().Equal(then) || !a.ModTime().Equal(then.Add(time.Second)) {
			t.Errorf("utimes (open %v) answered atime %v, mtime %v; want %v, %v", open, a.AccessTime(), a.ModTime(), then, then.Add(time.Second))
		}
		fi, err := os.Stat(k.store.StagingPath(k.mustInode(e.attr.Ino).Staging))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(then.Add(time.Second)) {
			t.Errorf("utimes (open %v): the staging file's mtime is %v, want %v", open, fi.ModTime(), then.Add(time.Second))
		}
		if open {
			k.release(e.node, fh)
		}
		k.sealNow(e.attr.Ino)
		if rec := k.mustInode(e.attr.Ino); rec.Staging != 0 || rec.Mtime != then.UnixNano()+1e9 {
			t.Errorf("utimes (open %v), then sealed: staging %d, mtime %d; want sealed, %d", open, rec.Staging, rec.Mtime, then.UnixNano()+1e9)
		}
	}
}
