package fs

import (
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/owner"
)

// A Flink layout for the tests: one executor, allocation, job and subtask.
const (
	testJob      = "0123456789abcdef0123456789abcdef"
	testAlloc    = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	testVertex   = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	executorPath = "tm_executor-1"
	allocPath    = executorPath + "/localState/aid_" + testAlloc
	jobPath      = allocPath + "/jid_" + testJob
	subtaskPath  = jobPath + "/vtx_" + testVertex + "_sti_0"
)

// ownerOf is the owner the index gives inode ino.
func (k *kernel) ownerOf(ino uint64) owner.Owner {
	k.t.Helper()
	var o owner.Owner
	err := k.store.Index.View(func(tx *index.Tx) error {
		rec, err := tx.Inode(ino)
		if err != nil {
			return err
		}
		o, err = tx.Owner(rec.Owner)
		return err
	})
	if err != nil {
		k.t.Fatalf("owner of inode %d: %v", ino, err)
	}
	return o
}

// job is the index's record of job id; nil if there is none.
func (k *kernel) job(id string) *index.Job {
	k.t.Helper()
	var j *index.Job
	err := k.store.Index.View(func(tx *index.Tx) (err error) {
		j, err = tx.Job(id)
		return err
	})
	if err != nil {
		return nil
	}
	return j
}

// A new inode takes the caller's user and group, and the mode exactly as
// asked: the kernel applied the umask already (DESIGN invariant 6).
func TestNewInodesTakeTheCallersOwnerAndMode(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	u := user{1000, 2000}
	for _, c := range []struct {
		name string
		make func() (entry, syscall.Errno)
		mode uint32
	}{
		{"mkdir", func() (entry, syscall.Errno) { return k.mkdir(u, rootNode, "dir", 0o777) }, syscall.S_IFDIR | 0o777},
		{"mkdir with setuid and sticky", func() (entry, syscall.Errno) { return k.mkdir(u, rootNode, "sticky", 0o5777) }, syscall.S_IFDIR | 0o5777},
		{"create", func() (entry, syscall.Errno) {
			e, fh, errno := k.create(u, rootNode, "file", 0o666)
			if errno == 0 {
				k.release(e.node, fh)
			}
			return e, errno
		}, syscall.S_IFREG | 0o666},
		{"create with no permissions", func() (entry, syscall.Errno) {
			e, fh, errno := k.create(u, rootNode, "none", 0)
			if errno == 0 {
				k.release(e.node, fh)
			}
			return e, errno
		}, syscall.S_IFREG},
		{"symlink", func() (entry, syscall.Errno) {
			var out fuse.EntryOut
			h := u.header(rootNode)
			st := k.raw.Symlink(nil, &h, "file", "link", &out)
			return entry{out.NodeId, out.Attr}, errnoOf(st)
		}, syscall.S_IFLNK | 0o777},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, errno := c.make()
			if errno != 0 {
				t.Fatalf("%s: %v", c.name, errno)
			}
			if e.attr.Mode != c.mode || e.attr.Uid != u.uid || e.attr.Gid != u.gid {
				t.Errorf("%s answered mode %o, owner %d:%d; want %o, %d:%d", c.name, e.attr.Mode, e.attr.Uid, e.attr.Gid, c.mode, u.uid, u.gid)
			}
			rec := k.mustInode(e.attr.Ino)
			if rec.Mode != c.mode || rec.Uid != u.uid || rec.Gid != u.gid {
				t.Errorf("%s recorded mode %o, owner %d:%d; want %o, %d:%d", c.name, rec.Mode, rec.Uid, rec.Gid, c.mode, u.uid, u.gid)
			}
		})
	}
}

