package fs

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statefs/statefs/hold"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/owner"
)

// heldKernel serves a new store with held deletes and a window so long
// that the holder decides nothing while the test runs: what is removed
// stays pending.
func heldKernel(t *testing.T) *kernel {
	return newKernel(t, Options{Hold: hold.Options{Enabled: true, Window: time.Hour}})
}

// setVerdict records verdict v for job id.
func (k *kernel) setVerdict(id string, v index.Verdict) {
	k.t.Helper()
	err := k.store.Index.Update(func(tx *index.Tx) error {
		j, err := tx.Job(id)
		if err != nil {
			return err
		}
		j.Verdict = v
		return tx.PutJob(j)
	})
	if err != nil {
		k.t.Fatalf("setting job %s's verdict: %v", id, err)
	}
}

// resolve is the inode at path in the tree (from the root); nil if there
// is none.
func (k *kernel) resolve(path string) *index.Inode {
	var rec *index.Inode
	k.store.Index.View(func(tx *index.Tx) (err error) {
		rec, err = tx.Resolve(path)
		return err
	})
	return rec
}

// pending is the inode at path under the attic's pending directory; nil if
// there is none.
func (k *kernel) pending(path string) *index.Inode {
	var rec *index.Inode
	k.store.Index.View(func(tx *index.Tx) error {
		dir, err := tx.Attic(index.AtticPending, false)
		if err != nil {
			return err
		}
		rec = dir
		for _, name := range strings.Split(path, "/") {
			d, err := tx.Lookup(rec.Ino, name)
			if err != nil {
				rec = nil
				return err
			}
			if rec, err = tx.Inode(d.Ino); err != nil {
				return err
			}
		}
		return nil
	})
	return rec
}

// holds lists the holds.
func (k *kernel) holds() []*index.Hold {
	k.t.Helper()
	var hs []*index.Hold
	if err := k.store.Index.View(func(tx *index.Tx) (err error) {
		hs, err = tx.Holds()
		return err
	}); err != nil {
		k.t.Fatalf("holds: %v", err)
	}
	return hs
}

// removeTree removes path and everything below it as Flink does: files
// first, then each directory once empty.
func (k *kernel) removeTree(path string) {
	k.t.Helper()
	dir, name := "", path
	if i := strings.LastIndex(path, "/"); i >= 0 {
		dir, name = path[:i], path[i+1:]
	}
	parent := entry{node: rootNode}
	if dir != "" {
		parent = k.walk(dir)
	}
	e := k.walk(path)
	if e.attr.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		if errno := k.unlink(parent.node, name); errno != 0 {
			k.t.Fatalf("unlink %s: %v", path, errno)
		}
		return
	}
	names, errno := k.readdir(e.node)
	if errno != 0 {
		k.t.Fatalf("readdir %s: %v", path, errno)
	}
	for n := range names {
		if n != "." && n != ".." {
			k.removeTree(path + "/" + n)
		}
	}
	if errno := k.rmdir(parent.node, name); errno != 0 {
		k.t.Fatalf("rmdir %s: %v", path, errno)
	}
}

