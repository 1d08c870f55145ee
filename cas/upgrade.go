package cas

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Upgrade rewrites every chunk file of an older format version in the
// current one, and returns how many it rewrote and how many it could not
// read. A chunk is verified before it is rewritten; a damaged one is left as
// it is, for scrub and fsck to report. Each file is replaced atomically
// (written beside, synced, renamed over), so a crash leaves the old file or
// the new one, both readable, and a later Upgrade finishes the work.
// Nothing else may use the chunk directory meanwhile.
func (s *Chunks) Upgrade() (upgraded, damaged int, err error) {
	if s.readOnly {
		return 0, 0, fmt.Errorf("cas: upgrade: %w", ErrReadOnly)
	}
	dirs := map[string]bool{}
	var buf []byte
	bp := new([]byte)
	err = s.Hashes(func(h Hash) error {
		f, err := s.open(h)
		if err != nil {
			return err
		}
		var hb [headerSize]byte
		n, rerr := f.ReadAt(hb[:], 0)
		f.Close()
		if rerr != nil && rerr != io.EOF {
			return rerr
		}
		if hd, err := decodeHeader(hb[:n]); err == nil && hd.version == formatVersion {
			return nil
		}
		data, err := s.Get(h, buf)
		if errors.Is(err, ErrCorrupt) {
			damaged++
			return nil
		}
		if err != nil {
			return err
		}
		buf = data
		content, err := encode(h, data, bp)
		if err != nil {
			return err
		}
		if err := replaceChunk(s.path(h), content); err != nil {
			return err
		}
		s.cache.remove(layoutKey(h))
		dirs[filepath.Dir(s.path(h))] = true
		upgraded++
		return nil
	})
	for dir := range dirs {
		if serr := syncDir(dir); err == nil {
			err = serr
		}
	}
	if err != nil {
		return upgraded, damaged, fmt.Errorf("cas: upgrade: %w", err)
	}
	return upgraded, damaged, nil
}

// replaceChunk writes content to a temporary file beside path, syncs it and
// renames it over path. The caller syncs the directory.
func replaceChunk(path string, content [][]byte) error {
	tmp, _, err := writeTemp(filepath.Dir(path), true, content)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
