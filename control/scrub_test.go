package control_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/internal/testbytes"
	"github.com/statefs/statefs/store"
)

// pass is one scrub pass a Server told of.
type pass struct {
	report   store.Scrubbed
	err      error
	progress [2]int // the last progress it told of: done, total
}

// scrubbingServer is a server of f's store that sends every scrub pass it
// tells of to the channel, with the last progress it told of.
func scrubbingServer(f *fixture) (*control.Server, <-chan pass) {
	passes := make(chan pass, 16)
	var mu sync.Mutex // Scrubbed of a periodic pass runs beside a pass on the socket
	var last [2]int
	srv := &control.Server{
		Store: f.S,
		Scrubbing: func(done, total int) {
			mu.Lock()
			defer mu.Unlock()
			last = [2]int{done, total}
		},
		Scrubbed: func(r store.Scrubbed, err error) {
			mu.Lock()
			p := pass{r, err, last}
			last = [2]int{}
			mu.Unlock()
			passes <- p
		},
	}
	return srv, passes
}

// checkProgress checks that p told of its progress up to its end: every
// chunk and object read.
func checkProgress(t *testing.T, p pass) {
	t.Helper()
	if done, total := p.progress[0], p.progress[1]; total != p.report.Chunks+p.report.Objects || done != total {
		t.Errorf("the pass told of %d of %d chunks and objects read last; it read %d chunks and %d objects", done, total, p.report.Chunks, p.report.Objects)
	}
}

func nextPass(t *testing.T, passes <-chan pass) pass {
	t.Helper()
	select {
	case p := <-passes:
		return p
	case <-time.After(30 * time.Second):
		t.Fatal("no scrub pass ended within 30s")
		return pass{}
	}
}

// rot flips the last byte of the object file is, as bit rot would.
func (f *fixture) rot(file string) cas.Hash {
	f.T.Helper()
	storetest.LeaveDamaged(f.T, "it rots the object of "+file)
	h := f.object(f.inspect(file))
	path := filepath.Join(f.S.Dir, "objects", h.String()[:2], h.String())
	o, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		f.T.Fatal(err)
	}
	defer o.Close()
	st, err := o.Stat()
	if err != nil {
		f.T.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := o.ReadAt(b, st.Size()-1); err != nil {
		f.T.Fatal(err)
	}
	b[0] ^= 1
	if _, err := o.WriteAt(b, st.Size()-1); err != nil {
		f.T.Fatal(err)
	}
	return h
}

func (f *fixture) quarantined(h cas.Hash) *index.Quarantine {
	f.T.Helper()
	var q *index.Quarantine
	if err := f.S.Index.View(func(tx *index.Tx) (err error) { q, err = tx.Quarantined(h); return err }); err != nil {
		f.T.Fatal(err)
	}
	return q
}

// The periodic scrub reads every chunk and object, quarantines a damaged
// object a file is (once: the next pass finds it quarantined), tells of
// each pass, and ends when the server closes.
func TestScrubEveryQuarantines(t *testing.T) {
	f := newFixture(t)
	rotten, sound := chk(jobA)+"/000001.sst", chk(jobA)+"/000002.sst"
	f.Write(rotten, testbytes.Random(100<<10, 1), 0, true)
	f.Write(sound, testbytes.Random(100<<10, 2), 0, true)
	f.Write(chk(jobA)+"/state", text(300<<10, 3), 0, true)
	h := f.rot(rotten)

	srv, passes := scrubbingServer(f)
	ended := make(chan struct{})
	go func() {
		srv.ScrubEvery(context.Background(), 10*time.Millisecond, 0)
		close(ended)
	}()
	first := nextPass(t, passes)
	if first.err != nil || first.report.Objects != 2 || first.report.Chunks < 1 || first.report.Bytes < 500<<10 {
		t.Fatalf("first pass: %+v, %v; want 2 objects, the chunks, all their bytes", first.report, first.err)
	}
	checkProgress(t, first)
	if !slices.Equal(first.report.Quarantined, []cas.Hash{h}) || len(first.report.Damaged) != 1 || first.report.Damaged[0].Hash != h {
		t.Errorf("first pass: quarantined %v, damaged %+v; want the rotten object %s", first.report.Quarantined, first.report.Damaged, h)
	}
	if q := f.quarantined(h); q == nil || q.Why == "" {
		t.Errorf("the rotten object's quarantine mark: %+v, want one saying why", q)
	}
	second := nextPass(t, passes)
	if second.err != nil || len(second.report.Quarantined) != 0 || len(second.report.Damaged) != 1 || second.report.Damaged[0].Kind != store.ProblemQuarantined {
		t.Errorf("second pass: %+v, %v; want the object found quarantined already, nothing quarantined anew", second.report, second.err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("ScrubEvery went on after Close")
	}
}

// A scrub asked for on the socket quarantines too, and is told of.
func TestScrubOnSocketQuarantines(t *testing.T) {
	f := newFixture(t)
	file := chk(jobA) + "/000001.sst"
	f.Write(file, testbytes.Random(100<<10, 1), 0, true)
	h := f.rot(file)
	srv, passes := scrubbingServer(f)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client, err := control.Dial(f.S.Dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := client.Scrub(context.Background(), store.ScrubOptions{})
	if err != nil || !slices.Equal(r.Quarantined, []cas.Hash{h}) || f.quarantined(h) == nil {
		t.Fatalf("client.Scrub: %+v, %v; want object %s quarantined", r, err, h)
	}
	if p := nextPass(t, passes); p.err != nil || !slices.Equal(p.report.Quarantined, r.Quarantined) {
		t.Errorf("told of %+v, %v; want the report the client got", p.report, p.err)
	} else {
		checkProgress(t, p)
	}
}

// Close stops the scrubs under way, periodic or asked for on the socket, at
// once, however slow their rate: a shutdown never waits for a pass.
func TestCloseStopsScrubs(t *testing.T) {
	f := newFixture(t)
	f.Write(chk(jobA)+"/000001.sst", testbytes.Random(2<<20, 1), 0, true)
	f.Write(chk(jobA)+"/state", text(2<<20, 2), 0, true)
	srv, passes := scrubbingServer(f)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	client, err := control.Dial(f.S.Dir)
	if err != nil {
		t.Fatal(err)
	}
	started, asked := make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := client.Scrub(context.Background(), store.ScrubOptions{Rate: 1, Progress: func(done, total int) {
			if done == 0 {
				close(started)
			}
		}})
		asked <- err
	}()
	<-started
	ended := make(chan struct{})
	go func() {
		srv.ScrubEvery(context.Background(), time.Millisecond, 1)
		close(ended)
	}()

	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %v with scrubs under way, want it at once", took)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("ScrubEvery went on after Close")
	}
	if err := <-asked; err == nil {
		t.Error("the scrub asked for on the socket ended without an error when Close stopped it")
	}
	if p := nextPass(t, passes); !errors.Is(p.err, context.Canceled) {
		t.Errorf("a stopped scrub was told of with %v, want context.Canceled", p.err)
	}
}
