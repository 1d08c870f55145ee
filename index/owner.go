package index

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/statefs/statefs/manifest"
)

// Owners are interned: an inode carries the number of its owner (0 for an
// unowned one), and each distinct owner is stored once, in both directions.
// A job's roots, the inodes it owns whose parent it does not own, are
// indexed by job, so the collector finds a job's state without scanning
// the tree.

const (
	prefixOwner     = 'w' // owner id -> encoded owner
	prefixOwnerByID = 'W' // encoded owner -> owner id
	prefixJobRoot   = 'r' // job, 0, ino -> nothing
)

func encodeOwner(o manifest.Owner) []byte {
	b := []byte{byte(o.Level)}
	for _, s := range []string{o.Executor, o.Allocation, o.Job, o.Vertex, o.Subtask, o.Checkpoint} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

func decodeOwner(b []byte) (manifest.Owner, error) {
	var o manifest.Owner
	if len(b) < 1 {
		return o, errors.New("corrupt owner record")
	}
	o.Level = manifest.Level(b[0])
	b = b[1:]
	for _, s := range []*string{&o.Executor, &o.Allocation, &o.Job, &o.Vertex, &o.Subtask, &o.Checkpoint} {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return o, errors.New("corrupt owner record")
		}
		*s = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	return o, nil
}

// OwnerID interns o and returns its number; the zero Owner is 0.
func (tx *Tx) OwnerID(o manifest.Owner) (uint64, error) {
	if o == (manifest.Owner{}) {
		return 0, nil
	}
	enc := encodeOwner(o)
	key := append([]byte{prefixOwnerByID}, enc...)
	v, err := tx.get(key)
	if err == nil {
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
func (tx *Tx) Owner(id uint64) (manifest.Owner, error) {
	if id == 0 {
		return manifest.Owner{}, nil
	}
	b, err := tx.get(inoKey(prefixOwner, id))
	if err != nil {
		return manifest.Owner{}, fmt.Errorf("owner %d: %w", id, err)
	}
	return decodeOwner(b)
}

func jobRootKey(job string, ino uint64) []byte {
	k := append([]byte{prefixJobRoot}, job...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, ino)
}

// JobRoots lists the inodes job owns whose parent it does not own.
func (tx *Tx) JobRoots(job string) ([]uint64, error) {
	prefix := append(append([]byte{prefixJobRoot}, job...), 0)
	var inos []uint64
	err := tx.scan(prefix, false, func(k, _ []byte) (bool, error) {
		inos = append(inos, binary.BigEndian.Uint64(k[len(prefix):]))
		return true, nil
	})
	return inos, err
}

// ownerJob is the job of the owner numbered id ("" if none).
func (tx *Tx) ownerJob(id uint64) (string, error) {
	o, err := tx.Owner(id)
	return o.Job, err
}

// indexRoot records or clears n as a root of its job, given its parent's
// owner. Called whenever n gets a parent or an owner.
func (tx *Tx) indexRoot(n *Inode, parentOwner uint64, oldJob string) error {
	job, err := tx.ownerJob(n.Owner)
	if err != nil {
		return err
	}
	parentJob, err := tx.ownerJob(parentOwner)
	if err != nil {
		return err
	}
	if oldJob != "" && oldJob != job {
		if err := tx.del(jobRootKey(oldJob, n.Ino)); err != nil {
			return err
		}
	}
	if job == "" {
		return nil
	}
	if job != parentJob {
		return tx.set(jobRootKey(job, n.Ino), nil)
	}
	return tx.del(jobRootKey(job, n.Ino))
}

// Reown gives inode ino, named path (relative to the mount root), and
// everything below it the owners rules assign to their paths, keeping the
// job roots right. A rename that moves state between owners calls it.
func (tx *Tx) Reown(ino uint64, path string, rules *manifest.Rules) error {
	n, err := tx.Inode(ino)
	if err != nil {
		return err
	}
	parentOwner := uint64(0)
	if n.IsDir() {
		if p, err := tx.Inode(n.Parent); err == nil {
			parentOwner = p.Owner
		}
	}
	return tx.reown(n, parentOwner, path, rules)
}

func (tx *Tx) reown(n *Inode, parentOwner uint64, path string, rules *manifest.Rules) error {
	id, err := tx.OwnerID(rules.Owner(path))
	if err != nil {
		return err
	}
	if id != n.Owner {
		oldJob, err := tx.ownerJob(n.Owner)
		if err != nil {
			return err
		}
		n.Owner = id
		if err := tx.PutInode(n); err != nil {
			return err
		}
		if err := tx.indexRoot(n, parentOwner, oldJob); err != nil {
			return err
		}
	} else if err := tx.indexRoot(n, parentOwner, ""); err != nil {
		return err
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
		if err := tx.reown(c, n.Owner, path+"/"+d.Name, rules); err != nil {
			return err
		}
	}
	return nil
}