// In a setgid directory a new inode takes the directory's group, and a new
// directory stays setgid; a new file does not become setgid.
func TestSetgidDirectoryGivesItsGroup(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	shared, errno := k.mkdir(root, rootNode, "shared", 0o2775)
	if errno != 0 {
		t.Fatalf("mkdir: %v", errno)
	}
	if _, errno := k.setattr(root, shared.node, setAttrIn(fuse.FATTR_GID, func(in *fuse.SetAttrInCommon) { in.Gid = 50 })); errno != 0 {
		t.Fatalf("chgrp: %v", errno)
	}
	if rec := k.mustInode(shared.attr.Ino); rec.Mode != syscall.S_IFDIR|0o2775 {
		t.Fatalf("chgrp of the directory changed its mode to %o", rec.Mode)
	}
	u := user{1000, 1000}
	dir, errno := k.mkdir(u, shared.node, "sub", 0o755)
	if errno != 0 {
		t.Fatalf("mkdir: %v", errno)
	}
	if dir.attr.Gid != 50 || dir.attr.Mode != syscall.S_IFDIR|0o2755 {
		t.Errorf("a directory made in a setgid one: gid %d, mode %o; want 50, %o", dir.attr.Gid, dir.attr.Mode, syscall.S_IFDIR|0o2755)
	}
	file, fh, errno := k.create(u, shared.node, "file", 0o644)
	if errno != 0 {
		t.Fatalf("create: %v", errno)
	}
	k.release(file.node, fh)
	if file.attr.Gid != 50 || file.attr.Mode != syscall.S_IFREG|0o644 {
		t.Errorf("a file made in a setgid directory: gid %d, mode %o; want 50, %o", file.attr.Gid, file.attr.Mode, syscall.S_IFREG|0o644)
	}
	if file.attr.Uid != u.uid {
		t.Errorf("a file made in a setgid directory: uid %d, want the caller's %d", file.attr.Uid, u.uid)
	}
}

// mknod makes what is not a directory or a symlink, with its device
// number; those two have requests of their own.
func TestMknod(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	for _, c := range []struct {
		name string
		mode uint32
		rdev uint32
		want syscall.Errno
	}{
		{"a fifo", syscall.S_IFIFO | 0o600, 0, 0},
		{"a character device keeps its number", syscall.S_IFCHR | 0o600, 0x0103, 0},
		{"a socket", syscall.S_IFSOCK | 0o755, 0, 0},
		{"a regular file", syscall.S_IFREG | 0o644, 0, 0},
		{"a directory is EINVAL", syscall.S_IFDIR | 0o755, 0, syscall.EINVAL},
		{"a symlink is EINVAL", syscall.S_IFLNK | 0o777, 0, syscall.EINVAL},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, errno := k.mknod(rootNode, c.name, c.mode, c.rdev)
			if errno != c.want {
				t.Fatalf("mknod: %v, want %v", errno, c.want)
			}
			if errno != 0 {
				if _, errno := k.lookup(rootNode, c.name); errno != syscall.ENOENT {
					t.Errorf("a refused mknod left a name: lookup %v", errno)
				}
				return
			}
			if e.attr.Mode != c.mode || e.attr.Rdev != c.rdev {
				t.Errorf("mknod answered mode %o, rdev %#x; want %o, %#x", e.attr.Mode, e.attr.Rdev, c.mode, c.rdev)
			}
		})
	}
}

// A symlink's target comes back from readlink, its size is the target's
// length, and readlink of anything else is EINVAL.
func TestSymlinkAndReadlink(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	target := "../chk_7/000042.sst"
	e, errno := k.symlink(rootNode, target, "link")
	if errno != 0 {
		t.Fatalf("symlink: %v", errno)
	}
	if e.attr.Size != uint64(len(target)) {
		t.Errorf("a symlink's size is %d, want %d", e.attr.Size, len(target))
	}
	h := root.header(e.node)
	if got, st := k.raw.Readlink(nil, &h); st != fuse.OK || string(got) != target {
		t.Errorf("readlink: %q (%v), want %q", got, st, target)
	}
	file := k.writeFile(rootNode, "file", nil)
	h = root.header(file.node)
	if _, st := k.raw.Readlink(nil, &h); errnoOf(st) != syscall.EINVAL {
		t.Errorf("readlink of a file: %v, want EINVAL", st)
	}
}

// Hard links are for files: a link to a directory is EPERM. A link counts
// in the inode's nlink and names the same content.
func TestLink(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	dir := k.mkdirAll("dir")
	if _, errno := k.link(dir.node, rootNode, "dirlink"); errno != syscall.EPERM {
		t.Errorf("link to a directory: %v, want EPERM", errno)
	}
	file := k.writeFile(rootNode, "file", []byte("shared"))
	e, errno := k.link(file.node, dir.node, "again")
	if errno != 0 {
		t.Fatalf("link: %v", errno)
	}
	if e.attr.Ino != file.attr.Ino || e.attr.Nlink != 2 {
		t.Errorf("link answered inode %d, nlink %d; want %d, 2", e.attr.Ino, e.attr.Nlink, file.attr.Ino)
	}
	if _, errno := k.link(file.node, dir.node, "again"); errno != syscall.EEXIST {
		t.Errorf("link over an existing name: %v, want EEXIST", errno)
	}
	if got := k.readFile(k.walk("dir/again").node, 64); string(got) != "shared" {
		t.Errorf("the link reads %q", got)
	}
}