// With deletes held, a removal in a job's local state (allocation level or
// deeper) whose job is not known to be gone moves to the pending
// directory; anything else goes.
func TestRemovalsMadePending(t *testing.T) {
	t.Parallel()
	const liveDB = executorPath + "/tmp/job_" + testJob + "_op_WindowOperator_abc_uuid_01234567-89ab-cdef-0123-456789abcdef"
	for _, c := range []struct {
		name    string
		dir     string // where the file is
		verdict index.Verdict
		noJob   bool // the job has no record
		pending bool
	}{
		{"a checkpoint file of a job not known gone is made pending", subtaskPath + "/chk_5", index.VerdictUnknown, false, true},
		{"a subtask's file of a live job is made pending", subtaskPath, index.VerdictLive, false, true},
		{"a file of a job-in-allocation is made pending", jobPath, index.VerdictUnknown, false, true},
		{"a file of a job without a record is made pending", subtaskPath, index.VerdictUnknown, true, true},
		{"a file of a gone job goes", subtaskPath + "/chk_5", index.VerdictGone, false, false},
		{"a file of an allocation, no job, goes", allocPath, index.VerdictUnknown, false, false},
		{"an executor's file goes", executorPath + "/blobStorage", index.VerdictUnknown, false, false},
		{"a job's live database file goes", liveDB, index.VerdictUnknown, false, false},
		{"an unowned file goes", "scratch", index.VerdictUnknown, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			k := heldKernel(t)
			dir := k.mkdirAll(c.dir)
			file := k.writeFile(dir.node, "000001.sst", []byte("x"))
			if k.job(testJob) != nil {
				k.setVerdict(testJob, c.verdict)
			}
			if c.noJob {
				if err := k.store.Index.Update(func(tx *index.Tx) error { return tx.DeleteJob(testJob) }); err != nil {
					t.Fatal(err)
				}
			}
			if errno := k.unlink(dir.node, "000001.sst"); errno != 0 {
				t.Fatalf("unlink: %v", errno)
			}
			if k.resolve(c.dir+"/000001.sst") != nil {
				t.Fatalf("unlink left the name in the tree")
			}
			madePending := k.pending(c.dir + "/000001.sst")
			if madePending != nil != c.pending {
				t.Fatalf("pending: %v, want made pending %v", madePending != nil, c.pending)
			}
			_, err := k.inode(file.attr.Ino)
			if c.pending && (err != nil || madePending.Ino != file.attr.Ino) {
				t.Errorf("the file made pending is not the removed inode: %+v, %v", madePending, err)
			}
			// A removed file the kernel still knows stays until FORGET.
			k.forget(file.node, 1)
			if _, err := k.inode(file.attr.Ino); (err == nil) != c.pending {
				t.Errorf("after FORGET the inode: %v; want kept %v", err, c.pending)
			}
		})
	}
}

// rmdir of a job's directory that is not empty is ENOTEMPTY, held deletes
// or not; of an empty one it makes pending like a file.
func TestRmdirMakesPending(t *testing.T) {
	t.Parallel()
	k := heldKernel(t)
	k.writeFile(k.mkdirAll(subtaskPath).node, "f", nil)
	job := k.walk(allocPath)
	if errno := k.rmdir(job.node, "jid_"+testJob); errno != syscall.ENOTEMPTY {
		t.Errorf("rmdir of a full job directory: %v, want ENOTEMPTY", errno)
	}
	if errno := k.rmdir(k.walk(subtaskPath).node, "f"); errno != syscall.ENOTDIR {
		t.Errorf("rmdir of a file: %v, want ENOTDIR", errno)
	}
	if errno := k.unlink(k.walk(jobPath).node, "vtx_"+testVertex+"_sti_0"); errno != syscall.EISDIR {
		t.Errorf("unlink of a directory: %v, want EISDIR", errno)
	}
	k.removeTree(subtaskPath)
	if k.pending(subtaskPath+"/f") == nil {
		t.Errorf("the subtask's file is not pending")
	}
	if k.resolve(subtaskPath) != nil {
		t.Errorf("the removed subtask is still in the tree")
	}
}

// testHoldID is the id holdSubtask gives its hold.
const testHoldID = "20261130T051700Z-jid_" + testJob

// holdSubtask makes the test subtask with a checkpoint (a file and a
// symlink), removes the job's tree as Flink does, which makes it pending, and
// holds the made pending tree as the holder would; it returns the hold.
func holdSubtask(k *kernel) *index.Hold {
	k.t.Helper()
	chk := k.mkdirAll(subtaskPath + "/chk_5")
	k.writeFile(chk.node, "000001.sst", []byte("sst"))
	if _, errno := k.symlink(chk.node, "000001.sst", "link"); errno != 0 {
		k.t.Fatalf("symlink: %v", errno)
	}
	k.removeTree(jobPath)
	dir := k.pending(allocPath)
	if dir == nil {
		k.t.Fatalf("the removed job's tree is not pending")
	}
	h := &index.Hold{ID: testHoldID, Path: jobPath, At: index.Now()}
	if err := k.store.Index.Update(func(tx *index.Tx) error {
		return tx.HoldPending(dir.Ino, "jid_"+testJob, h)
	}); err != nil {
		k.t.Fatalf("holding the tree made pending: %v", err)
	}
	return h
}

