package index

import (
	"encoding/json"
	"time"
)

// MaxCollections is how many collection records the index keeps: the
// newest, the oldest going as a new one comes. A record is a few hundred
// bytes (ids, evidence, counts), so the ring stays well under a megabyte,
// and a thousand removals cover weeks of a cluster that ends a job an hour:
// long enough to answer "where did that job's state go" after a weekend.
const MaxCollections = 1000

// Collection is one removal the collector made: a job's state, or an
// executor's tree, what went and why. It outlives the job's record, which
// goes with the job's last name.
type Collection struct {
	At       int64   `json:"at"` // when the removal ended, ns since the epoch
	Job      string  `json:"job,omitempty"`
	Executor string  `json:"executor,omitempty"` // set for an executor's tree
	Verdict  Verdict `json:"verdict"`
	Evidence string  `json:"evidence,omitempty"`
	Why      string  `json:"why"`   // the rule that let it go
	Since    int64   `json:"since"` // state made or written from then on stayed
	Names    int     `json:"names"`
	Files    int     `json:"files"`
	Bytes    int64   `json:"bytes"` // logical bytes of Files
	Kept     int     `json:"kept"`  // names kept: made or written since
}

// A collection record is kept as JSON with its times in nanoseconds since
// the epoch (storedCollection); Collection's JSON, which statefs prints
// and the control socket carries, gives them as RFC 3339 times.
type storedCollection Collection

type collectionJSON struct {
	storedCollection
	At    time.Time `json:"at"`
	Since time.Time `json:"since,omitzero"`
}

func (c Collection) MarshalJSON() ([]byte, error) {
	return json.Marshal(collectionJSON{storedCollection: storedCollection(c), At: clock(c.At), Since: clock(c.Since)})
}

func (c *Collection) UnmarshalJSON(b []byte) error {
	var v collectionJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = Collection(v.storedCollection)
	c.At, c.Since = nanos(v.At), nanos(v.Since)
	return nil
}

// AddCollection records c as the newest collection, and drops the oldest
// records beyond MaxCollections.
func (tx *Tx) AddCollection(c *Collection) error {
	var seqs []uint64
	err := tx.scan(kindPrefix(prefixCollection), false, func(k, _ []byte) (bool, error) {
		if seq, ok := keyCollection(k); ok {
			seqs = append(seqs, seq)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	next := uint64(1)
	if len(seqs) > 0 {
		next = seqs[len(seqs)-1] + 1
	}
	for len(seqs) >= MaxCollections {
		if err := tx.del(collectionKey(seqs[0])); err != nil {
			return err
		}
		seqs = seqs[1:]
	}
	b, err := json.Marshal((*storedCollection)(c))
	if err != nil {
		return err
	}
	return tx.set(collectionKey(next), b)
}

// Collections lists the collection records, oldest first.
func (tx *Tx) Collections() ([]*Collection, error) {
	var cs []*Collection
	err := tx.scan(kindPrefix(prefixCollection), true, func(_, v []byte) (bool, error) {
		c := &Collection{}
		if err := json.Unmarshal(v, (*storedCollection)(c)); err != nil {
			return false, err
		}
		cs = append(cs, c)
		return true, nil
	})
	return cs, err
}
