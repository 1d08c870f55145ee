package metrics

// White-box tests: they read the registry the way Prometheus would, and
// build the store collector with no scan interval so each gather rescans.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/store"
)

// sample is the value of metric name whose labels include the pairs in
// labels (name, value, ...): a counter's or gauge's value, a histogram's
// count. It fails the test if g has no such metric.
func sample(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("no metric %s%v", name, labels)
	return 0
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
		}
		if !found {
			return false
		}
	}
	return true
}

// fakeFS answers getattr, read and write as a node tree would, and
// everything else with ENOSYS.
type fakeFS struct {
	fuse.RawFileSystem
	read fuse.ReadResult
}

func newFakeFS() *fakeFS {
	return &fakeFS{RawFileSystem: fuse.NewDefaultRawFileSystem(), read: fuse.ReadResultData(make([]byte, 4096))}
}

func (f *fakeFS) GetAttr(<-chan struct{}, *fuse.GetAttrIn, *fuse.AttrOut) fuse.Status { return fuse.OK }

func (f *fakeFS) Read(<-chan struct{}, *fuse.ReadIn, []byte) (fuse.ReadResult, fuse.Status) {
	return f.read, fuse.OK
}

func (f *fakeFS) Writev(_ <-chan struct{}, _ *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	n := 0
	for _, b := range data {
		n += len(b)
	}
	return uint32(n), fuse.OK
}