// Restore puts a held tree back by rename, with the owners of its new
// path, and the kernel forgets its .statefs/held entry and any cached
// absence of the new name.
func TestRestore(t *testing.T) {
	t.Parallel()
	k := heldKernel(t)
	hold := holdSubtask(k)
	held := k.walk(statusDirName + "/" + heldDirName)
	alloc := k.walk(allocPath)
	k.notified()
	if err := k.fs.Restore(hold.ID, jobPath); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	rec := k.resolve(subtaskPath + "/chk_5/000001.sst")
	if rec == nil {
		t.Fatalf("the restored file is not in the tree")
	}
	if got := k.readFile(k.walk(subtaskPath+"/chk_5/000001.sst").node, 64); string(got) != "sst" {
		t.Errorf("the restored file reads %q", got)
	}
	if o := k.ownerOf(k.resolve(jobPath).Ino); o.Job != testJob || o.Level != owner.LevelJobInAllocation {
		t.Errorf("the restored tree's top: owner %+v", o)
	}
	if hs := k.holds(); len(hs) != 0 {
		t.Errorf("holds after the restore: %+v", hs)
	}
	notes := k.notified()
	for _, want := range []string{sprintf("entry %d jid_%s", alloc.node, testJob), sprintf("entry %d %s", held.node, hold.ID)} {
		if !slices.Contains(notes, want) {
			t.Errorf("notified %q, want %q among them", notes, want)
		}
	}
	for _, dest := range []string{jobPath, "../x", "", "missing/dir/x"} {
		if err := k.fs.Restore(hold.ID, dest); err == nil {
			t.Errorf("a second Restore to %q succeeded", dest)
		}
	}
}

// A removal that cannot be held (a pending file is where its directory
// would go) is not refused: it removes for good.
func TestRemovalThatCannotPendRemoves(t *testing.T) {
	t.Parallel()
	k := heldKernel(t)
	sub := k.mkdirAll(subtaskPath)
	k.writeFile(sub.node, "db", []byte("a file called db"))
	if errno := k.unlink(sub.node, "db"); errno != 0 {
		t.Fatalf("unlink: %v", errno)
	}
	if k.pending(subtaskPath+"/db") == nil {
		t.Fatalf("the file db is not pending")
	}
	db, errno := k.mkdir(root, sub.node, "db", 0o755)
	if errno != 0 {
		t.Fatalf("mkdir: %v", errno)
	}
	k.writeFile(db.node, "000001.sst", []byte("x"))
	if errno := k.unlink(db.node, "000001.sst"); errno != 0 {
		t.Errorf("unlink of a file that cannot pend: %v", errno)
	}
	if k.resolve(subtaskPath+"/db/000001.sst") != nil || k.pending(subtaskPath+"/db/000001.sst") != nil {
		t.Errorf("the file is still in the tree or pending")
	}
}

// The held trees show, read-only, under .statefs/held: directories, files
// and symlinks, under inode numbers of their own.
func TestHeldView(t *testing.T) {
	t.Parallel()
	k := heldKernel(t)
	held := k.walk(statusDirName + "/" + heldDirName)
	if names, errno := k.readdir(held.node); errno != 0 || len(names) != 2 {
		t.Errorf("readdir of .statefs/held with nothing held: %v, %v; want . and ..", names, errno)
	}
	if _, errno := k.lookup(held.node, "nothing"); errno != syscall.ENOENT {
		t.Errorf("lookup in .statefs/held with nothing held: %v, want ENOENT", errno)
	}
	hold := holdSubtask(k)
	names, errno := k.readdir(held.node)
	if errno != 0 || names[hold.ID] != heldViewIno(hold.Ino) || names["."] != heldDirIno || names[".."] != statusDirIno {
		t.Errorf("readdir of .statefs/held: %v, %v; want %s as %d", names, errno, hold.ID, heldViewIno(hold.Ino))
	}
	top := k.walk(statusDirName + "/" + heldDirName + "/" + hold.ID)
	if top.attr.Ino != heldViewIno(hold.Ino) || top.attr.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		t.Errorf("the held tree's top: inode %d, mode %o", top.attr.Ino, top.attr.Mode)
	}
	path := statusDirName + "/" + heldDirName + "/" + hold.ID + "/vtx_" + testVertex + "_sti_0/chk_5"
	chk := k.walk(path)
	names, errno = k.readdir(chk.node)
	if errno != 0 || len(names) != 4 {
		t.Errorf("readdir of a held checkpoint: %v, %v", names, errno)
	}
	for name, ino := range names {
		if name != ".." && ino>>62 != 3 { // ".." is 0, unknown, which go-fuse sends as FUSE_UNKNOWN_INO
			t.Errorf("held entry %s has inode %d, not a view's", name, ino)
		}
	}
	file := k.walk(path + "/000001.sst")
	if a, errno := k.getattr(file.node); errno != 0 || a.Ino != file.attr.Ino || a.Size != 3 {
		t.Errorf("getattr of a held file: %+v, %v", a, errno)
	}
	if got := k.readFile(file.node, 64); string(got) != "sst" {
		t.Errorf("a held file reads %q", got)
	}
	for _, flags := range []uint32{syscall.O_WRONLY, syscall.O_RDWR, syscall.O_RDONLY | syscall.O_TRUNC} {
		if _, _, errno := k.open(root, file.node, flags); errno != syscall.EROFS {
			t.Errorf("open of a held file (flags %#o): %v, want EROFS", flags, errno)
		}
	}
	if _, _, errno := k.open(root, chk.node, syscall.O_RDONLY); errno != syscall.EINVAL {
		t.Errorf("open of a held directory as a file: %v, want EINVAL", errno)
	}
	link := k.walk(path + "/link")
	h := root.header(link.node)
	if target, st := k.raw.Readlink(nil, &h); errnoOf(st) != 0 || string(target) != "000001.sst" {
		t.Errorf("readlink of a held symlink: %q, %v", target, st)
	}
	if errno := k.unlink(chk.node, "000001.sst"); errno != syscall.EROFS {
		t.Errorf("unlink in a held tree: %v, want EROFS", errno)
	}
	if _, errno := k.lookup(chk.node, "missing"); errno != syscall.ENOENT {
		t.Errorf("lookup of a missing name in a held tree: %v", errno)
	}
	if _, errno := k.getattr(held.node); errno != 0 {
		t.Errorf("getattr of .statefs/held: %v", errno)
	}
}

