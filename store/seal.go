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
// rather than in chunks or an object.
const InlineMax = 32 << 10

// Representation is how a seal keeps a file's content.
type Representation string

const (
	// AsInline: in the index, for files of at most InlineMax bytes.
	AsInline Representation = "inline"
	// AsChunks: cut into content-defined chunks, deduplicated chunk by chunk
	// and compressed, for content that compresses.
	AsChunks Representation = "chunks"
	// AsObject: the staging file itself, linked into the object directory
	// and named by its hash, for content that does not compress (SSTs):
	// no byte is written again, and the kernel reads it by passthrough.
	AsObject Representation = "object"
)

// PreparedSeal is staging content made immutable and content-addressed, ready to
// replace the staging reference in the index (CommitSeal): chunks stored,
// or an object hashed and its bytes durable.
type PreparedSeal struct {
	Ino      uint64
	Staging  uint64
	Manifest *manifest.Manifest
	As       Representation
	Why      string // why the seal chose As
	Atime    int64  // the staging file's times, the file's until now
	Mtime    int64
	Stored   int64 // bytes of new chunks written to disk

	// tree is an object's verification tree (cas.Tree).
	tree []byte
	// linked is set once CommitSeal made the staging file the object.
	linked bool
	// healed is set when CommitSeal put the staging file in place of a
	// quarantined object of the same hash.
	healed bool

	// pinned are the chunks, or the object, the seal keeps from Sweep
	// until it is committed or dropped (contentGuard).
	pinned  []cas.Hash
	guard   *contentGuard
	release sync.Once
}

// Drop gives up a seal that will not be committed. Its new chunks are
// garbage for the next sweep.
func (x *PreparedSeal) Drop() { x.release.Do(func() { x.guard.unpin(x.pinned) }) }

// PrepareSeal makes the staging content of inode ino immutable and
// content-addressed, and returns the manifest: inline bytes, chunks stored
// that the store did not have yet, or an object whose bytes are durable
// and which CommitSeal links. The index is not changed: the caller commits
// with CommitSeal if the file was not written meanwhile. Nil if the inode
// has no staging content.
func (s *Store) PrepareSeal(ino uint64) (*PreparedSeal, error) {
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
	x := &PreparedSeal{Ino: ino, Staging: n.Staging, Atime: st.Atim.Nano(), Mtime: st.Mtim.Nano(),
		Manifest: &manifest.Manifest{Size: uint64(st.Size)}, guard: &s.guard}
	if st.Size <= InlineMax {
		x.As, x.Why = AsInline, fmt.Sprintf("at most %d bytes", InlineMax)
		x.Manifest.Inline = make([]byte, st.Size)
		if _, err := io.ReadFull(f, x.Manifest.Inline); err != nil {
			x.Drop()
			return nil, fmt.Errorf("sealing inode %d: %w", ino, err)
		}
		return x, nil
	}
	if s.sealAs != "" {
		x.As, x.Why = s.sealAs, "--seal-as"
	} else {
		x.As, x.Why, err = choose(f, st.Size)
	}
	if x.As == AsObject && st.Size > MaxObject {
		x.As, x.Why = AsChunks, fmt.Sprintf("more than %d bytes", int64(MaxObject))
	}
	if err == nil && x.As == AsChunks {
		if err = s.roomFor(st.Blocks * 512); err == nil {
			err = s.chunkFile(f, &st, x)
		}
	} else if err == nil {
		err = s.hashObject(f, st.Size, x)
	}
	if err != nil {
		x.Drop()
		return nil, fmt.Errorf("sealing inode %d: %w", ino, err)
	}
	return x, nil
}

// SetSealAs makes every seal of a file longer than InlineMax keep it as
// r (AsChunks or AsObject) instead of choosing from its content; "" lets
// each seal choose. Set it before the first seal.
func (s *Store) SetSealAs(r Representation) { s.sealAs = r }

// MaxObject is the largest file a seal keeps as an object: its verification
// tree, 1/256 of it, is one value of the index, and stays well inside what
// one index transaction holds. Larger files are kept as chunks.
const MaxObject = 4 << 30

