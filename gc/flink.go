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
type FlinkREST struct {
	URLs           []string
	Client         *http.Client  // nil: a plain client; Timeout applies either way
	Timeout        time.Duration // per request; <= 0 means 5s
	NotFoundIsGone bool
}

var _ Oracle = (*FlinkREST)(nil)

const (
	defaultFlinkTimeout = 5 * time.Second
	// maxFlinkResponse caps the body read. /jobs/<id> carries the job's plan,
	// whose operator descriptions run long for SQL jobs; a body over the cap
	// is Unknown, never truncated and parsed.
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
	flinkFailed   flinkAnswer = iota // no answer: unreachable, an error, a malformed body
	flinkDoubt                       // an answer that decides nothing: SUSPENDED, a state unknown here
	flinkLive                        // a non-terminal state
	flinkTerminal                    // FINISHED, CANCELED or FAILED
	flinkNotFound                    // 404
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

	client := f.client()
	answers := make([]flinkAnswer, len(f.URLs))
	evidence := make([]string, len(f.URLs))
	var wg sync.WaitGroup
	for i, base := range f.URLs {
		wg.Go(func() {
			a, said := f.ask(ctx, client, base, job)
			answers[i], evidence[i] = a, "flink "+base+": "+said
		})
	}
	wg.Wait()

	count := map[flinkAnswer]int{}
	for _, a := range answers {
		count[a]++
	}
	switch {
	case count[flinkLive] > 0:
		out.Verdict = index.VerdictLive
	case count[flinkTerminal] > 0:
		out.Verdict = index.VerdictGone
	case f.NotFoundIsGone && count[flinkNotFound] == len(answers):
		out.Verdict = index.VerdictGone
	}
	out.Evidence = strings.Join(evidence, "; ")
	out.NotFound = out.Verdict == index.VerdictUnknown && count[flinkNotFound] == len(answers)
	if out.Verdict == index.VerdictUnknown && count[flinkFailed] > 0 {
		var failed []string
		for i, a := range answers {
			if a == flinkFailed {
				failed = append(failed, evidence[i])
			}
		}
		out.Failure = strings.Join(failed, "; ")
	}
	return out
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

// ask asks one URL and says what it answered, in words for the evidence.
func (f *FlinkREST) ask(ctx context.Context, client *http.Client, base, job string) (flinkAnswer, string) {
	if err := CheckFlinkURL(base); err != nil {
		return flinkFailed, "invalid URL"
	}
	u, _ := url.Parse(base)
	u = u.JoinPath("jobs", job)

	reqCtx, cancel := context.WithTimeout(ctx, f.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, u.String(), nil)
	if err != nil {
		return flinkFailed, "invalid request: " + err.Error()
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() == nil && reqCtx.Err() == context.DeadlineExceeded {
			return flinkFailed, fmt.Sprintf("unreachable: no answer within %v", f.timeout())
		}
		return flinkFailed, "unreachable: " + err.Error()
	}
	defer resp.Body.Close()

	switch {
	case resp.StatusCode == http.StatusNotFound:
		return flinkNotFound, "404 not found"
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return flinkFailed, fmt.Sprintf("HTTP %d redirect to %q not followed", resp.StatusCode, resp.Header.Get("Location"))
	case resp.StatusCode != http.StatusOK:
		return flinkFailed, fmt.Sprintf("HTTP %d", resp.StatusCode)
	}

	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFlinkResponse+1))
	if err != nil {
		return flinkFailed, "reading answer: " + err.Error()
	}
	if len(body) > maxFlinkResponse {
		return flinkFailed, fmt.Sprintf("answer larger than %d bytes", maxFlinkResponse)
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

// decodeJobDetails reads the fields of Flink's JobDetailsInfo that matter
// here: "state" (required) and "jid" (checked when present). It is stricter
// than json.Unmarshal into a struct: keys match exactly (not case-folded), a
// key given twice is an error (which one would Flink have meant?), and nothing
// may follow the object.
func decodeJobDetails(body []byte) (state, jid string, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil {
		return "", "", err
	} else if tok != json.Delim('{') {
		return "", "", errors.New("not a JSON object")
	}
	fields := map[string]*string{"state": &state, "jid": &jid}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", "", err
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return "", "", err
		}
		dst, wanted := fields[key]
		if !wanted {
			continue
		}
		if seen[key] {
			return "", "", fmt.Errorf("field %q given twice", key)
		}
		seen[key] = true
		if len(raw) == 0 || raw[0] != '"' {
			return "", "", fmt.Errorf("field %q is not a string", key)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return "", "", err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return "", "", err
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", "", errors.New("data after the JSON object")
	}
	if !seen["state"] {
		return "", "", errors.New(`no "state" field`)
	}
	return state, jid, nil
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
