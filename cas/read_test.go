package cas_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"os"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/internal/testbytes"
)

// chunkFile is a version 2 chunk file split the way the package
// documentation lays it out.
type chunkFile struct {
	b       []byte
	size    int // uncompressed
	groups  int
	framed  bool
	tree    int // offset of the tree
	table   int // offset of the table (framed)
	payload int // offset of the first group
}

func parseChunkFile(t *testing.T, b []byte) chunkFile {
	t.Helper()
	if b[4] != 2 {
		t.Fatalf("chunk file has version %d, want 2", b[4])
	}
	c := chunkFile{b: b, size: int(binary.LittleEndian.Uint64(b[8:])), framed: b[5] == 2, tree: 20}
	c.groups = (c.size + cas.GroupSize - 1) / cas.GroupSize
	c.table = c.tree + 64*max(c.groups-1, 0)
	c.payload = c.table
	if c.framed {
		c.payload += 4 * c.groups
	} else if c.groups > 1 {
		c.payload = (c.payload + 4095) &^ 4095
	}
	return c
}

// groupsOf returns the groups a byte at off of the file is needed for: a
// read of any of them must fail if that byte is damaged, and a read of any
// other must not. Padding is needed for none of them.
func (c chunkFile) groupsOf(off int) (from, to int) {
	all := func() (int, int) { return 0, c.groups - 1 }
	switch {
	case off < c.tree:
		return all() // the header
	case off < c.table:
		return c.node((off - c.tree) / 64)
	case c.framed && off < c.payload:
		g := (off - c.table) / 4 // where group g ends and g+1 starts
		return g, min(g+1, c.groups-1)
	case off < c.payload:
		return 0, -1 // padding
	case !c.framed:
		g := (off - c.payload) / cas.GroupSize
		return g, g
	default:
		for g := range c.groups {
			if end := int(binary.LittleEndian.Uint32(c.b[c.table+4*g:])); off-c.payload < end {
				return g, g
			}
		}
		panic("byte past the last frame")
	}
}

// inFrame reports whether the byte at off belongs to a compressed group.
func (c chunkFile) inFrame(off int) bool {
	if !c.framed || off < c.payload {
		return false
	}
	g, _ := c.groupsOf(off)
	start := 0
	if g > 0 {
		start = int(binary.LittleEndian.Uint32(c.b[c.table+4*(g-1):]))
	}
	end := int(binary.LittleEndian.Uint32(c.b[c.table+4*g:]))
	return end-start != min(cas.GroupSize, c.size-g*cas.GroupSize)
}

// node returns the groups under the tree's node k, counting in pre-order
// as Bao writes them: a node, its left subtree, its right subtree.
func (c chunkFile) node(k int) (from, to int) {
	var walk func(first, n int) (int, int, bool)
	walk = func(first, n int) (int, int, bool) { // groups first..first+n-1
		if n == 1 {
			return 0, 0, false
		}
		if k == 0 {
			return first, first + n - 1, true
		}
		k--
		left := 1 << (bits.Len(uint(n-1)) - 1) // groups in the left subtree
		if a, b, ok := walk(first, left); ok {
			return a, b, true
		}
		return walk(first+left, n-left)
	}
	from, to, ok := walk(0, c.groups)
	if !ok {
		panic("node past the tree")
	}
	return from, to
}

