package index_test

import (
	"errors"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/flinkid"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/owner"
)

// The two jobs of the owner and job tests (flinkid's {A} and {B}).
const (
	jobA = flinkid.JobA
	jobB = flinkid.JobB
)

// flinkTree is a TaskManager working directory with state of jobs A and B:
// local recovery in two allocations, a live RocksDB instance per job, and
// executor-level and unowned files.
var flinkTree = []string{
	"tm_x/",
	"tm_x/localState/",
	"tm_x/localState/aid_{D}/",
	"tm_x/localState/aid_{D}/jid_{A}/",
	"tm_x/localState/aid_{D}/jid_{A}/vtx_{V}_sti_0/",
	"tm_x/localState/aid_{D}/jid_{A}/vtx_{V}_sti_0/chk_3/",
	"tm_x/localState/aid_{D}/jid_{A}/vtx_{V}_sti_0/chk_3/_task_state_snapshot",
	"tm_x/localState/aid_{D}/jid_{A}/vtx_{V}_sti_0/chk_3/db/",
	"tm_x/localState/aid_{D}/jid_{A}/vtx_{V}_sti_0/chk_3/db/000001.sst",
	"tm_x/localState/aid_{E}/",
	"tm_x/localState/aid_{E}/jid_{A}/",
	"tm_x/localState/aid_{E}/jid_{A}/vtx_{V}_sti_1/",
	"tm_x/localState/aid_{E}/jid_{B}/",
	"tm_x/localState/aid_{E}/jid_{B}/vtx_{V}_sti_0/",
	"tm_x/localState/aid_{E}/jid_{B}/vtx_{V}_sti_0/chk_7/",
	"tm_x/localState/aid_{E}/jid_{B}/vtx_{V}_sti_0/chk_7/_task_state_snapshot",
	"tm_x/localState/aid_{F}/",
	"tm_x/tmp/",
	"tm_x/tmp/job_{A}_op_StreamMap_1_uuid_{U}/",
	"tm_x/tmp/job_{A}_op_StreamMap_1_uuid_{U}/db/",
	"tm_x/tmp/job_{A}_op_StreamMap_1_uuid_{U}/db/000009.sst",
	"tm_x/tmp/job_{B}_op_StreamMap_1_uuid_{U}/",
	"tm_x/tmp/job_{B}_op_StreamMap_1_uuid_{U}/db/",
	"tm_x/slotAllocationSnapshots/",
	"tm_x/slotAllocationSnapshots/0.bin",
	"scratch/",
	"scratch/vtx_{V}_sti_0/",
	"scratch/vtx_{V}_sti_0/chk_3/",
	"scratch/vtx_{V}_sti_0/chk_3/_task_state_snapshot",
	"scratch/inst/",
	"scratch/inst/db/",
	"scratch/inst/db/000001.sst",
	"scratch/CURRENT",
}

func jobRoots(t *testing.T, db *index.DB, job string) []uint64 {
	t.Helper()
	var roots []uint64
	if err := db.View(func(tx *index.Tx) (err error) { roots, err = tx.JobRoots(job); return err }); err != nil {
		t.Fatalf("JobRoots(%s): %v", job, err)
	}
	slices.Sort(roots)
	return roots
}

// inosOf maps paths (with flinkid's {X}) to their inodes in tr, sorted.
func inosOf(t *testing.T, tr storetest.Tree, paths ...string) []uint64 {
	t.Helper()
	var inos []uint64
	for _, p := range paths {
		inos = append(inos, tr.Ino(t, flinkid.Expand(p)))
	}
	slices.Sort(inos)
	return inos
}

