package index

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/statefs/statefs/owner"
)

// Dirent is one name in a directory.
type Dirent struct {
	Name string
	Ino  uint64
	Mode uint32 // the child's file type bits
	// Born is when the name was put where it is, in nanoseconds since the
	// epoch: made by the executor (create, mkdir, link, symlink, mknod,
	// rename) or made pending by held deletes (MakePending); holding a pending tree and
	// restoring a held one keep it. The collector removes a name only if it
	// was born before the job's verdict (DESIGN invariant 4): a link made
	// after it is new state. 0: made before the index recorded it (format
	// 1), which predates any verdict.
	Born int64
}

// Lookup finds name in directory parent.
func (tx *Tx) Lookup(parent uint64, name string) (Dirent, error) {
	v, err := tx.get(inoNameKey(prefixDirent, parent, name))
	if err != nil {
		return Dirent{}, err
	}
	return decodeDirent(name, v)
}

// A dirent record is the child's inode number, its file type bits and
// when the name was made. Format 1 wrote the first two only (direntV1Len);
// such records stand as they are, with Born 0.
const (
	direntV1Len = 12
	direntLen   = 20
)

func encodeDirent(d Dirent) []byte {
	v := make([]byte, direntLen)
	binary.BigEndian.PutUint64(v, d.Ino)
	binary.BigEndian.PutUint32(v[8:], d.Mode&modeType)
	binary.BigEndian.PutUint64(v[12:], uint64(d.Born))
	return v
}

func decodeDirent(name string, v []byte) (Dirent, error) {
	if len(v) != direntLen && len(v) != direntV1Len {
		return Dirent{}, fmt.Errorf("dirent %q: corrupt record", name)
	}
	d := Dirent{Name: name, Ino: binary.BigEndian.Uint64(v), Mode: binary.BigEndian.Uint32(v[8:])}
	if len(v) == direntLen {
		d.Born = int64(binary.BigEndian.Uint64(v[12:]))
		if d.Born < 0 {
			return Dirent{}, fmt.Errorf("dirent %q: corrupt record: made at %d", name, d.Born)
		}
	}
	if d.Mode&^modeType != 0 {
		return Dirent{}, fmt.Errorf("dirent %q: corrupt record: mode %#o has more than type bits", name, d.Mode)
	}
	return d, nil
}

func (tx *Tx) putDirent(parent uint64, d Dirent) error {
	return tx.set(inoNameKey(prefixDirent, parent, d.Name), encodeDirent(d))
}

// ReadDir calls fn for each entry of directory dir in name order until fn
// returns false.
func (tx *Tx) ReadDir(dir uint64, fn func(Dirent) bool) error {
	return tx.ReadDirFrom(dir, "", fn)
}

// ReadDirFrom is ReadDir from the first name not before from, in the
// names' byte order.
func (tx *Tx) ReadDirFrom(dir uint64, from string, fn func(Dirent) bool) error {
	return tx.scanFrom(inoKey(prefixDirent, dir), inoNameKey(prefixDirent, dir, from), true, func(k, v []byte) (bool, error) {
		_, name, _ := keyInoName(k)
		d, err := decodeDirent(name, v)
		if err != nil {
			return false, err
		}
		return fn(d), nil
	})
}

// IsEmpty reports whether directory dir has no entries.
func (tx *Tx) IsEmpty(dir uint64) (bool, error) {
	empty := true
	err := tx.scan(inoKey(prefixDirent, dir), false, func([]byte, []byte) (bool, error) {
		empty = false
		return false, nil
	})
	return empty, err
}

// touchDir records that directory dir's entries changed at now.
func (tx *Tx) touchDir(dir *Inode, now int64) {
	dir.Mtime, dir.Ctime = now, now
}

// Create adds a new inode n (its Ino already allocated, its Owner
// interned) under name in parent; the name is born at n's ctime. For a
// directory, n.Nlink and n.Parent are set here.
func (tx *Tx) Create(parent uint64, name string, n *Inode) error {
	return tx.create(parent, name, n, n.Ctime)
}

