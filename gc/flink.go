package gc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/owner"
)

// FlinkREST asks one or more Flink REST endpoints about a job: GET
// <url>/jobs/<id>, field "state" (Flink's JobStatus).
//
// FINISHED, CANCELED and FAILED (globally terminal) are Gone. Every other
// JobStatus (INITIALIZING, CREATED, RUNNING, FAILING, CANCELLING, RESTARTING,
// RECONCILING) is Live. SUSPENDED is Unknown: the job left this JobManager but
// stays in the HA job store and may be recovered. A state string not in that
// list is Unknown: a newer Flink's state is never guessed gone.
//
// Unreachable, timeout, any status but 200 and 404, a redirect (not followed:
// the answer must come from the endpoint the operator named, not from wherever
// it points), a body over maxFlinkResponse, malformed JSON, a missing,
// duplicated or non-string "state", or a "jid" naming another job: Unknown.
// 404 is Unknown unless NotFoundIsGone (the operator's opt-in; the collector
// applies the grace period), because a 404 also comes from a job expired from
// the job store, a restarted non-HA cluster, or a wrong URL.
//
// With several URLs (session clusters): Live if any says live; else Gone if
// any reports a terminal state; else Gone on 404 only if NotFoundIsGone and
// every URL answered 404; else Unknown. The URLs are asked at once. Evidence
// lists what each URL said, in order.
//
// About an executor it asks GET <url>/taskmanagers, the TaskManagers
// registered with each cluster, field "taskmanagers", each with its
// resource id as "id". Listed by any URL is Live, and the verdict names
// the URLs that list it (ExecutorVerdict.ListedBy). Gone only when every
// URL answers 200 with a well-formed list, none lists the executor, and
// at least one of them has listed it before (the caller's listedBy): a
// TaskManager missing from one cluster's list may be registered with
// another, and one that no URL asked has ever listed may belong to a
// cluster nobody named (a new cluster on the node before --flink-url names
// it, or a URL that now reaches another cluster), as a job's 404 may. Such
// an executor is Unknown, and no failure: every URL answered. Anything else
// from any URL (unreachable, any other status, a 404 included, a redirect,
// a body over maxFlinkResponse, malformed JSON, a field duplicated or not
// of its type) is Unknown with a Failure.
type FlinkREST struct {
	URLs           []string
	Client         *http.Client  // nil: a plain client; Timeout applies either way
	Timeout        time.Duration // per request; <= 0 means 5s
	NotFoundIsGone bool
}

var (
	_ Oracle         = (*FlinkREST)(nil)
	_ ExecutorOracle = (*FlinkREST)(nil)
)

const (
	defaultFlinkTimeout = 5 * time.Second
	// maxFlinkResponse caps the body read. /jobs/<id> carries the job's plan,
	// whose operator descriptions run long for SQL jobs, and /taskmanagers a
	// few kilobytes for each TaskManager; a body over the cap is Unknown,
	// never truncated and parsed.
	maxFlinkResponse = 4 << 20
)

// CheckFlinkURL says why u cannot be a Flink REST endpoint: it must be an
// absolute http or https URL with a host.
func CheckFlinkURL(u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("Flink URL %q is not an http:// or https:// URL with a host", u)
	}
	return nil
}

// Name returns "flink-rest".
func (f *FlinkREST) Name() string { return "flink-rest" }

// flinkAnswer is what one URL said.
type flinkAnswer uint8

const (
	flinkFailed    flinkAnswer = iota // no answer: unreachable, an error, a malformed body
	flinkDoubt                        // an answer that decides nothing: SUSPENDED, a state unknown here
	flinkLive                         // a non-terminal state; a TaskManager listed
	flinkTerminal                     // FINISHED, CANCELED or FAILED
	flinkNotFound                     // 404
	flinkNotListed                    // a list of the TaskManagers without the executor
)

// flinkStates maps every Flink JobStatus to what it means here.
var flinkStates = map[string]flinkAnswer{
	"INITIALIZING": flinkLive,
	"CREATED":      flinkLive,
	"RUNNING":      flinkLive,
	"FAILING":      flinkLive,
	"CANCELLING":   flinkLive,
	"RESTARTING":   flinkLive,
	"RECONCILING":  flinkLive,
	"FINISHED":     flinkTerminal,
	"CANCELED":     flinkTerminal,
	"FAILED":       flinkTerminal,
	"SUSPENDED":    flinkDoubt,
}

// Judge asks every URL about job and merges the answers as the type's doc says.
func (f *FlinkREST) Judge(ctx context.Context, job string) JobVerdict {
	out := JobVerdict{Job: job, Verdict: index.VerdictUnknown, Oracle: f.Name(), At: time.Now()}
	if !owner.IsFlinkID(job) {
		out.Evidence = evidenceInvalidJobID
		return out
	}
	if len(f.URLs) == 0 {
		out.Evidence = "flink: no URL configured"
		return out
	}

	got := f.each(func(client *http.Client, base string) (flinkAnswer, string) {
		return f.ask(ctx, client, base, job)
	})
	switch {
	case got.any(flinkLive):
		out.Verdict = index.VerdictLive
	case got.any(flinkTerminal):
		out.Verdict = index.VerdictGone
	case f.NotFoundIsGone && got.all(flinkNotFound):
		out.Verdict = index.VerdictGone
	}
	out.Evidence = got.evidence()
	out.NotFound = out.Verdict == index.VerdictUnknown && got.all(flinkNotFound)
	if out.Verdict == index.VerdictUnknown {
		out.Failure = got.failure()
	}
	return out
}

