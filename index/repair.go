package index

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/manifest"
)

// DamagedFile is a sealed file some of whose chunks, or whose object, are
// lost (missing from the store, not reading back as their hash, or, for an
// object, quarantined).
type DamagedFile struct {
	Ino   uint64   `json:"inode"`
	Paths []string `json:"paths"` // every name, from the root ("attic:<name>/..." outside the tree); none for an orphan
	Size  uint64   `json:"size"`
	// Lost lists the extents whose chunk is lost, in file order.
	Lost []manifest.Extent `json:"-"`
	// Object is the file's lost object: all of its bytes are lost.
	Object *cas.Hash `json:"-"`
}

// LostBytes is how many of the file's bytes are lost.
func (d *DamagedFile) LostBytes() uint64 {
	if d.Object != nil {
		return d.Size
	}
	var n uint64
	for _, e := range d.Lost {
		n += uint64(e.Len)
	}
	return n
}

// DamagedFiles lists the sealed files that use a chunk for which lost
// reports true, or are an object for which lostObject does, in inode order,
// with their paths. It reads one transaction and changes nothing.
func (db *DB) DamagedFiles(lost, lostObject func(cas.Hash) bool) ([]DamagedFile, error) {
	var damaged []DamagedFile
	err := db.View(func(tx *Tx) error {
		byIno := map[uint64]*DamagedFile{}
		err := tx.scanAll(prefixManifest, func(k, v []byte) {
			ino, ok := keyIno(k)
			if !ok {
				return // index.Check reports it
			}
			m, err := manifest.Unmarshal(v)
			if err != nil {
				return // index.Check reports it
			}
			var d *DamagedFile
			if m.Object != nil && lostObject(*m.Object) {
				d = &DamagedFile{Ino: ino, Size: m.Size, Object: m.Object}
			}
			for _, e := range m.Extents {
				if !lost(e.Hash) {
					continue
				}
				if d == nil {
					d = &DamagedFile{Ino: ino, Size: m.Size}
				}
				d.Lost = append(d.Lost, e)
			}
			if d != nil {
				byIno[d.Ino] = d
			}
		})
		if err != nil || len(byIno) == 0 {
			return err
		}
		paths, err := tx.paths(byIno)
		if err != nil {
			return err
		}
		for _, ino := range sortedKeys(byIno) {
			d := byIno[ino]
			d.Paths = paths[ino]
			damaged = append(damaged, *d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing damaged files: %w", err)
	}
	return damaged, nil
}

// paths finds every name of the inodes in want, walking the tree from the
// root and the attic directories.
func (tx *Tx) paths(want map[uint64]*DamagedFile) (map[uint64][]string, error) {
	type dir struct {
		ino  uint64
		path string
	}
	queue := []dir{{RootIno, ""}}
	err := tx.scanAll(prefixAttic, func(k, v []byte) {
		if len(v) == 8 {
			queue = append(queue, dir{binary.BigEndian.Uint64(v), "attic:" + keyString(k)})
		}
	})
	if err != nil {
		return nil, err
	}
	paths := map[uint64][]string{}
	seen := map[uint64]bool{}
	for ; len(queue) > 0; queue = queue[1:] {
		d := queue[0]
		if seen[d.ino] {
			continue // a corrupt index may hold cycles; index.Check reports them
		}
		seen[d.ino] = true
		var ds []Dirent
		if err := tx.ReadDir(d.ino, func(e Dirent) bool { ds = append(ds, e); return true }); err != nil {
			return nil, err
		}
		for _, e := range ds {
			path := e.Name
			if d.path != "" {
				path = d.path + "/" + e.Name
			}
			if want[e.Ino] != nil {
				paths[e.Ino] = append(paths[e.Ino], path)
			}
			if e.Mode&modeType == modeDir {
				queue = append(queue, dir{e.Ino, path})
			}
		}
	}
	for ino := range paths {
		slices.Sort(paths[ino])
	}
	return paths, nil
}

// DropLost removes from inode ino's manifest every extent whose chunk is
// lost, or its object if lostObject reports it, and drops those references,
// in one transaction: the file keeps its names, size, mode and owner, and
// the lost ranges (all of an object) become holes, which read as zeros, as
// e2fsck makes of blocks it clears. The inode's ctime is set. It returns
// the extents, or the object, removed; none if the inode no longer exists
// or its content is no longer that manifest's.
func (db *DB) DropLost(ino uint64, lost, lostObject func(cas.Hash) bool) ([]manifest.Extent, *cas.Hash, error) {
	var dropped []manifest.Extent
	var object *cas.Hash
	err := db.Update(func(tx *Tx) error {
		dropped, object = nil, nil
		n, err := tx.Inode(ino)
		if err == ErrNotFound {
			return nil
		}
		if err != nil {
			return err
		}
		if n.Staging != 0 || !n.IsRegular() {
			return nil
		}
		m, err := tx.Manifest(ino)
		if err != nil {
			return err
		}
		kept := m.Extents[:0:0]
		for _, e := range m.Extents {
			if lost(e.Hash) {
				dropped = append(dropped, e)
			} else {
				kept = append(kept, e)
			}
		}
		for _, e := range dropped {
			if err := tx.addRef(e.Hash, -1); err != nil {
				return err
			}
		}
		if m.Object != nil && lostObject(*m.Object) {
			if err := tx.addObjectRef(*m.Object, -1); err != nil {
				return err
			}
			object, m.Object = m.Object, nil
		}
		if len(dropped) == 0 && object == nil {
			return nil
		}
		m.Extents = kept
		if err := tx.set(inoKey(prefixManifest, ino), m.Marshal()); err != nil {
			return err
		}
		n.Ctime = Now()
		return tx.PutInode(n)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("repairing inode %d: %w", ino, err)
	}
	return dropped, object, nil
}

// UsedChunks lists the chunks some manifest uses, sorted, each once.
func (db *DB) UsedChunks() ([]cas.Hash, error) {
	seen := map[cas.Hash]bool{}
	err := db.View(func(tx *Tx) error {
		return tx.scanAll(prefixManifest, func(_, v []byte) {
			if m, err := manifest.Unmarshal(v); err == nil {
				for _, h := range m.Chunks() {
					seen[h] = true
				}
			}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing used chunks: %w", err)
	}
	used := make([]cas.Hash, 0, len(seen))
	for h := range seen {
		used = append(used, h)
	}
	slices.SortFunc(used, func(a, b cas.Hash) int { return bytes.Compare(a[:], b[:]) })
	return used, nil
}
