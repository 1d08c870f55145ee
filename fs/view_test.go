package fs

import (
	"bytes"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/statefs/statefs/index"
)

// White-box: a view entry's inode number depends on its path alone, lies
// above every number the index hands out and apart from the status
// directory's and the held view's, and tells apart paths that join to the
// same string.
func TestViewIno(t *testing.T) {
	paths := [][]string{
		{testJob},
		{testJob, "aid_" + testAlloc},
		{testJob, "aid_" + testAlloc, "vtx_" + testVertex + "_sti_0"},
		{testJob, "aid_" + testAlloc, "vtx_" + testVertex + "_sti_0", "chk_5"},
		{"ab", "c"},
		{"a", "bc"},
		{"abc"},
	}
	seen := map[uint64][]string{}
	for _, p := range paths {
		ino := viewIno(p)
		if ino != viewIno(append([]string(nil), p...)) {
			t.Errorf("viewIno(%q) is not stable", p)
		}
		if ino>>62 != 1 {
			t.Errorf("viewIno(%q) = %#x: its top bits are not 01", p, ino)
		}
		if ino == statusDirIno || ino == jobsDirIno || ino == heldDirIno {
			t.Errorf("viewIno(%q) is a status directory's number", p)
		}
		if other, ok := seen[ino]; ok {
			t.Errorf("viewIno(%q) = viewIno(%q)", p, other)
		}
		seen[ino] = p
	}
}

// White-box: the held view's inode numbers are the index's with the top
// two bits set: above the index's, the views' and the status directory's.
func TestHeldViewIno(t *testing.T) {
	for _, ino := range []uint64{index.RootIno, 2, 1 << 40, 1<<62 - 1} {
		got := heldViewIno(ino)
		if got>>62 != 3 || got&^(3<<62) != ino {
			t.Errorf("heldViewIno(%d) = %#x", ino, got)
		}
	}
	if statusDirIno>>62 != 2 {
		t.Errorf("the status directory's inode number %#x is not in a range of its own", uint64(statusDirIno))
	}
}

// White-box: the mount options: permissions checked by the kernel from the
// modes statefs reports (default_permissions, no umask of ours), setuid
// bits cleared by statefs (HANDLE_KILLPRIV_V2), the root's inode number the
// index's, and the attribute and entry caches for the time asked.
func TestMountOptions(t *testing.T) {
	for _, allowOther := range []bool{false, true} {
		o := MountOptions(allowOther, time.Minute, false)
		if o.AllowOther != allowOther {
			t.Errorf("AllowOther %v, asked for %v", o.AllowOther, allowOther)
		}
		if len(o.Options) != 1 || o.Options[0] != "default_permissions" {
			t.Errorf("mount options %q, want default_permissions", o.Options)
		}
		if o.ExtraCapabilities&fuse.CAP_HANDLE_KILLPRIV_V2 == 0 {
			t.Errorf("no FUSE_HANDLE_KILLPRIV_V2: the kernel would not leave clearing setuid bits to statefs")
		}
		if !o.NullPermissions {
			t.Errorf("NullPermissions off: go-fuse would make up modes")
		}
		if o.RootStableAttr == nil || o.RootStableAttr.Ino != index.RootIno {
			t.Errorf("the root's stable attributes %+v, want inode %d", o.RootStableAttr, index.RootIno)
		}
		if o.MaxWrite != 1<<20 || o.MaxReadAhead != 1<<20 || !o.DisableSplice {
			t.Errorf("max write %d, max read-ahead %d, splice disabled %v", o.MaxWrite, o.MaxReadAhead, o.DisableSplice)
		}
		for name, d := range map[string]*int64{"entry": (*int64)(o.EntryTimeout), "attr": (*int64)(o.AttrTimeout), "negative": (*int64)(o.NegativeTimeout)} {
			if d == nil || *d != int64(time.Minute) {
				t.Errorf("%s timeout %v, want a minute", name, d)
			}
		}
	}
}

// readStatusFile opens and reads the .statefs file at path through the
// tree, in reads of size bytes.
func (k *kernel) readStatusFile(path string, size int) []byte {
	k.t.Helper()
	e := k.walk(path)
	fh, flags, errno := k.open(root, e.node, syscall.O_RDONLY)
	if errno != 0 {
		k.t.Fatalf("open %s: %v", path, errno)
	}
	defer k.release(e.node, fh)
	if flags&fuse.FOPEN_DIRECT_IO == 0 {
		k.t.Errorf("%s is not opened for direct I/O: reads would stop at its size, 0", path)
	}
	var all []byte
	for {
		b, errno := k.read(e.node, fh, uint64(len(all)), size)
		if errno != 0 {
			k.t.Fatalf("read %s at %d: %v", path, len(all), errno)
		}
		if len(b) == 0 {
			return all
		}
		all = append(all, b...)
	}
}

