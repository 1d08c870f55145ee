package index

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/statefs/statefs/owner"
)

// The attic is two directories outside the tree, which no path from the
// root reaches. With deletes held (statefs mount --hold-deletes), what the
// executor removes from a job's tree waits in the pending directory, at the
// path it had, until the daemon decides whether it is held; a held tree is
// one entry of the held directory, named by its hold id, until it is
// restored, dropped or collected with its job. Moving a tree in or out is
// a rename: no content is copied. Inodes keep their owners in the attic,
// so the collector finds held state through the job roots like any other.
const (
	AtticPending = "pending"
	AtticHeld    = "held"
)

// Attic returns the attic directory name, making it first if create is set;
// ErrNotFound if it does not exist and create is not set. Like the root,
// an attic directory has no name and is its own parent.
func (tx *Tx) Attic(name string, create bool) (*Inode, error) {
	v, err := tx.get(atticKey(name))
	if err == nil {
		if len(v) != 8 {
			return nil, fmt.Errorf("attic directory %s: corrupt record %x", name, v)
		}
		return tx.Inode(binary.BigEndian.Uint64(v))
	}
	if !errors.Is(err, ErrNotFound) || !create {
		return nil, err
	}
	ino, err := tx.db.NewIno()
	if err != nil {
		return nil, err
	}
	now := Now()
	n := &Inode{Ino: ino, Mode: modeDir | 0o700, Nlink: 2, Size: dirSize,
		Atime: now, Mtime: now, Ctime: now, Btime: now, Parent: ino}
	if err := tx.PutInode(n); err != nil {
		return nil, err
	}
	return n, tx.set(atticKey(name), binary.BigEndian.AppendUint64(nil, ino))
}

// InAttic reports whether directory ino lies in the attic: no path from
// the root reaches it.
func (tx *Tx) InAttic(ino uint64) (bool, error) {
	for ino != RootIno {
		n, err := tx.Inode(ino)
		if err != nil {
			return false, err
		}
		if n.Parent == ino {
			return true, nil
		}
		ino = n.Parent
	}
	return false, nil
}

// heldTreeGone forgets the hold whose tree, name in directory dir, was
// just removed, if dir is the held directory: a hold record exists exactly
// while its tree does, whoever removes the tree (the collector, or
// DropHold).
func (tx *Tx) heldTreeGone(dir *Inode, name string) error {
	if dir.Parent != dir.Ino || dir.Ino == RootIno {
		return nil // not an attic directory
	}
	held, err := tx.Attic(AtticHeld, false)
	if errors.Is(err, ErrNotFound) || err == nil && held.Ino != dir.Ino {
		return nil
	}
	if err != nil {
		return err
	}
	return tx.DeleteHold(name)
}

// AtticInos lists the inode numbers of the attic directories that exist.
func (tx *Tx) AtticInos() ([]uint64, error) {
	var inos []uint64
	err := tx.scan(kindPrefix(prefixAttic), true, func(_, v []byte) (bool, error) {
		if len(v) == 8 {
			inos = append(inos, binary.BigEndian.Uint64(v))
		}
		return true, nil
	})
	return inos, err
}

// MakePending takes name out of directory parent, whose path from the root is
// dir, and puts it at the same path under the pending directory, making the
// directories on the way there as copies of the tree's (mode, owners,
// times, owner). The names in the pending directory are born when they
// were made pending (Dirent.Born): the holder decides them by it, and holding
// and restoring keep it. It answers as Unlink or Rmdir would: a directory must be
// empty, and the inode that lost a link, if any, is returned for the caller
// to reap. A directory the pending directory already holds (its children
// went first) stays, and the tree's empty one is removed; a pending file of
// the same name is replaced.
func (tx *Tx) MakePending(parent uint64, name, dir string) (*Inode, error) {
	d, err := tx.Lookup(parent, name)
	if err != nil {
		return nil, err
	}
	isDir := d.Mode&modeType == modeDir
	if isDir {
		empty, err := tx.IsEmpty(d.Ino)
		if err != nil {
			return nil, err
		}
		if !empty {
			return nil, ErrNotEmpty
		}
	}
	mirror, err := tx.mirror(dir)
	if err != nil {
		return nil, err
	}
	old, err := tx.Lookup(mirror.Ino, name)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return nil, err
	case old.Mode&modeType == modeDir:
		// The pending one holds the removed children; this one is empty.
		// (Or the kinds differ: nothing to keep of a name that changed kind.)
		return tx.Remove(parent, name)
	case isDir:
		return tx.Remove(parent, name)
	}
	return tx.Rename(parent, name, mirror.Ino, name, 0)
}