// CreateOwned is Create as a filesystem makes a new name: the inode n (Ino
// from DB.NewIno) belongs to o, the owner of its path, and o's job and
// executor note the write (at most once a second for o: noteWrite); in a
// setgid directory it takes the directory's
// group, and a new directory stays setgid.
func (tx *Tx) CreateOwned(parent uint64, name string, n *Inode, o owner.Owner) error {
	dir, err := tx.Inode(parent)
	if err != nil {
		return err
	}
	if dir.Mode&syscall.S_ISGID != 0 {
		n.Gid = dir.Gid
		if n.IsDir() {
			n.Mode |= syscall.S_ISGID
		}
	}
	if n.Owner, err = tx.OwnerID(o); err != nil {
		return err
	}
	if err := tx.Create(parent, name, n); err != nil {
		return err
	}
	return tx.noteWrite(o, n.Ctime)
}

// create is Create of a name born at born.
func (tx *Tx) create(parent uint64, name string, n *Inode, born int64) error {
	p, err := tx.dir(parent)
	if err != nil {
		return err
	}
	if _, err := tx.Lookup(parent, name); err == nil {
		return ErrExists
	} else if err != ErrNotFound {
		return err
	}
	if n.IsDir() {
		n.Nlink, n.Parent, n.Size = 2, parent, dirSize
		p.Nlink++
	} else {
		n.Nlink = 1
	}
	tx.touchDir(p, n.Ctime)
	if err := tx.PutInode(n); err != nil {
		return err
	}
	if err := tx.putDirent(parent, Dirent{Name: name, Ino: n.Ino, Mode: n.Mode, Born: born}); err != nil {
		return err
	}
	if err := tx.indexRoot(n, p.Owner, 0); err != nil {
		return err
	}
	return tx.PutInode(p)
}

// LinkOwned is Link as a filesystem makes a new name: the new name belongs
// to o, the owner of its path, whoever owns the inode's other names, and a
// link is a write of o's state (a checkpoint, or a restore, made of
// links), noted as CreateOwned notes one.
func (tx *Tx) LinkOwned(parent uint64, name string, ino uint64, o owner.Owner) (*Inode, error) {
	n, err := tx.Link(parent, name, ino)
	if err != nil {
		return nil, err
	}
	return n, tx.noteWrite(o, n.Ctime)
}

// dir reads inode ino and checks that it is a directory.
func (tx *Tx) dir(ino uint64) (*Inode, error) {
	n, err := tx.Inode(ino)
	if err != nil {
		return nil, err
	}
	if !n.IsDir() {
		return nil, ErrNotDir
	}
	return n, nil
}

// Link adds name in parent as one more name of inode ino, which must not be
// a directory, and returns the updated inode.
func (tx *Tx) Link(parent uint64, name string, ino uint64) (*Inode, error) {
	p, err := tx.dir(parent)
	if err != nil {
		return nil, err
	}
	n, err := tx.Inode(ino)
	if err != nil {
		return nil, err
	}
	if n.IsDir() {
		return nil, ErrIsDir
	}
	if n.Nlink == 0 {
		return nil, ErrNotFound
	}
	if _, err := tx.Lookup(parent, name); err == nil {
		return nil, ErrExists
	} else if err != ErrNotFound {
		return nil, err
	}
	now := Now()
	n.Nlink++
	n.Ctime = now
	tx.touchDir(p, now)
	if err := tx.putDirent(parent, Dirent{Name: name, Ino: ino, Mode: n.Mode, Born: now}); err != nil {
		return nil, err
	}
	if err := tx.PutInode(p); err != nil {
		return nil, err
	}
	return n, tx.PutInode(n)
}

