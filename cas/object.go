package cas

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/zeebo/blake3"
	"lukechampine.com/blake3/bao"
)

// Objects holds whole-file objects under one directory: an object is a
// sealed file's content byte for byte, holes included, named by the
// BLAKE3-256 hash of those bytes, in the same fan-out layout as chunks. An
// object is not encoded, so that the kernel can read it as the file itself
// (FUSE passthrough). An object becomes one by a hard link of the file that
// holds its bytes (Link): it is never written after that.
type Objects struct{ fanout }

// OpenObjects opens the object directory dir, creating it and its fan-out
// subdirectories if needed; the temporary files a crash left behind are
// RemoveStaleTemps's.
func OpenObjects(dir string) (*Objects, error) {
	f, err := openFanout(dir, "object")
	if err != nil {
		return nil, err
	}
	return &Objects{f}, nil
}

// OpenObjectsReadOnly opens the object directory dir for reading; nothing
// is created, removed or changed there.
func OpenObjectsReadOnly(dir string) (*Objects, error) {
	f, err := openFanoutReadOnly(dir, "object")
	if err != nil {
		return nil, err
	}
	return &Objects{f}, nil
}

// Link makes the file at path object h, by a hard link, and syncs the
// fan-out directory; the caller computed h from the file's bytes and made
// them durable, and writes the file no more. If object h exists already,
// nothing is linked and linked is false: the existing object, durable by
// then, holds the same bytes.
func (o *Objects) Link(h Hash, path string) (linked bool, err error) {
	if err := o.writable("link", h); err != nil {
		return false, err
	}
	name := o.path(h)
	switch err := os.Link(path, name); {
	case errors.Is(err, fs.ErrExist):
	case err != nil:
		return false, fmt.Errorf("cas: link object %s: %w", h, err)
	default:
		linked = true
	}
	// An existing object may come from a concurrent Link that has not yet
	// synced the directory; the caller is about to rely on it.
	if err := syncDir(filepath.Dir(name)); err != nil {
		return false, fmt.Errorf("cas: link object %s: %w", h, err)
	}
	return linked, nil
}

// Replace makes the file at path object h in place of whatever stands at
// its name (a damaged object), by a hard link to a temporary name renamed
// over it, and syncs the fan-out directory.
func (o *Objects) Replace(h Hash, path string) error {
	if err := o.writable("replace", h); err != nil {
		return err
	}
	name := o.path(h)
	tmp := filepath.Join(filepath.Dir(name), ownTemps+h.String())
	os.Remove(tmp)
	if err := os.Link(path, tmp); err != nil {
		return fmt.Errorf("cas: replace object %s: %w", h, err)
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cas: replace object %s: %w", h, err)
	}
	if err := syncDir(filepath.Dir(name)); err != nil {
		return fmt.Errorf("cas: replace object %s: %w", h, err)
	}
	return nil
}

// Open opens object h for reading: ErrNotFound if there is none.
func (o *Objects) Open(h Hash) (*os.File, error) {
	f, err := o.open(h)
	if err != nil {
		return nil, fmt.Errorf("cas: open object %s: %w", h, err)
	}
	return f, nil
}

// verifyPiece is how many bytes Verify reads and hashes at a time.
const verifyPiece = 1 << 20

