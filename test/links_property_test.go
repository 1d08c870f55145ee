package test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"

	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/owner"
	"github.com/statefs/statefs/store"
)

// TestLinkedStateProperty drives a mount with deletes held through random
// sequences of what Flink and RocksDB do with state hard-linked across
// owners, and what the operator does about it:
//
//   - write SSTs in the live RocksDB instance of a job (job level), some
//     with the content, or a prefix of the content, of another (shared
//     chunks); rewrite or append to them;
//   - checkpoint: link some of a job's live SSTs into a checkpoint
//     directory of one of two allocations, with a small file of its own;
//     link any file anywhere else (a restore from local state links a
//     checkpoint's SSTs back into a live instance); rename files;
//   - unlink names, rm -rf a checkpoint (pruned) or an allocation, a job in
//     it or a subtask (held, unless the job is known gone);
//   - restore a held tree (statefs restore, by id or by its path in
//     .statefs/held), where it was or into another allocation;
//   - say a job is gone (statefs job gone), and collect (statefs gc
//     --grace 0s: a dry run, then the real one);
//   - restart the daemon, cleanly or by SIGKILL.
//
// The model holds every name with when it was made, every file with when
// its content was last written, and the held trees. After every step the
// tree must be the model's: the same names, each file's content exact, the
// names of one file one inode, and its link count its names in the tree
// and in held trees (a held name counts, as the daemon counts it: an SST
// held with its allocation keeps nlink 2 on its name in the live db, and a
// restore gives back the names with the counts they had). After each
// hold, restore and gc the held trees must be the model's too (statefs
// held --json, each inode counted once, and .statefs/held). gc must remove
// exactly the files' names in a gone job's trees whose content was written
// before the job was said gone and, in the live tree, that were made
// before it too (a held name was moved aside, not made, so only its
// content counts); its report per job (files whose last name
// went, their bytes) must be the model's, and the dry run must have
// foretold the real run: the same report, and the same chunks and bytes
// swept. Nothing is open meanwhile. At the end, with the daemon stopped,
// statefs fsck finds the store consistent.
//
// The daemon decides held deletes once removals stop for the hold window;
// the test waits for that decision after each removal (the settle sentinel
// of TestModel), so that what is held never depends on timing. By default
// it runs a few short checks (about 20 s); run more with, for example,
//
//	go test -run TestLinkedStateProperty ./test/ -rapid.checks=100 -rapid.steps=60
func TestLinkedStateProperty(t *testing.T) {
	withRapidDefaults(t, map[string]string{"rapid.checks": "4", "rapid.steps": "40"})
	rapid.Check(t, func(rt *rapid.T) {
		m := mountStore(t, filepath.Join(t.TempDir(), "store"), linksMountArgs...)
		defer m.Unmount()
		l := &linksModel{m: m, tree: map[string]*linkedName{}, gone: map[string]bool{}}
		// The attic copies the tree's directories on the way to what is
		// made pending.
		l.attic = newAtticModel(func(p string) *linkedName { return l.tree[p] })
		l.attic.gone = func(job string) bool { return l.gone[job] }
		l.setUp(rt)
		rt.Repeat(map[string]func(*rapid.T){
			// Twice the weight: what Flink does most, and rm -rf and
			// restore, which make what gc works on.
			"write":       l.write,
			"write2":      l.write,
			"checkpoint":  l.checkpoint,
			"checkpoint2": l.checkpoint,
			"link":        l.link,
			"link2":       l.link,
			"rmTree":      l.rmTree,
			"rmTree2":     l.rmTree,
			"rename":      l.rename,
			"unlink":      l.unlink,
			"restore":     l.restore,
			"restore2":    l.restore,
			"jobGone":     l.jobGone,
			"gc":          l.gc,
			"restart":     l.restart,
			"":            l.check,
		})
		l.finish(rt)
		t.Logf("check: %d files written, %d trees held, %d restored, %d gc runs removed %d names of files (%d of them held)",
			l.files, l.held, l.restored, l.gcRuns, l.collected, l.collectedHeld)
	})
}

var linksMountArgs = []string{"--seal-delay", "0", "--hold-deletes", "--hold-window", "200ms", "--hold-min-free", "0"}

// The jobs whose state the test writes and may say gone. modelJob is never
// gone: its live instance keeps tm_p from being collected as an abandoned
// executor's tree, and it owns the settle sentinel.
var linksJobs = []string{"11111111111111111111111111111111", "22222222222222222222222222222222"}

