package gc_test

import (
	"context"
	"errors"
	"path"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/flinkid"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/owner"
)

const (
	chkA3  = "tm_x/localState/aid_{D}/jid_{A}/vtx_{V}_sti_0/chk_3"
	chkB7  = "tm_x/localState/aid_{E}/jid_{B}/vtx_{V}_sti_0/chk_7"
	rocksA = "tm_x/tmp/job_{A}_op_StreamMap_1_uuid_{U}"
	rocksB = "tm_x/tmp/job_{B}_op_StreamMap_1_uuid_{U}"
)

// gcTree is a TaskManager working directory holding jobs A and B: local
// recovery state in two allocations, a live RocksDB instance each (A's
// with an unsealed WAL), and executor-level and unowned files.
var gcTree = []string{
	"tm_x/",
	"tm_x/localState/",
	"tm_x/localState/aid_{D}/",
	"tm_x/localState/aid_{D}/jid_{A}/",
	"tm_x/localState/aid_{D}/jid_{A}/vtx_{V}_sti_0/",
	chkA3 + "/",
	chkA3 + "/_task_state_snapshot",
	chkA3 + "/db/",
	chkA3 + "/db/000001.sst",
	chkA3 + "/db/MANIFEST-000004",
	"tm_x/localState/aid_{E}/",
	"tm_x/localState/aid_{E}/jid_{A}/",
	"tm_x/localState/aid_{E}/jid_{A}/vtx_{V}_sti_1/",
	"tm_x/localState/aid_{E}/jid_{A}/vtx_{V}_sti_1/chk_3/",
	"tm_x/localState/aid_{E}/jid_{A}/vtx_{V}_sti_1/chk_3/_task_state_snapshot",
	"tm_x/localState/aid_{E}/jid_{B}/",
	"tm_x/localState/aid_{E}/jid_{B}/vtx_{V}_sti_0/",
	chkB7 + "/",
	chkB7 + "/_task_state_snapshot",
	chkB7 + "/db/",
	chkB7 + "/db/000001.sst",
	"tm_x/tmp/",
	rocksA + "/",
	rocksA + "/db/",
	rocksA + "/db/000009.sst",
	"~" + rocksA + "/db/000010.log",
	rocksB + "/",
	rocksB + "/db/",
	rocksB + "/db/000009.sst",
	"tm_x/slotAllocationSnapshots/",
	"tm_x/slotAllocationSnapshots/0.bin",
	"scratch/",
	"scratch/notes",
}

// jobATrees are the paths of job A's state in gcTree.
var jobATrees = []string{"jid_{A}", "job_{A}"}

// sealedFiles lists the sealed files of gcTree among paths.
func sealedFiles(paths []string) []string {
	return slices.DeleteFunc(slices.Clone(paths), func(p string) bool {
		return p[len(p)-1] == '/' || path.Base(p) == "000010.log"
	})
}

func (f *fixture) chunksOf(paths []string) []cas.Hash {
	f.T.Helper()
	var hs []cas.Hash
	for _, p := range sealedFiles(paths) {
		hs = append(hs, f.chunks(p)...)
	}
	return hs
}

// fileBytes is the sum of the sizes of the sealed files among paths.
func (f *fixture) fileBytes(paths []string) int64 {
	f.T.Helper()
	var n int64
	for _, p := range sealedFiles(paths) {
		n += int64(f.inode(f.lookup(p)).Size)
	}
	return n
}

func (f *fixture) collector(oracles ...gc.Oracle) *gc.Collector {
	return &gc.Collector{Store: f.S, Oracles: oracles}
}

func TestCollectNothingWithoutOracles(t *testing.T) {
	f := newFixture(t)
	f.build(gcTree...)
	before := f.paths()
	r := f.run(f.collector(), false)
	if len(r.Collected) != 0 || r.Swept.Chunks != 0 {
		t.Errorf("Run collected %s and swept %+v, want nothing", collected(r.Collected), r.Swept)
	}
	if len(r.Verdicts) != 2 {
		t.Errorf("Run judged %d jobs, want 2", len(r.Verdicts))
	}
	for _, v := range r.Verdicts {
		if v.Verdict != index.VerdictUnknown {
			t.Errorf("verdict on %.8s… = %v, want unknown", v.Job, v.Verdict)
		}
	}
	f.checkPaths("after a run without oracles", before)
	for _, job := range []string{jobA, jobB} {
		if j, err := f.job(job); err != nil || j.Verdict != index.VerdictUnknown {
			t.Errorf("job %.8s… = %+v, %v; want verdict unknown", job, j, err)
		}
	}
	f.check()
}

