package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/crashpoint"
	"github.com/statefs/statefs/manifest"
)

// InlineMax is the largest file whose content is kept in the index itself
// rather than in chunks.
const InlineMax = 32 << 10

// Sealed is staging content cut into chunks and stored, ready to replace
// the staging reference in the index (CommitSeal).
type Sealed struct {
	Ino      uint64
	Staging  uint64
	Manifest *manifest.Manifest
	Atime    int64 // the staging file's times, the file's until now
	Mtime    int64
	Stored   int64 // bytes of new chunks written to disk

	// pinned are the chunks the seal keeps from Sweep until it is committed
	// or dropped (chunkGuard).
	pinned  []cas.Hash
	guard   *chunkGuard
	release sync.Once
}

// Drop gives up a seal that will not be committed. Its new chunks are
// garbage for the next sweep.
func (x *Sealed) Drop() { x.release.Do(func() { x.guard.unpin(x.pinned) }) }

// Seal cuts the staging content of inode ino into content-defined chunks,
// stores the ones the store does not have yet, and returns the manifest.
// The index is not changed: the caller commits with CommitSeal if the file
// was not written meanwhile. Nil if the inode has no staging content.
func (s *Store) Seal(ino uint64) (*Sealed, error) {
	var n *index.Inode
	err := s.Index.View(func(tx *index.Tx) (err error) {
		n, err = tx.Inode(ino)
		return err
	})
	if errors.Is(err, index.ErrNotFound) {
		return nil, nil
	}
	if err != nil || n.Staging == 0 {
		return nil, err
	}
	f, err := os.Open(s.StagingPath(n.Staging))
	if err != nil {
		return nil, fmt.Errorf("sealing inode %d: %w", ino, err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	if st.Size > InlineMax {
		if err := s.roomFor(st.Blocks * 512); err != nil {
			return nil, fmt.Errorf("sealing inode %d: %w", ino, err)
		}
	}
	x := &Sealed{Ino: ino, Staging: n.Staging, Atime: st.Atim.Nano(), Mtime: st.Mtim.Nano(),
		Manifest: &manifest.Manifest{Size: uint64(st.Size)}, guard: &s.guard}
	if st.Size <= InlineMax {
		x.Manifest.Inline = make([]byte, st.Size)
		if _, err := io.ReadFull(f, x.Manifest.Inline); err != nil {
			x.Drop()
			return nil, fmt.Errorf("sealing inode %d: %w", ino, err)
		}
		return x, nil
	}
	if err := s.chunkFile(f, &st, x); err != nil {
		x.Drop()
		return nil, fmt.Errorf("sealing inode %d: %w", ino, err)
	}
	return x, nil
}

// chunkFile stores the content of f as chunks. A sparse file's holes stay
// holes in the manifest: only its data regions are cut and stored.
func (s *Store) chunkFile(f *os.File, st *unix.Stat_t, x *Sealed) error {
	regions, err := dataRegions(f, st)
	if err != nil {
		return err
	}
	var buf []byte
	for _, r := range regions {
		ch := cas.NewChunker(io.NewSectionReader(f, r[0], r[1]-r[0]))
		pos := r[0]
		for {
			data, err := ch.Next(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			buf = data
			h := cas.Sum(data)
			// The chunk this seal stores or finds already stored must not
			// be swept before the manifest that refers to it is committed
			// (DESIGN invariant 3).
			s.guard.pin(h)
			x.pinned = append(x.pinned, h)
			stored, err := s.chunks.Put(h, data)
			if err != nil {
				return err
			}
			x.Stored += stored
			crashpoint.Hit(crashpoint.SealChunkStored)
			x.Manifest.Extents = append(x.Manifest.Extents, manifest.Extent{Off: uint64(pos), Len: uint32(len(data)), Hash: h})
			pos += int64(len(data))
		}
	}
	return nil
}

// dataRegions lists the [start, end) byte ranges of f that hold data. A
// file with as many blocks as bytes is one region. A sparse one is asked
// with SEEK_DATA/SEEK_HOLE, after fdatasync: until its delayed allocations
// are written back, a filesystem may report a hole where data waits in the
// page cache (seen on ext4 while the caches were being dropped), and a
// missed region would be lost data.
func dataRegions(f *os.File, st *unix.Stat_t) ([][2]int64, error) {
	if st.Blocks*512 >= st.Size {
		return [][2]int64{{0, st.Size}}, nil
	}
	fd := int(f.Fd())
	if err := unix.Fdatasync(fd); err != nil {
		return nil, err
	}
	var regions [][2]int64
	for off := int64(0); off < st.Size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) || start >= st.Size {
			break // only a hole remains
		}
		if err != nil {
			return nil, err
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return nil, err
		}
		end = min(end, st.Size)
		regions = append(regions, [2]int64{start, end})
		off = end
	}
	return regions, nil
}

// CommitSeal makes the manifest of x the inode's content in one index
// transaction; the staging file goes after the commit. index.ErrStale if
// the inode no longer refers to the staging file that was sealed.
func (s *Store) CommitSeal(x *Sealed) error {
	defer x.Drop()
	crashpoint.Hit(crashpoint.SealBeforeCommit)
	return s.Index.Update(func(tx *index.Tx) error {
		// Before the staging file goes.
		tx.OnCommit(func() { crashpoint.Hit(crashpoint.SealCommitted) })
		return tx.Seal(x.Ino, x.Staging, x.Manifest, x.Atime, x.Mtime)
	})
}
