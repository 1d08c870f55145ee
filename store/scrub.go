package store

import (
	"context"
	"slices"
	"time"

	"golang.org/x/time/rate"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
)

// DamagedChunk is a chunk Scrub could not read back as its hash.
type DamagedChunk struct {
	Hash cas.Hash `json:"hash"`
	Kind string   `json:"kind"` // ProblemMissingChunk or ProblemCorruptChunk
	Why  string   `json:"why"`
	Used bool     `json:"used"` // a manifest uses it; an unused one is only garbage that reads badly
}

// Scrubbed is what Scrub found.
type Scrubbed struct {
	Chunks  int            `json:"chunks"` // chunks read
	Bytes   int64          `json:"bytes"`  // their uncompressed bytes
	Damaged []DamagedChunk `json:"damaged"`
	// Files are the files that use a damaged chunk: what `statefs fsck
	// --repair` would change.
	Files []index.DamagedFile `json:"files"`
}

// ScrubOptions say how Scrub goes.
type ScrubOptions struct {
	// Rate is the most bytes of chunks Scrub reads a second (0: as fast as
	// the disk gives them), so that a scrub leaves a serving daemon's disk
	// to the jobs.
	Rate int64
	// Progress, if set, is told how many chunks of how many Scrub has read:
	// once before the first (every chunk file, and every chunk a manifest
	// uses that is not one), then after each.
	Progress func(done, total int)
}

func (s *Store) scrubSet() (used, files []cas.Hash, err error) {
	if used, err = s.Index.UsedChunks(); err != nil {
		return nil, nil, err
	}
	files, err = s.chunkFiles()
	return used, files, err
}

// Scrub reads every chunk in the store, used or not, and verifies it
// against its hash (DESIGN invariant 5), and checks that every chunk a
// manifest uses is there; it reports the damaged chunks and the files
// that use them, and changes nothing. It stops when ctx is done.
//
// It may run while the daemon serves the store. Files written meanwhile
// are not scrubbed (the set of chunks is taken at the start), and the
// collector may sweep chunks under it: a chunk that is missing when it is
// read is damage only if a file still uses it once the scrub is over; one
// no file uses vanished in a sweep, or was garbage.
func (s *Store) Scrub(ctx context.Context, opts ScrubOptions) (Scrubbed, error) {
	var r Scrubbed
	used, files, err := s.scrubSet()
	if err != nil {
		return r, err
	}
	all := union(used, files)
	if opts.Progress != nil {
		opts.Progress(0, len(all))
	}
	var limit *rate.Limiter
	if opts.Rate > 0 {
		// A chunk is read whole, so the bucket holds one; it starts empty.
		limit = rate.NewLimiter(rate.Limit(opts.Rate), cas.MaxChunk)
		limit.AllowN(time.Now(), cas.MaxChunk)
	}
	lost, err := s.lostChunks(ctx, all, files, true, func(n int) {
		r.Chunks++
		r.Bytes += int64(n)
		if opts.Progress != nil {
			opts.Progress(r.Chunks, len(all))
		}
		if limit != nil && n > 0 && limit.WaitN(ctx, n) != nil {
			// The wait would outlast ctx's deadline, so it failed at once:
			// wait for ctx to end, which stops lostChunks.
			<-ctx.Done()
		}
	})
	if err == nil {
		err = ctx.Err() // ended during the wait after the last chunk
	}
	if err != nil {
		return r, err
	}
	if len(lost) > 0 {
		r.Files, err = s.Index.DamagedFiles(func(h cas.Hash) bool { _, ok := lost[h]; return ok })
		if err != nil {
			return r, err
		}
	}
	usedNow := map[cas.Hash]bool{}
	for _, f := range r.Files {
		for _, e := range f.Lost {
			usedNow[e.Hash] = true
		}
	}
	for _, h := range sortedHashes(lost) {
		if lost[h].kind == ProblemMissingChunk && !usedNow[h] {
			continue // swept under the scrub
		}
		r.Damaged = append(r.Damaged, DamagedChunk{Hash: h, Kind: lost[h].kind, Why: lost[h].why, Used: usedNow[h]})
	}
	return r, nil
}

// union merges two sorted lists of hashes into one, each hash once.
func union(a, b []cas.Hash) []cas.Hash {
	out := slices.Concat(a, b)
	slices.SortFunc(out, compareHash)
	return slices.CompactFunc(out, func(x, y cas.Hash) bool { return x == y })
}
