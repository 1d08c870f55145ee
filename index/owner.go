package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/statefs/statefs/owner"
)

// Owners are interned: an inode carries the number of its owner (0 for an
// unowned one), and each distinct owner is stored once, in both directions.
// A job's roots, the inodes it owns whose parent it does not own, are
// indexed by job, so the collector finds a job's state without scanning
// the tree.

func encodeOwner(o owner.Owner) []byte {
	b := []byte{byte(o.Level)}
	for _, s := range []string{o.Executor, o.Allocation, o.Job, o.Vertex, o.Subtask, o.Checkpoint} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

func decodeOwner(b []byte) (owner.Owner, error) {
	var o owner.Owner
	if len(b) < 1 {
		return o, errors.New("corrupt owner record")
	}
	o.Level = owner.Level(b[0])
	if o.Level > owner.LevelCheckpoint {
		return o, fmt.Errorf("corrupt owner record: level %d", b[0])
	}
	b = b[1:]
	for _, s := range []*string{&o.Executor, &o.Allocation, &o.Job, &o.Vertex, &o.Subtask, &o.Checkpoint} {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n || k != len(binary.AppendUvarint(nil, n)) { // minimal lengths only
			return o, errors.New("corrupt owner record")
		}
		*s = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	// One encoding per owner: OwnerID looks owners up by their encoding.
	if len(b) != 0 {
		return o, fmt.Errorf("corrupt owner record: %d bytes after the last id", len(b))
	}
	return o, nil
}

// OwnerID interns o and returns its number; the zero Owner is 0.
func (tx *Tx) OwnerID(o owner.Owner) (uint64, error) {
	if o == (owner.Owner{}) {
		return 0, nil
	}
	enc := encodeOwner(o)
	key := idByOwnerKey(enc)
	v, err := tx.get(key)
	if err == nil {
		if len(v) != 8 {
			return 0, fmt.Errorf("owner number of %x: corrupt record %x", enc, v)
		}
		return binary.BigEndian.Uint64(v), nil
	}
	if err != ErrNotFound {
		return 0, err
	}
	id, err := tx.db.owners.Next()
	if err != nil {
		return 0, err
	}
	id++
	if err := tx.set(key, binary.BigEndian.AppendUint64(nil, id)); err != nil {
		return 0, err
	}
	return id, tx.set(inoKey(prefixOwner, id), enc)
}

// Owner reads the owner numbered id; 0 is the zero Owner (unowned).
func (tx *Tx) Owner(id uint64) (owner.Owner, error) {
	if id == 0 {
		return owner.Owner{}, nil
	}
	b, err := tx.get(inoKey(prefixOwner, id))
	if err != nil {
		return owner.Owner{}, fmt.Errorf("owner %d: %w", id, err)
	}
	return decodeOwner(b)
}

func (tx *Tx) roots(prefix byte, id string) ([]uint64, error) {
	var inos []uint64
	err := tx.scan(rootsPrefix(prefix, id), false, func(k, _ []byte) (bool, error) {
		if _, ino, ok := keyRoot(k); ok {
			inos = append(inos, ino)
		}
		return true, nil
	})
	return inos, err
}

// JobRoots lists the inodes job owns whose parent it does not own.
func (tx *Tx) JobRoots(job string) ([]uint64, error) { return tx.roots(prefixJobRoot, job) }

// ExecutorRoots lists the inodes of executor whose parent is not its:
// its tm_<resource-id> directories.
func (tx *Tx) ExecutorRoots(executor string) ([]uint64, error) {
	return tx.roots(prefixExecutorRoot, executor)
}

// indexRoot records or clears n as a root of its job and of its
// executor, given its parent's owner and the owner it had before (0 if
// none). Called whenever n gets a parent or an owner.
func (tx *Tx) indexRoot(n *Inode, parentOwner, oldOwner uint64) error {
	var o [3]owner.Owner // n's, its parent's, its old one
	for i, id := range []uint64{n.Owner, parentOwner, oldOwner} {
		var err error
		if o[i], err = tx.Owner(id); err != nil {
			return err
		}
	}
	if err := tx.setRoot(prefixJobRoot, n.Ino, o[0].Job, o[1].Job, o[2].Job); err != nil {
		return err
	}
	return tx.setRoot(prefixExecutorRoot, n.Ino, o[0].Executor, o[1].Executor, o[2].Executor)
}

// setRoot keeps one root index right for inode ino whose id is now id,
// under a parent with parentID, and was old before.
func (tx *Tx) setRoot(prefix byte, ino uint64, id, parentID, old string) error {
	if old != "" && old != id {
		if err := tx.del(rootKey(prefix, old, ino)); err != nil {
			return err
		}
	}
	switch {
	case id == "":
		return nil
	case id != parentID:
		return tx.set(rootKey(prefix, id, ino), nil)
	default:
		return tx.del(rootKey(prefix, id, ino))
	}
}

// RenameOwned is Rename as a filesystem renames: what moved takes the
// owners rules give its new path (Reown), the inode now at newPath and,
// for an exchange, the one now at oldPath. It returns what Rename does.
func (tx *Tx) RenameOwned(dir uint64, name string, newDir uint64, newName string, flags uint32, oldPath, newPath string, rules *owner.Rules) (*Inode, error) {
	victim, err := tx.Rename(dir, name, newDir, newName, flags)
	if err != nil {
		return nil, err
	}
	if err := tx.reownName(newDir, newName, newPath, rules); err != nil {
		return nil, err
	}
	if flags&RenameExchange != 0 {
		if err := tx.reownName(dir, name, oldPath, rules); err != nil {
			return nil, err
		}
	}
	return victim, nil
}

func (tx *Tx) reownName(dir uint64, name, path string, rules *owner.Rules) error {
	d, err := tx.Lookup(dir, name)
	if err != nil {
		return err
	}
	return tx.Reown(d.Ino, path, rules)
}

// Reown gives inode ino, named path (relative to the mount root), and
// everything below it the owners rules assign to their paths, keeping the
// job roots right. A rename that moves state between owners calls it.
func (tx *Tx) Reown(ino uint64, path string, rules *owner.Rules) error {
	n, err := tx.Inode(ino)
	if err != nil {
		return err
	}
	parent, err := tx.Resolve(path[:max(strings.LastIndex(path, "/"), 0)])
	if err != nil {
		return fmt.Errorf("reowning %s: %w", path, err)
	}
	return tx.reown(n, parent.Owner, unknownOwner, path, rules)
}

// unknownOwner is no owner's number: the parent ino had before the move.
const unknownOwner = ^uint64(0)

// reown gives n, named path, and its subtree their owners. parentOwner is
// the owner n's parent has now, oldParentOwner the one it had: where
// neither n's owner nor its parent's changed, its root records stand as
// they were, and nothing is written (a tree put back where it was writes
// nothing but its top).
func (tx *Tx) reown(n *Inode, parentOwner, oldParentOwner uint64, path string, rules *owner.Rules) error {
	id, err := tx.OwnerID(rules.Owner(path))
	if err != nil {
		return err
	}
	old := n.Owner
	if id != old {
		n.Owner = id
		if err := tx.PutInode(n); err != nil {
			return err
		}
	}
	if id != old || parentOwner != oldParentOwner {
		if err := tx.indexRoot(n, parentOwner, old); err != nil {
			return err
		}
	}
	if !n.IsDir() {
		return nil
	}
	var children []Dirent
	if err := tx.ReadDir(n.Ino, func(d Dirent) bool { children = append(children, d); return true }); err != nil {
		return err
	}
	for _, d := range children {
		c, err := tx.Inode(d.Ino)
		if err != nil {
			return err
		}
		if err := tx.reown(c, n.Owner, old, path+"/"+d.Name, rules); err != nil {
			return err
		}
	}
	return nil
}