func TestCollectOperatorGone(t *testing.T) {
	f := newFixture(t)
	f.build(gcTree...)
	before := f.paths()
	aPaths := only(before, jobATrees...)
	kept := without(before, jobATrees...)
	aChunks, keptChunks := f.chunksOf(aPaths), f.chunksOf(kept)
	aBytes := f.fileBytes(aPaths)
	staging := f.stagingFiles()

	f.sayGone(jobA, time.Now())
	r := f.run(f.collector(), false)

	f.checkPaths("after collecting A", kept)
	if len(r.Collected) != 1 {
		t.Fatalf("Collected %s, want job A only", collected(r.Collected))
	}
	c := r.Collected[0]
	if c.Job.ID != jobA || c.Verdict.Verdict != index.VerdictGone || c.Names != len(aPaths) || c.Kept != 0 || c.Bytes < aBytes {
		t.Errorf("Collected %s (verdict %v), want job A, gone, %d inodes, at least %d bytes, none kept", collected(r.Collected), c.Verdict.Verdict, len(aPaths), aBytes)
	}
	for _, h := range aChunks {
		if f.hasChunk(h) {
			t.Errorf("chunk %s of job A not swept", h)
		}
	}
	for _, h := range keptChunks {
		if !f.hasChunk(h) {
			t.Errorf("chunk %s of a file that stays was swept", h)
		}
	}
	if r.Swept.Chunks != len(aChunks) {
		t.Errorf("Swept %d chunks, want %d", r.Swept.Chunks, len(aChunks))
	}
	if got := f.stagingFiles(); got != staging-1 {
		t.Errorf("%d staging files left, want %d (A's unsealed WAL removed)", got, staging-1)
	}
	if _, err := f.job(jobA); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("job A's record after collection: err = %v, want ErrNotFound", err)
	}
	if j, err := f.job(jobB); err != nil || j.Verdict != index.VerdictUnknown {
		t.Errorf("job B = %+v, %v; want its record, unknown", j, err)
	}
	f.check()
}

func TestCollectGrace(t *testing.T) {
	const grace = 10 * time.Minute
	for _, c := range []struct {
		name    string
		after   time.Duration // since the operator's word
		collect bool
	}{
		{"at once", 0, false},
		{"a nanosecond short", grace - 1, false},
		{"grace elapsed", grace, true},
		{"long after", 24 * time.Hour, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.build(gcTree...)
			before := f.paths()
			said := time.Now()
			f.sayGone(jobA, said)
			col := f.collector()
			col.Grace = grace
			col.Now = func() time.Time { return said.Add(c.after) }
			r := f.run(col, false)
			want := before
			if c.collect {
				want = without(before, jobATrees...)
			}
			f.checkPaths("after the run", want)
			if got := len(r.Collected) > 0; got != c.collect {
				t.Errorf("collected = %v (%s), want %v", got, collected(r.Collected), c.collect)
			}
			f.check()
		})
	}
}

