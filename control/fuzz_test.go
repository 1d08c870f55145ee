package control

// White-box tests: they drive Server.handler, the routes and limits the
// control socket serves, without a socket.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/owner"
	"github.com/statefs/statefs/store"
)

const fuzzJob = "a1b2c3d4e5f60718293a4b5c6d7e8f90"

// fakeFS records the restores the server asks for; block, if set, holds
// each one until it is closed.
type fakeFS struct {
	mu       sync.Mutex
	restores []string // dest of each call
	inside   atomic.Int32
	block    chan struct{}
}

func (f *fakeFS) Remove(uint64, string) (bool, error) { return false, nil }

func (f *fakeFS) Restore(hold, dest string) error {
	f.inside.Add(1)
	defer f.inside.Add(-1)
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restores = append(f.restores, dest)
	return nil
}

// newTestServer serves a new store holding state of fuzzJob.
func newTestServer(tb testing.TB, fs *fakeFS) *Server {
	s, _, err := store.Open(filepath.Join(tb.TempDir(), "store"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	err = s.Index.Update(func(tx *index.Tx) error {
		return tx.NoteWrite(owner.Owner{Level: owner.LevelJob, Executor: "tm-1", Job: fuzzJob}, index.Now())
	})
	if err != nil {
		tb.Fatal(err)
	}
	return &Server{Store: s, FS: fs, Mountpoint: "/mnt/statefs"}
}

func serve(h http.Handler, method, path string, body []byte) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, bytes.NewReader(body)))
	return w
}