// checkOwners checks what the index must hold for every inode in the
// namespace: the owner FlinkRules gives its path, and a job root entry
// exactly when its job differs from its parent directory's. Each inode must
// have one name (hard links have no single path).
func checkOwners(t *testing.T, db *index.DB) {
	t.Helper()
	wantRoots := map[string][]uint64{jobA: nil, jobB: nil}
	var visit func(dir uint64, dirJob, prefix string)
	visit = func(dir uint64, dirJob, prefix string) {
		var ds []index.Dirent
		err := db.View(func(tx *index.Tx) error {
			return tx.ReadDir(dir, func(d index.Dirent) bool { ds = append(ds, d); return true })
		})
		if err != nil {
			t.Fatalf("ReadDir: %v", err)
		}
		for _, d := range ds {
			p := path.Join(prefix, d.Name)
			want := owner.FlinkRules().Owner(p)
			var got owner.Owner
			err := db.View(func(tx *index.Tx) error {
				n, err := tx.Inode(d.Ino)
				if err != nil {
					return err
				}
				got, err = tx.Owner(n.Owner)
				return err
			})
			if err != nil {
				t.Fatalf("owner of %s: %v", p, err)
			}
			if got != want {
				t.Errorf("owner of %s = %+v, want %+v", p, got, want)
			}
			if want.Job != "" && want.Job != dirJob {
				wantRoots[want.Job] = append(wantRoots[want.Job], d.Ino)
			}
			if d.Mode&syscall.S_IFMT == syscall.S_IFDIR {
				visit(d.Ino, want.Job, p)
			}
		}
	}
	visit(index.RootIno, "", "")
	for job, want := range wantRoots {
		slices.Sort(want)
		if got := jobRoots(t, db, job); !slices.Equal(got, want) {
			t.Errorf("JobRoots(%.8s…) = %v, want %v", job, got, want)
		}
	}
}

