package cas

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
	"lukechampine.com/blake3/bao"
)

// Chunk file format; the layout is in the package documentation.
const (
	headerSize = 20
	// formatVersion is the format Put writes. Version 1 (one payload for the
	// whole chunk, raw or one zstd frame) is still read, and Upgrade
	// rewrites it.
	formatVersion = 2
	formatV1      = 1

	kindRaw    = 0 // versions 1 and 2: the bytes as they are
	kindZstd   = 1 // version 1: one zstd frame of the whole chunk
	kindFramed = 2 // version 2: a table, then each group raw or one zstd frame

	// groupLog sets the group, the unit a read verifies: 1 KiB (a BLAKE3
	// chunk) << groupLog. 16 KiB is four of RocksDB's default 4 KiB blocks,
	// so a random block read costs one small disk read, and its 64-byte node
	// in the verification tree is 0.4% of the group.
	groupLog  = 4
	GroupSize = 1024 << groupLog

	// nodeSize is one parent node of the verification tree: two BLAKE3
	// chaining values.
	nodeSize = 64
	// pageSize aligns the first group of a raw chunk with more than one
	// group, so that reading a group reads no more disk pages than it
	// covers. (Frames are not aligned: their ends are wherever they end.)
	pageSize = 4096
)

var (
	magic       = [4]byte{'s', 'f', 'c', 'k'}
	crc32cTable = crc32.MakeTable(crc32.Castagnoli)
)

// zstdLevel was chosen by measurement (store_bench_test.go): SpeedFastest
// compresses text-like chunks almost as well as SpeedDefault at several times
// the speed, and sealing competes with the FUSE read path for two cores.
const zstdLevel = zstd.SpeedFastest

// A group is stored compressed only when that saves at least 1/minSavingDiv
// of its size: a smaller saving is not worth a decompression on every read.
// Already-compressed SST blocks land here and are stored raw.
const minSavingDiv = 8

// The encoder and decoder are shared by all stores: EncodeAll and DecodeAll
// are safe for concurrent use and keep a pool of GOMAXPROCS workers each, so
// no call allocates a coder of its own.
var (
	encoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstdLevel),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithEncoderCRC(false), // the chunk hash covers the payload
		)
		if err != nil {
			panic(fmt.Sprintf("cas: zstd encoder: %v", err))
		}
		return e
	})
	decoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			// Never write past the length the header promised.
			zstd.WithDecodeAllCapLimit(true),
		)
		if err != nil {
			panic(fmt.Sprintf("cas: zstd decoder: %v", err))
		}
		return d
	})
)

// header describes a chunk file's payload.
type header struct {
	version byte
	kind    byte
	size    uint64 // uncompressed length
}

func (hd header) encode(b []byte) {
	copy(b[0:4], magic[:])
	b[4] = hd.version
	b[5] = hd.kind
	b[6], b[7] = 0, 0
	if hd.version >= formatVersion {
		b[6] = groupLog
	}
	binary.LittleEndian.PutUint64(b[8:16], hd.size)
	binary.LittleEndian.PutUint32(b[16:20], crc32.Checksum(b[:16], crc32cTable))
}

