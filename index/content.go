package index

import (
	"encoding/binary"
	"fmt"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/manifest"
)

// Manifest reads the sealed content of inode ino; an inode without one is
// an empty file.
func (tx *Tx) Manifest(ino uint64) (*manifest.Manifest, error) {
	b, err := tx.get(inoKey(prefixManifest, ino))
	if err == ErrNotFound {
		return &manifest.Manifest{}, nil
	}
	if err != nil {
		return nil, err
	}
	return manifest.Unmarshal(b)
}

// SetStaging makes staging file id the content of inode n (a regular
// file), dropping its manifest's chunk references. It returns the staging
// id the inode had before, if any, whose file goes once the transaction
// commits (DB.OnStagingDropped).
func (tx *Tx) SetStaging(n *Inode, id uint64) (old uint64, err error) {
	if err := tx.dropManifest(n.Ino); err != nil {
		return 0, err
	}
	old = n.Staging
	if old != 0 {
		if err := tx.del(inoKey(prefixStaging, old)); err != nil {
			return 0, err
		}
		tx.droppedStaging(old)
	}
	n.Staging = id
	v := make([]byte, 8)
	binary.BigEndian.PutUint64(v, n.Ino)
	if err := tx.set(inoKey(prefixStaging, id), v); err != nil {
		return 0, err
	}
	return old, tx.PutInode(n)
}

// Seal replaces the staging content id of inode ino by m, taking a
// reference on each of m's chunks or on its object, and sets the size, atime and mtime the
// staging file had; the ctime becomes at least that mtime, as a write
// to the staging file made it. ErrStale if the inode's content is no
// longer staging file id.
func (tx *Tx) Seal(ino, id uint64, m *manifest.Manifest, atime, mtime int64) error {
	n, err := tx.Inode(ino)
	if err != nil {
		return err
	}
	if n.Staging != id {
		return ErrStale
	}
	if err := tx.del(inoKey(prefixStaging, id)); err != nil {
		return err
	}
	tx.droppedStaging(id)
	for _, h := range m.Chunks() {
		if err := tx.addRef(h, 1); err != nil {
			return err
		}
	}
	if m.Object != nil {
		if err := tx.addObjectRef(*m.Object, 1); err != nil {
			return err
		}
	}
	if m.Size > 0 {
		if err := tx.set(inoKey(prefixManifest, ino), m.Marshal()); err != nil {
			return err
		}
	}
	n.Staging, n.Size, n.Atime, n.Mtime, n.Ctime = 0, m.Size, atime, mtime, max(n.Ctime, mtime)
	return tx.PutInode(n)
}

// dropManifest deletes ino's manifest and its chunk or object references.
func (tx *Tx) dropManifest(ino uint64) error {
	m, err := tx.Manifest(ino)
	if err != nil {
		return err
	}
	for _, h := range m.Chunks() {
		if err := tx.addRef(h, -1); err != nil {
			return err
		}
	}
	if m.Object != nil {
		if err := tx.addObjectRef(*m.Object, -1); err != nil {
			return err
		}
	}
	return tx.del(inoKey(prefixManifest, ino))
}

// ChunkRefs is the number of manifest extents that refer to chunk h.
func (tx *Tx) ChunkRefs(h cas.Hash) (uint64, error) {
	v, err := tx.get(hashKey(prefixChunk, h[:]))
	if err == ErrNotFound {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return decodeRefs(h, v)
}

func decodeRefs(h cas.Hash, v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("references of chunk %s: corrupt record %x", h, v)
	}
	return binary.BigEndian.Uint64(v), nil
}