// JudgeExecutor asks every URL which TaskManagers are registered and
// merges the answers as the type's doc says; listedBy are the URLs that
// have listed executor before.
func (f *FlinkREST) JudgeExecutor(ctx context.Context, executor string, listedBy []string) ExecutorVerdict {
	out := ExecutorVerdict{Executor: executor, Verdict: index.VerdictUnknown, Oracle: f.Name(), At: time.Now()}
	if !owner.IsResourceID(executor) {
		out.Evidence = evidenceInvalidExecutorID
		return out
	}
	if len(f.URLs) == 0 {
		out.Evidence = "flink: no URL configured"
		return out
	}
	got := f.each(func(client *http.Client, base string) (flinkAnswer, string) {
		return f.askTaskManagers(ctx, client, base, executor, slices.Contains(listedBy, base))
	})
	for i, a := range got.answers {
		if a == flinkLive {
			out.ListedBy = append(out.ListedBy, f.URLs[i])
		}
	}
	knew := slices.ContainsFunc(f.URLs, func(u string) bool { return slices.Contains(listedBy, u) })
	out.Evidence = got.evidence()
	switch {
	case got.any(flinkLive):
		out.Verdict = index.VerdictLive
	case got.all(flinkNotListed) && knew:
		out.Verdict = index.VerdictGone
	case got.all(flinkNotListed):
		out.Evidence += "; no Flink asked has listed it"
	}
	if out.Verdict == index.VerdictUnknown {
		out.Failure = got.failure()
	}
	return out
}

// flinkAnswers is what every URL answered to one question, and said, in
// the order of the URLs, each saying prefixed with its URL.
type flinkAnswers struct {
	answers []flinkAnswer
	said    []string
}

// each asks every URL at once with ask.
func (f *FlinkREST) each(ask func(client *http.Client, base string) (flinkAnswer, string)) flinkAnswers {
	client := f.client()
	got := flinkAnswers{answers: make([]flinkAnswer, len(f.URLs)), said: make([]string, len(f.URLs))}
	var wg sync.WaitGroup
	for i, base := range f.URLs {
		wg.Go(func() {
			a, said := ask(client, base)
			got.answers[i], got.said[i] = a, "flink "+base+": "+said
		})
	}
	wg.Wait()
	return got
}

// any reports whether some URL answered a.
func (got flinkAnswers) any(a flinkAnswer) bool { return slices.Contains(got.answers, a) }

// all reports whether every URL answered a.
func (got flinkAnswers) all(a flinkAnswer) bool {
	return !slices.ContainsFunc(got.answers, func(b flinkAnswer) bool { return b != a })
}

// evidence joins what every URL said.
func (got flinkAnswers) evidence() string { return strings.Join(got.said, "; ") }

// failure joins what the URLs that gave no answer said.
func (got flinkAnswers) failure() string {
	var out []string
	for i, a := range got.answers {
		if a == flinkFailed {
			out = append(out, got.said[i])
		}
	}
	return strings.Join(out, "; ")
}

