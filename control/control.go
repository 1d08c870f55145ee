// Package control is the daemon's control socket and the operations behind
// it. The socket is a small HTTP API with JSON bodies on a unix socket in
// the store directory (mode 0600, and only root and the daemon's user are
// accepted), served by Server while a daemon holds the store. The CLI
// talks to it through Client when a daemon serves the store, and runs the
// same operations itself (SetVerdict, SetExecutorVerdict, Restore, Holds;
// the collector and scrubs) when none does. Reports (jobs, executors,
// inspect, du) are the store's (store/report.go); the socket only serves
// them.
package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/owner"
	"github.com/statefs/statefs/store"
)

// SocketName is the control socket's name in the store directory.
const SocketName = "control.sock"

// maxRequest bounds a request body: every request is a few fields.
const maxRequest = 64 << 10

// maxInFlight bounds the requests served at once: inspect and du read the
// whole index, and a client that opens many at once gets 503 for the rest
// rather than making the daemon's memory and the FUSE requests pay.
const maxInFlight = 16

// GCRequest asks for one collector run.
type GCRequest struct {
	DryRun         bool          `json:"dry_run"`
	Grace          time.Duration `json:"grace"`
	FlinkURLs      []string      `json:"flink_urls,omitempty"`
	JobResultStore string        `json:"job_result_store,omitempty"`
	NotFoundIsGone bool          `json:"not_found_is_gone,omitempty"`
	// CollectUnknownAfter is gc.Collector.CollectUnknownAfter: 0 keeps
	// the jobs unknown to every oracle.
	CollectUnknownAfter time.Duration `json:"collect_unknown_after,omitempty"`
}

// Check refuses a request the collector cannot run as asked: a negative
// grace, or a Flink URL that is not an absolute http(s) URL (a typo would
// make every verdict unknown and collect nothing, silently).
func (r GCRequest) Check() error {
	if r.Grace < 0 {
		return errors.New("grace must not be negative")
	}
	if r.CollectUnknownAfter < 0 {
		return errors.New("collect-unknown-after must not be negative")
	}
	for _, u := range r.FlinkURLs {
		if err := gc.CheckFlinkURL(u); err != nil {
			return err
		}
	}
	return nil
}

// Oracles builds the oracles r asks for.
func (r GCRequest) Oracles() []gc.Oracle {
	var os []gc.Oracle
	if len(r.FlinkURLs) > 0 {
		os = append(os, &gc.FlinkREST{URLs: r.FlinkURLs, NotFoundIsGone: r.NotFoundIsGone})
	}
	if r.JobResultStore != "" {
		os = append(os, &gc.JobResultStore{Dir: r.JobResultStore})
	}
	return os
}

// VerdictRequest is the operator's word about a job: a verdict (gone or
// live), or, with Withdraw, taking back what was said before.
type VerdictRequest struct {
	Job      string        `json:"job"`
	Verdict  index.Verdict `json:"verdict"`
	Withdraw bool          `json:"withdraw,omitempty"`
}

// SetVerdict records the operator's verdict about job in the store's
// index, or withdraws it; the job must have state in the store. The
// combined verdict follows at the collector's next run, which asks every
// oracle; `statefs jobs` shows the operator's word at once.
func SetVerdict(s *store.Store, r VerdictRequest) error {
	if !owner.IsFlinkID(r.Job) {
		return fmt.Errorf("%q is not a Flink job id (32 lowercase hex characters)", r.Job)
	}
	said, at, err := operatorWord(r.Verdict, r.Withdraw)
	if err != nil {
		return err
	}
	return s.Index.Update(func(tx *index.Tx) error {
		j, err := tx.Job(r.Job)
		if errors.Is(err, index.ErrNotFound) {
			return fmt.Errorf("job %s: the store holds no state of it", r.Job)
		}
		if err != nil {
			return err
		}
		j.Operator, j.OperatorAt = said, at
		return tx.PutJob(j)
	})
}

// ExecutorVerdictRequest is the operator's word about an executor, by its
// resource id: its TaskManager is gone or live, or, with Withdraw, taking
// back what was said before.
type ExecutorVerdictRequest struct {
	Executor string        `json:"executor"`
	Verdict  index.Verdict `json:"verdict"`
	Withdraw bool          `json:"withdraw,omitempty"`
}

