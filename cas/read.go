package cas

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"lukechampine.com/blake3/bao"
)

// DefaultReadCache is how many bytes Chunks keeps in memory for reads
// unless told otherwise: the layouts of the chunks read last (about 0.4% of
// a chunk) and the groups read last that a read needed only part of.
const DefaultReadCache = 32 << 20

// layout is what a read must know of a chunk file before it reads a group:
// its header, its verification tree and (framed) where each group ends.
type layout struct {
	hd header
	// tree is the chunk's Bao outboard as package bao takes it: the length,
	// then the parent nodes in pre-order (version 2).
	tree []byte
	// ends[g] is where group g's stored bytes end, counted from the first
	// group's start (framed only).
	ends []byte
}

func (l *layout) cost() int64 { return int64(len(l.tree)+len(l.ends)) + 128 }

// readLayout reads the header, tree and table of an open chunk file.
func readLayout(f *os.File) (*layout, error) {
	meta := make([]byte, pageSize)
	n, err := f.ReadAt(meta, 0)
	if err != nil && err != io.EOF {
		return nil, err
	}
	hd, err := decodeHeader(meta[:n])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	l := &layout{hd: hd}
	if hd.version == formatV1 {
		return l, nil
	}
	tree := treeSize(hd.size)
	need := headerSize + tree
	if hd.kind == kindFramed {
		need += 4 * groups(hd.size)
	}
	if need > n {
		meta = make([]byte, need)
		if err := readAt(f, meta, 0); err != nil {
			return nil, err
		}
	}
	l.tree = make([]byte, 8+tree)
	binary.LittleEndian.PutUint64(l.tree, hd.size)
	copy(l.tree[8:], meta[headerSize:])
	if hd.kind == kindFramed {
		l.ends = append([]byte(nil), meta[headerSize+tree:need]...)
	}
	return l, nil
}

// stored returns where group g's stored bytes start and end, counted from
// the first group's start. A table damaged there fails this group's read
// and no other's.
func (l *layout) stored(g int) (start, end int64, err error) {
	if l.hd.kind == kindRaw {
		start = int64(g) * GroupSize
		return start, start + int64(groupLen(l.hd.size, g)), nil
	}
	if g > 0 {
		start = int64(binary.LittleEndian.Uint32(l.ends[4*(g-1):]))
	}
	end = int64(binary.LittleEndian.Uint32(l.ends[4*g:]))
	if end < start || end-start > int64(groupLen(l.hd.size, g)) {
		return 0, 0, fmt.Errorf("%w: group %d is stored at %d..%d", ErrCorrupt, g, start, end)
	}
	return start, end, nil
}

// readGroups reads groups g0 to g1 of chunk h into buf's storage (grown as
// needed) and returns their bytes, verified against h through the tree.
func (l *layout) readGroups(f *os.File, h Hash, g0, g1 int, buf []byte) ([]byte, error) {
	first := uint64(g0) * GroupSize
	plain := grow(buf, int(min(uint64(g1+1)*GroupSize, l.hd.size)-first))
	payload := l.hd.payloadOffset()
	if l.hd.kind == kindRaw {
		if err := readAt(f, plain, payload+int64(first)); err != nil {
			return nil, err
		}
	} else if err := l.decodeGroups(f, g0, g1, plain); err != nil {
		return nil, err
	}
	if !bao.VerifyChunk(plain, l.tree, groupLog, first, h) {
		return nil, fmt.Errorf("%w: bytes %d..%d do not match the hash", ErrCorrupt, first, first+uint64(len(plain)))
	}
	return plain, nil
}

// decodeGroups fills plain with groups g0 to g1 of a framed chunk.
func (l *layout) decodeGroups(f *os.File, g0, g1 int, plain []byte) error {
	from, _, err := l.stored(g0)
	if err != nil {
		return err
	}
	_, to, err := l.stored(g1)
	if err != nil {
		return err
	}
	if to < from {
		return fmt.Errorf("%w: groups %d..%d are stored at %d..%d", ErrCorrupt, g0, g1, from, to)
	}
	bp := scratch.Get().(*[]byte)
	defer scratch.Put(bp)
	in := grow(*bp, int(to-from))
	*bp = in[:0]
	if err := readAt(f, in, l.hd.payloadOffset()+from); err != nil {
		return err
	}
	for g := g0; g <= g1; g++ {
		start, end, err := l.stored(g)
		if err != nil {
			return err
		}
		if start < from || end > to {
			return fmt.Errorf("%w: group %d is stored at %d..%d", ErrCorrupt, g, start, end)
		}
		frame := in[start-from : end-from]
		out := plain[(g-g0)*GroupSize:][:groupLen(l.hd.size, g)]
		if len(frame) == len(out) {
			copy(out, frame)
			continue
		}
		got, err := decoder().DecodeAll(frame, out[:0:len(out)])
		if err != nil {
			return fmt.Errorf("%w: group %d: zstd: %v", ErrCorrupt, g, err)
		}
		if len(got) != len(out) {
			return fmt.Errorf("%w: group %d decompressed to %d bytes, want %d", ErrCorrupt, g, len(got), len(out))
		}
	}
	return nil
}

