package cas

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Chunk file header; the layout is in the package documentation.
const (
	headerSize    = 20
	formatVersion = 1
	kindRaw       = 0
	kindZstd      = 1
)

var (
	magic       = [4]byte{'s', 'f', 'c', 'k'}
	crc32cTable = crc32.MakeTable(crc32.Castagnoli)
)

// zstdLevel was chosen by measurement (store_bench_test.go): SpeedFastest
// compresses text-like chunks almost as well as SpeedDefault at several times
// the speed, and sealing competes with the FUSE read path for two cores.
const zstdLevel = zstd.SpeedFastest

// A chunk is stored compressed only when that saves at least 1/minSavingDiv
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
	kind byte
	size uint64 // uncompressed length
}

func (hd header) encode(b []byte) {
	copy(b[0:4], magic[:])
	b[4] = formatVersion
	b[5] = hd.kind
	b[6], b[7] = 0, 0
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
	if b[4] != formatVersion {
		return header{}, fmt.Errorf("unknown format version %d", b[4])
	}
	hd := header{kind: b[5], size: binary.LittleEndian.Uint64(b[8:16])}
	if hd.kind != kindRaw && hd.kind != kindZstd || b[6] != 0 || b[7] != 0 {
		return header{}, fmt.Errorf("unknown kind %d/%d/%d", b[5], b[6], b[7])
	}
	// The length is trusted for an allocation: no chunk is longer than
	// MaxChunk, and a header that says otherwise is damaged or hostile.
	if hd.size > MaxChunk {
		return header{}, fmt.Errorf("length %d is more than a chunk's %d", hd.size, MaxChunk)
	}
	return hd, nil
}

// scratch pools the buffers that hold compressed payloads on their way to and
// from disk, so Put and Get allocate nothing in steady state.
var scratch = sync.Pool{New: func() any { return new([]byte) }}