// SetExecutorVerdict records the operator's verdict about an executor in
// the store's index, or withdraws it, as SetVerdict does for a job; the
// executor must have a tree in the store.
func SetExecutorVerdict(s *store.Store, r ExecutorVerdictRequest) error {
	if !owner.IsResourceID(r.Executor) {
		return fmt.Errorf("%q is not a TaskManager resource id (1 to 255 of A-Z a-z 0-9 . _ -, not . or ..)", r.Executor)
	}
	said, at, err := operatorWord(r.Verdict, r.Withdraw)
	if err != nil {
		return err
	}
	return s.Index.Update(func(tx *index.Tx) error {
		e, err := tx.Executor(r.Executor)
		if errors.Is(err, index.ErrNotFound) {
			return fmt.Errorf("executor %s: the store holds no tree of it", r.Executor)
		}
		if err != nil {
			return err
		}
		e.Operator, e.OperatorAt = said, at
		return tx.PutExecutor(e)
	})
}

// operatorWord is what a record's Operator and OperatorAt become when the
// operator says v (gone or live: said now), or withdraws the word
// (nothing said, at no time). It refuses any other verdict, and a
// withdrawal with a verdict.
func operatorWord(v index.Verdict, withdraw bool) (said index.Verdict, at int64, err error) {
	switch {
	case withdraw && v != index.VerdictUnknown:
		return 0, 0, fmt.Errorf("withdraw takes no verdict, not %s", v)
	case !withdraw && v != index.VerdictGone && v != index.VerdictLive:
		return 0, 0, fmt.Errorf("the operator's verdict must be gone or live, not %s", v)
	case withdraw:
		return index.VerdictUnknown, 0, nil
	}
	return v, index.Now(), nil
}

// RestoreRequest asks to put held tree Hold back at Dest, a path relative
// to the mount root (or, to a daemon, an absolute path inside its mount).
type RestoreRequest struct {
	Hold string `json:"hold"`
	Dest string `json:"dest"`
}

// Restore puts a held tree back into the tree of a store no daemon serves.
func Restore(s *store.Store, rules *owner.Rules, r RestoreRequest) error {
	if filepath.IsAbs(r.Dest) {
		return fmt.Errorf("restore destination %s: give it relative to the mount root: the store is not mounted", r.Dest)
	}
	return s.Index.Update(func(tx *index.Tx) error {
		_, _, err := tx.RestoreTo(r.Hold, r.Dest, rules)
		return err
	})
}

// Holds lists the held trees of the store, oldest first.
func Holds(s *store.Store) ([]*index.Hold, error) {
	var hs []*index.Hold
	err := s.Index.View(func(tx *index.Tx) (err error) {
		hs, err = tx.Holds()
		return err
	})
	return hs, err
}

// Filesystem is what the control socket needs of the mounted filesystem:
// removals for the collector that keep the kernel's caches right, and
// restores of held trees.
type Filesystem interface {
	gc.Remover
	Restore(hold, dest string) error
}

// Server answers on the control socket of a mounted store.
type Server struct {
	Store      *store.Store
	FS         Filesystem
	Mountpoint string // absolute
	// Collected, if set, is told of every collector run that is not dry
	// (metrics).
	Collected func(gc.Report, error)
	// Scrubbed, if set, is told of every scrub pass, periodic or asked for
	// on the socket, with what it found and the error it ended on
	// (metrics).
	Scrubbed func(store.Scrubbed, error)
	// Scrubbing, if set, is told as a scrub pass goes how many of the
	// store's chunks and objects it has read of how many (metrics).
	Scrubbing func(done, total int)
	// Log is where collector runs are logged; nil is slog's default. Now
	// is the clock of the warnings about unknown jobs; nil is time.Now.
	Log *slog.Logger
	Now func() time.Time

	// gcMu lets one collector run at a time, from the socket or the
	// periodic timer, and Close waits for a run with it. It is the first
	// lock a run takes: the collector's removals take fs's and the store's
	// locks under it. scrubMu does the same for scrubs, which take the
	// chunk store's read cache lock and, to quarantine an object, the
	// index's writer lock.
	gcMu    sync.Mutex
	scrubMu sync.Mutex
	// warned is when each job unknown to every oracle was last named in a
	// warning (warnUnknown), under gcMu.
	warned map[string]time.Time
	slots  chan struct{} // requests at work (admit)
	srv    *http.Server
	ln     net.Listener

	// closing is done once Close has begun: scrubs stop then, rather than
	// hold the daemon's exit for the hours a pass can take.
	closeOnce sync.Once
	closing   context.Context
	endScrubs context.CancelFunc
}

// stopping is a context that is done once Close has begun.
func (s *Server) stopping() context.Context {
	s.closeOnce.Do(func() { s.closing, s.endScrubs = context.WithCancel(context.Background()) })
	return s.closing
}