func TestFUSEOpsAreCountedAndTimed(t *testing.T) {
	m := New(storetest.NewWithObjects(t).S)
	raw := m.FUSE(newFakeFS())
	for range 3 {
		raw.GetAttr(nil, &fuse.GetAttrIn{}, &fuse.AttrOut{})
	}
	raw.Read(nil, &fuse.ReadIn{}, nil)
	raw.Writev(nil, &fuse.WriteIn{}, [][]byte{make([]byte, 100), make([]byte, 28)})
	raw.Lookup(nil, &fuse.InHeader{}, "x", &fuse.EntryOut{}) // ENOSYS is still a request answered

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"statefs_fuse_op_duration_seconds", []string{"op", "getattr"}, 3},
		{"statefs_fuse_op_duration_seconds", []string{"op", "read"}, 1},
		{"statefs_fuse_op_duration_seconds", []string{"op", "write"}, 1},
		{"statefs_fuse_op_duration_seconds", []string{"op", "lookup"}, 1},
		{"statefs_fuse_op_duration_seconds", []string{"op", "mkdir"}, 0},
		{"statefs_fuse_read_bytes_total", nil, 4096},
		{"statefs_fuse_written_bytes_total", nil, 128},
	} {
		if got := sample(t, m.Registry, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// A failed write writes nothing, and ENOSYS from Writev (go-fuse then calls
// Write) is not a second request.
func TestFUSEWriteFallbackCountsOnce(t *testing.T) {
	m := New(storetest.NewWithObjects(t).S)
	raw := m.FUSE(fuse.NewDefaultRawFileSystem())
	raw.Writev(nil, &fuse.WriteIn{}, [][]byte{make([]byte, 10)})
	raw.Write(nil, &fuse.WriteIn{}, make([]byte, 10))
	if got := sample(t, m.Registry, "statefs_fuse_op_duration_seconds", "op", "write"); got != 1 {
		t.Errorf("write requests = %v, want 1", got)
	}
	if got := sample(t, m.Registry, "statefs_fuse_written_bytes_total"); got != 0 {
		t.Errorf("written bytes = %v, want 0 (every write failed)", got)
	}
}

// The FUSE path runs on every kernel request: it must not allocate.
func TestFUSEPathAllocatesNothing(t *testing.T) {
	s, _, err := store.Open(t.TempDir()) // not storetest's: AllocsPerRun wants no parallel tests
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := New(s)
	raw := m.FUSE(newFakeFS())
	in, out := &fuse.GetAttrIn{}, &fuse.AttrOut{}
	rin, win, data := &fuse.ReadIn{}, &fuse.WriteIn{}, [][]byte{make([]byte, 512)}
	for name, call := range map[string]func(){
		"getattr": func() { raw.GetAttr(nil, in, out) },
		"read":    func() { raw.Read(nil, rin, nil) },
		"writev":  func() { raw.Writev(nil, win, data) },
	} {
		if n := testing.AllocsPerRun(1000, call); n != 0 {
			t.Errorf("%s allocates %v times per call, want 0", name, n)
		}
	}
}

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	raw := fuse.NewDefaultRawFileSystem()
	if m.FUSE(raw) != raw {
		t.Error("a nil *Metrics wraps the file system")
	}
	m.OnSeal(sealed(store.AsChunks, 1), time.Second)
	m.Collected(gc.Report{}, nil)
	m.Scrubbing(1, 2)
	m.Scrubbed(store.Scrubbed{}, nil)
}

// sealed is a seal of size bytes kept as as, as fs reports it.
func sealed(as store.Representation, size uint64) *store.PreparedSeal {
	return &store.PreparedSeal{As: as, Manifest: &manifest.Manifest{Size: size}}
}

func TestSealsAndCollectorRuns(t *testing.T) {
	m := New(storetest.NewWithObjects(t).S)
	m.OnSeal(sealed(store.AsObject, 5<<20), 20*time.Millisecond)
	m.OnSeal(sealed(store.AsChunks, 3<<20), 3*time.Second)
	m.OnSeal(sealed(store.AsObject, 1<<20), time.Second)
	m.Collected(gc.Report{Collected: make([]gc.Candidate, 2), Swept: store.Swept{Chunks: 3, Bytes: 3 << 20}}, nil)
	m.Collected(gc.Report{Swept: store.Swept{Bytes: 1 << 20}}, errors.New("oracle gone"))
	m.Collected(gc.Report{Verdicts: []gc.JobVerdict{{Job: "a"}, {Job: "b", Failure: "flink-rest: unreachable"}}}, nil)

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"statefs_seal_duration_seconds", nil, 3},
		{"statefs_seals_total", []string{"as", "object"}, 2},
		{"statefs_seals_total", []string{"as", "chunks"}, 1},
		{"statefs_seals_total", []string{"as", "inline"}, 0},
		{"statefs_sealed_bytes_total", []string{"as", "object"}, 6 << 20},
		{"statefs_sealed_bytes_total", []string{"as", "chunks"}, 3 << 20},
		{"statefs_sealed_bytes_total", []string{"as", "inline"}, 0},
		{"statefs_gc_runs_total", []string{"result", "ok"}, 1},
		{"statefs_gc_runs_total", []string{"result", "failed"}, 1},
		{"statefs_gc_runs_total", []string{"result", "unanswered"}, 1},
		{"statefs_gc_freed_bytes_total", nil, 4 << 20},
		{"statefs_gc_collected_total", nil, 2},
	} {
		if got := sample(t, m.Registry, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// The collector's interval is what the daemon set, and a run that ended
// without error (ok or unanswered) is complete; a failed one is not.
func TestCollectorInterval(t *testing.T) {
	m := New(storetest.NewWithObjects(t).S)
	for _, name := range []string{"statefs_gc_interval_seconds", "statefs_gc_last_complete_timestamp_seconds"} {
		if got := sample(t, m.Registry, name); got != 0 {
			t.Errorf("%s = %v before anything was set or run, want 0", name, got)
		}
	}
	m.SetGCInterval(10 * time.Minute)
	if got := sample(t, m.Registry, "statefs_gc_interval_seconds"); got != 600 {
		t.Errorf("statefs_gc_interval_seconds = %v, want 600", got)
	}
	m.Collected(gc.Report{}, errors.New("index: closed"))
	if got := sample(t, m.Registry, "statefs_gc_last_complete_timestamp_seconds"); got != 0 {
		t.Errorf("statefs_gc_last_complete_timestamp_seconds = %v after a failed run, want 0", got)
	}
	for _, run := range []gc.Report{
		{Verdicts: []gc.JobVerdict{{Job: "a", Failure: "flink-rest: unreachable"}}}, // unanswered
		{}, // ok
	} {
		before := time.Now()
		m.Collected(run, nil)
		after := time.Now()
		at := sample(t, m.Registry, "statefs_gc_last_complete_timestamp_seconds")
		if at < float64(before.UnixNano())/1e9 || at > float64(after.UnixNano())/1e9 {
			t.Errorf("statefs_gc_last_complete_timestamp_seconds = %v after a run that ended between %v and %v", at, before, after)
		}
	}
	m.SetGCInterval(0)
	if got := sample(t, m.Registry, "statefs_gc_interval_seconds"); got != 0 {
		t.Errorf("statefs_gc_interval_seconds = %v with the collector off, want 0", got)
	}
}

// A pass counts by how it ended; one stopped by its context is no run, and
// only a complete pass sets the time and the damage found. The share read
// follows the pass under way, and is 0 once it ended.
func TestScrubPasses(t *testing.T) {
	m := New(storetest.NewWithObjects(t).S)
	if got := sample(t, m.Registry, "statefs_scrub_last_complete_timestamp_seconds"); got != 0 {
		t.Errorf("statefs_scrub_last_complete_timestamp_seconds = %v before any pass, want 0", got)
	}
	m.Scrubbing(0, 0) // an empty store: nothing to read
	for done, want := range []float64{0, 0.25, 0.5, 0.75, 1} {
		m.Scrubbing(done, 4)
		if got := sample(t, m.Registry, "statefs_scrub_progress_ratio"); got != want {
			t.Errorf("statefs_scrub_progress_ratio = %v with %d of 4 read, want %v", got, done, want)
		}
	}
	damaged := []store.DamagedChunk{{Kind: store.ProblemCorruptObject}, {Kind: store.ProblemCorruptChunk}}
	before := time.Now()
	m.Scrubbed(store.Scrubbed{Chunks: 3, Objects: 2, Bytes: 7 << 20, Damaged: damaged, Quarantined: make([]cas.Hash, 1)}, nil)
	after := time.Now()
	at := sample(t, m.Registry, "statefs_scrub_last_complete_timestamp_seconds")
	if at < float64(before.Unix()) || at > float64(after.Unix()+1) {
		t.Errorf("statefs_scrub_last_complete_timestamp_seconds = %v, want between %d and %d", at, before.Unix(), after.Unix()+1)
	}
	m.Scrubbed(store.Scrubbed{Bytes: 1 << 20}, errors.New("index: closed"))
	m.Scrubbed(store.Scrubbed{Bytes: 2 << 20, Quarantined: make([]cas.Hash, 1)}, fmt.Errorf("scrub: %w", context.Canceled))

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"statefs_scrub_runs_total", []string{"result", "ok"}, 1},
		{"statefs_scrub_runs_total", []string{"result", "failed"}, 1},
		{"statefs_scrub_bytes_total", nil, 10 << 20},
		{"statefs_scrub_quarantined_total", nil, 2},
		{"statefs_scrub_damaged", nil, 2},
		{"statefs_scrub_last_complete_timestamp_seconds", nil, at},
		{"statefs_scrub_progress_ratio", nil, 0}, // no pass runs
	} {
		if got := sample(t, m.Registry, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// Files sealed as objects are counted as object files and bytes, and a
// quarantined object as such, beside the chunks.
func TestObjectMetricsAreReadWhenScraped(t *testing.T) {
	f := storetest.NewWithObjects(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(newStoreCollector(f.S, 0, 0))
	noise := make([]byte, 200<<10) // does not compress: an object
	rand.NewChaCha8([32]byte{1}).Read(noise)
	ino := f.Write("tm_a/tmp/000001.sst", noise, 0, true)
	f.Write("tm_a/tmp/000002.sst", noise, 0, true) // the same object
	f.Write("tm_a/tmp/state", []byte(strings.Repeat("state ", 20000)), 0, true)
	var object cas.Hash
	err := f.S.Index.View(func(tx *index.Tx) error {
		m, err := tx.Manifest(ino)
		if err == nil && m.Object == nil {
			err = fmt.Errorf("%d random bytes were not sealed as an object", len(noise))
		}
		if err == nil {
			object = *m.Object
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := sample(t, reg, "statefs_quarantined_objects"); got != 0 {
		t.Errorf("statefs_quarantined_objects = %v before any quarantine, want 0", got)
	}
	storetest.LeaveDamaged(t, "it quarantines an object")
	if _, err := f.S.Index.Quarantine(object, "test"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want float64
	}{
		{"statefs_objects", 1},
		{"statefs_object_bytes", float64(len(noise))},
		{"statefs_quarantined_objects", 1},
	} {
		if got := sample(t, reg, c.name); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	chunks := sample(t, reg, "statefs_chunk_bytes")
	if got := sample(t, reg, "statefs_physical_bytes"); chunks <= 0 || got != chunks+float64(len(noise)) {
		t.Errorf("statefs_physical_bytes = %v, want the chunks' %v and the object's %d", got, chunks, len(noise))
	}
}

func TestStoreMetricsAreReadWhenScraped(t *testing.T) {
	f := storetest.NewWithObjects(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(newStoreCollector(f.S, 0, 0))
	if got := sample(t, reg, "statefs_files"); got != 0 {
		t.Fatalf("statefs_files = %v on an empty store", got)
	}

	const job, id = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	subtask := "tm_a/localState/aid_" + id + "/jid_" + job + "/vtx_" + id + "_sti_0/"
	content := []byte(strings.Repeat("state ", 20000)) // compresses, more than inline
	f.Write(subtask+"chk_1/sst", content, 0, true)
	f.Write(subtask+"chk_2/sst", content, 0, true) // a duplicate
	f.Write("tm_a/tmp/wal", []byte("not sealed yet"), 0, false)
	err := f.S.Index.Update(func(tx *index.Tx) error {
		j, err := tx.Job(job)
		if err != nil {
			return err
		}
		j.Verdict = index.VerdictGone
		return tx.PutJob(j)
	})
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"statefs_files", nil, 3},
		{"statefs_seal_backlog_files", nil, 1},
		{"statefs_staging_files", nil, 1},
		{"statefs_staging_bytes", nil, float64(len("not sealed yet"))},
		{"statefs_logical_bytes", nil, float64(2*len(content) + len("not sealed yet"))},
		{"statefs_jobs", []string{"verdict", "gone"}, 1},
		{"statefs_jobs", []string{"verdict", "live"}, 0},
		{"statefs_jobs", []string{"verdict", "unknown"}, 0},
		{"statefs_disk_full", nil, 0},
	} {
		if got := sample(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := sample(t, reg, "statefs_chunks"); got < 1 {
		t.Errorf("statefs_chunks = %v, want at least 1", got)
	}
	physical := sample(t, reg, "statefs_physical_bytes")
	if physical <= 0 || physical >= float64(len(content)) {
		t.Errorf("statefs_physical_bytes = %v, want more than 0 and less than one copy (%d): deduplicated and compressed", physical, len(content))
	}
	if got := sample(t, reg, "statefs_saved_ratio"); got <= 2 {
		t.Errorf("statefs_saved_ratio = %v, want more than 2 for two copies of compressible content", got)
	}
}

// statefs_jobs_unknown counts the jobs unknown to every oracle by how
// long they have been so, in its fixed buckets, read at each scan.
func TestJobsUnknownByAge(t *testing.T) {
	f := storetest.NewWithObjects(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(newStoreCollector(f.S, 0, 0))
	const id = "fedcba9876543210fedcba9876543210"
	now := time.Now()
	ages := map[string]time.Duration{ // job -> unknown for; 0: known
		strings.Repeat("1", 32): 0,
		strings.Repeat("2", 32): time.Minute,
		strings.Repeat("3", 32): 2 * time.Hour,
		strings.Repeat("4", 32): 3 * 24 * time.Hour,
		strings.Repeat("5", 32): 4 * 24 * time.Hour,
		strings.Repeat("6", 32): 30 * 24 * time.Hour,
	}
	for job, age := range ages {
		f.Write("tm_a/localState/aid_"+id+"/jid_"+job+"/vtx_"+id+"_sti_0/chk_1/x", []byte("x"), 0, true)
		err := f.S.Index.Update(func(tx *index.Tx) error {
			j, err := tx.Job(job)
			if err != nil || age == 0 {
				return err
			}
			j.UnknownSince = now.Add(-age).UnixNano()
			return tx.PutJob(j)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for age, want := range map[string]float64{"under_1h": 1, "1h_to_1d": 1, "1d_to_7d": 2, "over_7d": 1} {
		if got := sample(t, reg, "statefs_jobs_unknown", "age", age); got != want {
			t.Errorf("statefs_jobs_unknown{age=%q} = %v, want %v", age, got, want)
		}
	}
}

// The disk's size and free space are statfs's, read at each scrape, and
// the reserve is what the two reserve files hold.
func TestDiskMetricsAreReadWhenScraped(t *testing.T) {
	f := storetest.NewWithObjects(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(newStoreCollector(f.S, time.Hour, 0)) // the disk is read afresh all the same
	sample(t, reg, "statefs_files")
	before, err := f.S.Statfs()
	if err != nil {
		t.Fatal(err)
	}
	size, free := sample(t, reg, "statefs_disk_size_bytes"), sample(t, reg, "statefs_disk_free_bytes")
	after, err := f.S.Statfs()
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(before.Blocks) * float64(before.Bsize); size != want {
		t.Errorf("statefs_disk_size_bytes = %v, want statfs's %v", size, want)
	}
	// Other tests write to the same disk meanwhile: the free space is
	// statfs's available blocks within what they can write in a moment.
	const slack = 64 << 20
	lo := float64(min(before.Bavail, after.Bavail))*float64(before.Bsize) - slack
	hi := float64(max(before.Bavail, after.Bavail))*float64(before.Bsize) + slack
	if free < lo || free > hi {
		t.Errorf("statefs_disk_free_bytes = %v, want statfs's available bytes, between %v and %v", free, lo, hi)
	}
	var files float64
	for _, name := range store.ReserveNames {
		fi, err := os.Lstat(filepath.Join(f.S.Dir, name))
		if err != nil {
			t.Fatalf("the store on a disk with room keeps its reserve: %v", err)
		}
		files += float64(fi.Size())
	}
	if got := sample(t, reg, "statefs_disk_reserve_bytes"); got <= 0 || got != files {
		t.Errorf("statefs_disk_reserve_bytes = %v, want the reserve files' %v", got, files)
	}
}

// The reserve metric follows the files as the keeper releases them: half
// the reserve once the first is gone, nothing once both are. The store is
// opened read-only, which keeps no reserve, so nothing makes them again.
func TestDiskReserveFollowsTheFiles(t *testing.T) {
	dir := t.TempDir()
	s, _, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = store.OpenReadOnly(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(newStoreCollector(s, 0, 0))
	second, err := os.Lstat(filepath.Join(dir, store.ReserveNames[1]))
	if err != nil {
		t.Fatal(err)
	}
	whole := sample(t, reg, "statefs_disk_reserve_bytes")
	for _, c := range []struct {
		remove string
		want   float64
	}{
		{"", whole},
		{store.ReserveNames[0], float64(second.Size())},
		{store.ReserveNames[1], 0},
	} {
		if c.remove != "" {
			if err := os.Remove(filepath.Join(dir, c.remove)); err != nil {
				t.Fatal(err)
			}
		}
		if got := sample(t, reg, "statefs_disk_reserve_bytes"); got != c.want {
			t.Errorf("statefs_disk_reserve_bytes = %v with %q removed, want %v", got, c.remove, c.want)
		}
	}
	if whole != 2*float64(second.Size()) {
		t.Errorf("statefs_disk_reserve_bytes = %v with both files, want twice the second's %d", whole, second.Size())
	}
}

// One scan answers the scrapes within the interval.
func TestStoreScanIsShared(t *testing.T) {
	f := storetest.NewWithObjects(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(newStoreCollector(f.S, time.Hour, 0))
	sample(t, reg, "statefs_files")
	f.Write("a", []byte("a"), 0, false)
	if got := sample(t, reg, "statefs_files"); got != 0 {
		t.Errorf("statefs_files = %v within the interval, want the first scan's 0", got)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	m := New(storetest.NewWithObjects(t).S)
	problems, err := testutil.GatherAndLint(m.Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "statefs_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d\n%s", rec.Code, rec.Body)
	}
	for _, name := range []string{"statefs_fuse_op_duration_seconds_bucket", "statefs_seal_duration_seconds_count",
		"statefs_logical_bytes", "statefs_jobs{verdict=\"gone\"}", "statefs_gc_runs_total{result=\"ok\"}", "go_goroutines",
		"statefs_seals_total{as=\"object\"}", "statefs_sealed_bytes_total{as=\"inline\"}", "statefs_scrub_runs_total{result=\"failed\"}",
		"statefs_scrub_bytes_total", "statefs_scrub_last_complete_timestamp_seconds", "statefs_scrub_quarantined_total",
		"statefs_objects", "statefs_object_bytes", "statefs_quarantined_objects",
		"statefs_disk_size_bytes", "statefs_disk_free_bytes", "statefs_disk_reserve_bytes",
		"statefs_gc_interval_seconds", "statefs_gc_last_complete_timestamp_seconds", "process_start_time_seconds"} {
		if !strings.Contains(rec.Body.String(), name) {
			t.Errorf("GET /metrics has no %s", name)
		}
	}
}

// Both probes fail, with one line saying why, where no mount serves.
func TestHealthOfADirectoryThatIsNoMount(t *testing.T) {
	for _, c := range []struct {
		name, mountpoint, want string
	}{
		{"plain directory", t.TempDir(), "is not a FUSE mount"},
		{"missing", "/nonexistent/statefs-mnt", "does not serve"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &Health{Mountpoint: c.mountpoint, Store: t.TempDir()}
			for path, probe := range map[string]http.Handler{"/healthz": h.Liveness(), "/readyz": h.Readiness()} {
				rec := httptest.NewRecorder()
				probe.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				body := strings.TrimSuffix(rec.Body.String(), "\n")
				if rec.Code != http.StatusServiceUnavailable || !strings.Contains(body, c.want) || strings.Contains(body, "\n") {
					t.Errorf("GET %s = %d %q, want 503 and one line saying %q", path, rec.Code, body, c.want)
				}
			}
		})
	}
}

// statefs_store_writable follows whether the store directory takes a new
// file, probed at each scrape, and the log says when that changes, once.
func TestStoreWritableIsProbedWhenScraped(t *testing.T) {
	var log strings.Builder
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&log, nil)))

	store := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(store, 0o755); err != nil {
		t.Fatal(err)
	}
	m := New(storetest.NewWithObjects(t).S)
	h := &Health{Mountpoint: "/nonexistent/statefs-mnt", Store: store}
	srv := NewServer(m, h)
	scrape := func() string {
		rec := httptest.NewRecorder()
		srv.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	if body := scrape(); !strings.Contains(body, "\nstatefs_store_writable 1\n") {
		t.Errorf("GET /metrics of a store that takes files has no statefs_store_writable 1:\n%s", body)
	}
	// The store's directory goes: it takes no new file, even from root.
	if err := os.Remove(store); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if body := scrape(); !strings.Contains(body, "\nstatefs_store_writable 0\n") {
			t.Errorf("GET /metrics of a store that takes no files has no statefs_store_writable 0")
		}
	}
	if err := h.Writable(); err == nil || !strings.Contains(err.Error(), "not writable") {
		t.Errorf("Writable() = %v, want the store is not writable", err)
	}
	if err := os.Mkdir(store, 0o755); err != nil {
		t.Fatal(err)
	}
	if body := scrape(); !strings.Contains(body, "\nstatefs_store_writable 1\n") {
		t.Errorf("GET /metrics of a store that takes files again has no statefs_store_writable 1")
	}
	if n := strings.Count(log.String(), "the store takes no new files"); n != 1 {
		t.Errorf("the log says %d times that the store takes no new files, want once:\n%s", n, log.String())
	}
	if n := strings.Count(log.String(), "the store takes new files again"); n != 1 {
		t.Errorf("the log says %d times that the store takes new files again, want once:\n%s", n, log.String())
	}
	if _, err := os.Lstat(filepath.Join(store, ProbeName)); err == nil {
		t.Error("the probe left its file in the store")
	}
}

// A scan that took long answers for scanCostFactor times as long, beyond
// the interval: a big store is not walked on every scrape.
func TestSlowScanAnswersLonger(t *testing.T) {
	f := storetest.NewWithObjects(t)
	c := newStoreCollector(f.S, time.Millisecond, scanCostFactor)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	sample(t, reg, "statefs_files")
	c.mu.Lock()
	c.took = time.Hour // as if the walk had taken an hour
	c.mu.Unlock()
	f.Write("a", []byte("a"), 0, false)
	time.Sleep(5 * time.Millisecond) // past the interval
	if got := sample(t, reg, "statefs_files"); got != 0 {
		t.Errorf("statefs_files = %v, want the slow scan's 0 for 20 hours", got)
	}
	c.mu.Lock()
	c.took = 0
	c.mu.Unlock()
	if got := sample(t, reg, "statefs_files"); got != 1 {
		t.Errorf("statefs_files = %v after a fast scan's interval, want 1", got)
	}
	if age := sample(t, reg, "statefs_store_scan_age_seconds"); age < 0 || age > 60 {
		t.Errorf("statefs_store_scan_age_seconds = %v", age)
	}
}

// statefs_build_info says which build serves, as `statefs --version` does.
func TestBuildInfo(t *testing.T) {
	m := New(storetest.NewWithObjects(t).S)
	m.SetBuildInfo("v1.4.0-3-gabc123")
	if got := sample(t, m.Registry, "statefs_build_info", "version", "v1.4.0-3-gabc123", "goversion", runtime.Version()); got != 1 {
		t.Errorf("statefs_build_info = %v, want 1", got)
	}
	(*Metrics)(nil).SetBuildInfo("v1") // a daemon without --metrics-addr
}