// The collector's Remove of a held tree's top drops its hold with it.
func TestRemoveOfAHeldTreeForgetsItsView(t *testing.T) {
	t.Parallel()
	k := heldKernel(t)
	hold := holdSubtask(k)
	var heldDir uint64
	k.store.Index.View(func(tx *index.Tx) error {
		d, err := tx.Attic(index.AtticHeld, false)
		heldDir = d.Ino
		return err
	})
	held := k.walk(statusDirName + "/" + heldDirName)
	k.notified()
	k.removeBelow(hold.Ino)
	if _, err := k.fs.Remove(heldDir, hold.ID); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if notes := k.notified(); !slices.Contains(notes, sprintf("entry %d %s", held.node, hold.ID)) {
		t.Errorf("notified %q, want the held view's entry dropped", notes)
	}
}

// The holder's loop decides pending removals once none came for the
// window.
func TestHolderLoopHoldsAfterTheWindow(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{Hold: hold.Options{Enabled: true, Window: 50 * time.Millisecond}})
	chk := k.mkdirAll(subtaskPath + "/chk_5")
	k.writeFile(chk.node, "000001.sst", []byte("sst"))
	k.removeTree(jobPath)
	for deadline := time.Now().Add(10 * time.Second); len(k.holds()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("nothing held ten seconds after the removal")
		}
	}
	if hs := k.holds(); hs[0].Path != jobPath {
		t.Errorf("held %+v, want %s", hs[0], jobPath)
	}
}

// removeBelow removes everything below directory dir through Remove,
// bottom up, as the collector does.
func (k *kernel) removeBelow(dir uint64) {
	k.t.Helper()
	entries, err := k.fs.readDir(dir)
	if err != nil {
		k.t.Fatal(err)
	}
	for _, e := range entries {
		if e.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			k.removeBelow(e.Ino)
		}
		if _, err := k.fs.Remove(dir, e.Name); err != nil {
			k.t.Fatalf("Remove %s: %v", e.Name, err)
		}
	}
}

// The holder's loop drops a hold whose TTL is up, and the kernel forgets
// its .statefs/held entry.
func TestHolderLoopDropsExpiredHolds(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{Hold: hold.Options{Enabled: true, Window: 50 * time.Millisecond, TTL: time.Nanosecond}})
	held := k.walk(statusDirName + "/" + heldDirName)
	chk := k.mkdirAll(subtaskPath + "/chk_5")
	file := k.writeFile(chk.node, "000001.sst", []byte("sst"))
	k.forget(file.node, 1)
	k.removeTree(jobPath)
	prefix := sprintf("entry %d ", held.node)
	var notes []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		notes = append(notes, k.notified()...)
		if slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, prefix) }) && len(k.holds()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no hold dropped ten seconds after the removal: holds %+v, notified %q", k.holds(), notes)
		}
	}
	if _, err := k.inode(file.attr.Ino); err == nil {
		t.Errorf("the dropped hold's file is still there")
	}
}
