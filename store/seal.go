package store

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
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
	Mtime    int64
	Stored   int64 // bytes of new chunks written to disk
}

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
	x := &Sealed{Ino: ino, Staging: n.Staging, Mtime: st.Mtim.Nano(),
		Manifest: &manifest.Manifest{Size: uint64(st.Size)}}
	if st.Size <= InlineMax {
		x.Manifest.Inline = make([]byte, st.Size)
		if _, err := io.ReadFull(f, x.Manifest.Inline); err != nil {
			return nil, fmt.Errorf("sealing inode %d: %w", ino, err)
		}
		return x, nil
	}
	if err := s.chunkFile(f, st.Size, x); err != nil {
		return nil, fmt.Errorf("sealing inode %d: %w", ino, err)
	}
	return x, nil
}

// chunkFile stores the data regions of f (holes are skipped: they stay
// holes in the manifest) as chunks.
func (s *Store) chunkFile(f *os.File, size int64, x *Sealed) error {
	fd := int(f.Fd())
	var buf []byte
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole remains
		}
		if err != nil {
			return err
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		ch := cas.NewChunker(io.NewSectionReader(f, start, end-start))
		pos := start
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
			stored, err := s.Chunks.Put(h, data)
			if err != nil {
				return err
			}
			x.Stored += stored
			x.Manifest.Extents = append(x.Manifest.Extents, manifest.Extent{Off: uint64(pos), Len: uint32(len(data)), Hash: h})
			pos += int64(len(data))
		}
		off = end
	}
	return nil
}

// CommitSeal makes the manifest of x the inode's content in one index
// transaction and removes the staging file. index.ErrStale if the inode
// no longer refers to the staging file that was sealed.
func (s *Store) CommitSeal(x *Sealed) error {
	err := s.Index.Update(func(tx *index.Tx) error {
		return tx.Seal(x.Ino, x.Staging, x.Manifest, x.Mtime)
	})
	if err != nil {
		return err
	}
	s.RemoveStaging(x.Staging)
	return nil
}