// Listen creates the socket (replacing a stale one: the caller holds the
// store's lock) and serves it until Close.
func (s *Server) Listen() error {
	path := filepath.Join(s.Store.Dir, SocketName)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("control socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("control socket: %w", err)
	}
	ln = peerListener{ln}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 5 * time.Second,
		// A request body is at most maxRequest bytes; a client that sends
		// it slower, or idles on a kept-alive connection, loses it.
		ReadTimeout: 30 * time.Second,
		IdleTimeout: time.Minute,
	}
	go s.srv.Serve(ln)
	return nil
}

// peerListener accepts connections only from root and the daemon's own
// user. The socket's mode 0600 says the same, but a mode can be changed,
// and the socket exists for a moment before its chmod.
type peerListener struct{ net.Listener }

func (l peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		if err == nil && (uid == 0 || uid == uint32(os.Geteuid())) {
			return c, nil
		}
		slog.Warn("control socket: refused a connection from another user", "uid", uid, "err", err)
		c.Close()
	}
}

// peerUID is the user id of the process at the other end of a unix socket
// connection (SO_PEERCRED).
func peerUID(c net.Conn) (uint32, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, fmt.Errorf("a %T, not a unix socket connection", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) { cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	return cred.Uid, nil
}

// handler routes the API.
func (s *Server) handler() http.Handler {
	s.slots = make(chan struct{}, maxInFlight)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jobs", s.admitted(s.jobs))
	mux.HandleFunc("POST /job", operatorSays(s, SetVerdict))
	mux.HandleFunc("GET /executors", s.admitted(s.executors))
	mux.HandleFunc("POST /executor", operatorSays(s, SetExecutorVerdict))
	mux.HandleFunc("POST /gc", s.gc)
	mux.HandleFunc("GET /inspect", s.admitted(s.inspect))
	mux.HandleFunc("GET /du", s.admitted(s.du))
	mux.HandleFunc("GET /holds", s.admitted(s.holds))
	mux.HandleFunc("GET /collected", s.admitted(s.collected))
	mux.HandleFunc("POST /restore", s.restore)
	mux.HandleFunc("POST /scrub", s.scrub)
	return mux
}

// admit takes one of the maxInFlight slots for a request's work, or answers
// 503. Requests with a body read it first (decode): a slow client holds a
// connection until the server's timeouts, never a slot.
func (s *Server) admit(w http.ResponseWriter) (release func(), ok bool) {
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, true
	default:
		http.Error(w, fmt.Sprintf("busy: %d requests are being served, try again", maxInFlight), http.StatusServiceUnavailable)
		return nil, false
	}
}

// admitAlone admits a request that runs alone (one collector run, one
// scrub): mu, taken without waiting, keeps a second one out with 409 and
// busy saying what goes on; the slot keeps the daemon's requests bounded.
// release gives back both.
func (s *Server) admitAlone(w http.ResponseWriter, mu *sync.Mutex, busy string) (release func(), ok bool) {
	if !mu.TryLock() {
		http.Error(w, busy+" is already going on", http.StatusConflict)
		return nil, false
	}
	free, ok := s.admit(w)
	if !ok {
		mu.Unlock()
		return nil, false
	}
	return func() { free(); mu.Unlock() }, true
}

// admitted is h, run once admitted.
func (s *Server) admitted(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if release, ok := s.admit(w); ok {
			defer release()
			h(w, r)
		}
	}
}

// Close stops the scrubs under way, stops serving, waits a while for
// requests under way and for a collector run to end, and removes the
// socket. Once it returns no scrub or periodic collector run of s reads
// the store.
func (s *Server) Close() error {
	s.stopping()
	s.endScrubs()
	var err error
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = s.srv.Shutdown(ctx)
		os.Remove(filepath.Join(s.Store.Dir, SocketName))
	}
	s.scrubMu.Lock() // a stopped scrub ends before the store closes
	defer s.scrubMu.Unlock()
	s.gcMu.Lock() // a periodic run ends before the store closes
	defer s.gcMu.Unlock()
	return err
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request) {
	jobs, err := s.Store.Jobs()
	reply(w, jobs, err)
}

func (s *Server) collected(w http.ResponseWriter, r *http.Request) {
	cs, err := Collections(s.Store)
	reply(w, cs, err)
}

// Collections lists the collector's latest removals the store records
// (index.MaxCollections at most), oldest first.
func Collections(s *store.Store) ([]*index.Collection, error) {
	cs := []*index.Collection{}
	err := s.Index.View(func(tx *index.Tx) error {
		got, err := tx.Collections()
		cs = append(cs, got...)
		return err
	})
	return cs, err
}

