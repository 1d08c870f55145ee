package index

import (
	"fmt"
	"slices"
	"strings"
)

// Resolve finds the inode at path, a slash-separated path relative to the
// root ("" and "." are the root; empty and "." components are skipped). An
// absolute path or one with a ".." component is ErrInvalid: the index
// resolves names downwards only. A failed lookup names the part of path it
// reached.
func (tx *Tx) Resolve(path string) (*Inode, error) {
	if strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("%s: %w: absolute path", path, ErrInvalid)
	}
	n, err := tx.Inode(RootIno)
	if err != nil {
		return nil, err
	}
	var walked []string
	for _, name := range strings.Split(path, "/") {
		switch name {
		case "", ".":
			continue
		case "..":
			return nil, fmt.Errorf("%s: %w: '..' component", path, ErrInvalid)
		}
		walked = append(walked, name)
		if !n.IsDir() {
			return nil, fmt.Errorf("%s: %w", strings.Join(walked, "/"), ErrNotDir)
		}
		d, err := tx.Lookup(n.Ino, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(walked, "/"), err)
		}
		if n, err = tx.Inode(d.Ino); err != nil {
			return nil, fmt.Errorf("%s: %w", strings.Join(walked, "/"), err)
		}
	}
	return n, nil
}

// Walk calls fn for every inode below directory dir, parents before their
// children and siblings in name order, with a path relative to dir. An
// inode with several names (hard links) is visited once, under the first
// name the walk meets. It stops at the first error fn returns and returns
// it unchanged.
func (tx *Tx) Walk(dir uint64, fn func(path string, n *Inode) error) error {
	seen := map[uint64]bool{} // inodes with several names, once visited
	var walk func(dir uint64, prefix string) error
	walk = func(dir uint64, prefix string) error {
		// Collect the entries before descending: an update transaction allows
		// one iterator at a time.
		var ds []Dirent
		if err := tx.ReadDir(dir, func(d Dirent) bool { ds = append(ds, d); return true }); err != nil {
			return err
		}
		for _, d := range ds {
			n, err := tx.Inode(d.Ino)
			if err != nil {
				return fmt.Errorf("%s%s: %w", prefix, d.Name, err)
			}
			if !n.IsDir() && n.Nlink > 1 {
				if seen[n.Ino] {
					continue
				}
				seen[n.Ino] = true
			}
			if err := fn(prefix+d.Name, n); err != nil {
				return err
			}
			if n.IsDir() {
				if err := walk(n.Ino, prefix+d.Name+"/"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(dir, "")
}

// CountEntries is the number of names in directory dir.
func (tx *Tx) CountEntries(dir uint64) (int, error) {
	n := 0
	err := tx.scan(inoKey(prefixDirent, dir), false, func([]byte, []byte) (bool, error) {
		n++
		return true, nil
	})
	return n, err
}

// NameIn finds the name of inode ino in directory dir (the first, if it
// has several there); ErrNotFound if it has none.
func (tx *Tx) NameIn(dir, ino uint64) (string, error) {
	name := ""
	err := tx.ReadDir(dir, func(d Dirent) bool {
		if d.Ino == ino {
			name = d.Name
			return false
		}
		return true
	})
	if err == nil && name == "" {
		err = ErrNotFound
	}
	return name, err
}

// DirPath is the path of directory ino relative to the root, found through
// the parents (a directory has one name). It reads each ancestor's entries,
// so it is for the few directories a view names, not for every inode. A
// directory in the attic has no such path: ErrDetached.
func (tx *Tx) DirPath(ino uint64) (string, error) {
	var names []string
	for ino != RootIno {
		n, err := tx.Inode(ino)
		if err != nil {
			return "", err
		}
		if !n.IsDir() {
			return "", ErrNotDir
		}
		if n.Parent == ino {
			return "", ErrDetached
		}
		name, err := tx.NameIn(n.Parent, ino)
		if err != nil {
			return "", err
		}
		names = append(names, name)
		ino = n.Parent
	}
	slices.Reverse(names)
	return strings.Join(names, "/"), nil
}