func linksDB(job string) string {
	return "tm_p/tmp/job_" + job + "_op_o_uuid_5b1c2f3e-0a1b-4c2d-8e9f-0123456789ab/db"
}

// linksAllocs are the allocations: checkpoints are written in the first
// two; held trees may be restored into the third too.
var linksAllocs = append(slices.Clone(modelAllocs), "a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3")

func linksAlloc(alloc string) string { return "tm_p/localState/aid_" + alloc }

func linksJobInAlloc(alloc, job string) string { return linksAlloc(alloc) + "/jid_" + job }

func linksSubtask(alloc, job string) string {
	return linksJobInAlloc(alloc, job) + "/vtx_" + modelVertex + "_sti_0"
}

func linksCheckpoint(alloc, job string, chk int) string {
	return fmt.Sprintf("%s/chk_%d", linksSubtask(alloc, job), chk)
}

// linksDirs are the directories files are put in.
func linksDirs() []string {
	var dirs []string
	for _, job := range linksJobs {
		dirs = append(dirs, linksDB(job))
		for _, alloc := range modelAllocs {
			for chk := 1; chk <= 2; chk++ {
				dirs = append(dirs, linksCheckpoint(alloc, job, chk))
			}
		}
	}
	return dirs
}

var linksFileNames = []string{"000007.sst", "000008.sst", "000009.sst", "000010.sst", "MANIFEST-000003"}

// before reports whether the span ended before t; it fails the check if t
// falls inside it, where the model cannot tell (the test never overlaps a
// verdict with a change).
func (s span) before(rt *rapid.T, t int64, what string) bool {
	if s.from <= t && t <= s.to {
		rt.Fatalf("%s ran [%d, %d], across the verdict at %d: the model cannot tell", what, s.from, s.to, t)
	}
	return s.to < t
}

type linkedFile struct {
	data    []byte
	written span   // the last change of content (create, write)
	ino     uint64 // once seen
}

// linkedName is a name in the tree or in a held tree: a file's, or a
// directory (file nil).
type linkedName struct {
	file *linkedFile
	born span // when the name was made: create, mkdir, link, rename, or made pending
	made span // a directory's mkdir
}

// fileOf is the name's file, for the attic model.
func (n *linkedName) fileOf() (any, int64) {
	if n.file == nil {
		return nil, 0
	}
	return n.file, int64(len(n.file.data))
}

// madePending is a copy of the name, born when it was made pending.
func (n *linkedName) madePending(born span) *linkedName {
	c := *n
	c.born = born
	return &c
}

// linkedHold is a held tree of the model and the id statefs held gives it
// ("" until the test reads it there).
type linkedHold struct {
	id string
	*modelHold[*linkedName]
}

type linksModel struct {
	m     *Mount
	tree  map[string]*linkedName // by path from the mount root
	attic *atticModel[*linkedName]
	holds []*linkedHold
	// gone is what the index's verdicts say, as of the last gc run: a
	// removal of a gone job's name is a removal, not held.
	gone map[string]bool
	// For the log.
	files, held, restored, gcRuns, collected, collectedHeld int
}

func (l *linksModel) fatalf(rt *rapid.T, format string, args ...any) {
	rt.Helper()
	fatalWithLog(rt, l.m, format, args...)
}

// do runs a call that must succeed and returns when it ran.
func (l *linksModel) do(rt *rapid.T, what string, call func() error) span {
	rt.Helper()
	s := span{from: time.Now().UnixNano()}
	if err := call(); err != nil {
		l.fatalf(rt, "%s: %v", what, err)
	}
	s.to = time.Now().UnixNano()
	return s
}

