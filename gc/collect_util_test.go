package gc_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/flinkid"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/manifest"
)

// The two jobs of the collector tests (flinkid's {A} and {B}).
const (
	jobA = flinkid.JobA
	jobB = flinkid.JobB
)

// fixture is a store whose namespace the test builds through the index
// as the fs layer would (storetest); paths may hold flinkid's {X}.
type fixture struct{ *storetest.Fixture }

func newFixture(t *testing.T) *fixture { return &fixture{storetest.New(t)} }

// build creates paths in order (storetest.Build): one ending in "/" is a
// directory, "x=y" makes x another name of file y, and any other path is a
// file whose sealed content is made from its path; a path starting with
// "~" is a file left in staging, unsealed.
func (f *fixture) build(paths ...string) {
	f.T.Helper()
	f.Build(paths...)
}

// content is storetest.Content: the content build gives the file at p.
func content(p string) []byte { return storetest.Content(p) }

// write makes data the content of the file at p, creating it if need be,
// and seals it if seal is set.
func (f *fixture) write(p string, data []byte, seal bool) {
	f.T.Helper()
	f.Write(p, data, 0, seal)
}

// remove removes p (a file or an empty directory) as the collector does.
func (f *fixture) remove(p string) {
	f.T.Helper()
	f.Remove(flinkid.Expand(p))
}

func (f *fixture) lookup(p string) uint64 {
	f.T.Helper()
	return f.Lookup(flinkid.Expand(p))
}

func (f *fixture) inode(ino uint64) *index.Inode {
	f.T.Helper()
	var n *index.Inode
	if err := f.S.Index.View(func(tx *index.Tx) (err error) { n, err = tx.Inode(ino); return err }); err != nil {
		f.T.Fatalf("Inode(%d): %v", ino, err)
	}
	return n
}

// paths lists every path in the namespace, sorted, directories with a
// trailing "/".
func (f *fixture) paths() []string {
	f.T.Helper()
	var all []string
	var visit func(dir uint64, prefix string)
	visit = func(dir uint64, prefix string) {
		var ds []index.Dirent
		err := f.S.Index.View(func(tx *index.Tx) error {
			return tx.ReadDir(dir, func(d index.Dirent) bool { ds = append(ds, d); return true })
		})
		if err != nil {
			f.T.Fatalf("ReadDir: %v", err)
		}
		for _, d := range ds {
			p := prefix + d.Name
			if d.Mode&syscall.S_IFMT == syscall.S_IFDIR {
				all = append(all, p+"/")
				visit(d.Ino, p+"/")
			} else {
				all = append(all, p)
			}
		}
	}
	visit(index.RootIno, "")
	slices.Sort(all)
	return all
}

// chunks lists the chunks of the sealed file at p.
func (f *fixture) chunks(p string) []cas.Hash {
	f.T.Helper()
	ino := f.lookup(p)
	var m *manifest.Manifest
	if err := f.S.Index.View(func(tx *index.Tx) (err error) { m, err = tx.Manifest(ino); return err }); err != nil {
		f.T.Fatal(err)
	}
	if len(m.Chunks()) == 0 {
		f.T.Fatalf("%s has no chunks", p)
	}
	return m.Chunks()
}

func (f *fixture) hasChunk(h cas.Hash) bool {
	f.T.Helper()
	_, err := f.S.ChunkSize(h)
	if err != nil && !errors.Is(err, cas.ErrNotFound) {
		f.T.Fatal(err)
	}
	return err == nil
}

func (f *fixture) job(id string) (*index.Job, error) {
	var j *index.Job
	err := f.S.Index.View(func(tx *index.Tx) (err error) { j, err = tx.Job(id); return err })
	return j, err
}

// sayGone records the operator's "statefs job gone" at at.
func (f *fixture) sayGone(job string, at time.Time) {
	f.T.Helper()
	err := f.S.Index.Update(func(tx *index.Tx) error {
		j, err := tx.Job(job)
		if err != nil {
			return err
		}
		j.Operator, j.OperatorAt = index.VerdictGone, at.UnixNano()
		return tx.PutJob(j)
	})
	if err != nil {
		f.T.Fatalf("operator gone %s: %v", job, err)
	}
}

