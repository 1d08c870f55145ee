package csi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// A Publication is one volume published at one target: what the plugin
// needs to bind the target again after the daemon restarts, and to answer
// NodeGetVolumeStats, which names only the target. Its record is written
// before the bind and removed after the unmount, so every target the plugin
// may have bound has one, whatever point a plugin crash interrupts.
type Publication struct {
	VolumeID string `json:"volume_id"` // the CO's id of the volume
	Volume   string `json:"volume"`    // the tree: volumes/<Volume> under the mount
	Target   string `json:"target"`    // where it is bound
	ReadOnly bool   `json:"read_only"`
}

// decodePublication reads a record as put writes it, and accepts only
// what a publish request could have asked for: a record naming a volume
// such as "../.." would have a rebind bind a tree outside volumes/.
func decodePublication(b []byte) (*Publication, error) {
	var p Publication
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	if p.VolumeID == "" || !utf8.ValidString(p.VolumeID) {
		return nil, fmt.Errorf("volume_id %q is missing or not valid UTF-8", p.VolumeID)
	}
	if err := checkVolumeName(p.Volume); err != nil {
		return nil, err
	}
	if target, err := checkTarget(p.Target, "target"); err != nil || target != p.Target {
		return nil, fmt.Errorf("target %q is not a clean absolute path", p.Target)
	}
	return &p, nil
}

// publications are the records in a directory, one file per target, named
// by a hash of the target path (which may be longer than a file name).
type publications struct{ dir string }

func (ps publications) file(target string) string {
	sum := sha256.Sum256([]byte(target))
	return filepath.Join(ps.dir, hex.EncodeToString(sum[:16])+".json")
}

// get returns target's record, or nil if it has none.
func (ps publications) get(target string) (*Publication, error) {
	b, err := os.ReadFile(ps.file(target))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading publication record: %w", err)
	}
	p, err := decodePublication(b)
	if err != nil || p.Target != target {
		return nil, fmt.Errorf("publication record %s is corrupt", ps.file(target))
	}
	return p, nil
}

// put writes p's record whole or not at all: to a temporary file, then
// renamed over the old one. It is not synced: binds do not outlive a
// reboot either.
func (ps publications) put(p *Publication) error {
	if err := os.MkdirAll(ps.dir, 0o700); err != nil {
		return fmt.Errorf("publication records: %w", err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(ps.dir, ".tmp-")
	if err != nil {
		return fmt.Errorf("writing publication record: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), ps.file(p.Target))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing publication record: %w", err)
	}
	return nil
}

// remove deletes target's record; a missing one is fine.
func (ps publications) remove(target string) error {
	if err := os.Remove(ps.file(target)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing publication record: %w", err)
	}
	return nil
}

// list returns every record; none if the directory does not exist yet. A
// corrupt record is logged and left out, so that it does not keep the
// others from being bound again.
func (ps publications) list() ([]*Publication, error) {
	entries, err := os.ReadDir(ps.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("publication records: %w", err)
	}
	var all []*Publication
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(ps.dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading publication record: %w", err)
		}
		p, err := decodePublication(b)
		if err != nil || ps.file(p.Target) != path {
			slog.Warn("skipping a corrupt publication record", "file", path)
			continue
		}
		all = append(all, p)
	}
	return all, nil
}
