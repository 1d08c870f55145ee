package index

// White-box: the tests write records of older formats themselves.

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/statefs/statefs/owner"
)

// A format 1 index (dirents without when their names were made) opens as
// format 2: its names read as made at 0, before any verdict, and a move
// keeps that. An index of a newer format is refused and left as it was.
func TestOpenUpgradesFormat1(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := &Inode{Ino: RootIno + 1, Mode: modeReg | 0o644, Nlink: 1, Ctime: 1}
	err = db.Update(func(tx *Tx) error {
		if err := tx.PutInode(n); err != nil {
			return err
		}
		v1 := encodeDirent(Dirent{Ino: n.Ino, Mode: n.Mode})[:direntV1Len]
		if err := tx.set(inoNameKey(prefixDirent, RootIno, "old"), v1); err != nil {
			return err
		}
		return tx.set(versionKey(), []byte{formatV1})
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}

	if db, err = Open(dir); err != nil {
		t.Fatalf("Open of a format 1 index: %v", err)
	}
	err = db.Update(func(tx *Tx) error {
		if v, err := tx.get(versionKey()); err != nil || len(v) != 1 || v[0] != FormatVersion {
			t.Errorf("version after the upgrade %v, %v; want %d", v, err, FormatVersion)
		}
		d, err := tx.Lookup(RootIno, "old")
		if err != nil || d.Ino != n.Ino || d.Born != 0 {
			t.Errorf("format 1 dirent reads %+v, %v; want inode %d made at 0", d, err, n.Ino)
		}
		if _, err := tx.move(RootIno, "old", RootIno, "moved", 0); err != nil {
			return err
		}
		d, err = tx.Lookup(RootIno, "moved")
		if err != nil || d.Born != 0 {
			t.Errorf("moved format 1 dirent reads %+v, %v; want made at 0", d, err)
		}
		return nil
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}

	bdb, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(txn *badger.Txn) error { return txn.Set(versionKey(), []byte{FormatVersion + 1}) })
	if err := errors.Join(err, bdb.Close()); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir); !errors.Is(err, ErrFormat) {
		if err == nil {
			db.Close()
		}
		t.Fatalf("Open of format %d = %v, want ErrFormat", FormatVersion+1, err)
	}
}

