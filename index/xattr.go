package index

import "sync"

// Xattr reads extended attribute name of inode ino; ErrNotFound if unset.
func (tx *Tx) Xattr(ino uint64, name string) ([]byte, error) {
	return tx.get(inoNameKey(prefixXattr, ino, name))
}

// SetXattr sets extended attribute name of inode ino.
func (tx *Tx) SetXattr(ino uint64, name string, value []byte) error {
	tx.db.xattrs.add(ino) // before the attribute can exist
	return tx.set(inoNameKey(prefixXattr, ino, name), value)
}

// RemoveXattr deletes extended attribute name; ErrNotFound if unset.
func (tx *Tx) RemoveXattr(ino uint64, name string) error {
	key := inoNameKey(prefixXattr, ino, name)
	ok, err := tx.has(key)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotFound
	}
	return tx.del(key)
}

// Xattrs calls fn with the name of each extended attribute of inode ino.
func (tx *Tx) Xattrs(ino uint64, fn func(name string)) error {
	return tx.scan(inoKey(prefixXattr, ino), false, func(k, _ []byte) (bool, error) {
		_, name, _ := keyInoName(k)
		fn(name)
		return true, nil
	})
}

// xattrInos are the inodes that may have extended attributes: those that
// had one when the index was opened, and those that had one set since.
// Nothing the executors write sets one, while ls -l asks for two of every
// file it lists and the kernel for one before a file's first write, so
// MayHaveXattrs lets those questions be answered without a transaction.
// Inode numbers are never reused, so an inode stays in the set once added.
type xattrInos struct {
	mu   sync.Mutex
	inos map[uint64]struct{} // nil: not loaded, any inode may have some
}

func (x *xattrInos) add(ino uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.inos != nil {
		x.inos[ino] = struct{}{}
	}
}

// load fills the set from the index's attributes.
func (x *xattrInos) load(db *DB) error {
	inos := map[uint64]struct{}{}
	err := db.View(func(tx *Tx) error {
		return tx.scan(kindPrefix(prefixXattr), false, func(k, _ []byte) (bool, error) {
			if ino, _, ok := keyInoName(k); ok {
				inos[ino] = struct{}{}
			}
			return true, nil
		})
	})
	if err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.inos = inos
	return nil
}

// MayHaveXattrs reports whether inode ino may have extended attributes;
// false is certain. A read-only DB answers true.
func (db *DB) MayHaveXattrs(ino uint64) bool {
	x := &db.xattrs
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.inos == nil {
		return true
	}
	_, ok := x.inos[ino]
	return ok
}
