package store

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"golang.org/x/time/rate"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
)

// DamagedChunk is a chunk or an object Scrub could not read back as its
// hash.
type DamagedChunk struct {
	Hash cas.Hash `json:"hash"`
	Kind string   `json:"kind"` // ProblemMissingChunk, ProblemCorruptChunk, ProblemMissingObject, ProblemCorruptObject or ProblemQuarantined
	Why  string   `json:"why"`
	Used bool     `json:"used"` // a manifest uses it; an unused one is only garbage that reads badly
}

// Scrubbed is what Scrub found.
type Scrubbed struct {
	Chunks  int            `json:"chunks"`  // chunks read
	Objects int            `json:"objects"` // objects read
	Bytes   int64          `json:"bytes"`   // their uncompressed bytes
	Damaged []DamagedChunk `json:"damaged"`
	// Files are the files that use a damaged chunk: what `statefs fsck
	// --repair` would change.
	Files []index.DamagedFile `json:"files"`
	// Quarantined are the damaged objects this scrub quarantined
	// (ScrubOptions.Quarantine).
	Quarantined []cas.Hash `json:"quarantined"`
}

// ScrubOptions say how Scrub goes.
type ScrubOptions struct {
	// Rate is the most bytes of chunks Scrub reads a second (0: as fast as
	// the disk gives them), so that a scrub leaves a serving daemon's disk
	// to the jobs.
	Rate int64
	// Progress, if set, is told how many chunks and objects of how many
	// Scrub has read: once before the first (every chunk file, and every
	// chunk a manifest uses that is not one; the same for objects), then
	// after each.
	Progress func(done, total int)
	// Quarantine marks each damaged object that a file is, so that opens
	// of such files fail (index.DB.Quarantine): the daemon's scrubs do.
	Quarantine bool
}

func (s *Store) scrubSet() (used, files []cas.Hash, err error) {
	if used, err = s.Index.UsedChunks(); err != nil {
		return nil, nil, err
	}
	files, err = s.chunkFiles()
	return used, files, err
}

// Scrub reads every chunk and object in the store, used or not, and
// verifies it against its hash (DESIGN invariant 5), and checks that every
// chunk a manifest uses and every object a manifest is are there; it
// reports the damaged ones and the files that use them. It changes nothing
// but, with opts.Quarantine, the quarantine marks of damaged objects. It
// stops when ctx is done.
//
// It may run while the daemon serves the store. Files written meanwhile
// are not scrubbed (the sets are taken at the start), and the collector
// and the executor's removals may take chunks and objects away under it: a
// missing one is damage only if a file still uses it once the scrub is
// over; one no file uses vanished in a sweep, or was garbage.
func (s *Store) Scrub(ctx context.Context, opts ScrubOptions) (Scrubbed, error) {
	var r Scrubbed
	used, files, err := s.scrubSet()
	if err != nil {
		return r, err
	}
	usedObjects, objectFiles, err := s.objectSet()
	if err != nil {
		return r, err
	}
	all, allObjects := union(used, files), union(usedObjects, objectFiles)
	total := len(all) + len(allObjects)
	if opts.Progress != nil {
		opts.Progress(0, total)
	}
	var limit *rate.Limiter
	if opts.Rate > 0 {
		// A chunk is read whole, an object a piece at a time, so the
		// bucket holds one chunk; it starts empty.
		limit = rate.NewLimiter(rate.Limit(opts.Rate), cas.MaxChunk)
		limit.AllowN(time.Now(), cas.MaxChunk)
	}
	wait := func(n int) error {
		r.Bytes += int64(n)
		if err := ctx.Err(); err != nil {
			return err
		}
		if limit != nil && n > 0 && limit.WaitN(ctx, n) != nil {
			// The wait would outlast ctx's deadline, so it failed at once:
			// wait for ctx to end, which stops the scrub.
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	lost, err := s.lostChunks(ctx, all, files, true, func(n int) {
		r.Chunks++
		if opts.Progress != nil {
			opts.Progress(r.Chunks, total)
		}
		wait(n)
	})
	if err != nil {
		return r, err
	}
	lostObjects, err := s.lostObjects(ctx, allObjects, objectFiles, true, wait, func() {
		r.Objects++
		if opts.Progress != nil {
			opts.Progress(r.Chunks+r.Objects, total)
		}
	})
	if err == nil {
		err = ctx.Err() // ended during the wait after the last one
	}
	if err != nil {
		return r, err
	}
	if len(lost) > 0 || len(lostObjects) > 0 {
		r.Files, err = s.Index.DamagedFiles(isIn(lost), isIn(lostObjects))
		if err != nil {
			return r, err
		}
	}
	usedNow := map[cas.Hash]bool{}
	objectNow := map[cas.Hash]bool{}
	for _, f := range r.Files {
		for _, e := range f.Lost {
			usedNow[e.Hash] = true
		}
		if f.Object != nil {
			objectNow[*f.Object] = true
		}
	}
	for _, h := range sortedHashes(lost) {
		if lost[h].kind == ProblemMissingChunk && !usedNow[h] {
			continue // swept under the scrub
		}
		r.Damaged = append(r.Damaged, DamagedChunk{Hash: h, Kind: lost[h].kind, Why: lost[h].why, Used: usedNow[h]})
	}
	for _, h := range sortedHashes(lostObjects) {
		l := lostObjects[h]
		if l.kind == ProblemMissingObject && !objectNow[h] {
			continue // freed under the scrub
		}
		r.Damaged = append(r.Damaged, DamagedChunk{Hash: h, Kind: l.kind, Why: l.why, Used: objectNow[h]})
		if opts.Quarantine && objectNow[h] && l.kind != ProblemQuarantined {
			marked, err := s.Index.Quarantine(h, l.why)
			if err != nil {
				return r, err
			}
			if marked {
				r.Quarantined = append(r.Quarantined, h)
				slog.Error("quarantined a damaged object: opens of the files that are it fail with EIO", "object", h.String(), "why", l.why)
			}
		}
	}
	return r, nil
}

// union merges two sorted lists of hashes into one, each hash once.
func union(a, b []cas.Hash) []cas.Hash {
	out := slices.Concat(a, b)
	slices.SortFunc(out, compareHash)
	return slices.CompactFunc(out, func(x, y cas.Hash) bool { return x == y })
}