// Verify reads object h whole and checks that its bytes hash to h; wait,
// if set, is called with the length of each piece read before the next, so
// that a caller can bound the rate (an error from it stops Verify). It
// returns the object's length; ErrNotFound if it is missing, ErrCorrupt if
// its bytes are not h's.
func (o *Objects) Verify(h Hash, wait func(n int) error) (int64, error) {
	f, err := o.open(h)
	if err != nil {
		return 0, fmt.Errorf("cas: verify object %s: %w", h, err)
	}
	defer f.Close()
	hasher := blake3.New()
	buf := make([]byte, verifyPiece)
	var size int64
	for {
		n, err := io.ReadFull(f, buf)
		hasher.Write(buf[:n])
		size += int64(n)
		if wait != nil && n > 0 {
			if werr := wait(n); werr != nil {
				return size, werr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return size, fmt.Errorf("cas: verify object %s: %w", h, err)
		}
	}
	if got := Hash(hasher.Sum(nil)); got != h {
		return size, fmt.Errorf("cas: verify object %s: %w: its %d bytes hash to %s", h, ErrCorrupt, size, got)
	}
	return size, nil
}

// CopyVerified writes the first n bytes of src, an object's bytes, to dst
// at the same offsets, reading src whole to check that it hashes to h:
// ErrCorrupt if it does not. dst's bytes past n are left as they are.
func CopyVerified(dst io.WriterAt, src io.ReaderAt, h Hash, n int64) error {
	hasher := blake3.New()
	buf := make([]byte, verifyPiece)
	for off := int64(0); ; {
		m, err := src.ReadAt(buf, off)
		hasher.Write(buf[:m])
		if w := min(int64(m), n-off); w > 0 {
			if _, err := dst.WriteAt(buf[:w], off); err != nil {
				return err
			}
		}
		off += int64(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if sum := Hash(hasher.Sum(nil)); sum != h {
		return fmt.Errorf("%w: its bytes hash to %s", ErrCorrupt, sum)
	}
	return nil
}

// Tree reads size bytes from r and returns their hash and their
// verification tree: Bao's outboard encoding over groups of GroupSize, as
// package bao takes it (the length, then the parent nodes in pre-order),
// which lets ReadVerified check any group against the hash alone.
func Tree(r io.Reader, size int64) (Hash, []byte, error) {
	tree := &bufferAt{b: make([]byte, bao.EncodedSize(int(size), groupLog, true))}
	root, err := bao.Encode(tree, bufio.NewReaderSize(r, verifyPiece), size, groupLog, true)
	if err != nil {
		return Hash{}, nil, err
	}
	return root, tree.b, nil
}

// bufferAt is an io.WriterAt into a buffer of the final length.
type bufferAt struct{ b []byte }

func (b *bufferAt) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(b.b)) {
		return 0, fmt.Errorf("cas: tree write at %d+%d outside %d bytes", off, len(p), len(b.b))
	}
	return copy(b.b[off:], p), nil
}

// ReadVerified fills p with the bytes at off of object h, read from f,
// whose verification tree is tree (Tree), and returns how many it filled
// (fewer at the end). It reads the whole groups that hold them and checks
// them against h through the tree: bytes that do not match give
// ErrCorrupt, never wrong bytes (DESIGN invariant 5).
func ReadVerified(f io.ReaderAt, tree []byte, h Hash, p []byte, off int64) (int, error) {
	if len(tree) < 8 {
		return 0, fmt.Errorf("cas: read object %s: %w: a tree of %d bytes", h, ErrCorrupt, len(tree))
	}
	size := uint64(0)
	for i := 7; i >= 0; i-- {
		size = size<<8 | uint64(tree[i])
	}
	if len(tree) != bao.EncodedSize(int(size), groupLog, true) {
		return 0, fmt.Errorf("cas: read object %s: %w: a tree of %d bytes for %d bytes", h, ErrCorrupt, len(tree), size)
	}
	if off < 0 || uint64(off) >= size || len(p) == 0 {
		return 0, nil
	}
	end := min(uint64(off)+uint64(len(p)), size)
	first := uint64(off) / GroupSize * GroupSize
	last := min((end+GroupSize-1)/GroupSize*GroupSize, size)
	bp := scratch.Get().(*[]byte)
	defer scratch.Put(bp)
	buf := grow(*bp, int(last-first))
	*bp = buf[:0]
	if n, err := f.ReadAt(buf, int64(first)); n < len(buf) {
		if err == nil || err == io.EOF {
			err = fmt.Errorf("%w: the object ends at %d, before %d", ErrCorrupt, first+uint64(n), last)
		}
		return 0, fmt.Errorf("cas: read object %s at %d: %w", h, off, err)
	}
	if !bao.VerifyChunk(buf, tree, groupLog, first, h) {
		return 0, fmt.Errorf("cas: read object %s at %d: %w: bytes %d..%d do not match the hash", h, off, ErrCorrupt, first, last)
	}
	return copy(p, buf[uint64(off)-first:end-first]), nil
}

// Compresses reports whether zstd, at the level chunks are stored with,
// saves at least an eighth of p: what makes a group worth storing
// compressed.
func Compresses(p []byte) bool {
	if len(p) == 0 {
		return false
	}
	bp := scratch.Get().(*[]byte)
	defer scratch.Put(bp)
	out := encoder().EncodeAll(p, (*bp)[:0])
	*bp = out[:0]
	return len(out) < len(p)-len(p)/minSavingDiv
}

// Detach gives object h's name a verified copy of f's bytes, if the name
// is still f's inode, so that f's inode can be written (it becomes a
// staging file) while the object keeps its bytes. The copy is written to a
// temporary file beside the name, synced, checked against h and renamed
// over the name; ErrCorrupt if f's bytes are not h's, and nothing changes.
func (o *Objects) Detach(h Hash, f *os.File) error {
	if err := o.writable("detach", h); err != nil {
		return err
	}
	name := o.path(h)
	var want, got syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &want); err != nil {
		return fmt.Errorf("cas: detach object %s: %w", h, err)
	}
	if err := syscall.Lstat(name, &got); errors.Is(err, fs.ErrNotExist) || err == nil && got.Ino != want.Ino {
		return nil // the name is another inode, or none: nothing shares f's
	} else if err != nil {
		return fmt.Errorf("cas: detach object %s: %w", h, err)
	}
	dst, err := os.CreateTemp(filepath.Dir(name), ownTemps+"*")
	if err != nil {
		return fmt.Errorf("cas: detach object %s: %w", h, err)
	}
	fail := func(err error) error {
		dst.Close()
		os.Remove(dst.Name())
		return fmt.Errorf("cas: detach object %s: %w", h, err)
	}
	if err := CopyVerified(dst, f, h, want.Size); err != nil {
		return fail(err)
	}
	if err := dst.Sync(); err != nil {
		return fail(err)
	}
	if err := dst.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(dst.Name(), name); err != nil {
		os.Remove(dst.Name())
		return fmt.Errorf("cas: detach object %s: %w", h, err)
	}
	return syncDir(filepath.Dir(name))
}