// sayExecutor records the operator's "statefs executor gone|live" about
// executor at at (VerdictUnknown: withdrawn).
func (f *fixture) sayExecutor(executor string, said index.Verdict, at time.Time) {
	f.T.Helper()
	err := f.S.Index.Update(func(tx *index.Tx) error {
		e, err := tx.Executor(executor)
		if err != nil {
			return err
		}
		e.Operator, e.OperatorAt = said, at.UnixNano()
		if said == index.VerdictUnknown {
			e.OperatorAt = 0
		}
		return tx.PutExecutor(e)
	})
	if err != nil {
		f.T.Fatalf("operator %s executor %s: %v", said, executor, err)
	}
}

// executor reads the record of executor id.
func (f *fixture) executor(id string) (*index.Executor, error) {
	var e *index.Executor
	err := f.S.Index.View(func(tx *index.Tx) (err error) { e, err = tx.Executor(id); return err })
	return e, err
}

// run runs c, or with dryRun only plans and reports the plan.
func (f *fixture) run(c *gc.Collector, dryRun bool) gc.Report {
	f.T.Helper()
	if dryRun {
		p, err := c.Plan(context.Background())
		if err != nil {
			f.T.Fatalf("Plan: %v", err)
		}
		return p.Report()
	}
	r, err := c.Run(context.Background())
	if err != nil {
		f.T.Fatalf("Run: %v", err)
	}
	return r
}

// check runs the one consistency check (storetest.Check) now, as the end
// of every test does: what every run, finished or killed, must leave.
func (f *fixture) check() { f.T.Helper(); f.Check() }

// stagingFiles counts the files in the store's staging directory.
func (f *fixture) stagingFiles() int {
	f.T.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(f.S.Dir, "staging"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if err != nil {
		f.T.Fatal(err)
	}
	return n
}

// scriptOracle answers questions about job A with the verdicts of its
// script in turn, then the last one for ever; about any other job, Unknown.
type scriptOracle struct {
	mu     sync.Mutex
	script []index.Verdict
	calls  int
}

func oracle(script ...index.Verdict) *scriptOracle { return &scriptOracle{script: script} }

func (o *scriptOracle) Name() string { return "script" }

func (o *scriptOracle) Judge(ctx context.Context, job string) gc.JobVerdict {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := index.VerdictUnknown
	if job == jobA {
		v = o.script[min(o.calls, len(o.script)-1)]
		o.calls++
	}
	return gc.JobVerdict{Job: job, Verdict: v, Oracle: o.Name(), Evidence: "script says " + v.String(), At: time.Now()}
}

// collected describes candidates briefly, for messages.
func collected(cs []gc.Candidate) string {
	var out []string
	for _, c := range cs {
		what := "job " + flinkid.Shorten(c.Job.ID)
		if c.Executor != "" {
			what = "executor " + c.Executor
		}
		out = append(out, fmt.Sprintf("{%s: %d names, %d files, %d bytes, %d kept}", what, c.Names, c.Files, c.Bytes, c.Kept))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// checkPaths reports the difference between the namespace and want.
func (f *fixture) checkPaths(when string, want []string) {
	f.T.Helper()
	got := f.paths()
	var missing, extra []string
	for _, p := range want {
		if !slices.Contains(got, p) {
			missing = append(missing, flinkid.Shorten(p))
		}
	}
	for _, p := range got {
		if !slices.Contains(want, p) {
			extra = append(extra, flinkid.Shorten(p))
		}
	}
	if len(missing)+len(extra) > 0 {
		f.T.Errorf("%s: namespace lacks %q\nand has more: %q", when, missing, extra)
	}
}

// only keeps the paths in all that contain any of subs (with flinkid's {X}).
func only(all []string, subs ...string) []string {
	var out []string
	for _, p := range all {
		for _, s := range subs {
			if strings.Contains(p, flinkid.Expand(s)) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// without removes from all the paths that contain any of subs.
func without(all []string, subs ...string) []string {
	drop := only(all, subs...)
	return slices.DeleteFunc(slices.Clone(all), func(p string) bool { return slices.Contains(drop, p) })
}