// Unlink removes name, which must not be a directory, from parent. It
// returns the inode with its link count lowered; when that reaches zero the
// inode becomes an orphan, which the caller reaps (Reap) once no handle
// has it open.
func (tx *Tx) Unlink(parent uint64, name string) (*Inode, error) {
	p, err := tx.dir(parent)
	if err != nil {
		return nil, err
	}
	d, err := tx.Lookup(parent, name)
	if err != nil {
		return nil, err
	}
	if d.Mode&modeType == modeDir {
		return nil, ErrIsDir
	}
	now := Now()
	tx.touchDir(p, now)
	if err := tx.del(inoNameKey(prefixDirent, parent, name)); err != nil {
		return nil, err
	}
	if err := tx.PutInode(p); err != nil {
		return nil, err
	}
	return tx.dropLink(d.Ino, now)
}

// dropLink lowers the link count of ino, making it an orphan at zero.
func (tx *Tx) dropLink(ino uint64, now int64) (*Inode, error) {
	n, err := tx.Inode(ino)
	if err != nil {
		return nil, err
	}
	if n.Nlink > 0 {
		n.Nlink--
	}
	n.Ctime = now
	if n.Nlink == 0 {
		if err := tx.set(inoKey(prefixOrphan, ino), nil); err != nil {
			return nil, err
		}
	}
	return n, tx.PutInode(n)
}

// Rmdir removes the empty directory name from parent.
func (tx *Tx) Rmdir(parent uint64, name string) error {
	p, err := tx.dir(parent)
	if err != nil {
		return err
	}
	d, err := tx.Lookup(parent, name)
	if err != nil {
		return err
	}
	if d.Mode&modeType != modeDir {
		return ErrNotDir
	}
	if err := tx.removeDir(p, name, d.Ino, Now()); err != nil {
		return err
	}
	return tx.PutInode(p)
}

// removeDir deletes empty directory ino, called name in p, and lowers p's
// link count; the caller writes p.
func (tx *Tx) removeDir(p *Inode, name string, ino uint64, now int64) error {
	empty, err := tx.IsEmpty(ino)
	if err != nil {
		return err
	}
	if !empty {
		return ErrNotEmpty
	}
	if err := tx.del(inoNameKey(prefixDirent, p.Ino, name)); err != nil {
		return err
	}
	p.Nlink--
	tx.touchDir(p, now)
	if _, err = tx.Reap(ino); err != nil {
		return err
	}
	return tx.heldTreeGone(p, name)
}

// Rename flags, as renameat2(2) takes them.
const (
	RenameNoReplace = 1 << 0
	RenameExchange  = 1 << 1
)

// Rename moves oldName in oldParent to newName in newParent with the rules
// of rename(2): an existing target is replaced atomically (a directory only
// by a directory, and only an empty one), RenameNoReplace refuses an
// existing target, RenameExchange swaps the two. A directory cannot move
// into itself. It returns the replaced inode, if one lost a link. The
// executor's rename makes new names: they are born now (Dirent.Born).
func (tx *Tx) Rename(oldParent uint64, oldName string, newParent uint64, newName string, flags uint32) (*Inode, error) {
	return tx.rename(oldParent, oldName, newParent, newName, flags, false)
}

// move is Rename for holding a pending tree and restoring a held one: the
// names keep when they were born.
func (tx *Tx) move(oldParent uint64, oldName string, newParent uint64, newName string, flags uint32) (*Inode, error) {
	return tx.rename(oldParent, oldName, newParent, newName, flags, true)
}

