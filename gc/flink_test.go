package gc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/flinkid"
)

// details is a /jobs/<id> answer shaped like Flink's JobDetailsInfo.
func details(jid, state string) string {
	return fmt.Sprintf(`{"jid":%q,"name":"wordcount","isStoppable":false,"state":%q,"start-time":1700000000000,"end-time":-1,"duration":5,"now":1700000000005,"timestamps":{"RUNNING":1700000000000},"vertices":[{"id":"v1","name":"Source","parallelism":2,"status":"RUNNING"}],"status-counts":{"RUNNING":1},"plan":{"jid":%q,"name":"wordcount","nodes":[]}}`, jid, state, jid)
}

// flinkServer answers GET /jobs/<testJob> with status and body, and counts
// every request it gets. Any other request is a test failure.
func flinkServer(t *testing.T, status int, body string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Method != http.MethodGet || r.URL.Path != "/jobs/"+testJob {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.Error(w, "unexpected", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// refusedURL is an http URL nothing listens on.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// hangingServer calls start, then holds the request until the client gives up
// or the test ends.
func hangingServer(t *testing.T, start func(http.ResponseWriter)) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start(w)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: Close waits for handlers
	return srv
}

// judgeWithin asks o about testJob and fails the test at once if the answer
// takes longer than limit.
func judgeWithin(t *testing.T, ctx context.Context, limit time.Duration, o gc.Oracle) gc.JobVerdict {
	t.Helper()
	done := make(chan gc.JobVerdict, 1)
	go func() { done <- o.Judge(ctx, testJob) }()
	select {
	case v := <-done:
		return v
	case <-time.After(limit):
		t.Fatalf("%s gave no verdict within %v", o.Name(), limit)
		return gc.JobVerdict{}
	}
}

func TestFlinkRESTAnswers(t *testing.T) {
	U, L, G := index.VerdictUnknown, index.VerdictLive, index.VerdictGone
	other := "0000000000000000000000000000000f"
	for _, tc := range []struct {
		name     string
		status   int
		body     string
		notFound bool // NotFoundIsGone
		want     index.Verdict
		evidence string // must appear in the evidence
	}{
		// Every JobStatus value Flink has.
		{"INITIALIZING", 200, details(testJob, "INITIALIZING"), false, L, "state INITIALIZING"},
		{"CREATED", 200, details(testJob, "CREATED"), false, L, "state CREATED"},
		{"RUNNING", 200, details(testJob, "RUNNING"), false, L, "state RUNNING"},
		{"FAILING", 200, details(testJob, "FAILING"), false, L, "state FAILING"},
		{"FAILED", 200, details(testJob, "FAILED"), false, G, "state FAILED"},
		{"CANCELLING", 200, details(testJob, "CANCELLING"), false, L, "state CANCELLING"},
		{"CANCELED", 200, details(testJob, "CANCELED"), false, G, "state CANCELED"},
		{"FINISHED", 200, details(testJob, "FINISHED"), false, G, "state FINISHED"},
		{"RESTARTING", 200, details(testJob, "RESTARTING"), false, L, "state RESTARTING"},
		{"SUSPENDED is not gone", 200, details(testJob, "SUSPENDED"), true, U, "state SUSPENDED"},
		{"RECONCILING", 200, details(testJob, "RECONCILING"), false, L, "state RECONCILING"},
		{"minimal FINISHED", 200, `{"state":"FINISHED"}`, false, G, "state FINISHED"},

		// States nobody knows are never guessed gone (nor live).
		{"unknown state", 200, details(testJob, "DELETED"), true, U, `unknown state "DELETED"`},
		{"lowercase finished", 200, details(testJob, "finished"), true, U, "unknown state"},
		{"CANCELLED spelled the British way", 200, details(testJob, "CANCELLED"), true, U, "unknown state"},
		{"padded state", 200, details(testJob, " FINISHED"), true, U, "unknown state"},
		{"empty state", 200, details(testJob, ""), true, U, "unknown state"},
		{"long state is cut in evidence", 200, details(testJob, strings.Repeat("X", 10000)), true, U, `"...`},

		// Malformed answers.
		{"missing state", 200, `{"jid":"` + testJob + `","name":"x"}`, true, U, `no "state" field`},
		{"state only nested", 200, `{"jid":"` + testJob + `","plan":{"state":"FINISHED"}}`, true, U, `no "state" field`},
		{"nested state ignored", 200, `{"vertices":[{"state":"FINISHED"}],"state":"RUNNING"}`, false, L, "state RUNNING"},
		{"key case matters", 200, `{"State":"FINISHED"}`, true, U, `no "state" field`},
		{"other-case key ignored", 200, `{"STATE":"RUNNING","state":"FINISHED"}`, false, G, "state FINISHED"},
		{"state twice", 200, `{"state":"RUNNING","state":"FINISHED"}`, true, U, "given twice"},
		{"state twice, same", 200, `{"state":"FINISHED","state":"FINISHED"}`, true, U, "given twice"},
		{"state null", 200, `{"state":null}`, true, U, "not a string"},
		{"state number", 200, `{"state":3}`, true, U, "not a string"},
		{"state array", 200, `{"state":["FINISHED"]}`, true, U, "not a string"},
		{"state object", 200, `{"state":{"FINISHED":true}}`, true, U, "not a string"},
		{"truncated", 200, `{"state":"FINISHED"`, true, U, "malformed"},
		{"not JSON", 200, `<html>FINISHED</html>`, true, U, "malformed"},
		{"empty body", 200, ``, true, U, "malformed"},
		{"JSON null", 200, `null`, true, U, "not a JSON object"},
		{"JSON array", 200, `[{"state":"FINISHED"}]`, true, U, "not a JSON object"},
		{"JSON string", 200, `"FINISHED"`, true, U, "not a JSON object"},
		{"two objects", 200, `{"state":"FINISHED"} {"state":"FINISHED"}`, true, U, "after the JSON object"},
		{"trailing garbage", 200, `{"state":"FINISHED"}x`, true, U, "malformed"},
		{"another job's answer", 200, details(other, "FINISHED"), true, U, "answer is about job"},
		{"jid not a string", 200, `{"jid":1,"state":"FINISHED"}`, true, U, "not a string"},

		// Status codes.
		{"404", 404, `{"errors":["Job not found."]}`, false, U, "404"},
		{"404 with NotFoundIsGone", 404, `{"errors":["Job not found."]}`, true, G, "404"},
		{"500", 500, details(testJob, "FINISHED"), true, U, "HTTP 500"},
		{"503", 503, `{"errors":["leader election"]}`, true, U, "HTTP 503"},
		{"400", 400, details(testJob, "FINISHED"), true, U, "HTTP 400"},
		{"401", 401, details(testJob, "FINISHED"), true, U, "HTTP 401"},
		{"201 is not 200", 201, details(testJob, "FINISHED"), true, U, "HTTP 201"},
		{"204", 204, ``, true, U, "HTTP 204"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, hits := flinkServer(t, tc.status, tc.body)
			f := &gc.FlinkREST{URLs: []string{srv.URL}, NotFoundIsGone: tc.notFound}
			got := f.Judge(context.Background(), testJob)
			if got.Verdict != tc.want {
				t.Errorf("verdict %v, want %v (evidence %q)", got.Verdict, tc.want, got.Evidence)
			}
			// An unknown verdict is a failure unless Flink answered
			// something that decides nothing: a 404, SUSPENDED, a state
			// unknown here.
			answered := tc.status == 404 || strings.Contains(got.Evidence, ": state ") || strings.Contains(got.Evidence, ": unknown state ")
			if wantFailure := tc.want == index.VerdictUnknown && !answered; (got.Failure != "") != wantFailure {
				t.Errorf("failure %q; want one: %v", got.Failure, wantFailure)
			}
			if !strings.HasPrefix(got.Evidence, "flink "+srv.URL+": ") || !strings.Contains(got.Evidence, tc.evidence) {
				t.Errorf("evidence %q, want it to name %s and say %q", got.Evidence, srv.URL, tc.evidence)
			}
			if len(got.Evidence) > 512 {
				t.Errorf("evidence is %d bytes long", len(got.Evidence))
			}
			if got.Job != testJob || got.Oracle != "flink-rest" || got.At.IsZero() {
				t.Errorf("job %q oracle %q at %v", got.Job, got.Oracle, got.At)
			}
			if n := hits.Load(); n != 1 {
				t.Errorf("server asked %d times, want 1", n)
			}
		})
	}
}

func TestFlinkRESTURLForms(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		io.WriteString(w, details(testJob, "FINISHED"))
	}))
	defer srv.Close()
	for _, tc := range []struct{ base, path string }{
		{srv.URL, "/jobs/" + testJob},
		{srv.URL + "/", "/jobs/" + testJob},
		{srv.URL + "/proxy/flink", "/proxy/flink/jobs/" + testJob},
		{srv.URL + "/proxy/flink/", "/proxy/flink/jobs/" + testJob},
	} {
		paths = nil
		got := (&gc.FlinkREST{URLs: []string{tc.base}}).Judge(context.Background(), testJob)
		if got.Verdict != index.VerdictGone || len(paths) != 1 || paths[0] != tc.path {
			t.Errorf("base %q: verdict %v, requested %q; want gone from %q (%s)", tc.base, got.Verdict, paths, tc.path, got.Evidence)
		}
	}
	for _, base := range []string{"", "jm:8081", "ftp://jm:8081", "http://", "://x", "http://jm:8081/%zz"} {
		got := (&gc.FlinkREST{URLs: []string{base}, NotFoundIsGone: true}).Judge(context.Background(), testJob)
		if got.Verdict != index.VerdictUnknown || !strings.Contains(got.Evidence, "invalid URL") {
			t.Errorf("base %q: %v %q, want unknown, invalid URL", base, got.Verdict, got.Evidence)
		}
	}
	got := (&gc.FlinkREST{NotFoundIsGone: true}).Judge(context.Background(), testJob)
	if got.Verdict != index.VerdictUnknown || got.Evidence == "" {
		t.Errorf("no URLs: %v %q, want unknown with evidence", got.Verdict, got.Evidence)
	}
}