// Every single-byte corruption of a chunk file fails Get, and fails a read
// of exactly the groups that need the damaged byte: the header all of them,
// a tree node the groups under it, a table entry the two groups it bounds,
// a stored byte its own group. Every other read returns the right bytes
// (DESIGN invariant 5: never wrong bytes).
func TestEveryCorruptByteFailsItsRange(t *testing.T) {
	mixed := append(text(3*cas.GroupSize), testbytes.Random(4*cas.GroupSize+100, 3)...)
	for _, k := range []struct {
		name   string
		data   []byte
		framed bool
		every  int // test one payload byte in every
	}{
		{"raw, last group partial", testbytes.Random(9*cas.GroupSize+777, 1), false, 97},
		{"framed", text(7*cas.GroupSize + 5), true, 7},
		{"framed with raw groups", mixed, true, 31},
		{"one group", testbytes.Random(5000, 2), false, 13},
	} {
		t.Run(k.name, func(t *testing.T) {
			s, dir := openStore(t)
			s.SetReadCache(0) // every read sees the file as it is now
			h := put(t, s, k.data)
			path := chunkPath(dir, h)
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			c := parseChunkFile(t, orig)
			if c.framed != k.framed {
				t.Fatalf("chunk framed = %v, want %v", c.framed, k.framed)
			}
			tested := 0
			for off := range orig {
				if off >= c.payload && off%k.every != 0 && off != len(orig)-1 {
					continue
				}
				tested++
				damaged := bytes.Clone(orig)
				damaged[off] ^= 0x01
				if err := os.WriteFile(path, damaged, 0o600); err != nil {
					t.Fatal(err)
				}
				from, to := c.groupsOf(off)
				_, err := s.Get(h, nil)
				if err == nil && c.inFrame(off) {
					// Not every bit of a zstd frame changes what it decodes
					// to: if the bytes come out right, they are right.
					from, to = 0, -1
				} else if !errors.Is(err, cas.ErrCorrupt) {
					t.Fatalf("byte %d flipped: Get = %v, want ErrCorrupt", off, err)
				}
				for g := range c.groups {
					start := g * cas.GroupSize
					want := k.data[start:min(start+cas.GroupSize, len(k.data))]
					got := make([]byte, len(want))
					n, err := s.ReadAt(h, got, int64(start))
					if from <= g && g <= to {
						if !errors.Is(err, cas.ErrCorrupt) {
							t.Fatalf("byte %d flipped (needed by groups %d..%d): ReadAt of group %d = %d, %v; want ErrCorrupt", off, from, to, g, n, err)
						}
					} else if err != nil || !bytes.Equal(got[:n], want) {
						t.Fatalf("byte %d flipped (needed by groups %d..%d): ReadAt of group %d = %d, %v; want its bytes", off, from, to, g, n, err)
					}
				}
			}
			t.Logf("%d-byte file, %d groups: %d single-byte corruptions tried", len(orig), c.groups, tested)
		})
	}
}

// ReadAt returns the bytes of any range: within a group, straddling groups,
// the last partial group, past the end, and empty.
func TestReadAtRanges(t *testing.T) {
	for _, data := range [][]byte{testbytes.Random(5*cas.GroupSize+333, 4), text(5*cas.GroupSize + 333), testbytes.Random(100, 5), {}} {
		s, _ := openStore(t)
		h := put(t, s, data)
		size := len(data)
		for _, r := range [][2]int{
			{0, size}, {0, 1}, {size - 1, 1}, {size / 2, 4096},
			{cas.GroupSize - 10, 20}, {cas.GroupSize - 1, 2*cas.GroupSize + 2}, {4 * cas.GroupSize, 2 * cas.GroupSize},
			{size, 10}, {size + 100, 10}, {3, 0},
		} {
			if r[0] < 0 {
				continue
			}
			got := make([]byte, r[1])
			n, err := s.ReadAt(h, got, int64(r[0]))
			if err != nil {
				t.Fatalf("%d bytes: ReadAt(%d, %d) = %v", size, r[0], r[1], err)
			}
			want := data[min(r[0], size):min(r[0]+r[1], size)]
			if !bytes.Equal(got[:n], want) {
				t.Fatalf("%d bytes: ReadAt(%d, %d) gave %d bytes, want %d equal to the data", size, r[0], r[1], n, len(want))
			}
		}
	}
}

// A chunk file of format version 1 (one payload for the whole chunk) is
// still read, whole or in part, and verified.
func TestReadsVersion1(t *testing.T) {
	s, dir := openStore(t)
	for _, data := range [][]byte{testbytes.Random(3*cas.GroupSize, 6), text(3 * cas.GroupSize)} {
		h := cas.Sum(data)
		writeChunkFile(t, dir, h, version1(t, data))
		got, err := s.Get(h, nil)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get of a version 1 chunk = %v", err)
		}
		part := make([]byte, 100)
		if n, err := s.ReadAt(h, part, cas.GroupSize+5); err != nil || !bytes.Equal(part[:n], data[cas.GroupSize+5:][:100]) {
			t.Fatalf("ReadAt of a version 1 chunk = %d, %v", n, err)
		}
		damaged := version1(t, data)
		damaged[len(damaged)-1] ^= 1
		writeChunkFile(t, dir, h, damaged)
		s.SetReadCache(0)
		if _, err := s.ReadAt(h, part, 0); !errors.Is(err, cas.ErrCorrupt) {
			t.Fatalf("ReadAt of a damaged version 1 chunk = %v, want ErrCorrupt", err)
		}
		s.SetReadCache(cas.DefaultReadCache)
	}
}