func TestOwnerIDInterning(t *testing.T) {
	owners := []owner.Owner{
		{Executor: "x", Level: owner.LevelExecutor},
		{Executor: "x", Allocation: "d", Job: "j", Vertex: "v", Subtask: "0", Checkpoint: "3", Level: owner.LevelCheckpoint},
		{Executor: "x", Allocation: "d", Job: "j", Vertex: "v", Subtask: "0", Checkpoint: "4", Level: owner.LevelCheckpoint},
		{Executor: "x", Allocation: "d", Job: "j", Level: owner.LevelJobInAllocation},
		{Executor: "x", Job: "j", Level: owner.LevelJob},
		{Executor: "x", Job: "j", Level: owner.LevelJobInAllocation}, // only the level differs
		{Executor: "", Allocation: "", Job: "j", Level: owner.LevelJob},
		{Executor: strings.Repeat("r", 255), Job: strings.Repeat("é", 100), Checkpoint: "9223372036854775807", Level: owner.LevelCheckpoint},
		{Executor: "a\x00b", Allocation: "/", Level: owner.LevelAllocation},
	}
	dir := t.TempDir()
	storetest.CheckAtEnd(t, dir)
	db, err := index.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()

	intern := func(db *index.DB) []uint64 {
		t.Helper()
		ids := make([]uint64, len(owners))
		for i, o := range owners {
			update(t, db, func(tx *index.Tx) (err error) { ids[i], err = tx.OwnerID(o); return err })
		}
		return ids
	}
	ids := intern(db)
	for i, id := range ids {
		if id == 0 {
			t.Errorf("OwnerID(%+v) = 0, the number of the zero Owner", owners[i])
		}
		for j := range i {
			if ids[j] == id {
				t.Errorf("owners %+v and %+v share id %d", owners[j], owners[i], id)
			}
		}
	}
	if again := intern(db); !slices.Equal(again, ids) {
		t.Errorf("interning again in new transactions = %v, want %v", again, ids)
	}
	update(t, db, func(tx *index.Tx) error {
		for i, o := range owners { // in one transaction, too
			if id, err := tx.OwnerID(o); err != nil || id != ids[i] {
				t.Errorf("OwnerID(%+v) in one transaction = %d, %v; want %d", o, id, err, ids[i])
			}
		}
		return nil
	})
	db = reopen(t, db, dir)
	if again := intern(db); !slices.Equal(again, ids) {
		t.Errorf("interning after reopen = %v, want %v", again, ids)
	}
	err = db.View(func(tx *index.Tx) error {
		for i, id := range ids {
			o, err := tx.Owner(id)
			if err != nil {
				return err
			}
			if o != owners[i] {
				t.Errorf("Owner(%d) = %+v, want %+v", id, o, owners[i])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Owner: %v", err)
	}
	var fresh uint64
	update(t, db, func(tx *index.Tx) (err error) {
		fresh, err = tx.OwnerID(owner.Owner{Executor: "new after reopen", Level: owner.LevelExecutor})
		return err
	})
	if slices.Contains(ids, fresh) || fresh == 0 {
		t.Errorf("an owner interned after reopen got id %d, already one of %v", fresh, ids)
	}
}

func TestOwnerZeroAndUnknown(t *testing.T) {
	db := openDB(t)
	update(t, db, func(tx *index.Tx) error {
		if id, err := tx.OwnerID(owner.Owner{}); id != 0 || err != nil {
			t.Errorf("OwnerID(zero Owner) = %d, %v; want 0, nil", id, err)
		}
		if o, err := tx.Owner(0); o != (owner.Owner{}) || err != nil {
			t.Errorf("Owner(0) = %+v, %v; want the zero Owner", o, err)
		}
		if _, err := tx.Owner(12345); !errors.Is(err, index.ErrNotFound) {
			t.Errorf("Owner(12345) never interned: err = %v, want ErrNotFound", err)
		}
		return nil
	})
}

func TestCreateRecordsJobRoots(t *testing.T) {
	db := openDB(t)
	tr := storetest.Build(t, db, flinkTree...)
	checkOwners(t, db)
	for _, c := range []struct {
		job   string
		roots []string
	}{
		{jobA, []string{
			"tm_x/localState/aid_{D}/jid_{A}",
			"tm_x/localState/aid_{E}/jid_{A}",
			"tm_x/tmp/job_{A}_op_StreamMap_1_uuid_{U}",
		}},
		{jobB, []string{
			"tm_x/localState/aid_{E}/jid_{B}",
			"tm_x/tmp/job_{B}_op_StreamMap_1_uuid_{U}",
		}},
		{flinkid.Expand("{F}"), nil},
	} {
		if got, want := jobRoots(t, db, c.job), inosOf(t, tr, c.roots...); !slices.Equal(got, want) {
			t.Errorf("JobRoots(%.8s…) = %v, want %v (%v)", c.job, got, want, c.roots)
		}
	}
}

func TestReapRemovesJobRoot(t *testing.T) {
	db := openDB(t)
	tr := storetest.Build(t, db,
		"tm_x/", "tm_x/localState/", "tm_x/localState/aid_{D}/", "tm_x/localState/aid_{D}/jid_{A}/",
		"tm_x/tmp/", "tm_x/tmp/job_{A}_op_Map_uuid_{U}/",
		"tm_x/tmp/job_{B}_op_Map_uuid_{U}", // a file where a job's instance directory would be
	)
	aid, tmp := tr.Ino(t, flinkid.Expand("tm_x/localState/aid_{D}")), tr.Ino(t, "tm_x/tmp")
	if got := len(jobRoots(t, db, jobA)); got != 2 {
		t.Fatalf("job A has %d roots, want 2", got)
	}
	update(t, db, func(tx *index.Tx) error { return tx.Rmdir(aid, "jid_"+jobA) })
	if got, want := jobRoots(t, db, jobA), inosOf(t, tr, "tm_x/tmp/job_{A}_op_Map_uuid_{U}"); !slices.Equal(got, want) {
		t.Errorf("after rmdir of jid_A: JobRoots(A) = %v, want %v", got, want)
	}
	update(t, db, func(tx *index.Tx) error { return tx.Rmdir(tmp, "job_"+jobA+"_op_Map_uuid_"+flinkid.Expand("{U}")) })
	if got := jobRoots(t, db, jobA); len(got) != 0 {
		t.Errorf("after rmdir of every root: JobRoots(A) = %v, want none", got)
	}
	if got := len(jobRoots(t, db, jobB)); got != 1 {
		t.Fatalf("job B has %d roots, want 1 (the file)", got)
	}
	update(t, db, func(tx *index.Tx) error {
		n, err := tx.Unlink(tmp, "job_"+jobB+"_op_Map_uuid_"+flinkid.Expand("{U}"))
		if err != nil {
			return err
		}
		_, err = tx.Reap(n.Ino)
		return err
	})
	if got := jobRoots(t, db, jobB); len(got) != 0 {
		t.Errorf("after unlink and reap of B's root file: JobRoots(B) = %v, want none", got)
	}
}

// TestReown renames as the fs layer does: index Rename, then Reown of the
// moved inode at its new path, in the same transaction. Afterwards every
// inode must have its path's owner and the job roots must follow.
func TestReown(t *testing.T) {
	const (
		chkA  = "tm_x/localState/aid_{D}/jid_{A}/vtx_{V}_sti_0/chk_3"
		instA = "tm_x/tmp/job_{A}_op_StreamMap_1_uuid_{U}"
	)
	for _, c := range []struct {
		name     string
		from, to string
	}{
		{"subtask between jobs", "tm_x/localState/aid_{D}/jid_{A}/vtx_{V}_sti_0", "tm_x/localState/aid_{E}/jid_{B}/vtx_{V}_sti_1"},
		{"checkpoint between jobs", chkA, "tm_x/localState/aid_{E}/jid_{B}/vtx_{V}_sti_0/chk_8"},
		{"job directory to another allocation", "tm_x/localState/aid_{D}/jid_{A}", "tm_x/localState/aid_{F}/jid_{A}"},
		{"job directory renamed to another job", "tm_x/localState/aid_{D}/jid_{A}", "tm_x/localState/aid_{D}/jid_{B}"},
		{"RocksDB instance to another job", instA, "tm_x/tmp/job_{B}_op_StreamMap_2_uuid_{U}"},
		{"unowned into a job", "scratch/vtx_{V}_sti_0", "tm_x/localState/aid_{E}/jid_{A}/vtx_{V}_sti_0"},
		{"unowned becomes a job root", "scratch/inst", "tm_x/tmp/job_{B}_op_Other_uuid_{U}"},
		{"out of a job", "tm_x/localState/aid_{D}/jid_{A}", "scratch/jid_{A}"},
		{"job root into the executor's tree", instA, "tm_x/tmp/old"},
		{"within a checkpoint (RocksDB's native checkpoint)", chkA + "/db", chkA + "/db2"},
		{"file out of a job", chkA + "/_task_state_snapshot", "scratch/_task_state_snapshot2"},
		{"file from unowned into a job", "scratch/CURRENT", chkA + "/db/CURRENT"},
		{"file within a job (RocksDB's CURRENT)", instA + "/db/000009.sst", instA + "/db/CURRENT"},
		{"file between jobs", chkA + "/db/000001.sst", "tm_x/localState/aid_{E}/jid_{B}/vtx_{V}_sti_0/chk_7/000001.sst"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := openDB(t)
			tr := storetest.Build(t, db, flinkTree...)
			from, to := flinkid.Expand(c.from), flinkid.Expand(c.to)
			oldDir, oldName := path.Split(from)
			newDir, newName := path.Split(to)
			update(t, db, func(tx *index.Tx) error {
				if _, err := tx.Rename(tr.Ino(t, oldDir), oldName, tr.Ino(t, newDir), newName, 0); err != nil {
					return err
				}
				return tx.Reown(tr.Ino(t, from), to, owner.FlinkRules())
			})
			checkOwners(t, db)
		})
	}
}