// The .statefs view cannot be removed, renamed or replaced, and nothing in
// it can be changed.
func TestStatefsIsReadOnly(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	k.writeFile(rootNode, "file", nil)
	view := k.walk(statusDirName)
	status := k.walk(statusDirName + "/status.json")
	for _, c := range []struct {
		name string
		call func() syscall.Errno
		want syscall.Errno
	}{
		{"unlink .statefs", func() syscall.Errno { return k.unlink(rootNode, statusDirName) }, syscall.EPERM},
		{"rmdir .statefs", func() syscall.Errno { return k.rmdir(rootNode, statusDirName) }, syscall.EPERM},
		{"rename .statefs", func() syscall.Errno { return k.rename(rootNode, statusDirName, rootNode, "x", 0) }, syscall.EPERM},
		{"rename onto .statefs", func() syscall.Errno { return k.rename(rootNode, "file", rootNode, statusDirName, 0) }, syscall.EPERM},
		{"rename into .statefs", func() syscall.Errno { return k.rename(rootNode, "file", view.node, "file", 0) }, syscall.EROFS},
		{"rename out of .statefs", func() syscall.Errno { return k.rename(view.node, "status.json", rootNode, "s", 0) }, syscall.EROFS},
		{"mkdir in .statefs", func() syscall.Errno { _, e := k.mkdir(root, view.node, "d", 0o755); return e }, syscall.EROFS},
		{"create in .statefs", func() syscall.Errno { _, _, e := k.create(root, view.node, "f", 0o644); return e }, syscall.EROFS},
		{"mknod in .statefs", func() syscall.Errno { _, e := k.mknod(view.node, "p", syscall.S_IFIFO|0o644, 0); return e }, syscall.EROFS},
		{"symlink in .statefs", func() syscall.Errno { _, e := k.symlink(view.node, "x", "l"); return e }, syscall.EROFS},
		{"link into .statefs", func() syscall.Errno { _, e := k.link(k.walk("file").node, view.node, "l"); return e }, syscall.EROFS},
		{"unlink in .statefs", func() syscall.Errno { return k.unlink(view.node, "status.json") }, syscall.EROFS},
		{"rmdir in .statefs", func() syscall.Errno { return k.rmdir(view.node, "jobs") }, syscall.EROFS},
		{"chmod of a status file", func() syscall.Errno {
			_, e := k.setattr(root, status.node, setAttrIn(fuse.FATTR_MODE, func(in *fuse.SetAttrInCommon) { in.Mode = 0o666 }))
			return e
		}, syscall.EROFS},
		{"setxattr of a status file", func() syscall.Errno { return k.setxattr(status.node, "user.a", []byte("v"), 0) }, syscall.EROFS},
		{"removexattr of a status file", func() syscall.Errno { return k.removexattr(status.node, "user.a") }, syscall.EROFS},
		{"open of a status file for writing", func() syscall.Errno { _, _, e := k.open(root, status.node, syscall.O_WRONLY); return e }, syscall.EROFS},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.call(); got != c.want {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		})
	}
	if _, errno := k.lookup(rootNode, statusDirName); errno != 0 {
		t.Errorf(".statefs is gone: %v", errno)
	}
}

