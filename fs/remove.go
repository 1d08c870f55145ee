package fs

import (
	"syscall"

	"github.com/statefs/statefs/index"
)

// Remove takes name, a file or an empty directory, out of directory dir
// for the collector, while the filesystem is mounted: an inode that loses
// its last name lives on while it is open or the kernel holds it (as for
// unlink(2)), and the kernel forgets the name at once instead of serving it
// from its cache.
func (f *FS) Remove(dir uint64, name string) error {
	var victim *index.Inode
	err := f.store.Index.Update(func(tx *index.Tx) (err error) {
		victim, err = tx.Remove(dir, name)
		return err
	})
	if err != nil {
		return err
	}
	if parent := f.knownNode(dir); parent != nil {
		parent.RmChild(name)
		// ENOENT: the kernel holds no entry for name; nothing to drop.
		if errno := parent.NotifyEntry(name); errno != 0 && errno != syscall.ENOENT {
			return errno
		}
	}
	f.reapIfUnused(victim)
	return nil
}