func (s *Server) executors(w http.ResponseWriter, r *http.Request) {
	es, err := s.Store.Executors()
	reply(w, es, err)
}

// operatorSays serves the operator's word about one kind of subject
// (POST /job, POST /executor): a request of type R, read whole before a
// slot is taken, recorded in the store by set.
func operatorSays[R any](s *Server, set func(*store.Store, R) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req R
		if !decode(w, r, &req) {
			return
		}
		release, ok := s.admit(w)
		if !ok {
			return
		}
		defer release()
		reply(w, struct{}{}, set(s.Store, req))
	}
}

func (s *Server) holds(w http.ResponseWriter, r *http.Request) {
	hs, err := Holds(s.Store)
	reply(w, hs, err)
}

func (s *Server) restore(w http.ResponseWriter, r *http.Request) {
	var req RestoreRequest
	if !decode(w, r, &req) {
		return
	}
	dest, err := s.inMount(req.Dest)
	if err != nil {
		reply(w, nil, fmt.Errorf("restore destination %w", err))
		return
	}
	release, ok := s.admit(w)
	if !ok {
		return
	}
	defer release()
	reply(w, struct{}{}, s.FS.Restore(req.Hold, dest))
}

// inMount is path relative to the mount root: path as given, or an
// absolute path inside the daemon's mount made relative. Anything outside
// the mount, or going up, is refused.
func (s *Server) inMount(path string) (string, error) {
	rel := path
	if filepath.IsAbs(path) {
		var err error
		rel, err = filepath.Rel(s.Mountpoint, filepath.Clean(path))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return "", fmt.Errorf("%s is not inside the mount %s", path, s.Mountpoint)
		}
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%s: give a path inside the mount %s, downwards only", path, s.Mountpoint)
	}
	return rel, nil
}

// CollectEvery runs the collector with req every interval until ctx ends;
// a run never overlaps one asked for on the socket.
func (s *Server) CollectEvery(ctx context.Context, interval time.Duration, req GCRequest) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.gcMu.Lock()
		report, err := s.collector(req).Run(ctx)
		s.ran("periodic", report, err)
		s.gcMu.Unlock()
	}
}

// collector is the collector req asks for, removing through s.FS.
func (s *Server) collector(req GCRequest) *gc.Collector {
	return &gc.Collector{Store: s.Store, Oracles: req.Oracles(), Grace: req.Grace, Remover: s.FS,
		CollectUnknownAfter: req.CollectUnknownAfter, Log: s.Log}
}

func (s *Server) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// warnEvery is how often a job that stays unknown to every oracle is named
// again in a warning.
const warnEvery = 24 * time.Hour

// warnUnknown names in a warning each job unknown to every oracle: the
// first time a run finds it, and again once a day while it stays so. When
// each was named is kept in memory, not in the index: a restarted daemon
// names them all again at once, which whoever reads only the new
// process's log needs, and a warning costs no write. A job that stops
// being unknown is forgotten, and named at once if it becomes so again.
// The caller holds gcMu.
func (s *Server) warnUnknown(how string, unknown []gc.UnknownJob) {
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	warned := make(map[string]time.Time, len(unknown))
	for _, u := range unknown {
		last, ok := s.warned[u.Job]
		if !ok || now.Sub(last) >= warnEvery {
			last = now
			s.log().Warn("collector: every oracle answers it knows nothing of a job; its state is kept (statefs job gone, or --collect-unknown-after)",
				"run", how, "job", u.Job, "unknown_since", u.Since, "last_write", u.LastWrite)
		}
		warned[u.Job] = last
	}
	s.warned = warned
}

// ran tells the metrics of a collector run that was not dry, and logs it:
// a failed run at error level, and each job or executor no oracle could
// answer about at warning level, naming the oracles and what went wrong,
// since such a job's state, or executor's tree, is kept however long it
// has been gone; and the jobs unknown to every oracle (warnUnknown). The
// run's summary counts the jobs and the executors' trees it collected
// apart; the collector logged each. The caller holds gcMu.
func (s *Server) ran(how string, report gc.Report, err error) {
	if s.Collected != nil {
		s.Collected(report, err)
	}
	unanswered := report.Unanswered()
	for _, v := range unanswered {
		s.log().Warn("collector: no oracle could answer about a job; its state is kept", "run", how, "job", v.Job, "failure", v.Failure)
	}
	unansweredExecutors := report.UnansweredExecutors()
	for _, v := range unansweredExecutors {
		s.log().Warn("collector: no oracle could answer about an executor; its tree is kept", "run", how, "executor", v.Executor, "failure", v.Failure)
	}
	if err != nil {
		s.log().Error("collector run failed", "run", how, "err", err)
		return
	}
	s.warnUnknown(how, report.Unknown)
	jobs, executors := 0, 0
	for _, c := range report.Collected {
		if c.Executor != "" {
			executors++
		} else {
			jobs++
		}
	}
	s.log().Info("collector run", "run", how, "jobs_collected", jobs, "executors_collected", executors,
		"unanswered", len(unanswered)+len(unansweredExecutors), "unknown", len(report.Unknown),
		"chunks_swept", report.Swept.Chunks, "bytes_freed", report.Swept.Bytes, "took", report.Took.Duration())
}