// readdir lists "." and "..", the names, and at the root the .statefs
// view.
func TestReaddir(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	dir := k.mkdirAll("dir")
	k.writeFile(rootNode, "file", nil)
	sub := k.writeFile(dir.node, "sub", nil)
	got, errno := k.readdir(rootNode)
	if errno != 0 {
		t.Fatalf("readdir of the root: %v", errno)
	}
	want := map[string]uint64{".": index.RootIno, "..": index.RootIno, statusDirName: statusDirIno, "dir": dir.attr.Ino, "file": k.walk("file").attr.Ino}
	if !mapsEqual(got, want) {
		t.Errorf("readdir of the root: %v, want %v", got, want)
	}
	got, errno = k.readdir(dir.node)
	if errno != 0 {
		t.Fatalf("readdir of dir: %v", errno)
	}
	want = map[string]uint64{".": dir.attr.Ino, "..": index.RootIno, "sub": sub.attr.Ino}
	if !mapsEqual(got, want) {
		t.Errorf("readdir of dir: %v, want %v", got, want)
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// statfs reports the longest name statefs takes.
func TestStatfs(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	var out fuse.StatfsOut
	h := root.header(rootNode)
	if st := k.raw.StatFs(nil, &h, &out); st != fuse.OK {
		t.Fatalf("statfs: %v", st)
	}
	if out.NameLen != nameMax || out.Bsize == 0 || out.Blocks == 0 {
		t.Errorf("statfs: name length %d, block size %d, blocks %d; want %d and the disk's", out.NameLen, out.Bsize, out.Blocks, nameMax)
	}
}

// State that a rename moves between owners takes the owner of its new path,
// a directory's subtree with it, both sides of an exchange.
func TestRenameReowns(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	sub := k.mkdirAll(subtaskPath)
	staging := k.mkdirAll("staging")
	chk := k.mkdirAll("staging/chk_5")
	file := k.writeFile(chk.node, "000001.sst", []byte("x"))
	if o := k.ownerOf(file.attr.Ino); o.Job != "" {
		t.Fatalf("a file outside any executor's tree is owned: %+v", o)
	}
	if errno := k.rename(staging.node, "chk_5", sub.node, "chk_5", 0); errno != 0 {
		t.Fatalf("rename: %v", errno)
	}
	for _, ino := range []uint64{chk.attr.Ino, file.attr.Ino} {
		if o := k.ownerOf(ino); o.Job != testJob || o.Checkpoint != "5" || o.Level != owner.LevelCheckpoint {
			t.Errorf("inode %d moved into checkpoint 5 of the job: owner %+v", ino, o)
		}
	}

	other := k.writeFile(staging.node, "other", []byte("y"))
	if errno := k.rename(sub.node, "chk_5", staging.node, "other", index.RenameExchange); errno != 0 {
		t.Fatalf("rename exchange: %v", errno)
	}
	if o := k.ownerOf(other.attr.Ino); o.Job != testJob || o.Checkpoint != "5" {
		t.Errorf("a file exchanged into the subtask as chk_5: owner %+v", o)
	}
	for _, ino := range []uint64{chk.attr.Ino, file.attr.Ino} {
		if o := k.ownerOf(ino); o.Job != "" {
			t.Errorf("inode %d exchanged out of the job: owner %+v", ino, o)
		}
	}
}

// A file that loses its last name stays while a handle has it open or the
// kernel knows its node; the last of the two to let go reaps it, and its
// staging file with it.
func TestRemovedFileLivesWhileUsed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		remove func(k *kernel) syscall.Errno
	}{
		{"unlink", func(k *kernel) syscall.Errno { return k.unlink(rootNode, "victim") }},
		{"rename over it", func(k *kernel) syscall.Errno {
			k.writeFile(rootNode, "other", nil)
			return k.rename(rootNode, "other", rootNode, "victim", 0)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newKernel(t, Options{})
			e, fh, errno := k.create(root, rootNode, "victim", 0o644)
			if errno != 0 {
				t.Fatalf("create: %v", errno)
			}
			staging := k.store.StagingPath(k.mustInode(e.attr.Ino).Staging)
			if errno := c.remove(k); errno != 0 {
				t.Fatalf("%s: %v", c.name, errno)
			}
			rec, err := k.inode(e.attr.Ino)
			if err != nil || rec.Nlink != 0 {
				t.Fatalf("an open file without names: %+v, %v; want kept with nlink 0", rec, err)
			}
			if _, errno := k.write(e.node, fh, 0, []byte("still writable")); errno != 0 {
				t.Errorf("write to an open file without names: %v", errno)
			}
			k.release(e.node, fh)
			if _, err := k.inode(e.attr.Ino); err != nil {
				t.Errorf("reaped at the last close while the kernel knows it: %v", err)
			}
			if k.armed(e.attr.Ino) {
				t.Errorf("a seal was scheduled for a file without names")
			}
			k.forget(e.node, 1)
			if _, err := k.inode(e.attr.Ino); err == nil {
				t.Errorf("not reaped once closed and forgotten")
			}
			if _, err := os.Stat(staging); err == nil {
				t.Errorf("its staging file is still there")
			}
		})
	}
}