// ReadAt fills p with chunk h's bytes from off and returns how many it
// filled (fewer at the chunk's end). It reads and verifies only the groups
// that hold them (DESIGN invariant 5): a damaged group fails the reads that
// need it with ErrCorrupt and no other read.
func (s *Chunks) ReadAt(h Hash, p []byte, off int64) (int, error) {
	// The chunk file is opened only if the read cache does not hold all
	// the read needs: a reader of small blocks often asks again for a
	// group it read part of.
	c := &chunkFile{s: s, h: h}
	defer c.close()
	n, err := s.readAt(c, p, off)
	if err != nil {
		// A layout read from a damaged file must not outlive a repair.
		s.cache.remove(layoutKey(h))
		return 0, fmt.Errorf("cas: read %s at %d: %w", h, off, err)
	}
	return n, nil
}

// chunkFile opens chunk h's file the first time a read needs it.
type chunkFile struct {
	s *Chunks
	h Hash
	f *os.File
}

func (c *chunkFile) file() (*os.File, error) {
	if c.f == nil {
		f, err := c.s.open(c.h)
		if err != nil {
			return nil, err
		}
		c.f = f
	}
	return c.f, nil
}

func (c *chunkFile) close() {
	if c.f != nil {
		c.f.Close()
	}
}

func (s *Chunks) readAt(c *chunkFile, p []byte, off int64) (int, error) {
	h := c.h
	var l *layout
	if v, ok := s.cache.get(layoutKey(h)); ok {
		l = v.(*layout)
	} else {
		f, err := c.file()
		if err != nil {
			return 0, err
		}
		if l, err = readLayout(f); err != nil {
			return 0, err
		}
		s.cache.add(layoutKey(h), l)
	}
	size := l.hd.size
	if off < 0 || uint64(off) >= size || len(p) == 0 {
		return 0, nil
	}
	end := min(uint64(off)+uint64(len(p)), size)
	p = p[:end-uint64(off)]
	if l.hd.version == formatV1 {
		f, err := c.file()
		if err != nil {
			return 0, err
		}
		bp := scratch.Get().(*[]byte)
		defer scratch.Put(bp)
		data, err := readV1(f, l.hd, *bp)
		if err != nil {
			return 0, err
		}
		*bp = data[:0]
		if got := Sum(data); got != h {
			return 0, fmt.Errorf("%w: content hashes to %s", ErrCorrupt, got)
		}
		return copy(p, data[off:]), nil
	}
	// Whole groups are read into p itself; a group p holds only part of
	// is read aside and the part copied.
	for pos := uint64(off); pos < end; {
		g := int(pos / GroupSize)
		gEnd := min(uint64(g+1)*GroupSize, size)
		if pos == uint64(g)*GroupSize && gEnd <= end {
			last := int((end - 1) / GroupSize)
			if min(uint64(last+1)*GroupSize, size) > end {
				last-- // the last group is partly in p
			}
			to := min(uint64(last+1)*GroupSize, size)
			f, err := c.file()
			if err != nil {
				return 0, err
			}
			if _, err := l.readGroups(f, h, g, last, p[pos-uint64(off):to-uint64(off)]); err != nil {
				return 0, err
			}
			pos = to
			continue
		}
		data, err := s.group(c, l, g)
		if err != nil {
			return 0, err
		}
		pos += uint64(copy(p[pos-uint64(off):], data[pos-uint64(g)*GroupSize:min(gEnd, end)-uint64(g)*GroupSize]))
	}
	return len(p), nil
}

// group returns the verified bytes of group g of chunk h, from the cache
// or read and kept there: a reader of small blocks asks for the same group
// several times in a row. Verified bytes stay right whatever happens to
// the file later, since a chunk is named by its content.
func (s *Chunks) group(c *chunkFile, l *layout, g int) ([]byte, error) {
	key := cacheKey{c.h, int32(g)}
	if v, ok := s.cache.get(key); ok {
		return v.(group), nil
	}
	f, err := c.file()
	if err != nil {
		return nil, err
	}
	data, err := l.readGroups(f, c.h, g, g, nil)
	if err != nil {
		return nil, err
	}
	s.cache.add(key, group(data))
	return data, nil
}

// Get reads chunk h into buf's storage (grown as needed) and returns its
// uncompressed bytes, verified against h (DESIGN invariant 5), together with
// every part of its file: the tree, the table and the padding. A missing
// chunk gives ErrNotFound; a damaged one gives ErrCorrupt, never wrong bytes.
func (s *Chunks) Get(h Hash, buf []byte) ([]byte, error) {
	f, err := s.open(h)
	if err != nil {
		return nil, fmt.Errorf("cas: get %s: %w", h, err)
	}
	defer f.Close()
	out, err := get(f, h, buf)
	if err != nil {
		return nil, fmt.Errorf("cas: get %s: %w", h, err)
	}
	return out, nil
}