func (l *linksModel) cli(rt *rapid.T, args ...string) string {
	rt.Helper()
	out, err := statefs(args...)
	if err != nil {
		l.fatalf(rt, "statefs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// setUp writes the keeper's live instance and the settle sentinel.
func (l *linksModel) setUp(rt *rapid.T) {
	l.mkdirAll(rt, linksDB(modelJob))
	keep, data := linksDB(modelJob)+"/CURRENT", []byte("MANIFEST-000001\n")
	s := l.do(rt, "write "+keep, func() error { return createSynced(l.m.Path(keep), data) })
	l.files++
	l.tree[keep] = &linkedName{file: &linkedFile{data: data, written: s}, born: s}
	l.settle(rt)
}

// jobOf is the job whose state the name at p is, by its path.
func jobOf(p string) string { return owner.FlinkRules().Owner(p).Job }

func (l *linksModel) paths(file bool) []string {
	var ps []string
	for p, n := range l.tree {
		if (n.file != nil) == file {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// movable are the names of files the steps may rename or unlink: not the
// keeper's.
func (l *linksModel) movable() []string {
	return slices.DeleteFunc(l.paths(true), func(p string) bool { return jobOf(p) == modelJob })
}

// mkdirAll makes dir and what is missing on the way.
func (l *linksModel) mkdirAll(rt *rapid.T, dir string) {
	parts := strings.Split(dir, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		if n, ok := l.tree[p]; ok {
			if n.file != nil {
				l.fatalf(rt, "model: %s is a file", p)
			}
			continue
		}
		s := l.do(rt, "mkdir "+p, func() error { return os.Mkdir(l.m.Path(p), 0o755) })
		l.tree[p] = &linkedName{born: s, made: s}
		l.fsyncDir(rt, path.Dir(p))
	}
}

func (l *linksModel) fsyncDir(rt *rapid.T, dir string) {
	if dir == "." {
		dir = ""
	}
	l.do(rt, "fsync "+dir, func() error { return fsyncPath(l.m.Path(dir)) })
}

// content draws a file's content: new bytes, or another file's, whole or
// with more after it, so that files share chunks.
func (l *linksModel) content(rt *rapid.T) []byte {
	files := l.paths(true)
	if len(files) > 0 && rapid.IntRange(0, 3).Draw(rt, "shared") == 0 {
		from := l.tree[rapid.SampledFrom(files).Draw(rt, "like")].file.data
		tail := rapid.SampledFrom([]int{0, 100, 600 << 10}).Draw(rt, "tail")
		return append(slices.Clone(from), pattern(tail, rapid.Byte().Draw(rt, "seed"))...)
	}
	size := rapid.SampledFrom([]int{100, 40 << 10, 200 << 10, 1200 << 10}).Draw(rt, "size")
	return pattern(size, rapid.Byte().Draw(rt, "seed"))
}

// write writes an SST of a job's live instance: a new one, or again, or
// more of it.
func (l *linksModel) write(rt *rapid.T) {
	job := rapid.SampledFrom(linksJobs).Draw(rt, "job")
	p := linksDB(job) + "/" + rapid.SampledFrom(linksFileNames).Draw(rt, "name")
	l.mkdirAll(rt, linksDB(job))
	data := l.content(rt)
	n := l.tree[p]
	write := func() error { return createSynced(l.m.Path(p), data) }
	if n != nil && rapid.Bool().Draw(rt, "append") {
		more := data
		data = append(slices.Clone(n.file.data), more...)
		write = func() error {
			f, err := os.OpenFile(l.m.Path(p), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			return writeAndSync(f, more)
		}
	}
	s := l.do(rt, "write "+p, write)
	if n == nil {
		l.files++
		n = &linkedName{file: &linkedFile{}, born: s}
		l.tree[p] = n
		l.fsyncDir(rt, path.Dir(p))
	}
	n.file.data, n.file.written = data, s
}

// checkpoint links some of a job's live SSTs into a checkpoint of an
// allocation, and writes its metadata file, as a RocksDB checkpoint does.
func (l *linksModel) checkpoint(rt *rapid.T) {
	job := rapid.SampledFrom(linksJobs).Draw(rt, "job")
	dir := linksCheckpoint(rapid.SampledFrom(modelAllocs).Draw(rt, "alloc"), job, rapid.IntRange(1, 2).Draw(rt, "chk"))
	l.mkdirAll(rt, dir)
	for _, src := range l.paths(true) {
		if path.Dir(src) != linksDB(job) || !rapid.Bool().Draw(rt, "take "+path.Base(src)) {
			continue
		}
		dst := dir + "/" + path.Base(src)
		if _, ok := l.tree[dst]; ok {
			continue
		}
		s := l.do(rt, "link "+src+" "+dst, func() error { return os.Link(l.m.Path(src), l.m.Path(dst)) })
		l.tree[dst] = &linkedName{file: l.tree[src].file, born: s}
	}
	meta := dir + "/_task_state_snapshot"
	if _, ok := l.tree[meta]; !ok {
		data := []byte("snapshot of " + dir)
		s := l.do(rt, "write "+meta, func() error { return createSynced(l.m.Path(meta), data) })
		l.files++
		l.tree[meta] = &linkedName{file: &linkedFile{data: data, written: s}, born: s}
	}
	l.fsyncDir(rt, dir)
}

// drawTarget draws a new name for a file: in a live instance or a
// checkpoint, existing or not.
func (l *linksModel) drawTarget(rt *rapid.T) string {
	return rapid.SampledFrom(linksDirs()).Draw(rt, "dir") + "/" + rapid.SampledFrom(linksFileNames).Draw(rt, "name")
}

// link gives a file another name anywhere: across owners, allocations and
// jobs.
func (l *linksModel) link(rt *rapid.T) {
	files := l.paths(true)
	if len(files) == 0 {
		return
	}
	src, dst := rapid.SampledFrom(files).Draw(rt, "src"), l.drawTarget(rt)
	l.mkdirAll(rt, path.Dir(dst))
	if _, ok := l.tree[dst]; ok {
		err := os.Link(l.m.Path(src), l.m.Path(dst))
		if !os.IsExist(err) {
			l.fatalf(rt, "link %s %s over an existing name: %v, want EEXIST", src, dst, err)
		}
		return
	}
	s := l.do(rt, "link "+src+" "+dst, func() error { return os.Link(l.m.Path(src), l.m.Path(dst)) })
	l.tree[dst] = &linkedName{file: l.tree[src].file, born: s}
	l.fsyncDir(rt, path.Dir(dst))
}

// rename moves a file's name, over an existing file's name or not.
func (l *linksModel) rename(rt *rapid.T) {
	files := l.movable()
	if len(files) == 0 {
		return
	}
	src, dst := rapid.SampledFrom(files).Draw(rt, "src"), l.drawTarget(rt)
	if src == dst {
		return
	}
	l.mkdirAll(rt, path.Dir(dst))
	victim := l.tree[dst]
	s := l.do(rt, "rename "+src+" "+dst, func() error { return os.Rename(l.m.Path(src), l.m.Path(dst)) })
	if victim != nil && victim.file == l.tree[src].file {
		return // two names of one file: rename(2) does nothing
	}
	l.tree[dst] = &linkedName{file: l.tree[src].file, born: s}
	delete(l.tree, src)
	l.fsyncDir(rt, path.Dir(src))
	l.fsyncDir(rt, path.Dir(dst))
	if victim != nil && makesPending(dst) {
		// The name replaced goes, held or not: its checkpoint stays, so
		// holding it would prune it. Let the daemon decide first.
		l.settle(rt)
	}
}

// unlink removes a file's name; in a checkpoint, that is a pruned
// checkpoint's file, never held.
func (l *linksModel) unlink(rt *rapid.T) {
	files := l.movable()
	if len(files) == 0 {
		return
	}
	p := rapid.SampledFrom(files).Draw(rt, "path")
	l.do(rt, "unlink "+p, func() error { return os.Remove(l.m.Path(p)) })
	delete(l.tree, p)
	l.fsyncDir(rt, path.Dir(p))
	if makesPending(p) {
		l.settle(rt)
	}
}

// rmTree removes a checkpoint (pruned), a subtask, a job in an allocation
// or an allocation (held, as Flink freeing a slot), as rm -rf does: each
// file, then each directory once empty, bottom up. The test waits for the
// daemon's decision, which the attic model makes too: what the tree no
// longer has is held, and the held trees are checked if anything was made
// pending.
func (l *linksModel) rmTree(rt *rapid.T) {
	alloc := rapid.SampledFrom(linksAllocs).Draw(rt, "alloc")
	job := rapid.SampledFrom(linksJobs).Draw(rt, "job")
	top := rapid.SampledFrom([]string{
		linksAlloc(alloc), linksJobInAlloc(alloc, job), linksSubtask(alloc, job),
		linksCheckpoint(alloc, job, 1), linksCheckpoint(alloc, job, 2),
	}).Draw(rt, "top")
	if _, ok := l.tree[top]; !ok {
		return
	}
	var victims []string
	for p := range l.tree {
		if p == top || strings.HasPrefix(p, top+"/") {
			victims = append(victims, p)
		}
	}
	// Deepest first, so that each directory is empty when removed.
	slices.SortFunc(victims, func(a, b string) int {
		if d := strings.Count(b, "/") - strings.Count(a, "/"); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	pending := false
	for _, p := range victims {
		n := l.tree[p]
		s := l.do(rt, "remove "+p, func() error { return os.Remove(l.m.Path(p)) })
		pending = l.attic.makePending(p, n, s) || pending
		delete(l.tree, p)
	}
	l.fsyncDir(rt, path.Dir(top))
	l.settle(rt)
	for _, hd := range l.attic.decide(func(p string) bool { n, ok := l.tree[p]; return ok && n.file == nil }) {
		l.holds = append(l.holds, &linkedHold{modelHold: hd})
		l.held++
	}
	if pending {
		l.checkHolds(rt, true)
	}
}

// restore puts a held tree back where it was, or into another allocation,
// if the destination is free.
func (l *linksModel) restore(rt *rapid.T) {
	if len(l.holds) == 0 {
		return
	}
	i := rapid.IntRange(0, len(l.holds)-1).Draw(rt, "hold")
	hd := l.holds[i]
	// Where it was, or into another allocation (as a restarted TaskManager
	// offering the slot anew).
	from := linksAlloc(owner.FlinkRules().Owner(hd.path).Allocation)
	dest := linksAlloc(rapid.SampledFrom(linksAllocs).Draw(rt, "into")) + strings.TrimPrefix(hd.path, from)
	if _, taken := l.tree[dest]; taken {
		return
	}
	l.mkdirAll(rt, path.Dir(dest))
	what := hd.id
	if rapid.Bool().Draw(rt, "by view path") {
		what = l.m.Path(".statefs/held", hd.id)
	}
	out := l.cli(rt, "restore", "--store", l.m.Store, what, dest)
	if !strings.Contains(out, "restored "+hd.id) {
		l.fatalf(rt, "statefs restore %s %s printed %q", what, dest, out)
	}
	for rel, n := range hd.names {
		l.tree[path.Join(dest, rel)] = n
	}
	l.holds = slices.Delete(l.holds, i, i+1)
	l.restored++
	l.checkHolds(rt, false)
}

// jobGone is the operator's word that a job is gone. A job whose state the
// store no longer holds is refused.
func (l *linksModel) jobGone(rt *rapid.T) {
	job := rapid.SampledFrom(linksJobs).Draw(rt, "job")
	// The verdict falls between changes, clearly (the kernel's timestamps
	// are coarse).
	time.Sleep(20 * time.Millisecond)
	out, err := statefs("job", "--store", l.m.Store, "gone", job)
	if err != nil && !strings.Contains(out, "holds no state") {
		l.fatalf(rt, "statefs job gone %s: %v\n%s", job, err, out)
	}
	time.Sleep(20 * time.Millisecond)
}

func (l *linksModel) restart(rt *rapid.T) {
	if rapid.Bool().Draw(rt, "kill") {
		l.m.Kill()
	} else {
		l.m.Unmount()
	}
	l.m.Start()
}

// settle waits until the daemon has decided what is pending.
func (l *linksModel) settle(rt *rapid.T) {
	if err := sentinelMadePending(l.m); err != nil {
		l.fatalf(rt, "%v", err)
	}
	if err := awaitSentinel(l.m); err != nil {
		l.fatalf(rt, "%v", err)
	}
}

// gcRun is what a gc run reported, as `statefs gc --json` says it: per
// job, names, files and bytes removed; and what its sweep freed.
type gcRun struct {
	jobs    map[string][3]int64
	records map[string]index.Job // of the jobs collected, as the run judged them
	swept   store.Swept
}

func (l *linksModel) runGC(rt *rapid.T, args ...string) gcRun {
	out := l.cli(rt, append([]string{"gc", "--store", l.m.Store, "--grace", "0s", "--json"}, args...)...)
	var r gc.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		l.fatalf(rt, "statefs gc --json: %v\n%s", err, out)
	}
	run := gcRun{jobs: map[string][3]int64{}, records: map[string]index.Job{}, swept: r.Swept}
	for _, c := range r.Collected {
		if c.Executor != "" {
			l.fatalf(rt, "gc collected executor %s's tree:\n%s", c.Executor, out)
		}
		run.jobs[c.Job.ID] = [3]int64{int64(c.Names), int64(c.Files), c.Bytes}
		run.records[c.Job.ID] = c.Job
	}
	if r.Orphans.Files != 0 {
		l.fatalf(rt, "gc found removed files open:\n%s", out)
	}
	return run
}

// gc collects with --grace 0s: a dry run, then the real one, and checks
// both against the model.
func (l *linksModel) gc(rt *rapid.T) {
	l.waitSealed(rt)
	before := l.jobs(rt)
	dry := l.runGC(rt, "--dry-run")
	if after := l.jobs(rt); !reflect.DeepEqual(before, after) {
		l.fatalf(rt, "a dry run changed the job records from %+v to %+v", before, after)
	}
	real := l.runGC(rt)
	// The verdicts as the real run recorded them: the records it left,
	// and those of the jobs it collected as its report gives them.
	jobs := l.jobs(rt)
	maps.Copy(jobs, real.records)
	if dry.swept != real.swept || !maps.Equal(dry.jobs, real.jobs) {
		l.fatalf(rt, "the dry run foretold another run than the real one: dry run %+v, real run %+v", dry, real)
	}
	l.gcRuns++
	for _, job := range slices.Sorted(maps.Keys(jobs)) {
		j := jobs[job]
		if !j.Gone() {
			if _, ok := real.jobs[job]; ok {
				l.fatalf(rt, "gc collected job %s, whose verdict is %s: %+v", job, j.Verdict, real)
			}
			continue
		}
		got, ok := real.jobs[job]
		if !ok {
			l.fatalf(rt, "gc did not report job %s, gone since %d: %+v", job, j.Since, real)
		}
		names, files, bytes := l.collect(rt, job, j.Since)
		if got[1] != int64(files) || got[2] != bytes || got[0] < int64(names) {
			l.fatalf(rt, "gc removed of job %s %d names, %d files, %d bytes; the model: %d names of files, %d files whose last name went, %d bytes",
				job, got[0], got[1], got[2], names, files, bytes)
		}
	}
	l.syncDirs(rt, jobs)
	for job := range l.gone {
		delete(l.gone, job)
	}
	for job, j := range l.jobs(rt) {
		l.gone[job] = j.Gone()
	}
	// Held trees left empty go at the daemon's next pass: two sentinels,
	// one pass after another, see it done.
	l.settle(rt)
	l.settle(rt)
	l.checkHolds(rt, false)
}

// collect removes from the model what gc removes of job, gone since since:
// the names of files whose content was written before since, in held
// trees, and in the tree if made before since too. It returns the names
// removed, the files whose last name went and their bytes.
func (l *linksModel) collect(rt *rapid.T, job string, since int64) (names, files int, bytes int64) {
	lost := map[*linkedFile]bool{}
	goes := func(p string, n *linkedName) bool {
		return n.file != nil && jobOf(p) == job && n.file.written.before(rt, since, "writing "+p)
	}
	for p, n := range l.tree {
		if goes(p, n) && n.born.before(rt, since, "making "+p) {
			delete(l.tree, p)
			lost[n.file] = true
			names++
		}
	}
	for _, hd := range l.holds {
		for rel, n := range hd.names {
			if goes(path.Join(hd.path, rel), n) {
				delete(hd.names, rel)
				lost[n.file] = true
				names++
				l.collectedHeld++
			}
		}
	}
	for f := range lost {
		if l.links(f) == 0 {
			files++
			bytes += int64(len(f.data))
		}
	}
	l.collected += names
	return names, files, bytes
}

// syncDirs takes into the model which directories gc removed, after
// checking that each could go: in a gone job's tree, with nothing left in
// it, made before the verdict. Held trees with nothing left go.
func (l *linksModel) syncDirs(rt *rapid.T, jobs map[string]index.Job) {
	mayGo := func(p string, n *linkedName, names map[string]*linkedName, rel string) bool {
		j, ok := jobs[jobOf(p)]
		if !ok || !j.Gone() || n.file != nil {
			return false
		}
		for c := range names {
			if strings.HasPrefix(c, rel+"/") || (rel == "" && c != "") {
				return false
			}
		}
		return n.made.before(rt, j.Since, "making "+p)
	}
	seen := map[string]bool{}
	l.walk(rt, "", func(p string, _ *unix.Statx_t) { seen[p] = true })
	// Deepest first: a directory is empty once what was in it went.
	for _, p := range slices.Backward(slices.Sorted(maps.Keys(l.tree))) {
		if n := l.tree[p]; !seen[p] {
			if n.file != nil {
				l.fatalf(rt, "gc removed %s, a name made at %d of a file written at %d, its job's verdict: %+v", p, n.born.from, n.file.written.from, jobs[jobOf(p)])
			}
			if !mayGo(p, n, l.tree, p) {
				l.fatalf(rt, "gc removed directory %s, which holds names or was made after its job was gone", p)
			}
			delete(l.tree, p)
		}
	}
	var kept []*linkedHold
	for _, hd := range l.holds {
		for _, rel := range slices.Backward(slices.Sorted(maps.Keys(hd.names))) {
			if n := hd.names[rel]; rel != "" && n.file == nil && !l.heldDirSeen(hd, rel) {
				if !mayGo(path.Join(hd.path, rel), n, hd.names, rel) {
					l.fatalf(rt, "gc removed held directory %s of %s, which holds names or was made after its job was gone", rel, hd.path)
				}
				delete(hd.names, rel)
			}
		}
		if len(hd.names) > 1 {
			kept = append(kept, hd)
		}
	}
	l.holds = kept
}

// heldDirSeen reports whether .statefs/held still lists directory rel of
// hold hd (a hold that went shows nothing). It reads the listing, which
// the kernel does not cache, rather than looking the name up.
func (l *linksModel) heldDirSeen(hd *linkedHold, rel string) bool {
	entries, err := os.ReadDir(l.m.Path(".statefs/held", hd.id, path.Dir(rel)))
	return err == nil && slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == path.Base(rel) })
}

// jobs is what statefs jobs --json says, by job id.
func (l *linksModel) jobs(rt *rapid.T) map[string]index.Job {
	out := l.cli(rt, "jobs", "--store", l.m.Store, "--json")
	var list []index.Job
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		l.fatalf(rt, "statefs jobs --json: %v\n%s", err, out)
	}
	jobs := map[string]index.Job{}
	for _, j := range list {
		jobs[j.ID] = j
	}
	return jobs
}

func (l *linksModel) waitSealed(rt *rapid.T) {
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, err := sealBacklog(l.m)
		if err != nil {
			l.fatalf(rt, "%v", err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			l.fatalf(rt, "%d files still waiting to be sealed after 60s", n)
		}
	}
}

// links is a file's link count: its names in the tree and in held trees.
func (l *linksModel) links(f *linkedFile) int { return len(l.names(f)) }

// names lists a file's names in the tree and in held trees (those as
// "held <id>: <path>").
func (l *linksModel) names(f *linkedFile) []string {
	var names []string
	for p, n := range l.tree {
		if n.file == f {
			names = append(names, p)
		}
	}
	for _, hd := range l.holds {
		for rel, n := range hd.names {
			if n.file == f {
				names = append(names, "held "+hd.id+": "+path.Join(hd.path, rel))
			}
		}
	}
	slices.Sort(names)
	return names
}

// statNow stats p as the daemon sees it now, not as the kernel cached it:
// gc and the holder change names and link counts behind its back.
func statNow(p string) (unix.Statx_t, error) {
	var st unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_FORCE_SYNC, unix.STATX_BASIC_STATS, &st)
	return st, err
}

// walk calls fn for every name under dir in the mount, but the read-only
// view and the settle sentinel's tree.
func (l *linksModel) walk(rt *rapid.T, dir string, fn func(p string, st *unix.Statx_t)) {
	entries, err := os.ReadDir(l.m.Path(dir))
	if err != nil {
		l.fatalf(rt, "readdir %q: %v", dir, err)
	}
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		if p == ".statefs" || p == settleRoot {
			continue
		}
		st, err := statNow(l.m.Path(p))
		if err != nil {
			l.fatalf(rt, "statx %q: %v", p, err)
		}
		fn(p, &st)
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			l.walk(rt, p, fn)
		}
	}
}

// check compares the tree with the model: names, kinds, and each file's
// inode, link count and content.
func (l *linksModel) check(rt *rapid.T) {
	var got []string
	inos := map[uint64]*linkedFile{}
	l.walk(rt, "", func(p string, st *unix.Statx_t) {
		got = append(got, p)
		n, ok := l.tree[p]
		if !ok {
			return
		}
		if (st.Mode&unix.S_IFMT == unix.S_IFDIR) != (n.file == nil) {
			l.fatalf(rt, "%s: mode %#o, the model's is a %s", p, st.Mode, map[bool]string{true: "directory", false: "file"}[n.file == nil])
		}
		if n.file != nil {
			if f, ok := inos[st.Ino]; ok && f != n.file {
				l.fatalf(rt, "%s: inode %d, which another file has too", p, st.Ino)
			}
			inos[st.Ino] = n.file
			l.checkFile(rt, p, n.file, st)
		}
	})
	slices.Sort(got)
	if want := slices.Sorted(maps.Keys(l.tree)); !slices.Equal(got, want) {
		l.fatalf(rt, "the tree has\n  %s\nthe model\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// checkFile compares file f, seen at p in the tree or in .statefs/held,
// with the model.
func (l *linksModel) checkFile(rt *rapid.T, p string, f *linkedFile, st *unix.Statx_t) {
	ino := st.Ino &^ heldViewInoBits
	if f.ino != 0 && f.ino != ino {
		l.fatalf(rt, "%s: inode %d, the file's is %d", p, ino, f.ino)
	}
	f.ino = ino
	if want := l.links(f); st.Nlink != uint32(want) {
		l.fatalf(rt, "%s: %d links, the model %d, its names in the tree and in held trees:\n  %s", p, st.Nlink, want, strings.Join(l.names(f), "\n  "))
	}
	got, err := os.ReadFile(l.m.Path(p))
	if err != nil {
		l.fatalf(rt, "read %s: %v", p, err)
	}
	if !slices.Equal(got, f.data) {
		l.fatalf(rt, "%s: %d bytes, not the %d the model has (%s)", p, len(got), len(f.data), describe(got))
	}
}

// checkHolds compares statefs held --json and .statefs/held with the
// model's held trees; new ones (no id yet) take the id of the unclaimed
// tree at their path. With counts, the files and bytes of new holds must
// be the model's: each inode once.
func (l *linksModel) checkHolds(rt *rapid.T, counts bool) {
	out := l.cli(rt, "held", "--store", l.m.Store, "--json")
	var got []heldTree
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		l.fatalf(rt, "statefs held --json: %v\n%s", err, out)
	}
	slices.SortFunc(got, func(a, b heldTree) int { return strings.Compare(a.ID, b.ID) })
	claimed := map[string]bool{}
	for _, hd := range l.holds {
		if hd.id != "" {
			claimed[hd.id] = true
		}
	}
	for _, hd := range l.holds {
		if hd.id != "" {
			continue
		}
		i := slices.IndexFunc(got, func(g heldTree) bool { return !claimed[g.ID] && g.Path == hd.path })
		if i < 0 {
			l.fatalf(rt, "no held tree at %s: statefs held lists\n%s", hd.path, out)
		}
		hd.id, claimed[got[i].ID] = got[i].ID, true
		if counts && (got[i].Files != hd.files || got[i].Bytes != hd.bytes) {
			l.fatalf(rt, "held tree %s: %d files, %d bytes; the model %d files, %d bytes (each inode once)\n%s",
				hd.path, got[i].Files, got[i].Bytes, hd.files, hd.bytes, out)
		}
	}
	var ids, want []string
	for _, g := range got {
		ids = append(ids, g.ID)
	}
	for _, hd := range l.holds {
		want = append(want, hd.id)
	}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		l.fatalf(rt, "statefs held lists %q, the model %q\n%s", ids, want, out)
	}
	for _, hd := range l.holds {
		view := path.Join(".statefs/held", hd.id)
		var seen []string
		l.walkView(rt, view, func(rel string, st *unix.Statx_t) {
			seen = append(seen, rel)
			n, ok := hd.names[rel]
			switch {
			case !ok:
			case n.file == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR:
				l.fatalf(rt, "held %s/%s: mode %#o, the model's is a directory", hd.path, rel, st.Mode)
			case n.file != nil:
				l.checkFile(rt, path.Join(view, rel), n.file, st)
			}
		})
		seen = append(seen, "")
		slices.Sort(seen)
		if want := slices.Sorted(maps.Keys(hd.names)); !slices.Equal(seen, want) {
			l.fatalf(rt, "held tree %s (%s) has %q, the model %q", hd.id, hd.path, seen, want)
		}
	}
}

func (l *linksModel) walkView(rt *rapid.T, view string, fn func(rel string, st *unix.Statx_t)) {
	var walk func(rel string)
	walk = func(rel string) {
		entries, err := os.ReadDir(l.m.Path(view, rel))
		if err != nil {
			l.fatalf(rt, "readdir %s/%s: %v", view, rel, err)
		}
		for _, e := range entries {
			r := path.Join(rel, e.Name())
			st, err := statNow(l.m.Path(view, r))
			if err != nil {
				l.fatalf(rt, "statx %s/%s: %v", view, r, err)
			}
			fn(r, &st)
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				walk(r)
			}
		}
	}
	walk("")
}

// finish stops the daemon and checks that fsck finds the store it leaves
// consistent.
func (l *linksModel) finish(rt *rapid.T) {
	l.check(rt)
	l.m.Unmount()
	l.cli(rt, "fsck", "--store", l.m.Store)
}
