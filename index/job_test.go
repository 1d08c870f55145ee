package index_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/flinkid"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/owner"
)

func readJob(db *index.DB, id string) (j *index.Job, err error) {
	err = db.View(func(tx *index.Tx) error { j, err = tx.Job(id); return err })
	return j, err
}

func jobIDs(t *testing.T, db *index.DB) []string {
	t.Helper()
	var jobs []*index.Job
	if err := db.View(func(tx *index.Tx) (err error) { jobs, err = tx.Jobs(); return err }); err != nil {
		t.Fatalf("Jobs: %v", err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

func TestNoteWrite(t *testing.T) {
	ownerOf := func(path string) owner.Owner { return owner.FlinkRules().Owner(flinkid.Expand(path)) }
	chkD := ownerOf("tm_x/localState/aid_{D}/jid_{A}/vtx_{V}_sti_0/chk_3/db/000001.sst")
	type write struct {
		o  owner.Owner
		at int64
	}
	for _, c := range []struct {
		name   string
		writes []write
		want   *index.Job // nil: no record
	}{
		{"first write makes an unknown job", []write{{chkD, 100}},
			&index.Job{ID: jobA, FirstWrite: 100, LastWrite: 100, Executors: []string{"x"},
				Allocations: []string{flinkid.Expand("{D}")}, Verdict: index.VerdictUnknown}},
		{"later writes advance LastWrite only", []write{{chkD, 100}, {chkD, 300}, {chkD, 200}},
			&index.Job{ID: jobA, FirstWrite: 100, LastWrite: 300, Executors: []string{"x"},
				Allocations: []string{flinkid.Expand("{D}")}, Verdict: index.VerdictUnknown}},
		{"executors and allocations once each, in order seen", []write{
			{chkD, 100},
			{ownerOf("tm_y/localState/aid_{E}/jid_{A}"), 110},
			{ownerOf("tm_x/localState/aid_{E}/jid_{A}/vtx_{V}_sti_1"), 120},
			{ownerOf("tm_x/tmp/job_{A}_op_Map_uuid_{U}/db/CURRENT"), 130}, // no allocation
			{chkD, 140},
		}, &index.Job{ID: jobA, FirstWrite: 100, LastWrite: 140, Executors: []string{"x", "y"},
			Allocations: []string{flinkid.Expand("{D}"), flinkid.Expand("{E}")}, Verdict: index.VerdictUnknown}},
		{"RocksDB instance alone", []write{{ownerOf("tm_x/tmp/job_{A}_op_Map_uuid_{U}"), 5}},
			&index.Job{ID: jobA, FirstWrite: 5, LastWrite: 5, Executors: []string{"x"}, Verdict: index.VerdictUnknown}},
		{"no job, no record", []write{
			{ownerOf("tm_x/localState/aid_{D}"), 1},
			{ownerOf("tm_x/slotAllocationSnapshots/0.bin"), 2},
			{ownerOf("scratch/jid_{A}"), 3},
			{owner.Owner{}, 4},
		}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := openDB(t)
			for _, w := range c.writes {
				update(t, db, func(tx *index.Tx) error { return tx.NoteWrite(w.o, w.at) })
			}
			if c.want == nil {
				if ids := jobIDs(t, db); len(ids) != 0 {
					t.Errorf("Jobs = %v, want none", ids)
				}
				return
			}
			got, err := readJob(db, jobA)
			if err != nil {
				t.Fatalf("Job: %v", err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Job = %+v\nwant  %+v", got, c.want)
			}
		})
	}
}

// A write keeps what the collector and the operator recorded: a reused
// job id must not reset a verdict's Since.
func TestNoteWriteKeepsVerdict(t *testing.T) {
	db := openDB(t)
	o := owner.FlinkRules().Owner(flinkid.Expand("tm_x/localState/aid_{D}/jid_{A}"))
	update(t, db, func(tx *index.Tx) error { return tx.NoteWrite(o, 100) })
	j, err := readJob(db, jobA)
	if err != nil {
		t.Fatal(err)
	}
	j.Verdict, j.Evidence, j.Oracle, j.Since, j.CheckedAt = index.VerdictGone, "operator said so", "operator", 150, 160
	j.Operator, j.OperatorAt = index.VerdictGone, 140
	update(t, db, func(tx *index.Tx) error { return tx.PutJob(j) })
	update(t, db, func(tx *index.Tx) error { return tx.NoteWrite(o, 200) })
	want := *j
	want.LastWrite = 200
	if got, err := readJob(db, jobA); err != nil || !reflect.DeepEqual(*got, want) {
		t.Errorf("after a write: Job = %+v, %v\nwant %+v", got, err, want)
	}
}

func TestJobsOrderedAndDeleted(t *testing.T) {
	dir := t.TempDir()
	storetest.CheckAtEnd(t, dir)
	db, err := index.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	ids := []string{"0000000000000000000000000000000f", jobB, "00000000000000000000000000000000", jobA, "10000000000000000000000000000000"}
	for i, id := range ids {
		update(t, db, func(tx *index.Tx) error {
			return tx.NoteWrite(owner.Owner{Executor: "x", Job: id, Level: owner.LevelJob}, int64(i))
		})
	}
	want := slices.Sorted(slices.Values(ids))
	if got := jobIDs(t, db); !slices.Equal(got, want) {
		t.Errorf("Jobs = %v, want %v", got, want)
	}
	db = reopen(t, db, dir)
	if got := jobIDs(t, db); !slices.Equal(got, want) {
		t.Errorf("Jobs after reopen = %v, want %v", got, want)
	}
	update(t, db, func(tx *index.Tx) error { return tx.DeleteJob(jobB) })
	want = slices.DeleteFunc(want, func(id string) bool { return id == jobB })
	if got := jobIDs(t, db); !slices.Equal(got, want) {
		t.Errorf("Jobs after DeleteJob(B) = %v, want %v", got, want)
	}
	if _, err := readJob(db, jobB); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("Job(B) after DeleteJob: err = %v, want ErrNotFound", err)
	}
	if j, err := readJob(db, jobA); err != nil || j.ID != jobA {
		t.Errorf("Job(A) after DeleteJob(B) = %+v, %v", j, err)
	}
	update(t, db, func(tx *index.Tx) error { return tx.DeleteJob("no such job") })
	if got := jobIDs(t, db); !slices.Equal(got, want) {
		t.Errorf("Jobs after deleting an unknown job = %v, want %v", got, want)
	}
}

// An executor's record keeps each URL that listed it once, the latest
// last, and at most MaxListedBy of them: the oldest go first, and a URL
// that lists it again is kept as the latest.
func TestExecutorListedIsBounded(t *testing.T) {
	var e index.Executor
	e.Listed("a", "b")
	e.Listed("a")
	if want := []string{"b", "a"}; !slices.Equal(e.ListedBy, want) {
		t.Fatalf("ListedBy = %q, want %q", e.ListedBy, want)
	}
	var many []string
	for i := range index.MaxListedBy + 2 {
		many = append(many, string(rune('c'+i)))
	}
	e.Listed(many...)
	e.Listed(many[2])
	want := append(slices.Clone(many[3:]), many[2])
	if !slices.Equal(e.ListedBy, want) || len(e.ListedBy) != index.MaxListedBy {
		t.Errorf("ListedBy = %q, want %q", e.ListedBy, want)
	}
}
