package index

// Xattr reads extended attribute name of inode ino; ErrNotFound if unset.
func (tx *Tx) Xattr(ino uint64, name string) ([]byte, error) {
	return tx.get(inoNameKey(prefixXattr, ino, name))
}

// SetXattr sets extended attribute name of inode ino.
func (tx *Tx) SetXattr(ino uint64, name string, value []byte) error {
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
	prefix := inoKey(prefixXattr, ino)
	return tx.scan(prefix, false, func(k, _ []byte) (bool, error) {
		fn(string(k[len(prefix):]))
		return true, nil
	})
}