// decodeHeader checks and parses a chunk file's header. Its errors say what is
// wrong; the caller adds the hash and ErrCorrupt.
func decodeHeader(b []byte) (header, error) {
	if len(b) < headerSize {
		return header{}, fmt.Errorf("file is %d bytes, shorter than the %d-byte header", len(b), headerSize)
	}
	if [4]byte(b[0:4]) != magic {
		return header{}, fmt.Errorf("bad magic %q", b[0:4])
	}
	if got, want := binary.LittleEndian.Uint32(b[16:20]), crc32.Checksum(b[:16], crc32cTable); got != want {
		return header{}, fmt.Errorf("header checksum is %08x, want %08x", got, want)
	}
	hd := header{version: b[4], kind: b[5], size: binary.LittleEndian.Uint64(b[8:16])}
	switch {
	case hd.version == formatV1 && (hd.kind == kindRaw || hd.kind == kindZstd) && b[6] == 0 && b[7] == 0:
	case hd.version == formatVersion && (hd.kind == kindRaw || hd.kind == kindFramed) && b[6] == groupLog && b[7] == 0:
	case hd.version != formatV1 && hd.version != formatVersion:
		return header{}, fmt.Errorf("unknown format version %d", b[4])
	default:
		return header{}, fmt.Errorf("unknown kind %d/%d/%d for version %d", b[5], b[6], b[7], b[4])
	}
	// The length is trusted for an allocation: no chunk is longer than
	// MaxChunk, and a header that says otherwise is damaged or hostile.
	if hd.size > MaxChunk {
		return header{}, fmt.Errorf("length %d is more than a chunk's %d", hd.size, MaxChunk)
	}
	return hd, nil
}

// groups is how many groups a chunk of size bytes has.
func groups(size uint64) int { return int((size + GroupSize - 1) / GroupSize) }

// groupLen is the length of group g of a chunk of size bytes.
func groupLen(size uint64, g int) int { return int(min(GroupSize, size-uint64(g)*GroupSize)) }

// treeSize is the length of the verification tree of a chunk of size bytes:
// one node for each parent in the BLAKE3 tree over its groups.
func treeSize(size uint64) int { return max(groups(size)-1, 0) * nodeSize }

// payloadOffset is where a version 2 chunk's first group starts in its file:
// after the header, the tree and (framed) the table; on a page boundary if
// the chunk is raw and has more than one group.
func (hd header) payloadOffset() int64 {
	if hd.version == formatV1 {
		return headerSize
	}
	off := int64(headerSize + treeSize(hd.size))
	if hd.kind == kindFramed {
		off += 4 * int64(groups(hd.size))
	}
	if hd.kind == kindRaw && groups(hd.size) > 1 {
		off = (off + pageSize - 1) &^ (pageSize - 1)
	}
	return off
}

// encode returns the chunk file's content for data, whose hash is h, in
// pieces, using *bp as scratch space. It fails if data does not hash to h
// (a caller's bug: the chunk would never verify).
func encode(h Hash, data []byte, bp *[]byte) ([][]byte, error) {
	size := uint64(len(data))
	n := groups(size)
	var tree []byte
	if n > 1 {
		enc, root := bao.EncodeBuf(data, groupLog, true)
		if root != h {
			return nil, fmt.Errorf("content hashes to %s", Hash(root))
		}
		tree = enc[8:] // Bao's outboard after its length, which the header holds
	}
	// Compress each group alone, so that any group decodes without the
	// others, and keep the frames that pay for themselves.
	frames := (*bp)[:0]
	ends := make([]uint32, n)
	compressed := false
	for g := range n {
		plain := data[g*GroupSize : g*GroupSize+groupLen(size, g)]
		start := len(frames)
		frames = encoder().EncodeAll(plain, frames)
		if len(frames)-start >= len(plain)-len(plain)/minSavingDiv {
			frames = append(frames[:start], plain...)
		} else {
			compressed = true
		}
		ends[g] = uint32(len(frames))
	}
	*bp = frames[:0]
	hd := header{version: formatVersion, kind: kindRaw, size: size}
	if compressed {
		hd.kind = kindFramed
	}
	meta := make([]byte, hd.payloadOffset())
	hd.encode(meta)
	copy(meta[headerSize:], tree)
	if !compressed {
		return [][]byte{meta, data}, nil
	}
	table := meta[headerSize+len(tree):]
	for g, end := range ends {
		binary.LittleEndian.PutUint32(table[4*g:], end)
	}
	return [][]byte{meta, frames}, nil
}

// scratch pools the buffers that hold compressed payloads on their way to and
// from disk, so Put and Get allocate little in steady state.
var scratch = sync.Pool{New: func() any { return new([]byte) }}