// version1 encodes data as a version 1 chunk file: zstd if that halves it,
// raw otherwise (the tests need one of each).
func version1(t *testing.T, data []byte) []byte {
	t.Helper()
	kind, payload := byte(0), data
	if bytes.Equal(data, text(len(data))) {
		kind, payload = 1, zstdFrame(t, data)
	}
	b := make([]byte, 20)
	copy(b, "sfck")
	b[4], b[5] = 1, kind
	binary.LittleEndian.PutUint64(b[8:], uint64(len(data)))
	binary.LittleEndian.PutUint32(b[16:], crc32.Checksum(b[:16], crc32.MakeTable(crc32.Castagnoli)))
	return append(b, payload...)
}

func zstdFrame(t *testing.T, data []byte) []byte {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(false))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return e.EncodeAll(data, nil)
}

// FuzzChunkRead damages a three-group chunk file, framed or raw (up to
// three bytes changed, the file cut or not), and reads a range of it:
// ReadAt never panics, and returns the chunk's bytes or an error wrapping
// ErrCorrupt, never other bytes. Mutating a valid file rather than fuzzing
// whole files keeps each try small, so the fuzzer explores the layout.
func FuzzChunkRead(f *testing.F) {
	framed := append(text(2*cas.GroupSize), testbytes.Random(cas.GroupSize/2, 7)...)
	raw := testbytes.Random(len(framed), 8)
	files := map[bool][]byte{}
	{
		s, dir := openStore(f)
		for _, data := range [][]byte{framed, raw} {
			if _, err := s.Put(cas.Sum(data), data); err != nil {
				f.Fatal(err)
			}
			b, err := os.ReadFile(chunkPath(dir, cas.Sum(data)))
			if err != nil {
				f.Fatal(err)
			}
			files[bytes.Equal(data, framed)] = b
		}
	}
	f.Add(true, uint32(0), byte(0), uint32(0), byte(0), uint32(0), byte(0), uint32(0), uint32(cas.GroupSize-7), uint16(4096))
	f.Add(false, uint32(100), byte(1), uint32(5000), byte(0x80), uint32(0), byte(0), uint32(0), uint32(0), uint16(65535))
	f.Add(true, uint32(30), byte(0xff), uint32(600), byte(3), uint32(2000), byte(9), uint32(3000), uint32(cas.GroupSize*2), uint16(100))
	s, dir := openStore(f)
	s.SetReadCache(0)
	f.Fuzz(func(t *testing.T, isFramed bool, p1 uint32, x1 byte, p2 uint32, x2 byte, p3 uint32, x3 byte, cut uint32, off uint32, n uint16) {
		want := raw
		if isFramed {
			want = framed
		}
		file := bytes.Clone(files[isFramed])
		for _, d := range []struct {
			p uint32
			x byte
		}{{p1, x1}, {p2, x2}, {p3, x3}} {
			file[int(d.p)%len(file)] ^= d.x
		}
		if cut > 0 {
			file = file[:int(cut)%len(file)]
		}
		h := cas.Sum(want)
		if err := os.WriteFile(chunkPath(dir, h), file, 0o600); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n)
		m, err := s.ReadAt(h, got, int64(off))
		switch {
		case err != nil && !errors.Is(err, cas.ErrCorrupt):
			t.Fatalf("ReadAt failed with %v, which does not wrap ErrCorrupt", err)
		case err == nil && int(off) < len(want) && !bytes.Equal(got[:m], want[off:min(int(off)+int(n), len(want))]):
			t.Fatalf("ReadAt(%d, %d) returned %d bytes that are not the chunk's", off, n, m)
		case err == nil && int(off) >= len(want) && m != 0:
			t.Fatalf("ReadAt(%d, %d) past the end returned %d bytes", off, n, m)
		}
	})
}

func ExampleChunks_ReadAt() {
	dir, _ := os.MkdirTemp("", "cas")
	defer os.RemoveAll(dir)
	s, _ := cas.Open(dir)
	data := bytes.Repeat([]byte("0123456789"), 10000)
	h := cas.Sum(data)
	s.Put(h, data)
	p := make([]byte, 10)
	n, err := s.ReadAt(h, p, 50003)
	fmt.Println(n, err, string(p[:n]))
	// Output: 10 <nil> 3456789012
}