// TestCollectVerdicts runs the collector with the operator's word and other
// oracles; each oracle answers its script in turn (Run asks once to judge,
// once more right before it deletes).
func TestCollectVerdicts(t *testing.T) {
	U, L, G := index.VerdictUnknown, index.VerdictLive, index.VerdictGone
	for _, c := range []struct {
		name     string
		operator index.Verdict // what the operator said
		scripts  [][]index.Verdict
		verdict  index.Verdict // recorded afterwards
		collect  bool
	}{
		{"no oracle", U, nil, U, false},
		{"an oracle unknown", U, [][]index.Verdict{{U}}, U, false},
		{"an oracle live", U, [][]index.Verdict{{L}}, L, false},
		{"an oracle gone", U, [][]index.Verdict{{G}}, G, true},
		{"operator gone", G, nil, G, true},
		{"operator live, an oracle gone", L, [][]index.Verdict{{G}}, L, false},
		{"operator gone, an oracle unknown", G, [][]index.Verdict{{U}}, G, true},
		{"operator gone, an oracle live", G, [][]index.Verdict{{L}}, L, false},
		{"gone, gone and live", G, [][]index.Verdict{{G}, {L}}, L, false},
		{"live on the re-check", U, [][]index.Verdict{{G, L}}, L, false},
		{"unknown on the re-check", U, [][]index.Verdict{{G, U}}, U, false},
		{"operator gone, live on the re-check", G, [][]index.Verdict{{U}, {U, L}}, L, false},
		{"gone on the re-check", U, [][]index.Verdict{{G, G}}, G, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.build(gcTree...)
			before := f.paths()
			if c.operator != U {
				err := f.S.Index.Update(func(tx *index.Tx) error {
					j, err := tx.Job(jobA)
					if err != nil {
						return err
					}
					j.Operator, j.OperatorAt = c.operator, index.Now()
					return tx.PutJob(j)
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			var oracles []gc.Oracle
			for _, s := range c.scripts {
				oracles = append(oracles, oracle(s...))
			}
			r := f.run(f.collector(oracles...), false)
			want := before
			if c.collect {
				want = without(before, jobATrees...)
			}
			f.checkPaths("after the run", want)
			if got := len(r.Collected) > 0; got != c.collect {
				t.Errorf("collected = %v (%s), want %v", got, collected(r.Collected), c.collect)
			}
			j, err := f.job(jobA)
			if c.collect {
				if !errors.Is(err, index.ErrNotFound) {
					t.Errorf("job A's record after collection: %+v, %v; want ErrNotFound", j, err)
				}
			} else if err != nil || j.Verdict != c.verdict {
				t.Errorf("job A = %+v, %v; want verdict %s", j, err, c.verdict)
			}
			f.check()
		})
	}
}

// Gone must hold without a break for the grace period: an Unknown in
// between starts it again.
func TestCollectGraceRestartsAfterFlap(t *testing.T) {
	const grace = time.Hour
	f := newFixture(t)
	f.build(gcTree...)
	before := f.paths()
	o := oracle(index.VerdictGone, index.VerdictUnknown, index.VerdictGone)
	col := f.collector(o)
	col.Grace = grace
	now := time.Now()
	col.Now = func() time.Time { return now }
	since := func() int64 {
		j, err := f.job(jobA)
		if err != nil {
			t.Fatal(err)
		}
		return j.Since
	}

	f.run(col, false) // gone
	first := since()
	time.Sleep(time.Millisecond)
	f.run(col, false) // unknown
	time.Sleep(time.Millisecond)
	f.run(col, false) // gone again
	again := since()
	if again <= first {
		t.Fatalf("Since after gone, unknown, gone = %d, want later than the first gone's %d", again, first)
	}
	now = time.Unix(0, again).Add(grace - 1) // the first gone's grace has passed, not the second's
	if r := f.run(col, false); len(r.Collected) != 0 {
		t.Errorf("collected %s before gone held for the grace period", collected(r.Collected))
	}
	f.checkPaths("before the grace period", before)
	now = time.Unix(0, again).Add(grace)
	if r := f.run(col, false); len(r.Collected) != 1 {
		t.Errorf("collected %s once gone held for the grace period, want job A", collected(r.Collected))
	}
	f.checkPaths("once gone held for the grace period", without(before, jobATrees...))
	f.check()
}

// buildReused builds gcTree, has the operator say job A is gone, and then
// writes more state of A (its id reused): a new checkpoint, a new file in
// an old directory, an old file rewritten, and a new empty directory. It
// returns the paths that must survive A's collection.
func (f *fixture) buildReused() []string {
	f.T.Helper()
	f.build(gcTree...)
	time.Sleep(time.Millisecond)
	f.sayGone(jobA, time.Now())
	time.Sleep(time.Millisecond)
	f.build(
		"tm_x/localState/aid_{D}/jid_{A}/vtx_{V}_sti_0/chk_4/",
		"tm_x/localState/aid_{D}/jid_{A}/vtx_{V}_sti_0/chk_4/_task_state_snapshot",
		rocksA+"/db/000011.sst",
		"tm_x/localState/aid_{E}/jid_{A}/vtx_{V}_sti_2/",
	)
	p := flinkid.Expand(chkA3 + "/db/MANIFEST-000004")
	f.write(p, content(p+" rewritten after the verdict"), true)
	return without(f.paths(),
		chkA3+"/_task_state_snapshot", chkA3+"/db/000001.sst", "vtx_{V}_sti_1", rocksA+"/db/000009.sst", rocksA+"/db/000010.log")
}

func TestCollectKeepsStateWrittenAfterVerdict(t *testing.T) {
	f := newFixture(t)
	keep := f.buildReused()
	kept := f.chunksOf(keep)
	col := f.collector()
	r := f.run(col, false)
	f.checkPaths("after collecting A", keep)
	// Kept: chk_4 and its file, MANIFEST, db and chk_3 above it, vtx_0 and
	// jid_A above both; 000011.sst, db and the instance directory; vtx_2
	// and jid_A above it. Removed: two files of chk_3, vtx_1 with its
	// checkpoint and file, 000009.sst and the WAL.
	const wantKept, wantRemoved = 2 + 3 + 2 + 3 + 2, 2 + 3 + 2
	if len(r.Collected) != 1 || r.Collected[0].Kept != wantKept || r.Collected[0].Names != wantRemoved {
		t.Errorf("Collected %s, want job A, %d inodes removed, %d kept", collected(r.Collected), wantRemoved, wantKept)
	}
	for _, h := range kept {
		if !f.hasChunk(h) {
			t.Errorf("chunk %s of a kept file was swept", h)
		}
	}
	if j, err := f.job(jobA); err != nil || j.Verdict != index.VerdictGone {
		t.Errorf("job A = %+v, %v; want its record kept while it has state", j, err)
	}
	f.check()

	r = f.run(col, false)
	f.checkPaths("after a second run", keep)
	if len(r.Collected) != 1 || r.Collected[0].Names != 0 || r.Collected[0].Kept != wantKept || r.Swept.Chunks != 0 {
		t.Errorf("second run: Collected %s, Swept %+v; want nothing more removed", collected(r.Collected), r.Swept)
	}
	f.check()
}

// The execution checks each planned name again as it removes it: a file
// written between the plan and its execution stays, with the directories
// above it in the job's tree, and so does the job's record; the rest of
// the plan is carried out.
func TestCollectExecutionChecksEachNameAgain(t *testing.T) {
	f := newFixture(t)
	f.build(gcTree...)
	time.Sleep(time.Millisecond)
	f.sayGone(jobA, time.Now())
	col := f.collector()
	plan, err := col.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	planned := plan.Report().Collected
	if len(planned) != 1 || planned[0].Kept != 0 {
		t.Fatalf("planned %s, want all of job A", collected(planned))
	}
	late := chkA3 + "/db/000001.sst"
	// The kernel stamps a staging file's write from its coarse clock, up
	// to a tick (10 ms at HZ=100) behind the verdict's: write a tick later,
	// so that the write reads as after the verdict.
	time.Sleep(15 * time.Millisecond)
	f.write(flinkid.Expand(late), []byte("written after the plan"), false)
	r, err := col.Execute(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	// Kept: the file, db, chk_3, vtx_0 and jid_A above it.
	const kept = 5
	if len(r.Collected) != 1 || r.Collected[0].Kept != kept || r.Collected[0].Names != planned[0].Names-kept {
		t.Errorf("executed %s, planned %s; want %d names fewer removed, kept", collected(r.Collected), collected(planned), kept)
	}
	f.lookup(late)
	if j, err := f.job(jobA); err != nil || j.Verdict != index.VerdictGone {
		t.Errorf("job A = %+v, %v; want its record kept while it has state", j, err)
	}
	f.check()
}

func TestCollectDryRun(t *testing.T) {
	f := newFixture(t)
	f.buildReused()
	f.build(chkB7 + "/extra")
	before := f.paths()
	var chunks []cas.Hash
	for _, p := range sealedFiles(before) {
		chunks = append(chunks, f.chunks(p)...)
	}
	col := f.collector()
	recorded, err := f.job(jobA)
	if err != nil {
		t.Fatal(err)
	}
	dry := f.run(col, true)
	f.checkPaths("after a dry run", before)
	if j, err := f.job(jobA); err != nil || !reflect.DeepEqual(j, recorded) {
		t.Errorf("a dry run changed job A's record from %+v to %+v (%v)", recorded, j, err)
	}
	for _, h := range chunks {
		if !f.hasChunk(h) {
			t.Errorf("a dry run removed chunk %s", h)
		}
	}
	if _, err := f.job(jobA); err != nil {
		t.Errorf("a dry run deleted job A's record: %v", err)
	}
	real := f.run(col, false)
	if len(dry.Collected) != 1 || len(real.Collected) != 1 {
		t.Fatalf("dry run collected %s, real run %s; want job A in both", collected(dry.Collected), collected(real.Collected))
	}
	d, c := dry.Collected[0], real.Collected[0]
	if d.Names != c.Names || d.Bytes != c.Bytes || d.Kept != c.Kept || d.Job.ID != c.Job.ID {
		t.Errorf("dry run would remove %d inodes, %d bytes, keep %d; the real run removed %d, %d bytes, kept %d",
			d.Names, d.Bytes, d.Kept, c.Names, c.Bytes, c.Kept)
	}
	if c.Names == 0 || c.Bytes == 0 {
		t.Errorf("the real run removed %s, want something", collected(real.Collected))
	}
	// buildReused shares chunks between the jobs: only the ones job A alone
	// used are freed, and the dry run says which.
	if dry.Swept != real.Swept || real.Swept.Chunks == 0 {
		t.Errorf("a dry run would sweep %+v; the real run swept %+v", dry.Swept, real.Swept)
	}
	f.check()
}

// A run killed part way (simulated by removing part of job A's trees by
// hand, as the collector does, or by having run already) and run again
// finishes the job and leaves a consistent store.
func TestCollectResumes(t *testing.T) {
	for _, c := range []struct {
		name  string
		first func(f *fixture)
	}{
		{"after a finished run", func(f *fixture) { f.run(f.collector(), false) }},
		{"after a file went", func(f *fixture) { f.remove(chkA3 + "/db/000001.sst") }},
		{"after a directory went", func(f *fixture) {
			f.remove(chkA3 + "/db/000001.sst")
			f.remove(chkA3 + "/db/MANIFEST-000004")
			f.remove(chkA3 + "/db")
		}},
		{"after a whole root went", func(f *fixture) {
			f.remove(rocksA + "/db/000009.sst")
			f.remove(rocksA + "/db/000010.log")
			f.remove(rocksA + "/db")
			f.remove(rocksA)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.build(gcTree...)
			want := without(f.paths(), jobATrees...)
			bChunks := f.chunksOf(want)
			f.sayGone(jobA, time.Now())
			c.first(f)
			f.check()
			f.run(f.collector(), false)
			f.checkPaths("after the run", want)
			if _, err := f.job(jobA); !errors.Is(err, index.ErrNotFound) {
				t.Errorf("job A's record after collection: err = %v, want ErrNotFound", err)
			}
			for _, h := range bChunks {
				if !f.hasChunk(h) {
					t.Errorf("chunk %s of a file that stays was swept", h)
				}
			}
			f.check()
			r := f.run(f.collector(), false)
			if len(r.Collected) != 0 || r.Swept.Chunks != 0 {
				t.Errorf("one more run collected %s and swept %+v, want nothing", collected(r.Collected), r.Swept)
			}
			f.checkPaths("after one more run", want)
		})
	}
}

// A file of the gone job that another job's tree links to stays, under
// that name, with its content; and the other way round.
func TestCollectHardLinksAcrossJobs(t *testing.T) {
	f := newFixture(t)
	f.build(gcTree...)
	f.build(
		chkB7+"/db/000002.sst="+chkA3+"/db/000001.sst", // B's restore linked A's SST
		chkA3+"/db/000042.sst="+chkB7+"/db/000001.sst", // and the other way
	)
	shared, back := f.chunks(chkA3+"/db/000001.sst"), f.chunks(chkB7+"/db/000001.sst")
	sharedIno := f.lookup(chkA3 + "/db/000001.sst")
	want := without(f.paths(), jobATrees...)
	time.Sleep(time.Millisecond)
	f.sayGone(jobA, time.Now())
	r := f.run(f.collector(), false)
	f.checkPaths("after collecting A", want)
	if ino := f.lookup(chkB7 + "/db/000002.sst"); ino != sharedIno || f.inode(ino).Nlink != 1 {
		t.Errorf("B's name of A's file is inode %d with %d links, want inode %d with 1", ino, f.inode(ino).Nlink, sharedIno)
	}
	if got := f.chunks(chkB7 + "/db/000002.sst"); !slices.Equal(got, shared) {
		t.Errorf("the linked file's chunks = %v, want %v", got, shared)
	}
	for _, h := range append(shared, back...) {
		if !f.hasChunk(h) {
			t.Errorf("chunk %s of a file B still has was swept", h)
		}
	}
	if len(r.Collected) != 1 || r.Collected[0].Kept != 0 {
		t.Errorf("Collected %s, want job A, nothing kept", collected(r.Collected))
	}
	if _, err := f.job(jobA); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("job A's record after collection: err = %v, want ErrNotFound", err)
	}
	f.check()
}

// A file with several names in the gone job's trees goes with all of them.
// RocksDB's native checkpoint hard-links the live instance's SST files into
// the checkpoint directory, so this is the common case.
func TestCollectHardLinksWithinJob(t *testing.T) {
	for _, c := range []struct{ name, link string }{
		{"checkpoint of the live instance", chkA3 + "/db/000009.sst=" + rocksA + "/db/000009.sst"},
		{"two names in one directory", chkA3 + "/db/twice.sst=" + chkA3 + "/db/000001.sst"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.build(gcTree...)
			f.build(c.link)
			want := without(f.paths(), jobATrees...)
			time.Sleep(time.Millisecond)
			f.sayGone(jobA, time.Now())
			r := f.run(f.collector(), false)
			f.checkPaths("after collecting A", want)
			if len(r.Collected) != 1 || r.Collected[0].Kept != 0 {
				t.Errorf("Collected %s, want job A, nothing kept", collected(r.Collected))
			}
			if _, err := f.job(jobA); !errors.Is(err, index.ErrNotFound) {
				t.Errorf("job A's record after collection: err = %v, want ErrNotFound", err)
			}
			f.check()
		})
	}
}

// RocksDB writes CURRENT (and OPTIONS) under a temporary name and renames
// it; the fs layer then gives the file its new path's owner (index Reown).
// The job's state must stay collectable, whether the rename came before
// the verdict or after it (a reused job id's new instance), and Run must
// not fail.
func TestCollectAfterFileRenameInJob(t *testing.T) {
	const newInstance = "tm_x/tmp/job_{A}_op_StreamMap_1_uuid_00000000-9abc-def0-1234-56789abcdef0"
	for _, c := range []struct {
		name         string
		afterVerdict bool
		dir          string
		keep         []string // besides what is not A's
	}{
		{"before the verdict", false, rocksA + "/db", nil},
		{"after the verdict", true, newInstance + "/db", []string{newInstance + "/", newInstance + "/db/", newInstance + "/db/CURRENT"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.build(gcTree...)
			want := without(f.paths(), jobATrees...)
			for _, p := range c.keep {
				want = append(want, flinkid.Expand(p))
			}
			slices.Sort(want)
			if c.afterVerdict {
				time.Sleep(time.Millisecond)
				f.sayGone(jobA, time.Now())
				time.Sleep(time.Millisecond)
				f.build(newInstance+"/", newInstance+"/db/")
			}
			f.build(c.dir + "/000001.dbtmp")
			dir := f.lookup(c.dir)
			to := flinkid.Expand(c.dir + "/CURRENT")
			err := f.S.Index.Update(func(tx *index.Tx) error {
				if _, err := tx.Rename(dir, "000001.dbtmp", dir, "CURRENT", 0); err != nil {
					return err
				}
				d, err := tx.Lookup(dir, "CURRENT")
				if err != nil {
					return err
				}
				return tx.Reown(d.Ino, to, owner.FlinkRules())
			})
			if err != nil {
				t.Fatal(err)
			}
			if !c.afterVerdict {
				f.sayGone(jobA, time.Now())
			}
			if _, err := f.collector().Run(context.Background()); err != nil {
				t.Errorf("Run: %v", err)
			}
			f.checkPaths("after collecting A", want)
			f.check()
		})
	}
}

// Bytes counts the logical size of every file removed, unsealed ones too.
func TestCollectCountsStagingBytes(t *testing.T) {
	f := newFixture(t)
	f.build("tm_x/", "tm_x/tmp/", rocksA+"/", "~"+rocksA+"/000010.log")
	f.sayGone(jobA, time.Now())
	f.sayExecutor("x", index.VerdictGone, time.Now())
	r := f.run(f.collector(), false)
	want := int64(len(content(flinkid.Expand(rocksA + "/000010.log"))))
	// The executor tm_x, said gone, held only job A, so its tree goes too,
	// after A's.
	if len(r.Collected) != 2 || r.Collected[0].Names != 2 || r.Collected[0].Bytes != want || r.Collected[1].Executor != "x" {
		t.Errorf("Collected %s, want 2 inodes, %d bytes", collected(r.Collected), want)
	}
	if n := f.stagingFiles(); n != 0 {
		t.Errorf("%d staging files left, want none", n)
	}
}

// A restore from local state links the checkpoint's old SSTs into a new
// instance directory. When the job's id came back after its verdict, that
// link is new state: it stays, with its content, while the old names go
// (DESIGN invariant 4 judges names, not only content).
func TestCollectKeepsALinkMadeAfterTheVerdict(t *testing.T) {
	const newInstance = "tm_x/tmp/job_{A}_op_StreamMap_1_uuid_00000000-9abc-def0-1234-56789abcdef0"
	f := newFixture(t)
	f.build(gcTree...)
	old := chkA3 + "/db/000001.sst"
	chunks := f.chunks(old)
	time.Sleep(time.Millisecond)
	f.sayGone(jobA, time.Now())
	time.Sleep(time.Millisecond)
	f.build(newInstance+"/", newInstance+"/db/", newInstance+"/db/000001.sst="+old)
	want := append(without(f.paths(), jobATrees...),
		flinkid.Expand(newInstance+"/"), flinkid.Expand(newInstance+"/db/"), flinkid.Expand(newInstance+"/db/000001.sst"))
	slices.Sort(want)

	r := f.run(f.collector(), false)
	f.checkPaths("after collecting A", want)
	if got := f.chunks(newInstance + "/db/000001.sst"); !slices.Equal(got, chunks) {
		t.Errorf("the new link's chunks = %v, want the old file's %v", got, chunks)
	}
	for _, h := range chunks {
		if !f.hasChunk(h) {
			t.Errorf("chunk %s of the new link was swept", h)
		}
	}
	// Kept: the link, db and the instance directory.
	if len(r.Collected) != 1 || r.Collected[0].Kept != 3 {
		t.Errorf("Collected %s, want job A with 3 names kept", collected(r.Collected))
	}
	f.check()
}

// A file counts once however many names it has: the names removed count
// each, the files and bytes freed only the files whose last name went. A
// dry run predicts exactly what the run removes and sweeps.
func TestCollectCountsAFileOnce(t *testing.T) {
	f := newFixture(t)
	f.build(gcTree...)
	f.build(
		chkA3+"/db/000009.sst="+rocksA+"/db/000009.sst", // a checkpoint of the live instance
		chkB7+"/db/000002.sst="+chkA3+"/db/000001.sst",  // B's restore linked A's SST
	)
	aPaths := only(f.paths(), jobATrees...)
	freed := map[uint64]int64{} // inode -> size, of A's files with no name outside A
	for _, p := range aPaths {
		if p[len(p)-1] == '/' {
			continue
		}
		ino := f.lookup(p)
		if ino != f.lookup(chkB7+"/db/000002.sst") {
			n := f.inode(ino)
			freed[ino] = int64(n.Size)
			if n.Staging != 0 {
				freed[ino] = int64(len(content(p)))
			}
		}
	}
	var bytes int64
	for _, b := range freed {
		bytes += b
	}
	time.Sleep(time.Millisecond)
	f.sayGone(jobA, time.Now())

	dry := f.run(f.collector(), true)
	real := f.run(f.collector(), false)
	for _, r := range []gc.Report{dry, real} {
		if len(r.Collected) != 1 {
			t.Fatalf("Collected %s, want job A", collected(r.Collected))
		}
		if c := r.Collected[0]; c.Names != len(aPaths) || c.Files != len(freed) || c.Bytes != bytes {
			t.Errorf("Collected %s, want %d names, %d files, %d bytes", collected(r.Collected), len(aPaths), len(freed), bytes)
		}
	}
	if dry.Swept != real.Swept || real.Swept.Chunks == 0 {
		t.Errorf("a dry run would sweep %+v; the real run swept %+v", dry.Swept, real.Swept)
	}
	f.check()
}

// With files sealed as objects (random content), the objects of a gone job
// go as its last names do, not in the sweep; the run counts them, and a dry
// run foretells the same.
func TestCollectFreesObjects(t *testing.T) {
	f := &fixture{storetest.NewWithObjects(t)}
	f.build(gcTree...)
	st, err := f.S.Stats()
	if err != nil || st.ObjectFiles == 0 {
		t.Fatalf("no object after building the tree: %+v, %v", st, err)
	}
	time.Sleep(time.Millisecond)
	f.sayGone(jobA, time.Now())
	dry := f.run(f.collector(), true)
	real := f.run(f.collector(), false)
	if real.Swept.Objects == 0 || dry.Swept != real.Swept {
		t.Errorf("a dry run would free %+v; the real run freed %+v", dry.Swept, real.Swept)
	}
	after, err := f.S.Stats()
	if err != nil || after.ObjectFiles != st.ObjectFiles-real.Swept.Objects {
		t.Errorf("%d objects before, %d after, the run says it freed %d (%v)", st.ObjectFiles, after.ObjectFiles, real.Swept.Objects, err)
	}
	f.check()
}

// Flink clearing a gone job's slot before the verdict was recorded (a
// restarted TaskManager drops the allocations it did not recover): held
// deletes hold the tree, its names moved aside after the operator's word.
// In the attic names are judged by their content, so the collector takes
// the held tree with the job, and the hold with it.
func TestCollectHeldTreeMadePendingAfterTheVerdict(t *testing.T) {
	const id = "20261201T000000Z-vtx"
	sub := "tm_x/localState/aid_{D}/jid_{A}/vtx_{V}_sti_0"
	f := newFixture(t)
	f.build(gcTree...)
	before := f.paths()
	time.Sleep(time.Millisecond)
	f.sayGone(jobA, time.Now())
	time.Sleep(time.Millisecond)
	f.makeTreePending(sub)
	err := f.S.Index.Update(func(tx *index.Tx) error {
		pending, err := tx.Attic(index.AtticPending, false)
		if err != nil {
			return err
		}
		dir, err := tx.Lookup(pending.Ino, "tm_x")
		for _, name := range []string{"localState", flinkid.Expand("aid_{D}"), flinkid.Expand("jid_{A}")} {
			if err != nil {
				return err
			}
			dir, err = tx.Lookup(dir.Ino, name)
		}
		if err != nil {
			return err
		}
		return tx.HoldPending(dir.Ino, flinkid.Expand("vtx_{V}_sti_0"), &index.Hold{ID: id, Path: flinkid.Expand(sub), At: index.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}

	r := f.run(f.collector(), false)
	f.checkPaths("after collecting A", without(before, jobATrees...))
	if len(r.Collected) != 1 || r.Collected[0].Kept != 0 {
		t.Errorf("Collected %s, want job A with nothing kept", collected(r.Collected))
	}
	err = f.S.Index.View(func(tx *index.Tx) error {
		if _, err := tx.Hold(id); !errors.Is(err, index.ErrNotFound) {
			t.Errorf("hold %s after its tree was collected: %v, want ErrNotFound", id, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.job(jobA); !errors.Is(err, index.ErrNotFound) {
		t.Errorf("job A's record after collection: err = %v, want ErrNotFound", err)
	}
	f.check()
}

// makeTreePending makes pending everything at and below p (with flinkid's {X}) as rm -rf with
// deletes held does: a directory's entries first, then the directory.
func (f *fixture) makeTreePending(p string) {
	f.T.Helper()
	p = flinkid.Expand(p)
	ino := f.lookup(p)
	if f.inode(ino).IsDir() {
		var names []string
		err := f.S.Index.View(func(tx *index.Tx) error {
			return tx.ReadDir(ino, func(d index.Dirent) bool { names = append(names, d.Name); return true })
		})
		if err != nil {
			f.T.Fatal(err)
		}
		for _, name := range names {
			f.makeTreePending(p + "/" + name)
		}
	}
	err := f.S.Index.Update(func(tx *index.Tx) error {
		parent, err := tx.Resolve(path.Dir(p))
		if err != nil {
			return err
		}
		_, err = tx.MakePending(parent.Ino, path.Base(p), path.Dir(p))
		return err
	})
	if err != nil {
		f.T.Fatalf("pending %s: %v", p, err)
	}
}
