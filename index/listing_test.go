package index_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/statefs/statefs/index"
)

// TestListingFollowsCommits makes and removes names at random in a few
// directories, as a RocksDB directory churns, and checks after every step
// that Listing, served from the cache once a directory was listed, is what
// the index holds; the strict DB compares every cached directory with the
// index after each commit too. A transaction that fails leaves no trace.
func TestListingFollowsCommits(t *testing.T) {
	db := openDB(t)
	dirs := []uint64{index.RootIno,
		create(t, db, index.RootIno, "a", dirMode), create(t, db, index.RootIno, "b", dirMode)}
	rng := rand.New(rand.NewPCG(1, 2))
	name := func() string { return fmt.Sprintf("%06d.sst", rng.IntN(60)) }
	for step := range 1500 {
		dir := dirs[rng.IntN(len(dirs))]
		switch op := rng.IntN(10); {
		case op < 4:
			_ = db.Update(func(tx *index.Tx) error {
				ino, err := db.NewIno()
				if err != nil {
					return err
				}
				now := index.Now()
				return tx.Create(dir, name(), &index.Inode{Ino: ino, Mode: fileMode, Atime: now, Mtime: now, Ctime: now})
			}) // an existing name fails: nothing changes
		case op < 6:
			_ = db.Update(func(tx *index.Tx) error { _, err := tx.Unlink(dir, name()); return err })
		case op < 8:
			to := dirs[rng.IntN(len(dirs))]
			_ = db.Update(func(tx *index.Tx) error { _, err := tx.Rename(dir, name(), to, name(), 0); return err })
		case op < 9:
			_ = db.Update(func(tx *index.Tx) error {
				var ents []index.Dirent
				if err := tx.ReadDir(dir, func(d index.Dirent) bool { ents = append(ents, d); return true }); err != nil {
					return err
				}
				for _, d := range ents {
					if d.Mode&0o170000 == fileMode&0o170000 {
						if _, err := tx.Link(dirs[rng.IntN(len(dirs))], name(), d.Ino); err != nil {
							return err
						}
						break
					}
				}
				return nil
			})
		default:
			// Made, then the transaction fails: the name must not show.
			err := db.Update(func(tx *index.Tx) error {
				ino, err := db.NewIno()
				if err != nil {
					return err
				}
				now := index.Now()
				if err := tx.Create(dir, "never", &index.Inode{Ino: ino, Mode: fileMode, Atime: now, Mtime: now, Ctime: now}); err != nil {
					return err
				}
				return errors.New("rolled back")
			})
			if err == nil {
				t.Fatal("a failed transaction committed")
			}
		}
		for _, d := range dirs {
			want := readDir(t, db, d)
			got, err := db.Listing(d, "", 0)
			if err != nil {
				t.Fatalf("step %d: Listing(%d): %v", step, d, err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: Listing(%d) = %v, the index holds %v", step, d, got, want)
			}
			if len(want) > 2 {
				from := want[len(want)/2].Name
				got, err := db.Listing(d, from, 2)
				if err != nil || !slices.Equal(got, want[len(want)/2:len(want)/2+2]) {
					t.Fatalf("step %d: Listing(%d, %q, 2) = %v, %v; want %v", step, d, from, got, err, want[len(want)/2:len(want)/2+2])
				}
			}
		}
	}
}

// readDir is directory dir's entries as a transaction reads them.
func readDir(t *testing.T, db *index.DB, dir uint64) []index.Dirent {
	t.Helper()
	var ents []index.Dirent
	err := db.View(func(tx *index.Tx) error {
		return tx.ReadDir(dir, func(d index.Dirent) bool { ents = append(ents, d); return true })
	})
	if err != nil {
		t.Fatalf("ReadDir(%d): %v", dir, err)
	}
	return ents
}
