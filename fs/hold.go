package fs

import (
	"context"
	"errors"
	"log/slog"

	"github.com/statefs/statefs/hold"
	"github.com/statefs/statefs/index"
)

// The filesystem's side of held deletes (package hold decides): a removal
// the policy holds is made pending in its own transaction, the holder's removals
// go through the filesystem so that the kernel's view follows, and a held
// tree goes back into the tree by Restore.

// removeName takes name out of directory n as unlink (dir false) or rmdir
// (dir true) does, or makes it pending when deletes are held, and records
// the reply to the request ctx serves with either. It returns the inode
// that lost a link, for the caller to reap.
func (n *node) removeName(ctx context.Context, name string, dir bool) (*index.Inode, error) {
	holding := n.fs.opts.Hold.Enabled
	unique := n.fs.request(ctx)
	for {
		var victim *index.Inode
		madePending := false
		err := n.fs.store.Index.Update(func(tx *index.Tx) (err error) {
			victim, madePending, err = n.removeIn(tx, name, dir, holding)
			if err != nil {
				return err
			}
			return recordReply(tx, unique, 0)
		})
		if madePending && err != nil && !errors.Is(err, index.ErrNotEmpty) && !errors.Is(err, index.ErrNotFound) {
			// Holding is a favour to the executor; its delete must not fail.
			slog.Warn("could not hold a removal; removing it", "path", n.childPath(name), "err", err)
			holding = false
			continue
		}
		if err == nil && madePending {
			n.fs.holds.NotePending()
		}
		return victim, err
	}
}

// removeIn is removeName's change in tx: name made pending if holding
// and the policy holds it (madePending), or removed.
func (n *node) removeIn(tx *index.Tx, name string, dir, holding bool) (victim *index.Inode, madePending bool, err error) {
	if holding {
		if madePending, err = hold.MakesPending(tx, n.ino(), name, n.fs.rules.Owner(n.childPath(name)), dir); err != nil || madePending {
			if madePending {
				victim, err = tx.MakePending(n.ino(), name, n.Path(nil))
			}
			return victim, madePending, err
		}
	}
	if dir {
		return nil, false, tx.Rmdir(n.ino(), name)
	}
	victim, err = tx.Unlink(n.ino(), name)
	return victim, false, err
}

// holdNamespace is the filesystem as the holder sees it.
type holdNamespace struct{ *FS }

func (h holdNamespace) LostName(n *index.Inode) {
	if n != nil && n.Nlink > 0 {
		h.attrsChanged(n.Ino)
		return
	}
	h.reapIfUnused(n)
}
func (h holdNamespace) HeldGone(id string) { h.heldViewGone(id) }

// heldViewGone makes the kernel forget .statefs/held/<id>, a hold that was
// restored, dropped or collected, rather than serve it from its entry
// cache.
func (f *FS) heldViewGone(id string) {
	root := f.knownNode(index.RootIno)
	if root == nil {
		return
	}
	if status := root.GetChild(statusDirName); status != nil {
		if held := status.GetChild(heldDirName); held != nil {
			held.NotifyEntry(id)
		}
	}
}

func (f *FS) readDir(dir uint64) ([]index.Dirent, error) {
	var entries []index.Dirent
	err := f.store.Index.View(func(tx *index.Tx) error {
		return tx.ReadDir(dir, func(d index.Dirent) bool { entries = append(entries, d); return true })
	})
	return entries, err
}

// Restore moves held tree id back into the tree at dest, a path relative
// to the mount root whose parent exists and which itself does not. Only
// metadata moves.
func (f *FS) Restore(id, dest string) error {
	var parent uint64
	var name string
	err := f.store.Index.Update(func(tx *index.Tx) (err error) {
		parent, name, err = tx.RestoreTo(id, dest, f.rules)
		return err
	})
	if err != nil {
		return err
	}
	if p := f.knownNode(parent); p != nil {
		p.NotifyEntry(name)    // a cached "no such file" goes
		p.NotifyContent(-1, 0) // and the directory's attributes, and with them its listing
	}
	f.heldViewGone(id)
	slog.Info("restored held state", "hold", id, "to", dest)
	return nil
}
