// Package manifest says what a file's content is: one whole-file object of
// the content-addressed store, or an ordered list of extents, each one a
// chunk, with holes between them, or for small files the bytes themselves.
package manifest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/statefs/statefs/cas"
)

// Extent is one run of a file's bytes, stored as the whole of one chunk.
type Extent struct {
	Off  uint64   // where the run starts in the file
	Len  uint32   // its length, the chunk's uncompressed length
	Hash cas.Hash // the chunk
}

// End is the file offset just past the extent.
func (e Extent) End() uint64 { return e.Off + uint64(e.Len) }

// Manifest is the sealed content of a file. Extents are ordered by Off and do
// not overlap; a byte below Size covered by no extent is part of a hole and
// reads as zero. A small file keeps its bytes in Inline instead (then Extents
// is empty and len(Inline) == Size). A file sealed whole keeps them in one
// object instead (then Object is set, Extents and Inline are empty, and the
// object is Size bytes long).
type Manifest struct {
	Size    uint64
	Extents []Extent
	Inline  []byte
	Object  *cas.Hash
}

// Find returns the index of the first extent that ends after off, or
// len(m.Extents) if there is none.
func (m *Manifest) Find(off uint64) int {
	return sort.Search(len(m.Extents), func(i int) bool { return m.Extents[i].End() > off })
}

// Chunks lists the hashes the manifest refers to, one entry per extent.
func (m *Manifest) Chunks() []cas.Hash {
	hs := make([]cas.Hash, len(m.Extents))
	for i, e := range m.Extents {
		hs[i] = e.Hash
	}
	return hs
}

const (
	formatV1     = 1
	extentLen    = 8 + 4 + len(cas.Hash{})
	kindExtents  = 0
	kindInline   = 1
	kindObject   = 2
	headerLength = 1 + 1 + 8
)

// ErrCorrupt is returned by Unmarshal for bytes that are no manifest.
var ErrCorrupt = errors.New("corrupt manifest")

// Marshal encodes m for the index.
func (m *Manifest) Marshal() []byte {
	if m.Object != nil {
		b := make([]byte, headerLength, headerLength+len(m.Object))
		b[0], b[1] = formatV1, kindObject
		binary.BigEndian.PutUint64(b[2:], m.Size)
		return append(b, m.Object[:]...)
	}
	if m.Inline != nil {
		b := make([]byte, headerLength, headerLength+len(m.Inline))
		b[0], b[1] = formatV1, kindInline
		binary.BigEndian.PutUint64(b[2:], m.Size)
		return append(b, m.Inline...)
	}
	b := make([]byte, headerLength+len(m.Extents)*extentLen)
	b[0], b[1] = formatV1, kindExtents
	binary.BigEndian.PutUint64(b[2:], m.Size)
	p := b[headerLength:]
	for _, e := range m.Extents {
		binary.BigEndian.PutUint64(p, e.Off)
		binary.BigEndian.PutUint32(p[8:], e.Len)
		copy(p[12:], e.Hash[:])
		p = p[extentLen:]
	}
	return b
}

// Unmarshal decodes what Marshal wrote, checking that the extents are ordered,
// disjoint and inside Size: a manifest that fails these is corrupt, never
// silently served.
func Unmarshal(b []byte) (*Manifest, error) {
	if len(b) < headerLength || b[0] != formatV1 {
		return nil, fmt.Errorf("%w: bad header", ErrCorrupt)
	}
	m := &Manifest{Size: binary.BigEndian.Uint64(b[2:])}
	body := b[headerLength:]
	switch b[1] {
	case kindInline:
		if uint64(len(body)) != m.Size {
			return nil, fmt.Errorf("%w: inline length %d, size %d", ErrCorrupt, len(body), m.Size)
		}
		m.Inline = append([]byte{}, body...)
		return m, nil
	case kindObject:
		if len(body) != len(cas.Hash{}) {
			return nil, fmt.Errorf("%w: object hash of %d bytes", ErrCorrupt, len(body))
		}
		h := cas.Hash(body)
		m.Object = &h
		return m, nil
	case kindExtents:
		if len(body)%extentLen != 0 {
			return nil, fmt.Errorf("%w: truncated extent list", ErrCorrupt)
		}
		m.Extents = make([]Extent, len(body)/extentLen)
		var end uint64
		for i := range m.Extents {
			e := &m.Extents[i]
			e.Off = binary.BigEndian.Uint64(body)
			e.Len = binary.BigEndian.Uint32(body[8:])
			copy(e.Hash[:], body[12:extentLen])
			body = body[extentLen:]
			if e.Off < end || e.Len == 0 || e.End() > m.Size || e.End() < e.Off {
				return nil, fmt.Errorf("%w: extent %d [%d,+%d) out of order or outside size %d", ErrCorrupt, i, e.Off, e.Len, m.Size)
			}
			end = e.End()
		}
		return m, nil
	default:
		return nil, fmt.Errorf("%w: unknown kind %d", ErrCorrupt, b[1])
	}
}
