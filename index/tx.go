package index

import (
	"errors"

	badger "github.com/dgraph-io/badger/v4"
)

// Tx is one index transaction; see DB.View and DB.Update.
type Tx struct {
	txn      *badger.Txn
	db       *DB
	onCommit []func()
	dirents  []direntChange // for the listings cache
}

// OnCommit makes fn run once the transaction has committed, after the
// functions registered before it, outside the index's write lock; never if
// the transaction does not commit. It is where work that must follow a
// commit goes (removing a file the index no longer refers to), so that no
// caller has to remember it.
func (tx *Tx) OnCommit(fn func()) { tx.onCommit = append(tx.onCommit, fn) }

// droppedStaging notes that the transaction drops the reference to staging
// file id: the DB's OnStagingDropped function removes the file once the
// transaction commits.
func (tx *Tx) droppedStaging(id uint64) {
	if id != 0 && tx.db.stagingDropped != nil {
		tx.OnCommit(func() { tx.db.stagingDropped(id) })
	}
}

func (tx *Tx) get(key []byte) ([]byte, error) {
	item, err := tx.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

func (tx *Tx) has(key []byte) (bool, error) {
	_, err := tx.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (tx *Tx) set(key, value []byte) error {
	if err := tx.txn.Set(key, value); err != nil {
		return err
	}
	tx.noteDirent(key, value)
	return nil
}

func (tx *Tx) del(key []byte) error {
	if err := tx.txn.Delete(key); err != nil {
		return err
	}
	tx.noteDirent(key, nil)
	return nil
}

// scan calls fn for each key with prefix, in key order, until fn returns
// false or an error. The key and value are valid only during the call.
func (tx *Tx) scan(prefix []byte, values bool, fn func(key, value []byte) (bool, error)) error {
	return tx.scanFrom(prefix, prefix, values, fn)
}

// scanFrom is scan starting at key from, which has the prefix.
func (tx *Tx) scanFrom(prefix, from []byte, values bool, fn func(key, value []byte) (bool, error)) error {
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = values
	opts.Prefix = prefix
	it := tx.txn.NewIterator(opts)
	defer it.Close()
	for it.Seek(from); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		var v []byte
		if values {
			var err error
			if v, err = item.ValueCopy(nil); err != nil {
				return err
			}
		}
		more, err := fn(item.Key(), v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}