func TestFlinkRESTRedirectNotFollowed(t *testing.T) {
	target, targetHits := flinkServer(t, 200, details(testJob, "FINISHED"))
	for _, status := range []int{301, 302, 303, 307, 308} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+r.URL.Path, status)
		}))
		defer redirector.Close()
		callerClient := &http.Client{} // follows redirects by itself
		for _, client := range []*http.Client{nil, callerClient} {
			f := &gc.FlinkREST{URLs: []string{redirector.URL}, Client: client, NotFoundIsGone: true}
			got := f.Judge(context.Background(), testJob)
			if got.Verdict != index.VerdictUnknown || !strings.Contains(got.Evidence, "not followed") {
				t.Errorf("%d (client %v): %v %q, want unknown, not followed", status, client != nil, got.Verdict, got.Evidence)
			}
		}
		if callerClient.CheckRedirect != nil {
			t.Errorf("the caller's client was changed")
		}
	}
	if n := targetHits.Load(); n != 0 {
		t.Errorf("redirect target asked %d times, want 0", n)
	}
}

func TestFlinkRESTUnreachable(t *testing.T) {
	f := &gc.FlinkREST{URLs: []string{refusedURL(t)}, NotFoundIsGone: true}
	got := f.Judge(context.Background(), testJob)
	if got.Verdict != index.VerdictUnknown || !strings.Contains(got.Evidence, "unreachable") || !strings.Contains(got.Evidence, "refused") {
		t.Errorf("%v %q, want unknown, unreachable: connection refused", got.Verdict, got.Evidence)
	}
	if !strings.Contains(got.Failure, "refused") {
		t.Errorf("failure %q, want the refused connection", got.Failure)
	}
}

