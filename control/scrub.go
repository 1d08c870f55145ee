package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/statefs/statefs/store"
)

// ScrubLine is one line of the daemon's answer to a scrub, which streams
// JSON lines: the number of chunks to read first, then how many are read,
// every scrubEvery, and last the report or the error.
type ScrubLine struct {
	Total  int             `json:"total,omitempty"`
	Done   int             `json:"done,omitempty"`
	Report *store.Scrubbed `json:"report,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// ScrubRequest is the body of a scrub request.
type ScrubRequest struct {
	Rate int64 `json:"rate"` // the most bytes of chunks read a second; 0: no limit
}

// scrubEvery is how often a scrub tells its client how far it got.
const scrubEvery = 200 * time.Millisecond

// scrub reads and verifies every chunk of the store the daemon serves
// (store.Scrub), one scrub at a time; a client that goes away stops it.
func (s *Server) scrub(w http.ResponseWriter, r *http.Request) {
	var req ScrubRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Rate < 0 {
		http.Error(w, fmt.Sprintf("bad request: rate %d is negative", req.Rate), http.StatusBadRequest)
		return
	}
	if !s.scrubMu.TryLock() {
		http.Error(w, "a scrub is already going on", http.StatusConflict)
		return
	}
	defer s.scrubMu.Unlock()
	release, ok := s.admit(w)
	if !ok {
		return
	}
	defer release()
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	send := func(l ScrubLine) {
		enc.Encode(l)
		if flusher != nil {
			flusher.Flush()
		}
	}
	var last time.Time
	report, err := s.Store.Scrub(r.Context(), store.ScrubOptions{Rate: req.Rate, Progress: func(done, total int) {
		switch {
		case done == 0:
			send(ScrubLine{Total: total})
		case time.Since(last) >= scrubEvery:
			send(ScrubLine{Done: done})
		default:
			return
		}
		last = time.Now()
	}})
	if err != nil {
		send(ScrubLine{Error: err.Error()})
		return
	}
	send(ScrubLine{Report: &report})
}

// Scrub has the daemon scrub its store, at most opts.Rate bytes a second;
// opts.Progress, if set, is told how many chunks of how many are read as
// the scrub goes.
func (c *Client) Scrub(ctx context.Context, opts store.ScrubOptions) (store.Scrubbed, error) {
	resp, err := c.send(ctx, http.MethodPost, "/scrub", ScrubRequest{Rate: opts.Rate})
	if err != nil {
		return store.Scrubbed{}, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	total := 0
	for {
		var l ScrubLine
		if err := dec.Decode(&l); err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the daemon ended the scrub without a report")
			}
			return store.Scrubbed{}, fmt.Errorf("scrub: %w", err)
		}
		switch {
		case l.Error != "":
			return store.Scrubbed{}, fmt.Errorf("daemon: %s", l.Error)
		case l.Report != nil:
			return *l.Report, nil
		case l.Total > 0:
			total = l.Total
		}
		if opts.Progress != nil {
			opts.Progress(l.Done, total)
		}
	}
}
