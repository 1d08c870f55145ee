package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/statefs/statefs/store"
)

// ScrubLine is one line of the daemon's answer to a scrub, which streams
// JSON lines: the number of chunks and objects to read first, then how
// many are read, every scrubEvery, and last the report or the error.
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

// scrub reads and verifies every chunk and object of the store the daemon
// serves (store.Scrub), one scrub at a time, and quarantines the damaged
// objects files are, as the periodic scrub does: the daemon serves them,
// and an open of a damaged one must fail rather than hand the kernel
// unverified bytes by passthrough. A client that goes away stops it, and
// so does Close.
func (s *Server) scrub(w http.ResponseWriter, r *http.Request) {
	var req ScrubRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Rate < 0 {
		http.Error(w, fmt.Sprintf("bad request: rate %d is negative", req.Rate), http.StatusBadRequest)
		return
	}
	release, ok := s.admitAlone(w, &s.scrubMu, "a scrub")
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
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.stopping(), cancel)()
	var last time.Time
	report, err := s.Store.Scrub(ctx, store.ScrubOptions{Rate: req.Rate, Quarantine: true, Progress: func(done, total int) {
		if s.Scrubbing != nil {
			s.Scrubbing(done, total)
		}
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
	if s.Scrubbed != nil {
		s.Scrubbed(report, err)
	}
	if err != nil {
		send(ScrubLine{Error: err.Error()})
		return
	}
	send(ScrubLine{Report: &report})
}

// Scrub has the daemon scrub its store, at most opts.Rate bytes a second;
// opts.Progress, if set, is told how many chunks and objects of how many
// are read as the scrub goes. The daemon quarantines the damaged objects
// whatever opts.Quarantine says (Server.scrub).
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

// ScrubEvery scrubs the whole store every interval, at most rate bytes a
// second (0: no limit), until ctx ends or Close begins. The first pass
// starts one interval after the call; a pass that takes longer than
// interval is followed by the next at once. A pass never
// overlaps one asked for on the socket: it waits for that one to end. It
// quarantines the damaged objects files are, and logs one line a pass.
func (s *Server) ScrubEvery(ctx context.Context, interval time.Duration, rate int64) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.stopping(), cancel)()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.scrubMu.Lock()
		if ctx.Err() != nil { // stopped while a scrub on the socket ran
			s.scrubMu.Unlock()
			return
		}
		start := time.Now()
		report, err := s.Store.Scrub(ctx, store.ScrubOptions{Rate: rate, Quarantine: true, Progress: s.Scrubbing})
		s.scrubMu.Unlock()
		if s.Scrubbed != nil {
			s.Scrubbed(report, err)
		}
		attrs := []any{"chunks", report.Chunks, "objects", report.Objects, "bytes", report.Bytes,
			"damaged", len(report.Damaged), "quarantined", len(report.Quarantined), "took", time.Since(start).Round(time.Millisecond)}
		switch {
		case ctx.Err() != nil:
			slog.Info("periodic scrub stopped before its end", attrs...)
			return
		case err != nil:
			slog.Error("periodic scrub failed", append(attrs, "err", err)...)
		case len(report.Damaged) > 0:
			slog.Warn("periodic scrub found damage; statefs scrub lists it, statefs fsck --repair makes the lost ranges holes", attrs...)
		default:
			slog.Info("periodic scrub", attrs...)
		}
	}
}