// Job records written while verdicts were bare strings read as typed
// verdicts: a name as its Verdict, an operator that is "" or absent as
// nothing said, and any other string (a verdict of "" above all) as
// unknown, as every reader took it. A record holding names is written back
// byte for byte as it was read: the JSON of a job record did not change.
func TestJobRecordStringVerdicts(t *testing.T) {
	const id = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	for _, tc := range []struct {
		name      string
		record    string
		want      Job
		unchanged bool // PutJob writes record again, byte for byte
	}{
		{
			"first write",
			`{"id":"` + id + `","first_write":5,"last_write":5,"executors":["x"],"verdict":"unknown"}`,
			Job{ID: id, FirstWrite: 5, LastWrite: 5, Executors: []string{"x"}, Verdict: VerdictUnknown},
			true,
		},
		{
			"judged, operator said gone",
			`{"id":"` + id + `","first_write":100,"last_write":200,"executors":["x"],"allocations":["d"],` +
				`"verdict":"gone","evidence":"operator: statefs job gone","oracle":"operator","since":150,"checked_at":160,` +
				`"operator":"gone","operator_at":140}`,
			Job{ID: id, FirstWrite: 100, LastWrite: 200, Executors: []string{"x"}, Allocations: []string{"d"},
				Verdict: VerdictGone, Evidence: "operator: statefs job gone", Oracle: "operator", Since: 150, CheckedAt: 160,
				Operator: VerdictGone, OperatorAt: 140},
			true,
		},
		{
			"live, operator said live",
			`{"id":"` + id + `","first_write":1,"last_write":2,"verdict":"live","operator":"live","operator_at":3}`,
			Job{ID: id, FirstWrite: 1, LastWrite: 2, Verdict: VerdictLive, Operator: VerdictLive, OperatorAt: 3},
			true,
		},
		{
			"operator empty",
			`{"id":"` + id + `","first_write":1,"last_write":2,"verdict":"gone","operator":""}`,
			Job{ID: id, FirstWrite: 1, LastWrite: 2, Verdict: VerdictGone},
			false,
		},
		{
			"verdict empty",
			`{"id":"` + id + `","first_write":1,"last_write":2,"verdict":""}`,
			Job{ID: id, FirstWrite: 1, LastWrite: 2},
			false,
		},
		{
			"verdict absent",
			`{"id":"` + id + `","first_write":1,"last_write":2}`,
			Job{ID: id, FirstWrite: 1, LastWrite: 2},
			false,
		},
		{
			"no names",
			`{"id":"` + id + `","verdict":"Gone","operator":"dead"}`,
			Job{ID: id},
			false,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			key := append([]byte{prefixJob}, id...)
			err = db.Update(func(tx *Tx) error {
				if err := tx.set(key, []byte(tc.record)); err != nil {
					return err
				}
				got, err := tx.Job(id)
				if err != nil {
					t.Fatalf("Job: %v", err)
				}
				if !reflect.DeepEqual(*got, tc.want) {
					t.Errorf("Job = %+v\nwant  %+v", *got, tc.want)
				}
				if all, err := tx.Jobs(); err != nil || len(all) != 1 || !reflect.DeepEqual(*all[0], tc.want) {
					t.Errorf("Jobs = %+v, %v; want the one record", all, err)
				}
				if err := tx.PutJob(got); err != nil {
					return err
				}
				again, err := tx.get(key)
				if err != nil {
					return err
				}
				if tc.unchanged && string(again) != tc.record {
					t.Errorf("PutJob wrote\n%s\nfor the record read from\n%s", again, tc.record)
				}
				if back, err := tx.Job(id); err != nil || !reflect.DeepEqual(*back, tc.want) {
					t.Errorf("written back, the record reads %+v, %v; want %+v", back, err, tc.want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Executor records written before executors had verdicts read as unknown,
// nothing said, and keep what they held when written back; a record with
// a verdict keeps it through a write noted under its executor, which only
// moves its last write.
func TestExecutorRecordVerdicts(t *testing.T) {
	const id = "tm-1"
	for _, tc := range []struct {
		name   string
		record string
		want   Executor
	}{
		{
			"written before verdicts",
			`{"id":"tm-1","last_write":5,"jobs":["j"]}`,
			Executor{ID: id, LastWrite: 5, Jobs: []string{"j"}},
		},
		{
			"judged, operator said gone",
			`{"id":"tm-1","last_write":5,"verdict":"gone","evidence":"operator: statefs executor gone","oracle":"operator",` +
				`"since":7,"checked_at":8,"operator":"gone","operator_at":6}`,
			Executor{ID: id, LastWrite: 5, Verdict: VerdictGone, Evidence: "operator: statefs executor gone", Oracle: "operator",
				Since: 7, CheckedAt: 8, Operator: VerdictGone, OperatorAt: 6},
		},
		{
			"no names",
			`{"id":"tm-1","last_write":5,"verdict":"Gone","operator":""}`,
			Executor{ID: id, LastWrite: 5},
		},
		{
			"listed by Flinks",
			`{"id":"tm-1","last_write":5,"verdict":"live","listed_by":["http://a:8081","http://b:8081"]}`,
			Executor{ID: id, LastWrite: 5, Verdict: VerdictLive, ListedBy: []string{"http://a:8081", "http://b:8081"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			err = db.Update(func(tx *Tx) error {
				if err := tx.set(executorKey(id), []byte(tc.record)); err != nil {
					return err
				}
				got, err := tx.Executor(id)
				if err != nil || !reflect.DeepEqual(*got, tc.want) {
					t.Errorf("Executor = %+v, %v\nwant       %+v", got, err, tc.want)
				}
				if all, err := tx.Executors(); err != nil || len(all) != 1 || !reflect.DeepEqual(*all[0], tc.want) {
					t.Errorf("Executors = %+v, %v; want the one record", all, err)
				}
				if err := tx.NoteWrite(owner.Owner{Level: owner.LevelExecutor, Executor: id}, 9); err != nil {
					return err
				}
				want := tc.want
				want.LastWrite = 9
				if back, err := tx.Executor(id); err != nil || !reflect.DeepEqual(*back, want) {
					t.Errorf("after a write noted, the record reads %+v, %v; want %+v", back, err, want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Every prefix is one kind of record: two kinds sharing a byte would read
// each other's keys. keys.go is read as source, so that a prefix added
// there is checked without being listed anywhere else.
func TestPrefixesDistinct(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "keys.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			for i, name := range v.Names {
				lit, ok := v.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.CHAR {
					t.Fatalf("%s is not a one-byte character literal", name.Name)
				}
				if other, dup := seen[lit.Value]; dup {
					t.Errorf("%s and %s are both %s", other, name.Name, lit.Value)
				}
				seen[lit.Value] = name.Name
			}
		}
	}
	if len(seen) < 18 {
		t.Errorf("found %d prefixes in keys.go, want every kind of record: %v", len(seen), seen)
	}
}