// sampleGroups is how many groups of a file choose compresses to decide.
const sampleGroups = 8

// choose decides how a file of size bytes, more than InlineMax, is kept,
// from a sample of its content: a few groups spread over the file, each
// compressed as a chunk's group would be. Chunks when most of them
// compress (a file that compresses is seldom one that was compressed
// already, and such files, heap-state snapshots, tend to change a little
// from one checkpoint to the next, so that chunks also deduplicate them);
// an object otherwise. RocksDB's and ForSt's SSTs are compressed block by
// block and are either identical copies or entirely new, which whole-file
// objects deduplicate as well as chunks would.
func choose(f *os.File, size int64) (Representation, string, error) {
	n := int(min(sampleGroups, (size+cas.GroupSize-1)/cas.GroupSize))
	buf := make([]byte, cas.GroupSize)
	compress := 0
	for i := range n {
		off := size * int64(i) / int64(n) / cas.GroupSize * cas.GroupSize
		m, err := f.ReadAt(buf, off)
		if err != nil && err != io.EOF {
			return "", "", err
		}
		if cas.Compresses(buf[:m]) {
			compress++
		}
	}
	why := fmt.Sprintf("%d of %d sampled groups compress", compress, n)
	if 2*compress > n {
		return AsChunks, why, nil
	}
	return AsObject, why, nil
}

// hashObject hashes the staging file f of size bytes, with its
// verification tree, and makes its bytes durable: what CommitSeal needs to
// make it the object. The object is pinned against a sweep from here on.
func (s *Store) hashObject(f *os.File, size int64, x *PreparedSeal) error {
	h, tree, err := cas.Tree(io.NewSectionReader(f, 0, size), size)
	if err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.SealObjectHashed)
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.SealObjectSynced)
	x.guard = &s.objectGuard
	x.guard.pin(h)
	x.pinned = []cas.Hash{h}
	x.Manifest.Object = &h
	x.tree = tree
	return nil
}

// chunkFile stores the content of f as chunks. A sparse file's holes stay
// holes in the manifest: only its data regions are cut and stored.
func (s *Store) chunkFile(f *os.File, st *unix.Stat_t, x *PreparedSeal) error {
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
// transaction; the staging file goes after the commit. An object seal
// first links the staging file as its object, unless the object is there
// already. index.ErrStale if the inode no longer refers to the staging
// file that was sealed. The caller keeps the file from being opened or
// changed until it returns: once linked, the staging file's bytes are the
// object's.
func (s *Store) CommitSeal(x *PreparedSeal) error {
	defer x.Drop()
	if x.Manifest.Object != nil {
		// Never link a staging file the inode no longer refers to: its
		// writer may still change it.
		err := s.Index.View(func(tx *index.Tx) error {
			n, err := tx.Inode(x.Ino)
			if err == nil && n.Staging != x.Staging {
				err = index.ErrStale
			}
			return err
		})
		if err != nil {
			return err
		}
		if err := s.linkObject(x); err != nil {
			return err
		}
	}
	crashpoint.Hit(crashpoint.SealBeforeCommit)
	err := s.Index.Update(func(tx *index.Tx) error {
		// Before the staging file goes.
		tx.OnCommit(func() { crashpoint.Hit(crashpoint.SealCommitted) })
		if h := x.Manifest.Object; h != nil {
			if err := tx.SetObjectTree(*h, x.tree); err != nil {
				return err
			}
			if x.healed {
				if err := tx.Unquarantine(*h); err != nil {
					return err
				}
			}
		}
		return tx.Seal(x.Ino, x.Staging, x.Manifest, x.Atime, x.Mtime)
	})
	if err != nil && (x.linked || x.healed) {
		// The staging file stays the content, and must not stay the
		// object's bytes too: its next writer would change them.
		if uerr := s.unshare(x.Staging); uerr != nil {
			return errors.Join(err, uerr)
		}
	}
	return err
}