// FuzzRequestBody posts arbitrary bodies to the endpoints that take one
// (the collector's aside: it would call out to the URLs a body names; the
// store of /scrub is empty, so any rate ends at once).
// Nothing panics or answers 5xx; POST /job changes the job's record only
// when it answers 200, and then exactly as a well-formed request for a
// Flink job id and gone or live says, and POST /executor the executor's
// likewise; POST /restore hands the filesystem
// only paths inside the mount, downwards. The seed corpus is in
// testdata/fuzz/FuzzRequestBody.
func FuzzRequestBody(f *testing.F) {
	for _, b := range []string{
		`{"job":"` + fuzzJob + `","verdict":"gone"}`,
		`{"job":"` + fuzzJob + `","verdict":"live"}`,
		`{"job":"` + fuzzJob + `","verdict":"unknown"}`,
		`{"job":"` + fuzzJob + `","verdict":"gone"}{"job":"` + fuzzJob + `","verdict":"live"}`,
		`{"job":"` + fuzzJob + `","verdict":"gone","x":1}`,
		`{"executor":"tm-1","verdict":"gone"}`,
		`{"executor":"tm-1","verdict":"live"}`,
		`{"executor":"tm-1","withdraw":true}`,
		`{"executor":"tm-1","verdict":"gone","withdraw":true}`,
		`{"executor":"../tm-1","verdict":"gone"}`,
		`{"executor":"tm-2","verdict":"gone"}`,
		`{"hold":"0000000000000001","dest":"tm_1/localState/aid_x"}`,
		`{"hold":"1","dest":"../../etc"}`,
		`{"hold":"1","dest":"/mnt/statefs/../../etc"}`,
		`{"hold":"1","dest":"/mnt/statefsX/a"}`,
		`{"hold":"1","dest":"/mnt/statefs/a/b"}`,
		`{"hold":"1","dest":"a/../../b"}`,
		`{"rate":0}`,
		`{"rate":-1}`,
		`{"rate":1e3}`,
		`{"rate":9223372036854775807}`,
		`null`,
		`[]`,
	} {
		f.Add(uint8(0), []byte(b))
		f.Add(uint8(1), []byte(b))
		f.Add(uint8(2), []byte(b))
		f.Add(uint8(3), []byte(b))
	}
	fs := &fakeFS{}
	s := newTestServer(f, fs)
	h := s.handler()
	f.Fuzz(func(t *testing.T, endpoint uint8, body []byte) {
		path := []string{"/job", "/restore", "/scrub", "/executor"}[endpoint%4]
		before, err := s.Store.Jobs()
		if err != nil {
			t.Fatal(err)
		}
		executorsBefore, err := s.Store.Executors()
		if err != nil {
			t.Fatal(err)
		}
		fs.mu.Lock()
		fs.restores = nil
		fs.mu.Unlock()
		w := serve(h, http.MethodPost, path, body)
		if w.Code >= 500 {
			t.Fatalf("POST %s %q: %d %s", path, body, w.Code, w.Body)
		}
		after, err := s.Store.Jobs()
		if err != nil {
			t.Fatal(err)
		}
		switch path {
		case "/job":
			if w.Code != http.StatusOK {
				if !equalJSON(before, after) {
					t.Fatalf("POST /job %q answered %d but changed the job record", body, w.Code)
				}
				return
			}
			var req struct {
				Job     string `json:"job"`
				Verdict string `json:"verdict"`
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			if err := dec.Decode(&req); err != nil || dec.More() {
				t.Fatalf("POST /job %q answered 200 for a body that is not one JSON object", body)
			}
			if req.Job != fuzzJob || (req.Verdict != "gone" && req.Verdict != "live") {
				t.Fatalf("POST /job %q answered 200", body)
			}
			if len(after) != 1 || after[0].Operator.String() != req.Verdict {
				t.Fatalf("POST /job %q answered 200; the record says %+v", body, after[0])
			}
			// Put the record back for the next input.
			if err := s.Store.Index.Update(func(tx *index.Tx) error { return tx.PutJob(before[0]) }); err != nil {
				t.Fatal(err)
			}
		case "/executor":
			after, err := s.Store.Executors()
			if err != nil {
				t.Fatal(err)
			}
			if w.Code != http.StatusOK {
				if !equalJSON(executorsBefore, after) {
					t.Fatalf("POST /executor %q answered %d but changed the executor record", body, w.Code)
				}
				return
			}
			var req struct {
				Executor string `json:"executor"`
				Verdict  string `json:"verdict"`
				Withdraw bool   `json:"withdraw"`
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			if err := dec.Decode(&req); err != nil || dec.More() {
				t.Fatalf("POST /executor %q answered 200 for a body that is not one JSON object", body)
			}
			said := req.Verdict
			if req.Withdraw {
				said = "unknown"
			}
			if req.Executor != "tm-1" || (!req.Withdraw && said != "gone" && said != "live") {
				t.Fatalf("POST /executor %q answered 200", body)
			}
			if len(after) != 1 || after[0].Operator.String() != said {
				t.Fatalf("POST /executor %q answered 200; the record says %+v", body, after[0])
			}
			if err := s.Store.Index.Update(func(tx *index.Tx) error { return tx.PutExecutor(executorsBefore[0]) }); err != nil {
				t.Fatal(err)
			}
		case "/restore":
			fs.mu.Lock()
			defer fs.mu.Unlock()
			if len(fs.restores) > 0 && w.Code != http.StatusOK {
				t.Fatalf("POST /restore %q answered %d after restoring", body, w.Code)
			}
			for _, dest := range fs.restores {
				if !filepath.IsLocal(dest) {
					t.Fatalf("POST /restore %q made the filesystem restore to %q", body, dest)
				}
			}
		}
	})
}

// A scrub's rate must not be negative; a good request streams the report.
func TestScrubRequest(t *testing.T) {
	h := newTestServer(t, &fakeFS{}).handler()
	w := serve(h, http.MethodPost, "/scrub", []byte(`{"rate":-5}`))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "negative") || strings.Count(strings.TrimSpace(w.Body.String()), "\n") != 0 {
		t.Errorf("POST /scrub with a negative rate: %d %q, want 400 and one line saying negative", w.Code, w.Body)
	}
	w = serve(h, http.MethodPost, "/scrub", []byte(`{"rate":1048576}`))
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"report"`) {
		t.Errorf("POST /scrub of an empty store: %d %q, want 200 and a report", w.Code, w.Body)
	}
}

// equalJSON reports whether a and b print the same.
func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// The control API's limits: a body over maxRequest gets 413, more than one
// JSON value 400, and requests beyond maxInFlight get 503 at once instead
// of piling up; once the slots free up, requests are served again.
func TestRequestLimits(t *testing.T) {
	fs := &fakeFS{block: make(chan struct{})}
	s := newTestServer(t, fs)
	h := s.handler()

	big := []byte(`{"job":"` + fuzzJob + `","verdict":"gone","pad":"` + strings.Repeat("x", maxRequest) + `"}`)
	if w := serve(h, http.MethodPost, "/job", big); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a %d-byte body: %d %s, want 413", len(big), w.Code, w.Body)
	}
	two := []byte(`{"job":"` + fuzzJob + `","verdict":"gone"} {"job":"` + fuzzJob + `","verdict":"live"}`)
	if w := serve(h, http.MethodPost, "/job", two); w.Code != http.StatusBadRequest {
		t.Errorf("two JSON values: %d %s, want 400", w.Code, w.Body)
	}
	if jobs, err := s.Store.Jobs(); err != nil || jobs[0].Operator != index.VerdictUnknown {
		t.Fatalf("refused requests changed the job: %+v %v", jobs, err)
	}

	restore := []byte(`{"hold":"1","dest":"a"}`)
	var wg sync.WaitGroup
	codes := make(chan int, maxInFlight)
	for range maxInFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- serve(h, http.MethodPost, "/restore", restore).Code
		}()
	}
	for deadline := time.Now().Add(30 * time.Second); fs.inside.Load() < maxInFlight; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d requests reached the filesystem", fs.inside.Load(), maxInFlight)
		}
	}
	for _, path := range []string{"/jobs", "/holds", "/du?by=job"} {
		if w := serve(h, http.MethodGet, path, nil); w.Code != http.StatusServiceUnavailable {
			t.Errorf("GET %s with %d requests under way: %d, want 503", path, maxInFlight, w.Code)
		}
	}
	close(fs.block)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("a restore that waited its turn answered %d", c)
		}
	}
	if w := serve(h, http.MethodGet, "/jobs", nil); w.Code != http.StatusOK {
		t.Errorf("GET /jobs once the slots are free: %d %s", w.Code, w.Body)
	}
}
