package store_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/testbytes"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/store"
)

// sealNew creates file name in the root holding data and seals it, as the
// fs layer does; safe to call from any goroutine.
func sealNew(s *store.Store, name string, data []byte) error {
	ino, _, err := newFile(s, name, func(f *os.File) error { _, err := f.Write(data); return err })
	if err != nil {
		return err
	}
	x, err := s.PrepareSeal(ino)
	if err != nil {
		return err
	}
	// The fs layer takes its own lock and checks the file between the two;
	// a pause here holds the race window open.
	time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
	return s.CommitSeal(x)
}

// remove unlinks name from the root and reaps its inode.
func remove(s *store.Store, name string) error {
	return s.Index.Update(func(tx *index.Tx) error {
		n, err := tx.Unlink(index.RootIno, name)
		if err != nil {
			return err
		}
		_, err = tx.Reap(n.Ino)
		return err
	})
}

// The classic CAS race (DESIGN invariant 3): writers keep sealing content
// whose chunks the store already holds, and deleting files so that those
// chunks fall to zero references, while the sweeper removes every chunk
// it sees unreferenced. No surviving file may lose a chunk.
func TestSweepRacingDedupingWriters(t *testing.T) {
	s := newChunkedStore(t)
	blobs := make([][]byte, 8)
	for i := range blobs {
		blobs[i] = make([]byte, 1<<20+i*4096) // above the inline limit: chunked
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		for j := range blobs[i] {
			blobs[i][j] = byte(rng.Uint32())
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	var (
		mu        sync.Mutex
		survivors = map[string]int{} // file name -> blob
		sealed    atomic.Int64
		sweeps    atomic.Int64
		swept     atomic.Int64
		wg        sync.WaitGroup
		errs      = make(chan error, 8)
	)
	for w := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var mine []string
			for i := 0; time.Now().Before(deadline); i++ {
				name := fmt.Sprintf("w%d-%d", w, i)
				b := rng.IntN(len(blobs))
				if err := sealNew(s, name, blobs[b]); err != nil {
					errs <- fmt.Errorf("sealing %s: %w", name, err)
					return
				}
				sealed.Add(1)
				mu.Lock()
				survivors[name] = b
				mu.Unlock()
				mine = append(mine, name)
				// Deleting the newest file right away makes its chunks
				// garbage the moment another writer is about to reuse them.
				if rng.IntN(10) > 0 {
					victim := mine[len(mine)-1]
					mine = mine[:len(mine)-1]
					mu.Lock()
					delete(survivors, victim)
					mu.Unlock()
					if err := remove(s, victim); err != nil {
						errs <- fmt.Errorf("removing %s: %w", victim, err)
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for time.Now().Before(deadline) {
			sw, err := s.Sweep()
			if err != nil {
				errs <- fmt.Errorf("sweep: %w", err)
				return
			}
			sweeps.Add(1)
			swept.Add(int64(sw.Chunks))
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if swept.Load() == 0 {
		t.Fatalf("the sweeper removed no chunk in %d sweeps: the race was not exercised", sweeps.Load())
	}
	for name, b := range survivors {
		var n *index.Inode
		err := s.Index.View(func(tx *index.Tx) error {
			d, err := tx.Lookup(index.RootIno, name)
			if err != nil {
				return err
			}
			n, err = tx.Inode(d.Ino)
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m, err := manifestOf(s, n.Ino)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := make([]byte, len(blobs[b]))
		if _, err := s.ReadAt(n.Ino, m, got, 0); err != nil {
			t.Fatalf("%s lost a chunk to the sweeper: %v", name, err)
		}
		if string(got) != string(blobs[b]) {
			t.Fatalf("%s reads back wrong bytes", name)
		}
	}
	t.Logf("%d files sealed, %d sweeps removed %d chunks, %d files verified", sealed.Load(), sweeps.Load(), swept.Load(), len(survivors))
}

func manifestOf(s *store.Store, ino uint64) (*manifest.Manifest, error) {
	var m *manifest.Manifest
	err := s.Index.View(func(tx *index.Tx) (err error) {
		m, err = tx.Manifest(ino)
		return err
	})
	return m, err
}

// The same race, forced: a seal that deduplicates against a chunk starts
// right when the sweeper has found the chunk unreferenced and is about to
// remove it. The seal must wait for the sweep, and then store the chunk
// anew; without the chunk guard it commits a reference to a chunk the
// sweeper then removes.
func TestSweepWaitsOutADedupingSeal(t *testing.T) {
	s := newChunkedStore(t)
	blob := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range blob {
		blob[i] = byte(rng.Uint32())
	}
	if err := sealNew(s, "old", blob); err != nil {
		t.Fatal(err)
	}
	if err := remove(s, "old"); err != nil { // its chunks are garbage now
		t.Fatal(err)
	}
	sealed := make(chan error, 1)
	once := sync.Once{}
	store.SetBeforeRemove(s, func(cas.Hash) {
		once.Do(func() {
			go func() { sealed <- sealNew(s, "new", blob) }()
			select {
			case err := <-sealed: // the seal did not wait for the sweep
				sealed <- err
			case <-time.After(300 * time.Millisecond):
			}
		})
	})
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	if err := <-sealed; err != nil {
		t.Fatal(err)
	}
	var ino uint64
	var m *manifest.Manifest
	err := s.Index.View(func(tx *index.Tx) error {
		d, err := tx.Lookup(index.RootIno, "new")
		if err != nil {
			return err
		}
		ino = d.Ino
		m, err = tx.Manifest(ino)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(blob))
	if _, err := s.ReadAt(ino, m, got, 0); err != nil {
		t.Fatalf("the sweeper took the chunk of a file sealed meanwhile: %v", err)
	}
	if !bytes.Equal(got, blob) {
		t.Fatal("the file sealed during the sweep reads back other bytes")
	}
}

// A seal holds a sweep off only from the chunks it pinned: a sweep runs to
// its end while a seal of content whose chunks were garbage waits to
// commit, removes the other garbage, and leaves the seal's chunks, which
// the commit then refers to.
func TestSweepRunsBesideAnUncommittedSeal(t *testing.T) {
	s := newChunkedStore(t)
	kept, other := testbytes.Random(1<<20, 11), testbytes.Random(1<<20, 12)
	for name, data := range map[string][]byte{"kept": kept, "other": other} {
		if err := sealNew(s, name, data); err != nil {
			t.Fatal(err)
		}
		if err := remove(s, name); err != nil { // its chunks are garbage now
			t.Fatal(err)
		}
	}
	ino, _ := addContent(t, s, "again", kept)
	x, err := s.PrepareSeal(ino) // deduplicated against the garbage, not committed
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan store.Swept, 1)
	go func() {
		sw, err := s.Sweep()
		if err != nil {
			t.Error(err)
		}
		done <- sw
	}()
	select {
	case sw := <-done:
		if sw.Chunks == 0 {
			t.Error("the sweep removed nothing: the other file's chunks were garbage")
		}
	case <-time.After(10 * time.Second):
		x.Drop()
		t.Fatal("the sweep waited for a seal that had not committed")
	}
	if err := s.CommitSeal(x); err != nil {
		t.Fatal(err)
	}
	m := sealedManifest(t, s, ino)
	got := make([]byte, len(kept))
	if _, err := s.ReadAt(ino, m, got, 0); err != nil {
		t.Fatalf("the sweep took a chunk the seal had pinned: %v", err)
	}
	if !bytes.Equal(got, kept) {
		t.Fatal("the sealed file reads back other bytes")
	}
}