func TestFlinkRESTTimeout(t *testing.T) {
	hang := hangingServer(t, func(http.ResponseWriter) {})
	// Headers and half a body, then nothing: the body read is bounded too.
	stall := hangingServer(t, func(w http.ResponseWriter) {
		io.WriteString(w, `{"state":"FINI`)
		w.(http.Flusher).Flush()
	})

	for _, tc := range []struct {
		name   string
		url    string
		client *http.Client
	}{
		{"no answer, default client", hang.URL, nil},
		{"no answer, caller's client without timeout", hang.URL, &http.Client{}},
		{"stalled body", stall.URL, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &gc.FlinkREST{URLs: []string{tc.url}, Client: tc.client, Timeout: 100 * time.Millisecond, NotFoundIsGone: true}
			got := judgeWithin(t, context.Background(), 2*time.Second, f)
			if got.Verdict != index.VerdictUnknown {
				t.Errorf("%v %q, want unknown", got.Verdict, got.Evidence)
			}
		})
	}
}

func TestFlinkRESTContext(t *testing.T) {
	hang := hangingServer(t, func(http.ResponseWriter) {})
	ok, okHits := flinkServer(t, 200, details(testJob, "FINISHED"))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := (&gc.FlinkREST{URLs: []string{ok.URL}}).Judge(ctx, testJob)
	if got.Verdict != index.VerdictUnknown || !strings.Contains(got.Evidence, "canceled") {
		t.Errorf("canceled before: %v %q, want unknown, canceled", got.Verdict, got.Evidence)
	}
	if n := okHits.Load(); n != 0 {
		t.Errorf("server asked %d times under a canceled context", n)
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	got = judgeWithin(t, ctx, 2*time.Second, &gc.FlinkREST{URLs: []string{hang.URL}, Timeout: time.Minute})
	if got.Verdict != index.VerdictUnknown {
		t.Errorf("canceled during: %v %q, want unknown", got.Verdict, got.Evidence)
	}
}

func TestFlinkRESTBodySize(t *testing.T) {
	// Both bodies are valid and say FINISHED; only the cap tells them apart.
	pad := func(n int) string {
		return `{"jid":"` + testJob + `","state":"FINISHED","plan":"` + strings.Repeat("p", n) + `"}`
	}
	for _, tc := range []struct {
		name string
		body string
		want index.Verdict
	}{
		{"512 KiB", pad(512 << 10), index.VerdictGone},
		{"10 MiB", pad(10 << 20), index.VerdictUnknown},
	} {
		srv, _ := flinkServer(t, 200, tc.body)
		got := (&gc.FlinkREST{URLs: []string{srv.URL}}).Judge(context.Background(), testJob)
		if got.Verdict != tc.want {
			t.Errorf("%s: %v %q, want %v", tc.name, got.Verdict, got.Evidence, tc.want)
		}
	}

	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"state":"FINISHED","pad":"`)
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer endless.Close()
	start := time.Now()
	got := (&gc.FlinkREST{URLs: []string{endless.URL}}).Judge(context.Background(), testJob)
	if got.Verdict != index.VerdictUnknown || !strings.Contains(got.Evidence, "larger than") || time.Since(start) > 2*time.Second {
		t.Errorf("endless body: %v %q after %v, want unknown, larger than, fast", got.Verdict, got.Evidence, time.Since(start))
	}
}

func TestFlinkRESTSeveralURLs(t *testing.T) {
	U, L, G := index.VerdictUnknown, index.VerdictLive, index.VerdictGone
	type answer struct {
		status int
		state  string // "" with 200: unreachable
	}
	var (
		running   = answer{200, "RUNNING"}
		finished  = answer{200, "FINISHED"}
		failed    = answer{200, "FAILED"}
		suspended = answer{200, "SUSPENDED"}
		notFound  = answer{404, ""}
		broken    = answer{500, ""}
		refused   = answer{0, ""}
	)
	for _, tc := range []struct {
		name     string
		answers  []answer
		notFound bool
		want     index.Verdict
	}{
		{"running and finished", []answer{running, finished}, true, L},
		{"finished and running", []answer{finished, running}, true, L},
		{"404 and running", []answer{notFound, running}, true, L},
		{"finished and refused", []answer{finished, refused}, false, G},
		{"finished and 404", []answer{notFound, finished}, false, G},
		{"suspended and failed", []answer{suspended, failed}, false, G},
		{"finished and 500", []answer{broken, finished}, false, G},
		{"all 404, opted in", []answer{notFound, notFound, notFound}, true, G},
		{"all 404, not opted in", []answer{notFound, notFound}, false, U},
		{"404 and refused, opted in", []answer{notFound, refused}, true, U},
		{"404 and 500, opted in", []answer{notFound, broken}, true, U},
		{"404 and suspended, opted in", []answer{notFound, suspended}, true, U},
		{"refused and 500", []answer{refused, broken}, true, U},
		{"suspended twice", []answer{suspended, suspended}, true, U},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var urls []string
			for _, a := range tc.answers {
				switch {
				case a.status == 0:
					urls = append(urls, refusedURL(t))
				case a.status == 200:
					srv, _ := flinkServer(t, 200, details(testJob, a.state))
					urls = append(urls, srv.URL)
				default:
					srv, _ := flinkServer(t, a.status, `{"errors":[]}`)
					urls = append(urls, srv.URL)
				}
			}
			got := (&gc.FlinkREST{URLs: urls, NotFoundIsGone: tc.notFound}).Judge(context.Background(), testJob)
			if got.Verdict != tc.want {
				t.Errorf("verdict %v, want %v (evidence %q)", got.Verdict, tc.want, got.Evidence)
			}
			parts := strings.Split(got.Evidence, "; ")
			if len(parts) != len(urls) {
				t.Fatalf("evidence %q has %d parts, want one per URL", got.Evidence, len(parts))
			}
			for i, u := range urls {
				if !strings.HasPrefix(parts[i], "flink "+u+": ") {
					t.Errorf("evidence part %d %q does not name %s", i, parts[i], u)
				}
			}
		})
	}
}

