package index

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/owner"
)

// Problem is one inconsistency fsck found. Kind is short and stable (tests
// and scripts match on it); Detail names the keys, inodes and chunks
// involved.
type Problem struct {
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

func (p Problem) String() string { return p.Kind + ": " + p.Detail }

// The kinds of problem Check reports.
const (
	ProblemInode          = "inode"           // an inode record that does not decode; no root directory
	ProblemDanglingDirent = "dangling-dirent" // a name of an inode that does not exist, or in a directory that does not
	ProblemDirentType     = "dirent-type"     // a name whose file type is not its inode's
	ProblemParent         = "parent"          // a directory with other than one name, or whose Parent does not hold it
	ProblemNlink          = "nlink"           // a link count that is not the number of names (subdirectories)
	ProblemUnreachable    = "unreachable"     // an inode neither reachable from the root nor an orphan
	ProblemOrphan         = "orphan"          // an orphan mark on an inode that has names or does not exist; a nameless file without one
	ProblemStagingRef     = "staging-ref"     // Inode.Staging and the staging reference do not agree
	ProblemManifest       = "manifest"        // a manifest that does not decode, or belongs to no regular file
	ProblemSize           = "size"            // a sealed file whose size is not its manifest's
	ProblemChunkRefcount  = "chunk-refcount"  // a chunk reference count that is not the number of extents using it
	ProblemGarbageList    = "garbage-list"    // a chunk listed as garbage that has references
	ProblemObjectRefcount = "object-refcount" // an object reference count that is not the number of manifests that are the object
	ProblemObjectTree     = "object-tree"     // a used object without a verification tree of its size; a tree or quarantine mark of an unused one
	ProblemOwner          = "owner"           // an owner number that is not interned, or an owner record that does not agree with its reverse
	ProblemJobRoot        = "job-root"        // a job root that is not one, or a job's directory that should be one and is not
	ProblemJob            = "job"             // a job record that does not decode
	ProblemExecutor       = "executor"        // an executor record that does not decode
	ProblemCollection     = "collection"      // a collection record that does not decode, or whose key is not a number
	ProblemXattr          = "xattr"           // an extended attribute of an inode that does not exist
	ProblemHold           = "hold"            // a hold record and the held directory's entries do not agree
	ProblemReply          = "reply"           // a reply record that does not decode, or whose key is not a number
)

// scanAll calls fn with a copy of each key (and value) under the one-byte
// prefix p. Check reads whole key ranges this way.
func (tx *Tx) scanAll(p byte, fn func(key, value []byte)) error {
	return tx.scan(kindPrefix(p), true, func(k, v []byte) (bool, error) {
		fn(bytes.Clone(k), v)
		return true, nil
	})
}

// CountInodes is the number of inodes in the index, orphans included.
func (db *DB) CountInodes() (int, error) {
	n := 0
	err := db.View(func(tx *Tx) error {
		return tx.scan(kindPrefix(prefixInode), false, func([]byte, []byte) (bool, error) {
			n++
			return true, nil
		})
	})
	return n, err
}

// checker holds the whole index in memory while Check cross-checks it.
type checker struct {
	problems []Problem

	inodes    map[uint64]*Inode
	dirents   map[uint64][]Dirent // parent -> entries
	names     map[uint64]int      // ino -> number of dirents that name it
	holders   map[uint64][]uint64 // ino -> directories holding a name of it
	manifests map[uint64]*manifest.Manifest
	orphans   map[uint64]bool
	staging   map[uint64]uint64 // staging id -> ino
	refs      map[cas.Hash]uint64
	garbage   []cas.Hash
	objects   map[cas.Hash]uint64 // object -> reference count
	trees     map[cas.Hash]uint64 // object -> the length its tree says
	marked    []cas.Hash          // quarantined objects
	owners    map[uint64]owner.Owner
	ownerIDs  map[string]uint64 // encoded owner -> id
	roots     []jobRoot
	attic     map[string]uint64 // attic directory name -> ino
	holds     map[string]*Hold
}

type jobRoot struct {
	job string
	ino uint64
}

func (c *checker) add(kind, format string, args ...any) {
	c.problems = append(c.problems, Problem{Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// Check reads the whole index in one read transaction and reports every
// inconsistency it finds, changing nothing. It also returns every chunk
// some manifest uses, sorted, so that the caller can check the chunk store.
//
// What it checks:
//   - every dirent is in an existing directory and names an existing inode
//     of the same file type;
//   - a directory other than the root has exactly one name, in the
//     directory its Parent names; the root has none and is its own Parent;
//   - a file's link count is its number of names, and 0 only for an orphan;
//     a directory's is 2 + its subdirectories;
//   - every inode is reachable from the root or is an orphan;
//   - Inode.Staging != 0 exactly when a staging reference names the inode
//     back; a file with a manifest has no staging reference;
//   - every manifest decodes and belongs to a regular file whose size it
//     gives;
//   - every chunk reference count is the number of manifest extents that
//     use the chunk (DESIGN invariant 3), and no chunk with references is
//     listed as garbage;
//   - every object reference count is the number of manifests that are the
//     object, each used object has a verification tree of its length, and
//     no unused one has a tree or a quarantine mark;
//   - every inode's owner is interned, both ways;
//   - every job root names an existing inode of that job whose parent's job
//     differs, and every such directory is a job root;
//   - job records and extended attributes belong to something;
//   - collection and reply records decode.
func (db *DB) Check() ([]Problem, []cas.Hash, error) {
	c := &checker{
		inodes:    map[uint64]*Inode{},
		dirents:   map[uint64][]Dirent{},
		names:     map[uint64]int{},
		holders:   map[uint64][]uint64{},
		manifests: map[uint64]*manifest.Manifest{},
		orphans:   map[uint64]bool{},
		staging:   map[uint64]uint64{},
		refs:      map[cas.Hash]uint64{},
		objects:   map[cas.Hash]uint64{},
		trees:     map[cas.Hash]uint64{},
		owners:    map[uint64]owner.Owner{},
		ownerIDs:  map[string]uint64{},
		attic:     map[string]uint64{},
		holds:     map[string]*Hold{},
	}
	var used []cas.Hash
	err := db.View(func(tx *Tx) error {
		if err := c.load(tx); err != nil {
			return err
		}
		c.checkNamespace()
		c.checkContent()
		used = c.checkChunks()
		c.checkObjects()
		c.checkOwners()
		c.checkHolds()
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("checking index: %w", err)
	}
	return c.problems, used, nil
}

// load reads every key range Check needs; records that do not decode are
// reported here and left out of the maps.
func (c *checker) load(tx *Tx) error {
	var xattrs []uint64
	steps := []struct {
		prefix byte
		fn     func(k, v []byte)
	}{
		{prefixInode, func(k, v []byte) {
			ino, ok := keyIno(k)
			if !ok {
				c.add(ProblemInode, "inode key %x has the wrong length", k)
				return
			}
			n, err := unmarshalInode(ino, v)
			if err != nil {
				c.add(ProblemInode, "%v", err)
				return
			}
			c.inodes[ino] = n
		}},
		{prefixDirent, func(k, v []byte) {
			parent, name, ok := keyInoName(k)
			if !ok || name == "" {
				c.add(ProblemDanglingDirent, "dirent key %x has no name", k)
				return
			}
			d, err := decodeDirent(name, v)
			if err != nil {
				c.add(ProblemDanglingDirent, "in directory %d: %v", parent, err)
				return
			}
			c.dirents[parent] = append(c.dirents[parent], d)
			c.names[d.Ino]++
			c.holders[d.Ino] = append(c.holders[d.Ino], parent)
		}},
		{prefixManifest, func(k, v []byte) {
			ino, ok := keyIno(k)
			if !ok {
				c.add(ProblemManifest, "manifest key %x has the wrong length", k)
				return
			}
			m, err := manifest.Unmarshal(v)
			if err != nil {
				c.add(ProblemManifest, "manifest of inode %d: %v", ino, err)
				return
			}
			c.manifests[ino] = m
		}},
		{prefixXattr, func(k, _ []byte) {
			ino, _, ok := keyInoName(k)
			if !ok {
				c.add(ProblemXattr, "xattr key %x is too short", k)
				return
			}
			xattrs = append(xattrs, ino)
		}},
		{prefixChunk, func(k, v []byte) {
			h, ok := keyHash(k)
			if !ok || len(v) != 8 {
				c.add(ProblemChunkRefcount, "chunk reference record %x = %x is corrupt", k, v)
				return
			}
			c.refs[h] = binary.BigEndian.Uint64(v)
		}},
		{prefixObject, func(k, v []byte) {
			h, ok := keyHash(k)
			if !ok || len(v) != 8 {
				c.add(ProblemObjectRefcount, "object reference record %x = %x is corrupt", k, v)
				return
			}
			c.objects[h] = binary.BigEndian.Uint64(v)
		}},
		{prefixTree, func(k, v []byte) {
			h, ok := keyHash(k)
			if !ok || len(v) < 8 {
				c.add(ProblemObjectTree, "object tree record %x of %d bytes is corrupt", k, len(v))
				return
			}
			c.trees[h] = binary.LittleEndian.Uint64(v)
		}},
		{prefixQuarantine, func(k, v []byte) {
			h, ok := keyHash(k)
			if !ok || json.Unmarshal(v, &Quarantine{}) != nil {
				c.add(ProblemObjectTree, "quarantine record %x = %q is corrupt", k, v)
				return
			}
			c.marked = append(c.marked, h)
		}},
		{prefixGarbage, func(k, _ []byte) {
			if h, ok := keyHash(k); ok {
				c.garbage = append(c.garbage, h)
			} else {
				c.add(ProblemGarbageList, "garbage key %x is corrupt", k)
			}
		}},
		{prefixStaging, func(k, v []byte) {
			id, ok := keyIno(k)
			if !ok || len(v) != 8 {
				c.add(ProblemStagingRef, "staging reference %x = %x is corrupt", k, v)
				return
			}
			c.staging[id] = binary.BigEndian.Uint64(v)
		}},
		{prefixOrphan, func(k, _ []byte) {
			ino, ok := keyIno(k)
			if !ok {
				c.add(ProblemOrphan, "orphan key %x has the wrong length", k)
				return
			}
			c.orphans[ino] = true
		}},
		{prefixOwner, func(k, v []byte) {
			id, ok := keyIno(k)
			if !ok {
				c.add(ProblemOwner, "owner key %x has the wrong length", k)
				return
			}
			o, err := decodeOwner(v)
			if err != nil {
				c.add(ProblemOwner, "owner %d: %v", id, err)
				return
			}
			c.owners[id] = o
		}},
		{prefixIDByOwner, func(k, v []byte) {
			if len(v) != 8 {
				c.add(ProblemOwner, "owner number of %x is corrupt", keyString(k))
				return
			}
			c.ownerIDs[keyString(k)] = binary.BigEndian.Uint64(v)
		}},
		{prefixJobRoot, func(k, _ []byte) {
			job, ino, ok := keyRoot(k)
			if !ok {
				c.add(ProblemJobRoot, "job root key %x is corrupt", k)
				return
			}
			c.roots = append(c.roots, jobRoot{job: job, ino: ino})
		}},
		{prefixAttic, func(k, v []byte) {
			if len(v) != 8 {
				c.add(ProblemInode, "attic directory %q record %x is corrupt", keyString(k), v)
				return
			}
			c.attic[keyString(k)] = binary.BigEndian.Uint64(v)
		}},
		{prefixHold, func(k, v []byte) {
			h, err := decodeHold(v)
			if err != nil || h.ID != keyString(k) {
				c.add(ProblemHold, "hold record %q does not decode or names another hold: %s", keyString(k), v)
				return
			}
			c.holds[h.ID] = h
		}},
		{prefixJob, func(k, v []byte) {
			if j, err := decodeJob(v); err != nil {
				c.add(ProblemJob, "job record %q: %v", keyString(k), err)
			} else if j.ID != keyString(k) {
				c.add(ProblemJob, "job record %q holds job %q", keyString(k), j.ID)
			}
		}},
		{prefixCollection, func(k, v []byte) {
			var rec Collection
			if _, ok := keyCollection(k); !ok {
				c.add(ProblemCollection, "collection record key %x is corrupt", k)
			} else if err := json.Unmarshal(v, (*storedCollection)(&rec)); err != nil {
				c.add(ProblemCollection, "collection record %x: %v", k, err)
			}
		}},
		{prefixReply, func(k, v []byte) {
			// A record answers a request of the connection that made it
			// and refers to nothing that must exist: an inode it answered
			// may be gone since.
			if _, ok := keyReply(k); !ok {
				c.add(ProblemReply, "reply record key %x is corrupt", k)
			} else if _, err := decodeReply(v); err != nil {
				c.add(ProblemReply, "reply record %x: %v", k, err)
			}
		}},
		{prefixExecutor, func(k, v []byte) {
			if e, err := decodeExecutor(v); err != nil {
				c.add(ProblemExecutor, "executor record %q: %v", keyString(k), err)
			} else if e.ID != keyString(k) {
				c.add(ProblemExecutor, "executor record %q holds executor %q", keyString(k), e.ID)
			}
		}},
	}
	for _, s := range steps {
		if err := tx.scanAll(s.prefix, s.fn); err != nil {
			return err
		}
	}
	for _, ino := range xattrs {
		if c.inodes[ino] == nil {
			c.add(ProblemXattr, "extended attribute of inode %d, which does not exist", ino)
		}
	}
	return nil
}

func typeName(mode uint32) string {
	switch mode & modeType {
	case modeDir:
		return "directory"
	case modeReg:
		return "file"
	case modeLnk:
		return "symlink"
	}
	return fmt.Sprintf("type %o", mode&modeType)
}

// checkNamespace checks dirents, parents, link counts, orphans and
// reachability.
func (c *checker) checkNamespace() {
	root := c.inodes[RootIno]
	switch {
	case root == nil:
		c.add(ProblemInode, "the root directory (inode %d) does not exist", RootIno)
	case !root.IsDir():
		c.add(ProblemInode, "the root (inode %d) is a %s", RootIno, typeName(root.Mode))
	case root.Parent != RootIno:
		c.add(ProblemParent, "the root's parent is %d, not itself", root.Parent)
	}
	for _, parent := range sortedKeys(c.dirents) {
		p := c.inodes[parent]
		for _, d := range c.dirents[parent] {
			n := c.inodes[d.Ino]
			switch {
			case p == nil:
				c.add(ProblemDanglingDirent, "%q in directory %d, which does not exist", d.Name, parent)
			case !p.IsDir():
				c.add(ProblemDanglingDirent, "%q in inode %d, which is a %s", d.Name, parent, typeName(p.Mode))
			}
			switch {
			case n == nil:
				c.add(ProblemDanglingDirent, "%q in directory %d names inode %d, which does not exist", d.Name, parent, d.Ino)
			case n.Mode&modeType != d.Mode&modeType:
				c.add(ProblemDirentType, "%q in directory %d names inode %d as a %s; it is a %s",
					d.Name, parent, d.Ino, typeName(d.Mode), typeName(n.Mode))
			}
		}
	}
	for _, ino := range sortedKeys(c.inodes) {
		n := c.inodes[ino]
		names := c.names[ino]
		if n.IsDir() {
			c.checkDir(n, names)
			continue
		}
		switch {
		case uint32(names) != n.Nlink:
			c.add(ProblemNlink, "%s %d has %d names and link count %d", typeName(n.Mode), ino, names, n.Nlink)
		case names == 0 && !c.orphans[ino]:
			c.add(ProblemOrphan, "%s %d has no name and is not an orphan: nothing will reap it", typeName(n.Mode), ino)
		}
	}
	for _, ino := range sortedKeys(c.orphans) {
		switch n := c.inodes[ino]; {
		case n == nil:
			c.add(ProblemOrphan, "orphan %d does not exist", ino)
		case c.names[ino] > 0 || n.Nlink > 0:
			c.add(ProblemOrphan, "orphan %d has %d names and link count %d", ino, c.names[ino], n.Nlink)
		}
	}
	reached := map[uint64]bool{RootIno: true}
	queue := []uint64{RootIno}
	for _, name := range sortedKeys(c.attic) {
		reached[c.attic[name]] = true
		queue = append(queue, c.attic[name])
	}
	for ; len(queue) > 0; queue = queue[1:] {
		for _, d := range c.dirents[queue[0]] {
			if n := c.inodes[d.Ino]; n != nil && !reached[d.Ino] {
				reached[d.Ino] = true
				if n.IsDir() {
					queue = append(queue, d.Ino)
				}
			}
		}
	}
	for _, ino := range sortedKeys(c.inodes) {
		// A nameless inode is reported above, as an orphan or a directory
		// without a parent.
		if !reached[ino] && !c.orphans[ino] && c.names[ino] > 0 {
			c.add(ProblemUnreachable, "%s %d is not reachable from the root", typeName(c.inodes[ino].Mode), ino)
		}
	}
}

// checkDir checks the names, parent and link count of directory n.
func (c *checker) checkDir(n *Inode, names int) {
	subdirs := 0
	for _, d := range c.dirents[n.Ino] {
		mode := d.Mode
		if child := c.inodes[d.Ino]; child != nil {
			mode = child.Mode
		}
		if mode&modeType == modeDir {
			subdirs++
		}
	}
	if want := 2 + subdirs; uint32(want) != n.Nlink {
		c.add(ProblemNlink, "directory %d has %d subdirectories and link count %d, not %d", n.Ino, subdirs, n.Nlink, want)
	}
	if n.Ino == RootIno || c.isAttic(n.Ino) {
		if names > 0 {
			c.add(ProblemParent, "the root or attic directory %d has %d names in directories %v", n.Ino, names, c.holders[n.Ino])
		}
		if n.Parent != n.Ino {
			c.add(ProblemParent, "the root or attic directory %d has parent %d, not itself", n.Ino, n.Parent)
		}
		return
	}
	switch {
	case names != 1:
		c.add(ProblemParent, "directory %d has %d names (in directories %v), not one", n.Ino, names, c.holders[n.Ino])
	case c.holders[n.Ino][0] != n.Parent:
		c.add(ProblemParent, "directory %d is named in directory %d but its parent is %d", n.Ino, c.holders[n.Ino][0], n.Parent)
	}
}

// checkContent checks staging references, manifests and sizes.
func (c *checker) checkContent() {
	for _, ino := range sortedKeys(c.inodes) {
		n := c.inodes[ino]
		_, sealed := c.manifests[ino]
		if n.Staging != 0 {
			switch back, ok := c.staging[n.Staging]; {
			case !n.IsRegular():
				c.add(ProblemStagingRef, "%s %d refers to staging file %x", typeName(n.Mode), ino, n.Staging)
			case !ok:
				c.add(ProblemStagingRef, "file %d refers to staging file %x, which has no staging reference", ino, n.Staging)
			case back != ino:
				c.add(ProblemStagingRef, "file %d refers to staging file %x, whose reference names inode %d", ino, n.Staging, back)
			}
			if sealed {
				c.add(ProblemStagingRef, "file %d has both a manifest and staging file %x", ino, n.Staging)
			}
			continue
		}
		if !n.IsRegular() {
			continue
		}
		size := uint64(0)
		if m := c.manifests[ino]; m != nil {
			size = m.Size
		}
		if n.Size != size {
			c.add(ProblemSize, "sealed file %d has size %d; its manifest holds %d bytes", ino, n.Size, size)
		}
	}
	for _, id := range sortedKeys(c.staging) {
		ino := c.staging[id]
		switch n := c.inodes[ino]; {
		case n == nil:
			c.add(ProblemStagingRef, "staging file %x belongs to inode %d, which does not exist", id, ino)
		case n.Staging != id:
			c.add(ProblemStagingRef, "staging file %x belongs to inode %d, whose content is staging file %x", id, ino, n.Staging)
		}
	}
	for _, ino := range sortedKeys(c.manifests) {
		switch n := c.inodes[ino]; {
		case n == nil:
			c.add(ProblemManifest, "manifest of inode %d, which does not exist", ino)
		case !n.IsRegular():
			c.add(ProblemManifest, "manifest of %s %d", typeName(n.Mode), ino)
		}
	}
}

// checkChunks compares the chunk reference counts with the manifests'
// extents and returns the chunks the manifests use.
func (c *checker) checkChunks() []cas.Hash {
	uses := map[cas.Hash]uint64{}
	for _, m := range c.manifests {
		for _, h := range m.Chunks() {
			uses[h]++
		}
	}
	used := make([]cas.Hash, 0, len(uses))
	for h := range uses {
		used = append(used, h)
	}
	slices.SortFunc(used, func(a, b cas.Hash) int { return bytes.Compare(a[:], b[:]) })
	for _, h := range used {
		if refs, ok := c.refs[h]; !ok {
			c.add(ProblemChunkRefcount, "chunk %s is used by %d extents and has no reference count", h, uses[h])
		} else if refs != uses[h] {
			c.add(ProblemChunkRefcount, "chunk %s is used by %d extents and has reference count %d", h, uses[h], refs)
		}
	}
	var counted []cas.Hash
	for h := range c.refs {
		if uses[h] == 0 {
			counted = append(counted, h)
		}
	}
	slices.SortFunc(counted, func(a, b cas.Hash) int { return bytes.Compare(a[:], b[:]) })
	for _, h := range counted {
		c.add(ProblemChunkRefcount, "chunk %s has reference count %d and no extent uses it", h, c.refs[h])
	}
	for _, h := range c.garbage {
		if _, ok := c.refs[h]; ok {
			c.add(ProblemGarbageList, "chunk %s is listed as garbage but has reference count %d", h, c.refs[h])
		}
	}
	return used
}

// checkObjects compares the object reference counts with the manifests
// that are objects, and checks that each used object has a tree of its
// length and that no unused one has a tree or a quarantine mark.
func (c *checker) checkObjects() {
	uses := map[cas.Hash]uint64{}
	sizes := map[cas.Hash]uint64{}
	for _, m := range c.manifests {
		if m.Object != nil {
			uses[*m.Object]++
			sizes[*m.Object] = m.Size
		}
	}
	for _, h := range sortedHashes(uses) {
		if refs := c.objects[h]; refs != uses[h] {
			c.add(ProblemObjectRefcount, "object %s is %d files' content and has reference count %d", h, uses[h], refs)
		}
		if size, ok := c.trees[h]; !ok {
			c.add(ProblemObjectTree, "object %s has no verification tree", h)
		} else if size != sizes[h] {
			c.add(ProblemObjectTree, "object %s of %d bytes has a tree of %d", h, sizes[h], size)
		}
	}
	for _, h := range sortedHashes(c.objects) {
		if uses[h] == 0 {
			c.add(ProblemObjectRefcount, "object %s has reference count %d and no file is it", h, c.objects[h])
		}
	}
	for _, h := range sortedHashes(c.trees) {
		if uses[h] == 0 {
			c.add(ProblemObjectTree, "object %s has a tree and no file is it", h)
		}
	}
	for _, h := range c.marked {
		if uses[h] == 0 {
			c.add(ProblemObjectTree, "object %s is quarantined and no file is it", h)
		}
	}
}

func sortedHashes[V any](m map[cas.Hash]V) []cas.Hash {
	hs := make([]cas.Hash, 0, len(m))
	for h := range m {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b cas.Hash) int { return bytes.Compare(a[:], b[:]) })
	return hs
}

// checkOwners checks owner numbers, both directions of the owner records,
// and the job roots.
func (c *checker) checkOwners() {
	for _, id := range sortedKeys(c.owners) {
		enc := string(encodeOwner(c.owners[id]))
		if back, ok := c.ownerIDs[enc]; !ok || back != id {
			c.add(ProblemOwner, "owner %d (%+v) is not interned under its number", id, c.owners[id])
		}
	}
	for _, enc := range sortedKeys(c.ownerIDs) {
		id := c.ownerIDs[enc]
		if o, ok := c.owners[id]; !ok || string(encodeOwner(o)) != enc {
			c.add(ProblemOwner, "owner number %d, interned for %x, names another owner or none", id, enc)
		}
	}
	job := func(n *Inode) string { return c.owners[n.Owner].Job }
	for _, ino := range sortedKeys(c.inodes) {
		if n := c.inodes[ino]; n.Owner != 0 {
			if _, ok := c.owners[n.Owner]; !ok {
				c.add(ProblemOwner, "inode %d has owner %d, which does not exist", ino, n.Owner)
			}
		}
	}
	isRoot := map[jobRoot]bool{}
	for _, r := range c.roots {
		isRoot[r] = true
		n := c.inodes[r.ino]
		if n == nil {
			c.add(ProblemJobRoot, "root %d of job %s does not exist", r.ino, r.job)
			continue
		}
		if j := job(n); j != r.job {
			c.add(ProblemJobRoot, "root %d of job %s belongs to job %q", r.ino, r.job, j)
			continue
		}
		// A directory has one parent; a file is a root if one of the
		// directories holding it belongs to another job.
		parents := c.holders[r.ino]
		if n.IsDir() {
			parents = []uint64{n.Parent}
		}
		differs := len(parents) == 0 && !n.IsDir()
		for _, p := range parents {
			if pn := c.inodes[p]; pn == nil || job(pn) != r.job {
				differs = true
			}
		}
		if !differs {
			c.add(ProblemJobRoot, "%s %d is a root of job %s, but its parent %v belongs to that job too", typeName(n.Mode), r.ino, r.job, parents)
		}
	}
	for _, ino := range sortedKeys(c.inodes) {
		n := c.inodes[ino]
		if !n.IsDir() || ino == RootIno || c.isAttic(ino) || job(n) == "" || isRoot[jobRoot{job(n), ino}] {
			continue
		}
		if p := c.inodes[n.Parent]; p != nil && job(p) != job(n) {
			c.add(ProblemJobRoot, "directory %d of job %s is below directory %d of job %q but is not a root of its job", ino, job(n), n.Parent, job(p))
		}
	}
}

func (c *checker) isAttic(ino uint64) bool {
	for _, a := range c.attic {
		if a == ino {
			return true
		}
	}
	return false
}

// checkHolds checks that the held directory's entries and the hold
// records name each other.
func (c *checker) checkHolds() {
	held := map[string]uint64{}
	if ino, ok := c.attic[AtticHeld]; ok {
		for _, d := range c.dirents[ino] {
			held[d.Name] = d.Ino
		}
	}
	for _, id := range sortedKeys(c.holds) {
		switch ino, ok := held[id]; {
		case !ok:
			c.add(ProblemHold, "hold %s has no tree in the held directory", id)
		case ino != c.holds[id].Ino:
			c.add(ProblemHold, "hold %s names inode %d; the held directory's entry is inode %d", id, c.holds[id].Ino, ino)
		}
	}
	for _, id := range sortedKeys(held) {
		if c.holds[id] == nil {
			c.add(ProblemHold, "held tree %s (inode %d) has no hold record", id, held[id])
		}
	}
}

func sortedKeys[K interface{ ~uint64 | ~string }, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// StagingRefs lists the staging references: staging file id -> inode.
func (tx *Tx) StagingRefs() (map[uint64]uint64, error) {
	refs := map[uint64]uint64{}
	err := tx.scanAll(prefixStaging, func(k, v []byte) {
		if id, ok := keyIno(k); ok && len(v) == 8 {
			refs[id] = binary.BigEndian.Uint64(v)
		}
	})
	return refs, err
}