// .statefs/status.json shows the filesystem's state as it was at the open,
// whatever the size of the reads.
func TestStatusJSON(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	k.writeFile(rootNode, "a", []byte("x"))
	k.writeFile(rootNode, "b", []byte("y"))
	open, fh, errno := k.create(root, rootNode, "open", 0o644)
	if errno != 0 {
		t.Fatalf("create: %v", errno)
	}
	defer k.release(open.node, fh)
	var s Status
	whole := k.readStatusFile(statusDirName+"/status.json", 1<<16)
	if err := json.Unmarshal(whole, &s); err != nil {
		t.Fatalf("status.json is not JSON: %v\n%s", err, whole)
	}
	if s.Store != k.store.Dir || s.SealBacklog != 3 || s.OpenFiles != 1 || s.Passthrough || s.DiskFull {
		t.Errorf("status.json: %+v; want the store, 3 unsealed, 1 open", s)
	}
	if bit := k.readStatusFile(statusDirName+"/status.json", 7); !bytes.Equal(bit, whole) {
		t.Errorf("status.json read 7 bytes at a time differs:\n%s\n%s", bit, whole)
	}
	for _, name := range []string{"stats.json", "jobs.json", "inventory.json", "collected.json"} {
		var v any
		if b := k.readStatusFile(statusDirName+"/"+name, 1<<16); json.Unmarshal(b, &v) != nil {
			t.Errorf("%s is not JSON: %s", name, b)
		}
	}
	names, errno := k.readdir(k.walk(statusDirName).node)
	if errno != 0 {
		t.Fatalf("readdir of .statefs: %v", errno)
	}
	for _, name := range []string{"status.json", "stats.json", "jobs.json", "inventory.json", "collected.json", "jobs", heldDirName} {
		if _, ok := names[name]; !ok {
			t.Errorf("readdir of .statefs: %v, no %s", names, name)
		}
	}
	a, errno := k.getattr(k.walk(statusDirName).node)
	if errno != 0 || a.Mode != syscall.S_IFDIR|0o555 || a.Ino != statusDirIno {
		t.Errorf("getattr of .statefs: %+v, %v", a, errno)
	}
	a, errno = k.getattr(k.walk(statusDirName + "/status.json").node)
	if errno != 0 || a.Mode != syscall.S_IFREG|0o444 {
		t.Errorf("getattr of status.json: %+v, %v", a, errno)
	}
}

// .statefs/jobs/ has a directory per job with its status.json, and below
// it the job's allocations, subtasks, and symlinks to its checkpoints in
// the tree.
func TestJobsView(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	chk := k.mkdirAll(subtaskPath + "/chk_5")
	k.writeFile(chk.node, "_task_state_snapshot", []byte("meta"))
	jobs := k.walk(statusDirName + "/jobs")
	names, errno := k.readdir(jobs.node)
	if errno != 0 || names[testJob] != viewIno([]string{testJob}) || len(names) != 3 {
		t.Errorf("readdir of .statefs/jobs: %v, %v", names, errno)
	}
	if _, errno := k.lookup(jobs.node, "fedcba9876543210fedcba9876543210"); errno != syscall.ENOENT {
		t.Errorf("lookup of an unknown job: %v, want ENOENT", errno)
	}
	job := k.walk(statusDirName + "/jobs/" + testJob)
	names, errno = k.readdir(job.node)
	if _, ok := names["status.json"]; errno != 0 || !ok || names["aid_"+testAlloc] == 0 {
		t.Errorf("readdir of the job's view: %v, %v", names, errno)
	}
	var j index.Job
	if b := k.readStatusFile(statusDirName+"/jobs/"+testJob+"/status.json", 1<<16); json.Unmarshal(b, &j) != nil || j.ID != testJob {
		t.Errorf("the job's status.json: %s", b)
	}
	sub := k.walk(statusDirName + "/jobs/" + testJob + "/aid_" + testAlloc + "/vtx_" + testVertex + "_sti_0")
	names, errno = k.readdir(sub.node)
	if errno != 0 || len(names) != 3 || names["chk_5"] == 0 {
		t.Errorf("readdir of the subtask's view: %v, %v", names, errno)
	}
	link, errno := k.lookup(sub.node, "chk_5")
	if errno != 0 || link.attr.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		t.Fatalf("lookup of the checkpoint's link: %+v, %v", link, errno)
	}
	// From .statefs/jobs/<job>/<allocation>/<subtask>/ up to the mount root.
	want := "../../../../../" + subtaskPath + "/chk_5"
	h := root.header(link.node)
	if target, st := k.raw.Readlink(nil, &h); st != fuse.OK || string(target) != want {
		t.Errorf("the checkpoint's link: %q (%v), want %q", target, st, want)
	}
	if link.attr.Size != uint64(len(want)) {
		t.Errorf("the checkpoint's link has size %d, want %d", link.attr.Size, len(want))
	}
	if _, errno := k.lookup(sub.node, "chk_6"); errno != syscall.ENOENT {
		t.Errorf("lookup of a checkpoint the store does not hold: %v, want ENOENT", errno)
	}
	if _, errno := k.lookup(job.node, "aid_fedcba9876543210fedcba9876543210"); errno != syscall.ENOENT {
		t.Errorf("lookup of an allocation the job was not on: %v, want ENOENT", errno)
	}
	if a, errno := k.getattr(jobs.node); errno != 0 || a.Ino != jobsDirIno || a.Mode != syscall.S_IFDIR|0o555 {
		t.Errorf("getattr of .statefs/jobs: %+v, %v", a, errno)
	}
	if a, errno := k.getattr(sub.node); errno != 0 || a.Ino != sub.attr.Ino {
		t.Errorf("getattr of the subtask's view: %+v, %v", a, errno)
	}
}

// White-box: Status counts the inodes with open state and the files whose
// content waits in staging.
func TestStatus(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{Passthrough: true})
	e := k.writeFile(rootNode, "a", []byte("x"))
	s, err := k.fs.Status()
	if err != nil || s.SealBacklog != 1 || s.OpenFiles != 0 || !s.Passthrough {
		t.Errorf("Status with one closed unsealed file: %+v, %v", s, err)
	}
	k.sealNow(e.attr.Ino)
	fh, _, errno := k.open(root, e.node, syscall.O_RDONLY)
	if errno != 0 {
		t.Fatalf("open: %v", errno)
	}
	defer k.release(e.node, fh)
	if s, err = k.fs.Status(); err != nil || s.SealBacklog != 0 || s.OpenFiles != 1 {
		t.Errorf("Status with one open sealed file: %+v, %v", s, err)
	}
}