func TestFlinkRESTRefusesInvalidJobID(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, `{"state":"FINISHED"}`)
	}))
	defer srv.Close()
	f := &gc.FlinkREST{URLs: []string{srv.URL, srv.URL + "/prefix"}, NotFoundIsGone: true}
	for _, id := range flinkid.InvalidJobIDs {
		got := f.Judge(context.Background(), id)
		if got.Verdict != index.VerdictUnknown || got.Evidence != "invalid job id" {
			t.Errorf("Judge(%q) = %v %q, want unknown \"invalid job id\"", id, got.Verdict, got.Evidence)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("server asked %d times about invalid ids, want 0", n)
	}
}

// roundTripFunc answers requests without a network.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// FuzzFlinkResponse feeds arbitrary /jobs/<id> bodies to FlinkREST: it never
// panics, and it says gone only when the body is a JSON object whose "state"
// is exactly FINISHED, CANCELED or FAILED (and live only for a live state).
func FuzzFlinkResponse(f *testing.F) {
	for _, s := range []string{"RUNNING", "FINISHED", "CANCELED", "FAILED", "SUSPENDED", "finished", ""} {
		f.Add([]byte(details(testJob, s)))
	}
	f.Add([]byte(`{"state":"RUNNING","state":"FINISHED"}`))
	f.Add([]byte(`{"state":"FINISHED"}x`))
	f.Add([]byte(`[{"state":"FINISHED"}]`))

	gone := map[string]bool{"FINISHED": true, "CANCELED": true, "FAILED": true}
	live := map[string]bool{"INITIALIZING": true, "CREATED": true, "RUNNING": true, "FAILING": true, "CANCELLING": true, "RESTARTING": true, "RECONCILING": true}
	f.Fuzz(func(t *testing.T, body []byte) {
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{
				StatusCode: 200,
				Header:     http.Header{"Content-Type": {"application/json"}},
				Body:       io.NopCloser(bytes.NewReader(body)),
				Request:    r,
			}, nil
		})}
		got := (&gc.FlinkREST{URLs: []string{"http://flink.invalid:8081"}, Client: client}).Judge(context.Background(), testJob)
		if len(got.Evidence) > 1024 {
			t.Errorf("evidence is %d bytes long", len(got.Evidence))
		}
		if got.Verdict == index.VerdictUnknown {
			return
		}
		var fields map[string]json.RawMessage
		var state string
		if err := json.Unmarshal(body, &fields); err != nil {
			t.Fatalf("%v from a body that is not a JSON object (%v): %q", got.Verdict, err, body)
		}
		if err := json.Unmarshal(fields["state"], &state); err != nil {
			t.Fatalf("%v from a body without a string state (%v): %q", got.Verdict, err, body)
		}
		switch got.Verdict {
		case index.VerdictGone:
			if !gone[state] {
				t.Fatalf("gone from state %q: %q", state, body)
			}
		case index.VerdictLive:
			if !live[state] {
				t.Fatalf("live from state %q: %q", state, body)
			}
		default:
			t.Fatalf("verdict %v", got.Verdict)
		}
	})
}