// Remove takes a name out for the collector: a file that lost its last
// name goes at once, even while the kernel knows it, unless it is open
// (an orphan); the kernel is told to drop the entry (and the inode), and
// the attributes that changed with it: the directory's, and those of a
// file that keeps other names.
func TestRemoveForTheCollector(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	known := k.writeFile(rootNode, "known", []byte("x"))
	open, fh, e := k.create(root, rootNode, "open", 0o644)
	if e != 0 {
		t.Fatalf("create: %v", e)
	}
	linked := k.writeFile(rootNode, "linked", []byte("x"))
	if _, e := k.link(linked.node, rootNode, "link2"); e != 0 {
		t.Fatalf("link: %v", e)
	}
	dir := k.mkdirAll("dir")
	k.writeFile(dir.node, "inside", nil)
	k.notified()

	for _, c := range []struct {
		name     string
		file     string
		ino      uint64
		orphan   bool
		gone     bool
		notified []string
		err      syscall.Errno
	}{
		{"a closed file goes though the kernel knows it", "known", known.attr.Ino, false, true,
			[]string{sprintf("delete %d known", rootNode), sprintf("inode %d", rootNode)}, 0},
		{"an open file is an orphan", "open", open.attr.Ino, true, false,
			[]string{sprintf("delete %d open", rootNode), sprintf("inode %d", rootNode)}, 0},
		{"a file with another name loses only this one, and the link count the kernel has", "linked", linked.attr.Ino, false, false,
			[]string{sprintf("entry %d linked", rootNode), sprintf("inode %d", rootNode), sprintf("inode %d", linked.node)}, 0},
		{"a directory with entries stays", "dir", dir.attr.Ino, false, false, nil, syscall.ENOTEMPTY},
		{"a missing name is ENOENT", "missing", 0, false, false, nil, syscall.ENOENT},
	} {
		t.Run(c.name, func(t *testing.T) {
			orphan, err := k.fs.Remove(index.RootIno, c.file)
			if got := errno(err); got != c.err {
				t.Fatalf("Remove: %v (%v), want %v", err, got, c.err)
			}
			if orphan != c.orphan {
				t.Errorf("Remove reported orphan %v, want %v", orphan, c.orphan)
			}
			if c.ino != 0 {
				if _, err := k.inode(c.ino); (err != nil) != c.gone {
					t.Errorf("after Remove, the inode: %v; want gone %v", err, c.gone)
				}
			}
			got := k.notified()
			if !slices.Equal(got, c.notified) {
				t.Errorf("notified %q, want %q", got, c.notified)
			}
		})
	}
	// The orphan goes at its last close and the kernel's FORGET.
	k.release(open.node, fh)
	k.forget(open.node, 1)
	if _, err := k.inode(open.attr.Ino); err == nil {
		t.Errorf("the orphan was not reaped once closed and forgotten")
	}
}

// Writes in a job's tree are noted in the job's record: a create, a
// writer's close and a link each note theirs, once a second per owner at
// most, and always after the record was deleted; a reader's close notes
// nothing.
func TestWritesAreNotedInTheJob(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	sub := k.mkdirAll(subtaskPath)
	if k.job(testJob) == nil {
		t.Fatalf("making the job's tree made no job record")
	}
	e, fh, errno := k.create(root, sub.node, "000001.sst", 0o644)
	if errno != 0 {
		t.Fatalf("create: %v", errno)
	}
	k.release(e.node, fh)
	j := k.job(testJob)
	if !slices.Contains(j.Allocations, testAlloc) || !slices.Contains(j.Executors, "executor-1") {
		t.Errorf("the job record lacks the allocation or executor: %+v", j)
	}
	// Another close within the second, under the same owner: not noted.
	fh, _, errno = k.open(root, e.node, syscall.O_WRONLY)
	if errno != 0 {
		t.Fatalf("open: %v", errno)
	}
	k.release(e.node, fh)
	if again := k.job(testJob); again.LastWrite != j.LastWrite {
		t.Errorf("a second close within a second was noted too: %d, then %d", j.LastWrite, again.LastWrite)
	}
	// Once the record is gone, a reader's close does not make it again; a
	// writer's close does, at once.
	if err := k.store.Index.Update(func(tx *index.Tx) error { return tx.DeleteJob(testJob) }); err != nil {
		t.Fatal(err)
	}
	k.readFile(e.node, 1)
	if again := k.job(testJob); again != nil {
		t.Errorf("a reader's close was noted as a write: %+v", again)
	}
	closed := index.Now()
	fh, _, errno = k.open(root, e.node, syscall.O_WRONLY)
	if errno != 0 {
		t.Fatalf("open: %v", errno)
	}
	k.release(e.node, fh)
	if again := k.job(testJob); again == nil || again.LastWrite < closed {
		t.Errorf("a writer's close after the record was deleted noted no write at %d: %+v", closed, again)
	}

	// A link into another job's tree notes a write of that job.
	const other = "fedcba9876543210fedcba9876543210"
	dst := k.mkdirAll(allocPath + "/jid_" + other + "/vtx_" + testVertex + "_sti_1")
	if err := k.store.Index.Update(func(tx *index.Tx) error { return tx.DeleteJob(other) }); err != nil {
		t.Fatal(err)
	}
	if _, errno := k.link(e.node, dst.node, "000001.sst"); errno != 0 {
		t.Fatalf("link: %v", errno)
	}
	if j := k.job(other); j == nil || j.LastWrite == 0 {
		t.Errorf("a link into job %s's tree noted no write: %+v", other, j)
	}
}