func (s *Server) gc(w http.ResponseWriter, r *http.Request) {
	var req GCRequest
	if !decode(w, r, &req) {
		return
	}
	if err := req.Check(); err != nil {
		reply(w, nil, err)
		return
	}
	release, ok := s.admitAlone(w, &s.gcMu, "a collector run")
	if !ok {
		return
	}
	defer release()
	c := s.collector(req)
	if req.DryRun {
		plan, err := c.Plan(r.Context())
		if err != nil {
			reply(w, nil, err)
			return
		}
		reply(w, plan.Report(), nil)
		return
	}
	report, err := c.Run(r.Context())
	s.ran("asked", report, err)
	reply(w, report, err)
}

// decode reads a request body that is exactly one JSON value of v's type,
// with no unknown fields, at most maxRequest bytes (413 beyond).
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequest))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		switch err = dec.Decode(&json.RawMessage{}); err {
		case io.EOF:
			err = nil
		case nil:
			err = errors.New("more than one JSON value")
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		http.Error(w, fmt.Sprintf("request body larger than %d bytes", maxRequest), http.StatusRequestEntityTooLarge)
		return false
	case err != nil:
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// Client talks to the daemon serving a store.
type Client struct {
	http *http.Client
}

// Dial returns a client for the daemon serving the store in dir.
func Dial(dir string) (*Client, error) {
	path := filepath.Join(dir, SocketName)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("control socket of the daemon serving %s: %w", dir, err)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &Client{http: &http.Client{Transport: tr}}, nil
}

func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.send(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// send makes a request with in as its JSON body (nil: none) and returns
// the answer if it is 200 OK; the caller closes its body. Any other answer
// is an error carrying the daemon's message.
func (c *Client) send(ctx context.Context, method, path string, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://statefs"+path, body)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking the daemon: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("daemon: %s", strings.TrimSpace(string(msg)))
	}
	return resp, nil
}

// Jobs lists the store's job records.
func (c *Client) Jobs(ctx context.Context) ([]*index.Job, error) {
	var jobs []*index.Job
	return jobs, c.call(ctx, http.MethodGet, "/jobs", nil, &jobs)
}

// SetVerdict gives the operator's verdict about a job.
func (c *Client) SetVerdict(ctx context.Context, r VerdictRequest) error {
	return c.call(ctx, http.MethodPost, "/job", r, &struct{}{})
}

// Executors lists the store's executor records.
func (c *Client) Executors(ctx context.Context) ([]*index.Executor, error) {
	var es []*index.Executor
	return es, c.call(ctx, http.MethodGet, "/executors", nil, &es)
}

// SetExecutorVerdict gives the operator's verdict about an executor.
func (c *Client) SetExecutorVerdict(ctx context.Context, r ExecutorVerdictRequest) error {
	return c.call(ctx, http.MethodPost, "/executor", r, &struct{}{})
}

// Holds lists the held trees.
func (c *Client) Holds(ctx context.Context) ([]*index.Hold, error) {
	var hs []*index.Hold
	return hs, c.call(ctx, http.MethodGet, "/holds", nil, &hs)
}

// Collections lists the collector's latest removals.
func (c *Client) Collections(ctx context.Context) ([]*index.Collection, error) {
	var cs []*index.Collection
	return cs, c.call(ctx, http.MethodGet, "/collected", nil, &cs)
}

// Restore puts a held tree back.
func (c *Client) Restore(ctx context.Context, r RestoreRequest) error {
	return c.call(ctx, http.MethodPost, "/restore", r, &struct{}{})
}

// GC runs the daemon's collector once.
func (c *Client) GC(ctx context.Context, r GCRequest) (gc.Report, error) {
	var report gc.Report
	return report, c.call(ctx, http.MethodPost, "/gc", r, &report)
}