// tmServer answers GET /taskmanagers with status and body; any other
// request is a test failure.
func tmServer(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/taskmanagers" {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.Error(w, "unexpected", http.StatusTeapot)
			return
		}
		if status == http.StatusFound {
			w.Header().Set("Location", "http://elsewhere.invalid/taskmanagers")
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Which TaskManagers one Flink lists decides an executor only when the
// list is whole: listed is live, absent from a well-formed list of a
// Flink that listed it before is gone, and anything else is unknown with
// a failure.
func TestFlinkRESTTaskManagers(t *testing.T) {
	U, L, G := index.VerdictUnknown, index.VerdictLive, index.VerdictGone
	listing := func(ids ...string) string {
		var tms []string
		for _, id := range ids {
			tms = append(tms, fmt.Sprintf(`{"id":%q,"path":"pekko.tcp://flink@10.0.0.1:6122/user/rpc/taskmanager_0","dataPort":6121,"slotsNumber":2,"freeSlots":2}`, id))
		}
		return `{"taskmanagers":[` + strings.Join(tms, ",") + `]}`
	}
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   index.Verdict
		said   string // in the evidence
	}{
		{"listed", 200, listing("y", "tm-1"), L, "registered TaskManager"},
		{"not listed", 200, listing("y", "tm-10"), G, "not among its 2 registered TaskManagers"},
		{"none registered", 200, listing(), G, "not among its 0 registered TaskManagers"},
		{"404", 404, `{"errors":["Not found"]}`, U, "404 not found"},
		{"500", 500, `{"errors":[]}`, U, "HTTP 500"},
		{"redirect", http.StatusFound, "", U, "not followed"},
		{"not an object", 200, `[` + listing("y") + `]`, U, "not a JSON object"},
		{"no list", 200, `{"jobs":[]}`, U, `no "taskmanagers" field`},
		{"list twice", 200, `{"taskmanagers":[],"taskmanagers":[{"id":"tm-1"}]}`, U, "given twice"},
		{"list not an array", 200, `{"taskmanagers":{"id":"tm-1"}}`, U, "not an array"},
		{"id missing", 200, `{"taskmanagers":[{"path":"p"}]}`, U, `no "id" field`},
		{"id not a string", 200, `{"taskmanagers":[{"id":7}]}`, U, `"id" is not a string`},
		{"id twice", 200, `{"taskmanagers":[{"id":"y","id":"tm-1"}]}`, U, "given twice"},
		{"case-folded key", 200, `{"TaskManagers":[{"id":"tm-1"}]}`, U, `no "taskmanagers" field`},
		{"data after", 200, listing("y") + `{}`, U, "data after"},
		{"truncated", 200, `{"taskmanagers":[{"id":"y"}`, U, "malformed"},
		{"too large", 200, `{"taskmanagers":[{"id":"y","path":"` + strings.Repeat("p", 4<<20) + `"}]}`, U, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := tmServer(t, tc.status, tc.body)
			got := (&gc.FlinkREST{URLs: []string{url}}).JudgeExecutor(context.Background(), "tm-1", []string{url})
			if got.Verdict != tc.want || !strings.Contains(got.Evidence, tc.said) {
				t.Errorf("JudgeExecutor = %v (%s), want %v, evidence saying %q", got.Verdict, got.Evidence, tc.want, tc.said)
			}
			if failing := got.Failure != ""; failing != (tc.want == U) {
				t.Errorf("failure %q, want one only for unknown", got.Failure)
			}
			if got.Executor != "tm-1" || got.Oracle != "flink-rest" {
				t.Errorf("verdict about %q by %q, want tm-1 by flink-rest", got.Executor, got.Oracle)
			}
			if listed := len(got.ListedBy) == 1 && got.ListedBy[0] == url; listed != (tc.want == L) {
				t.Errorf("ListedBy = %q, want the URL only when it lists tm-1", got.ListedBy)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		url := refusedURL(t)
		got := (&gc.FlinkREST{URLs: []string{url}}).JudgeExecutor(context.Background(), "tm-1", []string{url})
		if got.Verdict != U || !strings.Contains(got.Failure, "unreachable") {
			t.Errorf("JudgeExecutor = %v, failure %q; want unknown, unreachable", got.Verdict, got.Failure)
		}
	})
}

// With several Flinks, an executor is live if any lists it, and gone only
// if every one answers with a whole list that does not and one of them
// listed it before: absent from the lists of Flinks that never listed it,
// it may run in a cluster nobody asked, and is unknown, which is no
// failure (every Flink answered).
func TestFlinkRESTTaskManagersSeveralURLs(t *testing.T) {
	U, L, G := index.VerdictUnknown, index.VerdictLive, index.VerdictGone
	const (
		listed = `{"taskmanagers":[{"id":"tm-1"}]}`
		absent = `{"taskmanagers":[{"id":"y"}]}`
	)
	for _, tc := range []struct {
		name    string
		answers []string // a body answered with 200; "" fails (HTTP 503)
		knew    []int    // the URLs, by index, that listed tm-1 before
		want    index.Verdict
		failing bool
	}{
		{"absent from both, both listed it", []string{absent, absent}, []int{0, 1}, G, false},
		{"absent from both, the second listed it", []string{absent, absent}, []int{1}, G, false},
		{"absent from both, neither listed it", []string{absent, absent}, nil, U, false},
		{"listed by the second", []string{absent, listed}, nil, L, false},
		{"listed by one, the other failing", []string{"", listed}, nil, L, false},
		{"absent from one that listed it, the other failing", []string{absent, ""}, []int{0}, U, true},
		{"both failing", []string{"", ""}, []int{0, 1}, U, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var urls, knew []string
			for _, body := range tc.answers {
				status := 200
				if body == "" {
					status = http.StatusServiceUnavailable
				}
				urls = append(urls, tmServer(t, status, body))
			}
			for _, i := range tc.knew {
				knew = append(knew, urls[i])
			}
			knew = append(knew, "http://elsewhere.invalid:8081") // a URL no longer asked says nothing
			got := (&gc.FlinkREST{URLs: urls}).JudgeExecutor(context.Background(), "tm-1", knew)
			if got.Verdict != tc.want {
				t.Errorf("verdict %v, want %v (evidence %q)", got.Verdict, tc.want, got.Evidence)
			}
			parts := strings.Split(got.Evidence, "; ")
			if tc.knew == nil && tc.want == U {
				if last := parts[len(parts)-1]; last != "no Flink asked has listed it" {
					t.Errorf("evidence %q does not end saying no Flink asked has listed it", got.Evidence)
				}
				parts = parts[:len(parts)-1]
			}
			if len(parts) != len(urls) {
				t.Errorf("evidence %q has %d parts, want one per URL", got.Evidence, len(parts))
			}
			if failing := got.Failure != ""; failing != tc.failing {
				t.Errorf("failure %q, want one: %v", got.Failure, tc.failing)
			}
		})
	}
}

