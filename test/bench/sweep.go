package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/owner"
	"github.com/statefs/statefs/store"
)

// collectorAtScale is the second half of workload 7: `statefs gc` over a
// store of the target's size, which a mount would take hours to fill (the
// chunks of a sealed file average 1 MiB), so the harness builds it through
// the store's own packages: files of two jobs whose manifests refer to
// small chunks, every chunk referred to by one file.
func (b *bench) collectorAtScale() *Workload {
	s := b.cfg.Collector
	w := newWorkload(7, fmt.Sprintf("Collector over %s chunks", thousands(int64(s.Chunks))), 1)
	w.Setup = fmt.Sprintf("statefs only, one repetition (gc consumes the store). The harness builds a store offline through statefs's "+
		"store and index packages: %s chunks of 64 bytes, each referred to by one of %s sealed files of %d chunks "+
		"in the checkpoint directories of two jobs, alternating, so half the chunks belong to each job. "+
		"`statefs job gone` marks one job gone, the caches are dropped, and `statefs gc --grace 0s` runs on the store offline: "+
		"it removes the gone job's files (their references) and sweeps every chunk nothing refers to. The time is gc's, process "+
		"start to exit.", thousands(int64(s.Chunks)), thousands(int64(s.Chunks/s.ChunksPerFile)), s.ChunksPerFile)
	build := w.metric("building the store (not timed against a target)", "s", false, nil)
	chunks := w.metric("chunks in the store before gc", "chunks", false, nil)
	swept := w.metric("chunks swept", "chunks", false, nil)
	seconds := w.metric("gc run", "s", false, valueGoal("<", 60, "< 60 s"))
	b.eachRep(w, []target{b.statefs}, func(target) error {
		dir := filepath.Join(b.dir, "gc-scale", "store")
		if err := removeTree(filepath.Dir(dir)); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return err
		}
		defer removeTree(filepath.Dir(dir))
		start := time.Now()
		if err := buildChunkStore(dir, s.Chunks, s.ChunksPerFile); err != nil {
			return fmt.Errorf("building the store: %w", err)
		}
		build.add(statefs, since(start))
		chunks.add(statefs, float64(s.Chunks))
		bin := b.statefs.bin
		if out, err := exec.Command(bin, "job", "--store", dir, "gone", flinkID("gone job")).CombinedOutput(); err != nil {
			return fmt.Errorf("statefs job gone: %v\n%s", err, out)
		}
		b.caches.Drop()
		start = time.Now()
		out, err := exec.Command(bin, "gc", "--store", dir, "--grace", "0s", "--json").Output()
		took := since(start)
		report, err := parseGCReport(out, err)
		if err != nil {
			return err
		}
		seconds.add(statefs, took)
		swept.add(statefs, float64(report.Swept.Chunks))
		b.logf("  gc %.1f s over %d chunks, %d swept", took, s.Chunks, report.Swept.Chunks)
		if want := s.Chunks / s.ChunksPerFile / 2 * s.ChunksPerFile; report.Swept.Chunks != want {
			return fmt.Errorf("statefs gc swept %d chunks, want the gone job's %d", report.Swept.Chunks, want)
		}
		return nil
	})
	w.finish(&b.caches)
	return w
}

// buildChunkStore makes a store in dir with chunks chunks, perFile to a
// file, the files alternating between the checkpoints of a live job and a
// gone one. Four builders write the chunks of a group of files each, in
// bulk, then add the files to the index.
func buildChunkStore(dir string, chunks, perFile int) error {
	s, _, err := store.Open(dir)
	if err != nil {
		return err
	}
	defer s.Close()
	// The chunks go in through the chunk store of the store's directory
	// itself, in bulk: nothing else writes there while this builds.
	chunkStore, err := cas.Open(filepath.Join(dir, "chunks"))
	if err != nil {
		return err
	}
	const builders, group = 4, 8
	files := chunks / perFile
	var g errgroup.Group
	for w := range builders {
		g.Go(func() error {
			bulk := chunkStore.Bulk()
			data := make([]byte, 64)
			copy(data[8:], "a chunk of the collector workload, 64 bytes long.")
			for first := w * group; first < files; first += builders * group {
				ms := map[int]*manifest.Manifest{}
				for file := first; file < min(first+group, files); file++ {
					m := &manifest.Manifest{}
					for i := range perFile {
						binary.LittleEndian.PutUint64(data, uint64(file*perFile+i))
						h := cas.Sum(data)
						if err := bulk.Put(h, data); err != nil {
							return err
						}
						m.Extents = append(m.Extents, manifest.Extent{Off: m.Size, Len: uint32(len(data)), Hash: h})
						m.Size += uint64(len(data))
					}
					ms[file] = m
				}
				if err := bulk.Flush(); err != nil { // before the index refers to them
					return err
				}
				for file, m := range ms {
					job := [2]string{"live job", "gone job"}[file%2]
					p := path.Join(filepath.ToSlash(subtaskDir("", job)), "chk_1", sstName(file))
					if err := addSealedFile(s, p, m); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// addSealedFile creates the file at p, and its directories, with content m,
// as a seal would leave it.
func addSealedFile(s *store.Store, p string, m *manifest.Manifest) error {
	rules := owner.FlinkRules()
	return s.Index.Update(func(tx *index.Tx) error {
		parent := uint64(index.RootIno)
		dirs, name := path.Split(p)
		at := ""
		for _, d := range strings.Split(strings.Trim(dirs, "/"), "/") {
			at = path.Join(at, d)
			e, err := tx.Lookup(parent, d)
			if err == nil {
				parent = e.Ino
				continue
			}
			ino, err := create(s, tx, parent, d, at, syscall.S_IFDIR|0o755, rules)
			if err != nil {
				return err
			}
			parent = ino
		}
		ino, err := create(s, tx, parent, name, p, syscall.S_IFREG|0o644, rules)
		if err != nil {
			return err
		}
		// A staging id no file has: Seal only checks that the inode refers to it.
		n, err := tx.Inode(ino)
		if err != nil {
			return err
		}
		if _, err := tx.SetStaging(n, ino); err != nil {
			return err
		}
		now := index.Now()
		return tx.Seal(ino, ino, m, now, now)
	})
}

func create(s *store.Store, tx *index.Tx, parent uint64, name, p string, mode uint32, rules *owner.Rules) (uint64, error) {
	n, err := s.Index.NewInode(mode, 0, 0)
	if err != nil {
		return 0, err
	}
	return n.Ino, tx.CreateOwned(parent, name, n, rules.Owner(p))
}

// removeTree removes dir, the work dir of a store of this workload, and
// everything in it: the store's chunk directories four at a time, since
// they hold half a million files.
func removeTree(dir string) error {
	chunks := filepath.Join(dir, "store", "chunks")
	entries, err := os.ReadDir(chunks)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var g errgroup.Group
	g.SetLimit(4)
	for _, e := range entries {
		g.Go(func() error { return os.RemoveAll(filepath.Join(chunks, e.Name())) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}
