package index

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/statefs/statefs/cas"
)

// An object is a file's whole sealed content, kept as one file of the
// store (cas.Objects). The index counts the manifests that are each object,
// keeps its verification tree for verified reads, and marks an object the
// scrub found damaged (quarantine). All three go with the last reference.

// ObjectRefs is the number of manifests that are object h.
func (tx *Tx) ObjectRefs(h cas.Hash) (uint64, error) {
	v, err := tx.get(hashKey(prefixObject, h[:]))
	if err == ErrNotFound {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return decodeRefs(h, v)
}

// addObjectRef changes object h's reference count by delta. The last
// reference takes the object's tree and quarantine mark with it, and has
// the store free the object once the transaction commits
// (DB.OnObjectDropped).
func (tx *Tx) addObjectRef(h cas.Hash, delta int64) error {
	refs, err := tx.ObjectRefs(h)
	if err != nil {
		return err
	}
	refs = uint64(int64(refs) + delta)
	if int64(refs) > 0 {
		v := make([]byte, 8)
		binary.BigEndian.PutUint64(v, refs)
		return tx.set(hashKey(prefixObject, h[:]), v)
	}
	for _, p := range []byte{prefixObject, prefixTree, prefixQuarantine} {
		if err := tx.del(hashKey(p, h[:])); err != nil {
			return err
		}
	}
	if tx.db.objectDropped != nil {
		tx.OnCommit(func() { tx.db.objectDropped(h) })
	}
	return nil
}

// SetObjectTree keeps tree as object h's verification tree, unless it has
// one. The seal that refers to the object sets it in its transaction.
func (tx *Tx) SetObjectTree(h cas.Hash, tree []byte) error {
	if ok, err := tx.has(hashKey(prefixTree, h[:])); err != nil || ok {
		return err
	}
	return tx.set(hashKey(prefixTree, h[:]), tree)
}

// ObjectTree is object h's verification tree; ErrNotFound if it has none.
func (tx *Tx) ObjectTree(h cas.Hash) ([]byte, error) {
	return tx.get(hashKey(prefixTree, h[:]))
}

// Quarantine is the mark of an object whose bytes are not its hash's, or
// that cannot be read: every open of a file that is the object fails.
type Quarantine struct {
	At  int64  `json:"at"`  // when it was found, in nanoseconds since the epoch
	Why string `json:"why"` // what the check that found it said
}

// Quarantined is object h's quarantine mark; nil if it has none.
func (tx *Tx) Quarantined(h cas.Hash) (*Quarantine, error) {
	v, err := tx.get(hashKey(prefixQuarantine, h[:]))
	if err == ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var q Quarantine
	if err := json.Unmarshal(v, &q); err != nil {
		return nil, fmt.Errorf("quarantine mark of object %s: %w", h, err)
	}
	return &q, nil
}

// Quarantine marks object h damaged, unless no file uses it any more. It
// reports whether the mark is new.
func (db *DB) Quarantine(h cas.Hash, why string) (bool, error) {
	marked := false
	err := db.Update(func(tx *Tx) error {
		marked = false
		refs, err := tx.ObjectRefs(h)
		if err != nil || refs == 0 {
			return err
		}
		if q, err := tx.Quarantined(h); err != nil || q != nil {
			return err
		}
		v, err := json.Marshal(Quarantine{At: Now(), Why: why})
		if err != nil {
			return err
		}
		marked = true
		return tx.set(hashKey(prefixQuarantine, h[:]), v)
	})
	return marked, err
}

// QuarantinedObjects lists the objects marked damaged, sorted.
func (tx *Tx) QuarantinedObjects() ([]cas.Hash, error) {
	var hs []cas.Hash
	err := tx.scan(kindPrefix(prefixQuarantine), false, func(k, _ []byte) (bool, error) {
		if h, ok := keyHash(k); ok {
			hs = append(hs, h)
		}
		return true, nil
	})
	return hs, err
}

// UsedObjects lists the objects some manifest is, sorted, each once.
func (db *DB) UsedObjects() ([]cas.Hash, error) {
	var used []cas.Hash
	err := db.View(func(tx *Tx) error {
		return tx.scan(kindPrefix(prefixObject), false, func(k, _ []byte) (bool, error) {
			if h, ok := keyHash(k); ok {
				used = append(used, h)
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing used objects: %w", err)
	}
	slices.SortFunc(used, func(a, b cas.Hash) int { return bytes.Compare(a[:], b[:]) })
	return used, nil
}

// Unquarantine clears object h's quarantine mark: a seal of the same bytes
// put a sound copy in its place.
func (tx *Tx) Unquarantine(h cas.Hash) error {
	return tx.del(hashKey(prefixQuarantine, h[:]))
}
