package fs

import (
	"errors"
	"syscall"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/crashpoint"
)

// Remove takes name, a file or an empty directory, out of directory dir
// for the collector and for dropped holds, while the filesystem is
// mounted. A file that loses its last name goes at once, its content with
// it, unless a handle has it open: then it is an orphan, reported so, and
// goes once it is closed and the kernel has forgotten it. Unlike after
// unlink(2), the kernel's knowing an inode that is not open does not keep
// it: nobody races the collector to open state of a job that is gone, and
// a collection is to free what it removed before it returns. The kernel
// forgets the name at once instead of serving it from its cache.
func (f *FS) Remove(dir uint64, name string) (orphan bool, err error) {
	var victim *index.Inode
	var heldTree bool // name was a held tree's top: its hold went with it
	err = f.store.Index.Update(func(tx *index.Tx) (err error) {
		if victim, err = tx.Remove(dir, name); err != nil || victim != nil {
			return err
		}
		held, err := tx.Attic(index.AtticHeld, false)
		heldTree = err == nil && held.Ino == dir
		if errors.Is(err, index.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return false, err
	}
	if heldTree {
		f.heldViewGone(name)
	}
	orphan = victim != nil && victim.Nlink == 0 && !f.reap(victim, false)
	if parent := f.knownNode(dir); parent != nil {
		parent.RmChild(name)
		// An inode that lost its last name is deleted in the kernel too,
		// so that it evicts the inode once no file has it open (go-fuse
		// drops its node, and an orphan is reaped, at the FORGET) rather
		// than keep it until memory runs short; otherwise only the name
		// goes. ENOENT: the kernel holds no entry for name.
		errno := syscall.ENOENT
		if victim != nil && victim.Nlink == 0 {
			if child := f.knownNode(victim.Ino); child != nil {
				errno = parent.NotifyDelete(name, child)
			}
		}
		if errno == syscall.ENOENT {
			errno = parent.NotifyEntry(name)
		}
		if errno != 0 && errno != syscall.ENOENT {
			return orphan, errno
		}
		// The kernel drops the directory's attributes with a name it
		// held, not otherwise; those of a file's other names stay. With
		// them goes its cached listing: the kernel reads the attributes
		// again before it lists, and drops the listing when the
		// directory's mtime moved.
		parent.NotifyContent(-1, 0)
	}
	if victim != nil && victim.Nlink > 0 {
		f.attrsChanged(victim.Ino)
	}
	return orphan, nil
}

// attrsChanged has the kernel, if it knows inode ino, drop the attributes
// it cached: statefs changed them on its own. Attributes only (offset -1),
// so the kernel takes no lock a FUSE request may hold.
func (f *FS) attrsChanged(ino uint64) {
	if n := f.knownNode(ino); n != nil {
		n.NotifyContent(-1, 0)
	}
}

// reapIfUnused deletes an inode that lost its last name, unless a handle
// still has it open or the kernel still knows it (a process may have looked
// it up and be about to open it, as on a local filesystem); the last
// Release or the kernel's FORGET reaps it then. After a crash, Open of the
// store reaps what is left (index orphans).
func (f *FS) reapIfUnused(rec *index.Inode) { f.reap(rec, true) }

// reap deletes inode rec, which has no name left, unless a handle has it
// open or, with kernelKnows set, the kernel still holds it. It reports
// whether the inode is gone.
func (f *FS) reap(rec *index.Inode, kernelKnows bool) bool {
	if rec == nil || rec.Nlink > 0 {
		return false
	}
	st := f.acquire(rec.Ino)
	defer f.release(st)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.opens > 0 || kernelKnows && f.reapAtForget(rec.Ino) {
		return false
	}
	err := f.store.Index.Update(func(tx *index.Tx) error {
		// Before the staging file goes.
		tx.OnCommit(func() { crashpoint.Hit(crashpoint.ReapCommitted) })
		_, err := tx.Reap(rec.Ino)
		return err
	})
	if err != nil {
		errno(err) // only for its log of what is unexpected: no caller to tell
		return false
	}
	st.gen++
	return true
}