// mirror returns the directory at path dir under the pending directory,
// making what is missing as copies of the tree's directories.
func (tx *Tx) mirror(dir string) (*Inode, error) {
	m, err := tx.Attic(AtticPending, true)
	if err != nil {
		return nil, err
	}
	live, err := tx.Inode(RootIno)
	if err != nil {
		return nil, err
	}
	for _, name := range strings.Split(dir, "/") {
		if name == "" {
			continue
		}
		d, err := tx.Lookup(live.Ino, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		if live, err = tx.dir(d.Ino); err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		md, err := tx.Lookup(m.Ino, name)
		if err == nil && md.Mode&modeType == modeDir {
			if m, err = tx.Inode(md.Ino); err != nil {
				return nil, err
			}
			continue
		}
		if err == nil {
			// A pending file where a directory goes: the caller removes
			// for good instead (a file it may hold open is not reaped here).
			return nil, fmt.Errorf("%s: %w: a pending file is where a directory goes", dir, ErrExists)
		}
		if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		ino, err := tx.db.NewIno()
		if err != nil {
			return nil, err
		}
		c := *live
		c.Ino = ino
		if err := tx.create(m.Ino, name, &c, Now()); err != nil {
			return nil, err
		}
		m = &c
	}
	return m, nil
}

// Hold is one held tree: what the executor removed, kept in the attic.
type Hold struct {
	ID       string   `json:"id"`   // its name in the held directory
	Ino      uint64   `json:"ino"`  // its top directory
	Path     string   `json:"path"` // where it was in the tree
	Jobs     []string `json:"jobs,omitempty"`
	Executor string   `json:"executor,omitempty"`
	At       int64    `json:"at"`    // when it was held, ns since the epoch
	Files    int      `json:"files"` // each file once, however many names it has in the tree
	Bytes    int64    `json:"bytes"` // logical bytes of its files
	// Dropping is set once its removal began: what is left of it is no
	// longer whole, so it is not restored, and the removal goes on.
	Dropping string `json:"dropping,omitempty"` // why
}

// A hold record is kept as JSON with At in nanoseconds since the epoch
// (storedHold, the fields' own tags); Hold's JSON, which statefs prints and
// the control socket carries, gives it as an RFC 3339 time.
type storedHold Hold

func decodeHold(b []byte) (*Hold, error) {
	h := &Hold{}
	return h, json.Unmarshal(b, (*storedHold)(h))
}

// holdJSON is Hold as statefs prints it.
type holdJSON struct {
	storedHold
	At time.Time `json:"at"`
}

func (h Hold) MarshalJSON() ([]byte, error) {
	return json.Marshal(holdJSON{storedHold: storedHold(h), At: clock(h.At)})
}

func (h *Hold) UnmarshalJSON(b []byte) error {
	var v holdJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*h = Hold(v.storedHold)
	h.At = nanos(v.At)
	return nil
}

// HoldPending moves directory name out of pending directory dir (the path
// it had in the tree is h.Path) into the held directory under h.ID, and
// records h. h's Ino, jobs, executor, files and bytes are filled in here.
func (tx *Tx) HoldPending(dir uint64, name string, h *Hold) error {
	held, err := tx.Attic(AtticHeld, true)
	if err != nil {
		return err
	}
	d, err := tx.Lookup(dir, name)
	if err != nil {
		return err
	}
	if _, err := tx.move(dir, name, held.Ino, h.ID, RenameNoReplace); err != nil {
		return fmt.Errorf("holding %s as %s: %w", h.Path, h.ID, err)
	}
	n, err := tx.Inode(d.Ino)
	if err != nil {
		return err
	}
	// The tree's top now has a parent without an owner: it is a root of its
	// job and executor.
	if err := tx.indexRoot(n, held.Owner, n.Owner); err != nil {
		return err
	}
	h.Ino = d.Ino
	if err := tx.summarize(h, n); err != nil {
		return err
	}
	return tx.PutHold(h)
}

// summarize fills in the jobs, executor, files and bytes of the tree whose
// top is n. The jobs are those of its directories, whose owners are their
// names' (a file's inode may carry the owner of another of its names). A
// file counts once however many names it has in the tree.
func (tx *Tx) summarize(h *Hold, n *Inode) error {
	jobs := map[string]bool{}
	files := map[uint64]bool{}
	note := func(n *Inode) error {
		if !n.IsDir() {
			if !files[n.Ino] {
				files[n.Ino] = true
				h.Files++
				h.Bytes += int64(n.Size)
			}
			return nil
		}
		o, err := tx.Owner(n.Owner)
		if err != nil {
			return err
		}
		if o.Job != "" && !jobs[o.Job] {
			jobs[o.Job] = true
			h.Jobs = append(h.Jobs, o.Job)
		}
		if h.Executor == "" {
			h.Executor = o.Executor
		}
		return nil
	}
	if err := note(n); err != nil {
		return err
	}
	return tx.Walk(n.Ino, func(_ string, c *Inode) error { return note(c) })
}

// PutHold writes h.
func (tx *Tx) PutHold(h *Hold) error {
	b, err := json.Marshal((*storedHold)(h))
	if err != nil {
		return err
	}
	return tx.set(holdKey(h.ID), b)
}

// Hold reads the hold id; ErrNotFound if there is none.
func (tx *Tx) Hold(id string) (*Hold, error) {
	b, err := tx.get(holdKey(id))
	if err != nil {
		return nil, err
	}
	return decodeHold(b)
}

// Holds lists every hold in id order, which is the order they were made.
func (tx *Tx) Holds() ([]*Hold, error) {
	var hs []*Hold
	err := tx.scan(kindPrefix(prefixHold), true, func(_, v []byte) (bool, error) {
		h, err := decodeHold(v)
		if err != nil {
			return false, err
		}
		hs = append(hs, h)
		return true, nil
	})
	return hs, err
}

// DeleteHold forgets the record of hold id (not its tree).
func (tx *Tx) DeleteHold(id string) error { return tx.del(holdKey(id)) }

// Restore moves the held tree id to name in directory parent, whose path
// from the root is dir, which must not exist there; the tree takes the
// owners of its new paths and the hold is forgotten. Only metadata moves.
func (tx *Tx) Restore(id string, parent uint64, name, dir string, rules *owner.Rules) error {
	h, err := tx.Hold(id)
	if err != nil {
		return fmt.Errorf("hold %s: %w", id, err)
	}
	if h.Dropping != "" {
		return fmt.Errorf("hold %s: %w: it is being dropped (%s) and is no longer whole", id, ErrInvalid, h.Dropping)
	}
	held, err := tx.Attic(AtticHeld, false)
	if err != nil {
		return err
	}
	if _, err := tx.move(held.Ino, id, parent, name, RenameNoReplace); err != nil {
		return err
	}
	path := name
	if dir != "" {
		path = dir + "/" + name
	}
	if err := tx.Reown(h.Ino, path, rules); err != nil {
		return err
	}
	return tx.DeleteHold(id)
}

// RestoreTo restores held tree id at dest, a path relative to the root
// whose parent directory exists and which itself does not, and returns the
// parent's inode and the name the tree got there.
func (tx *Tx) RestoreTo(id, dest string, rules *owner.Rules) (uint64, string, error) {
	// The owners come from the path as the rules read it: a clean one.
	var parts []string
	for _, p := range strings.Split(dest, "/") {
		switch p {
		case "", ".":
		case "..":
			return 0, "", fmt.Errorf("restore destination %q: %w: '..' component", dest, ErrInvalid)
		default:
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 || len(parts[len(parts)-1]) > 255 {
		return 0, "", fmt.Errorf("restore destination %q: %w: not a name for a new directory", dest, ErrInvalid)
	}
	dir, name := strings.Join(parts[:len(parts)-1], "/"), parts[len(parts)-1]
	parent, err := tx.Resolve(dir)
	if err != nil {
		return 0, "", fmt.Errorf("restore destination %q: %w", dest, err)
	}
	if !parent.IsDir() {
		return 0, "", fmt.Errorf("restore destination %q: %s: %w", dest, dir, ErrNotDir)
	}
	if err := tx.Restore(id, parent.Ino, name, dir, rules); err != nil {
		if errors.Is(err, ErrExists) {
			return 0, "", fmt.Errorf("restore destination %q: %w", dest, err)
		}
		return 0, "", err
	}
	return parent.Ino, name, nil
}