func (tx *Tx) rename(oldParent uint64, oldName string, newParent uint64, newName string, flags uint32, keepBorn bool) (*Inode, error) {
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return nil, ErrInvalid
	}
	op, err := tx.dir(oldParent)
	if err != nil {
		return nil, err
	}
	np := op
	if newParent != oldParent {
		if np, err = tx.dir(newParent); err != nil {
			return nil, err
		}
	}
	src, err := tx.Lookup(oldParent, oldName)
	if err != nil {
		return nil, err
	}
	dst, err := tx.Lookup(newParent, newName)
	hasDst := err == nil
	if err != nil && err != ErrNotFound {
		return nil, err
	}
	if hasDst && flags&RenameNoReplace != 0 {
		return nil, ErrExists
	}
	if !hasDst && flags&RenameExchange != 0 {
		return nil, ErrNotFound
	}
	srcDir := src.Mode&modeType == modeDir
	if srcDir {
		if err := tx.checkNotInside(newParent, src.Ino); err != nil {
			return nil, err
		}
	}
	if hasDst && dst.Ino == src.Ino {
		return nil, nil // two names of one inode: rename(2) does nothing
	}
	now := Now()
	if !keepBorn {
		src.Born, dst.Born = now, now
	}
	if flags&RenameExchange != 0 {
		return nil, tx.exchange(op, oldName, src, np, newName, dst, now)
	}
	var victim *Inode
	if hasDst {
		dstDir := dst.Mode&modeType == modeDir
		switch {
		case srcDir && !dstDir:
			return nil, ErrNotDir
		case !srcDir && dstDir:
			return nil, ErrIsDir
		case dstDir:
			if err := tx.removeDir(np, newName, dst.Ino, now); err != nil {
				return nil, err
			}
		default:
			if victim, err = tx.dropLink(dst.Ino, now); err != nil {
				return nil, err
			}
		}
	}
	if err := tx.del(inoNameKey(prefixDirent, oldParent, oldName)); err != nil {
		return nil, err
	}
	src.Name = newName
	if err := tx.putDirent(newParent, src); err != nil {
		return nil, err
	}
	if err := tx.moved(src.Ino, op, np, now); err != nil {
		return nil, err
	}
	tx.touchDir(op, now)
	tx.touchDir(np, now)
	if err := tx.PutInode(op); err != nil {
		return nil, err
	}
	if np != op {
		if err := tx.PutInode(np); err != nil {
			return nil, err
		}
	}
	return victim, nil
}

// moved records that inode ino went from directory op to np: its ctime, and
// for a directory its parent and both parents' link counts.
func (tx *Tx) moved(ino uint64, op, np *Inode, now int64) error {
	n, err := tx.Inode(ino)
	if err != nil {
		return err
	}
	n.Ctime = now
	if n.IsDir() && op != np {
		n.Parent = np.Ino
		op.Nlink--
		np.Nlink++
	}
	return tx.PutInode(n)
}

// exchange swaps two existing names atomically.
func (tx *Tx) exchange(op *Inode, oldName string, src Dirent, np *Inode, newName string, dst Dirent, now int64) error {
	if dst.Mode&modeType == modeDir {
		if err := tx.checkNotInside(op.Ino, dst.Ino); err != nil {
			return err
		}
	}
	src.Name, dst.Name = newName, oldName
	if err := tx.putDirent(np.Ino, src); err != nil {
		return err
	}
	if err := tx.putDirent(op.Ino, dst); err != nil {
		return err
	}
	if err := tx.moved(src.Ino, op, np, now); err != nil {
		return err
	}
	if err := tx.moved(dst.Ino, np, op, now); err != nil {
		return err
	}
	tx.touchDir(op, now)
	tx.touchDir(np, now)
	if err := tx.PutInode(op); err != nil {
		return err
	}
	if np != op {
		return tx.PutInode(np)
	}
	return nil
}

// checkNotInside fails with ErrInvalid if dir is ino or lies below it.
func (tx *Tx) checkNotInside(dir, ino uint64) error {
	for {
		if dir == ino {
			return ErrInvalid
		}
		n, err := tx.Inode(dir)
		if err != nil {
			return err
		}
		if n.Parent == dir { // the root, or an attic directory
			return nil
		}
		dir = n.Parent
	}
}

// Remove takes name out of parent whatever it is: an empty directory goes
// (Rmdir), a file loses a link (Unlink) and is returned, as Unlink returns
// it, for the caller to reap once nothing holds it; nil for a directory.
func (tx *Tx) Remove(parent uint64, name string) (*Inode, error) {
	d, err := tx.Lookup(parent, name)
	if err != nil {
		return nil, err
	}
	if d.Mode&modeType == modeDir {
		return nil, tx.Rmdir(parent, name)
	}
	return tx.Unlink(parent, name)
}