// client returns the configured client with redirects refused, or a plain one.
// The copy shares the caller's Transport (and its connection pool).
func (f *FlinkREST) client() *http.Client {
	c := http.Client{}
	if f.Client != nil {
		c = *f.Client
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

func (f *FlinkREST) timeout() time.Duration {
	if f.Timeout <= 0 {
		return defaultFlinkTimeout
	}
	return f.Timeout
}

// ask asks one URL about job and says what it answered, in words for the
// evidence.
func (f *FlinkREST) ask(ctx context.Context, client *http.Client, base, job string) (flinkAnswer, string) {
	body, a, said := f.get(ctx, client, base, "jobs", job)
	if body == nil {
		return a, said
	}
	state, jid, err := decodeJobDetails(body)
	if err != nil {
		return flinkFailed, "malformed answer: " + err.Error()
	}
	if jid != "" && jid != job {
		return flinkFailed, fmt.Sprintf("answer is about job %s", quoteShort(jid))
	}
	a, known := flinkStates[state]
	if !known {
		return flinkDoubt, fmt.Sprintf("unknown state %s", quoteShort(state))
	}
	return a, "state " + state
}

// askTaskManagers asks one URL which TaskManagers are registered and says
// whether executor is among them: flinkLive if it is, flinkNotListed if
// the list is whole and it is not, flinkFailed for anything else (a 404
// too: every Flink serves /taskmanagers). knew says the URL has listed
// executor before, for the evidence.
func (f *FlinkREST) askTaskManagers(ctx context.Context, client *http.Client, base, executor string, knew bool) (flinkAnswer, string) {
	body, _, said := f.get(ctx, client, base, "taskmanagers")
	if body == nil {
		return flinkFailed, said
	}
	ids, err := decodeTaskManagers(body)
	if err != nil {
		return flinkFailed, "malformed answer: " + err.Error()
	}
	if slices.Contains(ids, executor) {
		return flinkLive, "registered TaskManager"
	}
	said = fmt.Sprintf("not among its %d registered TaskManagers", len(ids))
	if knew {
		said += ", listed here before"
	}
	return flinkNotListed, said
}

// get asks one URL for the path below it and returns the body of a 200
// answer. With none, it says why in words for the evidence: flinkNotFound
// for a 404, flinkFailed for anything else (unreachable, a timeout, a
// redirect, another status, a body over maxFlinkResponse).
func (f *FlinkREST) get(ctx context.Context, client *http.Client, base string, path ...string) ([]byte, flinkAnswer, string) {
	if err := CheckFlinkURL(base); err != nil {
		return nil, flinkFailed, "invalid URL"
	}
	u, _ := url.Parse(base)
	u = u.JoinPath(path...)

	reqCtx, cancel := context.WithTimeout(ctx, f.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, flinkFailed, "invalid request: " + err.Error()
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() == nil && reqCtx.Err() == context.DeadlineExceeded {
			return nil, flinkFailed, fmt.Sprintf("unreachable: no answer within %v", f.timeout())
		}
		return nil, flinkFailed, "unreachable: " + err.Error()
	}
	defer resp.Body.Close()

	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, flinkNotFound, "404 not found"
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return nil, flinkFailed, fmt.Sprintf("HTTP %d redirect to %q not followed", resp.StatusCode, resp.Header.Get("Location"))
	case resp.StatusCode != http.StatusOK:
		return nil, flinkFailed, fmt.Sprintf("HTTP %d", resp.StatusCode)
	}

	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFlinkResponse+1))
	if err != nil {
		return nil, flinkFailed, "reading answer: " + err.Error()
	}
	if len(body) > maxFlinkResponse {
		return nil, flinkFailed, fmt.Sprintf("answer larger than %d bytes", maxFlinkResponse)
	}
	return body, flinkFailed, ""
}

// decodeJobDetails reads the fields of Flink's JobDetailsInfo that matter
// here: "state" (required) and "jid" (checked when present), both strings.
func decodeJobDetails(body []byte) (state, jid string, err error) {
	fields, err := decodeObject(body, "state", "jid")
	if err != nil {
		return "", "", err
	}
	if _, ok := fields["state"]; !ok {
		return "", "", errors.New(`no "state" field`)
	}
	if err := stringField(fields, "state", &state); err != nil {
		return "", "", err
	}
	return state, jid, stringField(fields, "jid", &jid)
}

// decodeTaskManagers reads the resource ids of Flink's TaskManagersInfo:
// "taskmanagers" (required), an array of objects, each with its string
// "id" (required).
func decodeTaskManagers(body []byte) ([]string, error) {
	fields, err := decodeObject(body, "taskmanagers")
	if err != nil {
		return nil, err
	}
	raw, ok := fields["taskmanagers"]
	if !ok {
		return nil, errors.New(`no "taskmanagers" field`)
	}
	var list []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' {
		return nil, errors.New(`field "taskmanagers" is not an array`)
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	ids := make([]string, len(list))
	for i, tm := range list {
		fields, err := decodeObject(tm, "id")
		if err != nil {
			return nil, fmt.Errorf("TaskManager %d: %w", i, err)
		}
		if _, ok := fields["id"]; !ok {
			return nil, fmt.Errorf(`TaskManager %d: no "id" field`, i)
		}
		if err := stringField(fields, "id", &ids[i]); err != nil {
			return nil, fmt.Errorf("TaskManager %d: %w", i, err)
		}
	}
	return ids, nil
}

// decodeObject reads the fields named wanted of the JSON object body. It
// is stricter than json.Unmarshal into a struct: keys match exactly (not
// case-folded), a wanted key given twice is an error (which one would
// Flink have meant?), and nothing may follow the object. A wanted field
// not given is not in the map.
func decodeObject(body []byte, wanted ...string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil {
		return nil, err
	} else if tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if !slices.Contains(wanted, key) {
			continue
		}
		if _, seen := fields[key]; seen {
			return nil, fmt.Errorf("field %q given twice", key)
		}
		fields[key] = raw
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return fields, nil
}

// stringField decodes field key of fields, if given, into dst; it must be
// a JSON string.
func stringField(fields map[string]json.RawMessage, key string, dst *string) error {
	raw, ok := fields[key]
	if !ok {
		return nil
	}
	if len(raw) == 0 || raw[0] != '"' {
		return fmt.Errorf("field %q is not a string", key)
	}
	return json.Unmarshal(raw, dst)
}

// quoteShort quotes s for evidence, cut to a readable length: the string came
// from the network and may be anything.
func quoteShort(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q...", s[:max])
	}
	return fmt.Sprintf("%q", s)
}