// addRef changes chunk h's reference count by delta. A chunk whose count
// falls to zero is listed as garbage for the collector; one that gains a
// reference leaves that list (DESIGN invariant 3).
func (tx *Tx) addRef(h cas.Hash, delta int64) error {
	refs, err := tx.ChunkRefs(h)
	if err != nil {
		return err
	}
	refs = uint64(int64(refs) + delta)
	if int64(refs) <= 0 {
		if err := tx.del(hashKey(prefixChunk, h[:])); err != nil {
			return err
		}
		return tx.set(hashKey(prefixGarbage, h[:]), nil)
	}
	v := make([]byte, 8)
	binary.BigEndian.PutUint64(v, refs)
	if delta > 0 && refs == uint64(delta) {
		if err := tx.del(hashKey(prefixGarbage, h[:])); err != nil {
			return err
		}
	}
	return tx.set(hashKey(prefixChunk, h[:]), v)
}

// StagingInode is the inode whose content staging file id holds;
// ErrNotFound if none.
func (tx *Tx) StagingInode(id uint64) (uint64, error) {
	v, err := tx.get(inoKey(prefixStaging, id))
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("staging file %x: corrupt reference %x", id, v)
	}
	return binary.BigEndian.Uint64(v), nil
}

// Orphans lists the inodes that lost their last name while open.
func (tx *Tx) Orphans() ([]uint64, error) {
	var inos []uint64
	err := tx.scan(kindPrefix(prefixOrphan), false, func(k, _ []byte) (bool, error) {
		if ino, ok := keyIno(k); ok {
			inos = append(inos, ino)
		}
		return true, nil
	})
	return inos, err
}

// Reap deletes inode ino with its content references, extended attributes
// and orphan mark. It returns the staging id it dropped (0 if none), whose
// file goes once the transaction commits (DB.OnStagingDropped).
func (tx *Tx) Reap(ino uint64) (staging uint64, err error) {
	n, err := tx.Inode(ino)
	if err == ErrNotFound {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if n.Staging != 0 {
		if err := tx.del(inoKey(prefixStaging, n.Staging)); err != nil {
			return 0, err
		}
		tx.droppedStaging(n.Staging)
	}
	if err := tx.dropManifest(ino); err != nil {
		return 0, err
	}
	var names []string
	if err := tx.Xattrs(ino, func(name string) { names = append(names, name) }); err != nil {
		return 0, err
	}
	for _, name := range names {
		if err := tx.del(inoNameKey(prefixXattr, ino, name)); err != nil {
			return 0, err
		}
	}
	if err := tx.del(inoKey(prefixOrphan, ino)); err != nil {
		return 0, err
	}
	if o, err := tx.Owner(n.Owner); err != nil {
		return 0, err
	} else {
		if err := tx.del(rootKey(prefixJobRoot, o.Job, ino)); err != nil {
			return 0, err
		}
		if err := tx.del(rootKey(prefixExecutorRoot, o.Executor, ino)); err != nil {
			return 0, err
		}
	}
	return n.Staging, tx.del(inoKey(prefixInode, ino))
}

// CountStaging is the number of files whose content waits in staging.
func (tx *Tx) CountStaging() (int, error) {
	n := 0
	err := tx.scan(kindPrefix(prefixStaging), false, func([]byte, []byte) (bool, error) {
		n++
		return true, nil
	})
	return n, err
}

// ForgetGarbage empties the list of chunks whose references fell to zero,
// once a sweep removed them. It goes through the list once, a batch of keys
// per transaction: a sweep after a big collection forgets hundreds of
// thousands, more than one badger transaction holds. Marks added meanwhile
// may stay; the next sweep finds their chunks anyway, by walking them all.
func (db *DB) ForgetGarbage() error {
	prefix := kindPrefix(prefixGarbage)
	from := prefix
	for {
		var keys [][]byte
		err := db.View(func(tx *Tx) error {
			return tx.scanFrom(prefix, from, false, func(k, _ []byte) (bool, error) {
				keys = append(keys, append([]byte{}, k...))
				return len(keys) < forgetBatch, nil
			})
		})
		if err != nil || len(keys) == 0 {
			return err
		}
		err = db.Update(func(tx *Tx) error {
			for _, k := range keys {
				if err := tx.del(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		from = append(keys[len(keys)-1], 0) // the next key after the last one
	}
}

// forgetBatch is how many garbage marks one transaction of ForgetGarbage
// deletes.
const forgetBatch = 10000
