package fs

import (
	"syscall"

	"github.com/statefs/statefs/index"
)

// Remove takes name, a file or an empty directory, out of directory dir
// for the collector and for dropped holds, while the filesystem is
// mounted. A file that loses its last name goes at once, its content with
// it, unless a handle has it open: then it is an orphan, reported so, and
// goes at its last release. Unlike unlink(2), the kernel's knowing the
// inode does not keep it: nobody races the collector to open state of a
// job that is gone, and a collection is to free what it removed before it
// returns. The kernel forgets the name at once instead of serving it from
// its cache.
func (f *FS) Remove(dir uint64, name string) (orphan bool, err error) {
	var victim *index.Inode
	err = f.store.Index.Update(func(tx *index.Tx) (err error) {
		victim, err = tx.Remove(dir, name)
		return err
	})
	if err != nil {
		return false, err
	}
	reaped := victim != nil && victim.Nlink == 0 && f.reap(victim, false)
	orphan = victim != nil && victim.Nlink == 0 && !reaped
	if parent := f.knownNode(dir); parent != nil {
		parent.RmChild(name)
		// A reaped inode the kernel still holds is deleted there too, so
		// that it evicts it (and go-fuse drops its node at the FORGET)
		// rather than keep it until memory runs short; otherwise only the
		// name goes. ENOENT: the kernel holds no entry for name.
		errno := syscall.ENOENT
		if reaped {
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
	}
	return orphan, nil
}
