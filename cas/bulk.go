package cas

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Bulk stores many chunks at once, faster than one Put each: instead of two
// fsyncs per chunk it syncs the whole filesystem twice per batch. Chunks
// are written to temporary files; Flush syncs them all, renames them to
// their names and syncs again, so a chunk's name still appears only for a
// complete, synced file (DESIGN invariant 2). Nothing may refer to a chunk
// Bulk stored before the Flush that follows it returns. A Bulk is for one
// goroutine, and no Put to the same directory may run meanwhile (a Put
// could find a name that is not yet durable).
type Bulk struct {
	s       *Chunks
	pending [][2]string // temporary file, chunk name
	buf     []byte
}

// bulkBatch is how many chunks a Bulk writes between two flushes.
const bulkBatch = 8192

// Bulk starts a bulk load of the chunk directory.
func (s *Chunks) Bulk() *Bulk { return &Bulk{s: s} }

// Put stores data under h, which the caller computed as Sum(data), unless
// a chunk with that hash is already stored; it flushes every bulkBatch
// chunks.
func (b *Bulk) Put(h Hash, data []byte) error {
	if err := b.s.writable("put", h); err != nil {
		return err
	}
	if len(data) > MaxChunk {
		return fmt.Errorf("cas: put %s: %d bytes, more than a chunk's %d", h, len(data), MaxChunk)
	}
	path := b.s.path(h)
	switch _, err := os.Lstat(path); {
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("cas: put %s: %w", h, err)
	}
	content, err := encode(h, data, &b.buf)
	var tmp string
	if err == nil {
		tmp, _, err = writeTemp(filepath.Dir(path), false, content)
	}
	if err != nil {
		return fmt.Errorf("cas: put %s: %w", h, err)
	}
	b.pending = append(b.pending, [2]string{tmp, path})
	if len(b.pending) >= bulkBatch {
		return b.Flush()
	}
	return nil
}

// Flush makes every chunk Put so far durable under its name.
func (b *Bulk) Flush() error {
	if len(b.pending) == 0 {
		return nil
	}
	if err := b.syncfs(); err != nil {
		return err
	}
	for _, p := range b.pending {
		// Two temporary files of one hash hold the same bytes: whichever
		// rename lands last is as good as the first.
		if err := os.Rename(p[0], p[1]); err != nil {
			return fmt.Errorf("cas: bulk put: %w", err)
		}
	}
	b.pending = b.pending[:0]
	return b.syncfs()
}

// syncfs writes out the filesystem the chunk directory is on.
func (b *Bulk) syncfs() error {
	d, err := os.Open(b.s.dir)
	if err != nil {
		return fmt.Errorf("cas: bulk put: %w", err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("cas: bulk put: syncfs %s: %w", b.s.dir, err)
	}
	return nil
}