func get(f *os.File, h Hash, buf []byte) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	l, err := readLayout(f)
	if err != nil {
		return nil, err
	}
	var out []byte
	if l.hd.version == formatV1 {
		if out, err = readV1(f, l.hd, buf); err != nil {
			return nil, err
		}
	} else {
		payload, length := l.hd.payloadOffset(), int64(0)
		if n := groups(l.hd.size); n > 0 {
			if _, length, err = l.stored(n - 1); err != nil {
				return nil, err
			}
		}
		if fi.Size() != payload+length {
			return nil, fmt.Errorf("%w: file is %d bytes, its layout says %d", ErrCorrupt, fi.Size(), payload+length)
		}
		if err := checkPadding(f, l); err != nil {
			return nil, err
		}
		if l.hd.size == 0 {
			out = grow(buf, 0)
		} else if out, err = l.readGroups(f, h, 0, groups(l.hd.size)-1, buf); err != nil {
			return nil, err
		}
	}
	if l.hd.size == 0 || l.hd.version == formatV1 {
		// The tree verified every group of a longer chunk, and its root.
		if got := Sum(out); got != h {
			return nil, fmt.Errorf("%w: content hashes to %s", ErrCorrupt, got)
		}
	}
	return out, nil
}

// checkPadding checks that the bytes between a chunk's table and its first
// group are zeros, as Put wrote them.
func checkPadding(f *os.File, l *layout) error {
	from := int64(headerSize + len(l.tree) - 8 + len(l.ends))
	pad := make([]byte, l.hd.payloadOffset()-from)
	if err := readAt(f, pad, from); err != nil {
		return err
	}
	for i, c := range pad {
		if c != 0 {
			return fmt.Errorf("%w: padding byte at %d is %#x", ErrCorrupt, from+int64(i), c)
		}
	}
	return nil
}

// readV1 decodes a version 1 chunk file's payload into buf's storage.
func readV1(f *os.File, hd header, buf []byte) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	payload := fi.Size() - headerSize
	switch hd.kind {
	case kindRaw:
		if uint64(payload) != hd.size {
			return nil, fmt.Errorf("%w: raw payload is %d bytes, header says %d", ErrCorrupt, payload, hd.size)
		}
		out := grow(buf, int(hd.size))
		if err := readAt(f, out, headerSize); err != nil {
			return nil, err
		}
		return out, nil
	default: // kindZstd
		bp := scratch.Get().(*[]byte)
		defer scratch.Put(bp)
		in := grow(*bp, int(max(payload, 0)))
		*bp = in[:0]
		if err := readAt(f, in, headerSize); err != nil {
			return nil, err
		}
		out, err := decoder().DecodeAll(in, grow(buf, int(hd.size))[:0])
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
		}
		if uint64(len(out)) != hd.size {
			return nil, fmt.Errorf("%w: decompressed %d bytes, header says %d", ErrCorrupt, len(out), hd.size)
		}
		return out, nil
	}
}

// readAt fills p from offset off; a file that ends early is corrupt.
func readAt(f *os.File, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if err == io.EOF {
		return fmt.Errorf("%w: file ends after %d of %d bytes at %d", ErrCorrupt, n, len(p), off)
	}
	return err
}

// grow returns buf resized to n bytes, reallocated only if it is too small.
func grow(buf []byte, n int) []byte {
	if cap(buf) < n {
		return make([]byte, n)
	}
	return buf[:n]
}

// group is a group's verified bytes, as the read cache keeps them.
type group []byte

func (g group) cost() int64 { return int64(cap(g)) + 64 }

// cacheKey names what the read cache keeps: group g of chunk h, or for g
// -1 the chunk's layout.
type cacheKey struct {
	h Hash
	g int32
}

func layoutKey(h Hash) cacheKey { return cacheKey{h, -1} }

// readCache keeps what reads need again, the least recently used first to
// go, up to a number of bytes.
type readCache struct {
	// mu guards the fields below; nothing is taken while it is held, and
	// no chunk file is read under it.
	mu    sync.Mutex
	lru   *simplelru.LRU[cacheKey, cached]
	bytes int64
	max   int64
}

type cached interface{ cost() int64 }

func newReadCache(max int64) *readCache {
	c := &readCache{max: max}
	c.lru, _ = simplelru.NewLRU(math.MaxInt32, func(_ cacheKey, v cached) { c.bytes -= v.cost() })
	return c
}

func (c *readCache) get(k cacheKey) (cached, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Get(k)
}

func (c *readCache) add(k cacheKey, v cached) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.Contains(k) || v.cost() > c.max {
		return
	}
	c.lru.Add(k, v)
	c.bytes += v.cost()
	c.shrink()
}

func (c *readCache) remove(k cacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(k)
}

func (c *readCache) resize(max int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.max = max
	c.shrink()
}

func (c *readCache) shrink() {
	for c.bytes > c.max {
		c.lru.RemoveOldest()
	}
}

// SetReadCache bounds the memory kept for reads (layouts of chunks and
// groups read in part) to max bytes; 0 keeps nothing.
func (s *Chunks) SetReadCache(max int64) { s.cache.resize(max) }
