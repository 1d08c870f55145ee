package index_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/statefs/statefs/index"
)

// The index keeps the newest MaxCollections collection records, oldest
// first, whatever number of transactions added them.
func TestCollectionsKeepTheNewest(t *testing.T) {
	db := openDB(t)
	const extra = 5
	for i := range index.MaxCollections + extra {
		update(t, db, func(tx *index.Tx) error {
			return tx.AddCollection(&index.Collection{At: int64(i + 1), Executor: fmt.Sprint(i), Why: "test"})
		})
	}
	var cs []*index.Collection
	if err := db.View(func(tx *index.Tx) (err error) { cs, err = tx.Collections(); return err }); err != nil {
		t.Fatal(err)
	}
	if len(cs) != index.MaxCollections {
		t.Fatalf("%d collection records kept, want %d", len(cs), index.MaxCollections)
	}
	for i, c := range cs {
		if want := fmt.Sprint(i + extra); c.Executor != want {
			t.Fatalf("record %d is of %s, want %s: the oldest go first", i, c.Executor, want)
		}
	}
}

// A collection record prints its times as RFC 3339 and reads back the same.
func TestCollectionJSON(t *testing.T) {
	at := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	c := index.Collection{At: at.UnixNano(), Job: strings.Repeat("a", 32), Verdict: index.VerdictGone, Evidence: "operator",
		Why: "gone", Since: at.Add(-time.Hour).UnixNano(), Names: 3, Files: 2, Bytes: 10}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"at":"2026-12-03T08:00:00Z"`) || !strings.Contains(string(b), `"since":"2026-12-03T07:00:00Z"`) {
		t.Errorf("JSON %s: want at and since as RFC 3339", b)
	}
	var back index.Collection
	if err := json.Unmarshal(b, &back); err != nil || back != c {
		t.Errorf("read back %+v, %v; want %+v", back, err, c)
	}
}
