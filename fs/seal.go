package fs

import (
	"errors"
	"log/slog"
	"time"

	"github.com/statefs/statefs/index"
)

// sealRetryDelay is how long a seal that failed (a full disk, say) waits
// before it is tried again; the content stays in staging meanwhile.
const sealRetryDelay = 30 * time.Second

// scheduleSeal seals inode ino once it has stayed closed for the seal
// delay; a later call restarts the wait.
func (f *FS) scheduleSeal(ino uint64) { f.scheduleSealAfter(ino, f.opts.SealDelay) }

func (f *FS) scheduleSealAfter(ino uint64, delay time.Duration) {
	f.sealMu.Lock()
	defer f.sealMu.Unlock()
	if f.closed.Load() {
		return
	}
	if t, ok := f.sealTimers[ino]; ok && t.Stop() {
		t.Reset(delay)
		return
	}
	// Each armed timer counts once in f.sealing; seal or Shutdown ends it.
	// The timer may fire before AfterFunc returns (a delay of 0): seal
	// reads t under sealMu, which this function holds until t is set.
	f.sealing.Add(1)
	var t *time.Timer
	t = time.AfterFunc(delay, func() { f.seal(ino, &t) })
	f.sealTimers[ino] = t
}

// seal seals inode ino if it is still closed, and commits the result only
// if nothing opened or changed the file while the chunks were written. t
// is the timer that fired, read under sealMu.
func (f *FS) seal(ino uint64, t **time.Timer) {
	defer f.sealing.Done()
	f.sealMu.Lock()
	if f.sealTimers[ino] == *t {
		delete(f.sealTimers, ino)
	}
	closed := f.closed.Load()
	f.sealMu.Unlock()
	if closed {
		return
	}
	f.sealers <- struct{}{}
	defer func() { <-f.sealers }()
	if f.closed.Load() {
		return // shutting down: sealed after the next mount
	}

	st := f.acquire(ino)
	defer f.release(st)
	st.mu.RLock()
	busy, gen := st.opens > 0, st.gen
	st.mu.RUnlock()
	if busy {
		return // the last release schedules a new seal
	}
	start := time.Now()
	x, err := f.store.PrepareSeal(ino)
	if err != nil {
		slog.Error("sealing failed; the file stays in staging", "inode", ino, "err", err, "retry_in", sealRetryDelay)
		f.scheduleSealAfter(ino, sealRetryDelay)
		return
	}
	if x == nil {
		return
	}
	defer x.Drop()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.opens > 0 || st.gen != gen {
		return
	}
	err = f.store.CommitSeal(x)
	switch {
	case errors.Is(err, index.ErrStale), errors.Is(err, index.ErrNotFound):
	case errors.Is(err, index.ErrTooLarge):
		// Trying again would read the whole file again for the same
		// answer: it is sealed when it changes, or after a restart.
		slog.Warn("the file has too many chunks to seal in one index transaction; it stays in staging",
			"inode", ino, "bytes", x.Manifest.Size, "extents", len(x.Manifest.Extents))
	case err != nil:
		slog.Error("committing seal failed; the file stays in staging", "inode", ino, "err", err, "retry_in", sealRetryDelay)
		f.scheduleSealAfter(ino, sealRetryDelay)
	default:
		st.manifest = nil
		f.attrsChanged(ino) // the blocks were the staging file's
		if f.opts.OnSeal != nil {
			f.opts.OnSeal(x, time.Since(start))
		}
		slog.Debug("sealed", "inode", ino, "bytes", x.Manifest.Size, "as", x.As, "why", x.Why,
			"extents", len(x.Manifest.Extents), "stored", x.Stored, "took", time.Since(start))
	}
}