// An executor id that no resource id can be is refused without a request.
func TestFlinkRESTRefusesInvalidExecutorID(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, `{"taskmanagers":[]}`)
	}))
	defer srv.Close()
	f := &gc.FlinkREST{URLs: []string{srv.URL}}
	for _, id := range []string{"", ".", "..", "../x", "a/b", "tm 1", "%2e%2e", strings.Repeat("r", 256)} {
		for _, got := range []gc.ExecutorVerdict{f.JudgeExecutor(context.Background(), id, f.URLs), gc.CombineExecutor(context.Background(), id, f.URLs, f)} {
			if got.Verdict != index.VerdictUnknown || got.Evidence != "invalid executor id" {
				t.Errorf("judging executor %q = %v %q, want unknown \"invalid executor id\"", id, got.Verdict, got.Evidence)
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("server asked %d times about invalid ids, want 0", n)
	}
}

// FuzzTaskManagersResponse feeds arbitrary /taskmanagers bodies to
// FlinkREST: it never panics, says live only when the body lists the
// executor, and gone only when the body is an object whose "taskmanagers"
// is an array of objects, each with a string "id", none the executor's.
func FuzzTaskManagersResponse(f *testing.F) {
	f.Add([]byte(`{"taskmanagers":[{"id":"tm-1","path":"p","freeSlots":1}]}`))
	f.Add([]byte(`{"taskmanagers":[{"id":"y"}]}`))
	f.Add([]byte(`{"taskmanagers":[]}`))
	f.Add([]byte(`{"taskmanagers":[{"id":"y"},{"id":"tm-1","id":"z"}]}`))
	f.Add([]byte(`{"taskmanagers":null}`))
	f.Add([]byte(`{"taskmanagers":[null]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
		})}
		url := "http://flink.invalid:8081"
		got := (&gc.FlinkREST{URLs: []string{url}, Client: client}).JudgeExecutor(context.Background(), "tm-1", []string{url})
		if got.Verdict == index.VerdictUnknown {
			return
		}
		var doc struct {
			TaskManagers []map[string]json.RawMessage `json:"taskmanagers"`
		}
		if err := json.Unmarshal(body, &doc); err != nil || doc.TaskManagers == nil {
			t.Fatalf("%v from a body without a list of TaskManagers (%v): %q", got.Verdict, err, body)
		}
		listed := false
		for _, tm := range doc.TaskManagers {
			var id string
			if err := json.Unmarshal(tm["id"], &id); err != nil {
				t.Fatalf("%v from a TaskManager without a string id (%v): %q", got.Verdict, err, body)
			}
			listed = listed || id == "tm-1"
		}
		if listed != (got.Verdict == index.VerdictLive) {
			t.Fatalf("%v from a body that lists the executor: %v: %q", got.Verdict, listed, body)
		}
	})
}
