package cas_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/internal/testbytes"
)

// BenchmarkZstd compares the two levels considered for chunks on 1 MiB of
// text-like and of random data; ratio is compressed/uncompressed size.
func BenchmarkZstd(b *testing.B) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, level := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault} {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderCRC(false))
		if err != nil {
			b.Fatal(err)
		}
		for _, in := range []struct {
			name string
			data []byte
		}{{"text", text(1 << 20)}, {"random", testbytes.Random(1<<20, 20)}} {
			compressed := enc.EncodeAll(in.data, nil)
			ratio := float64(len(compressed)) / float64(len(in.data))
			b.Run(level.String()+"/"+in.name+"/compress", func(b *testing.B) {
				b.SetBytes(int64(len(in.data)))
				dst := make([]byte, 0, 2<<20)
				for b.Loop() {
					dst = enc.EncodeAll(in.data, dst[:0])
				}
				b.ReportMetric(ratio, "ratio")
			})
			b.Run(level.String()+"/"+in.name+"/decompress", func(b *testing.B) {
				b.SetBytes(int64(len(in.data)))
				dst := make([]byte, 0, len(in.data))
				for b.Loop() {
					if dst, err = dec.DecodeAll(compressed, dst[:0]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

var benchInputs = []struct {
	name string
	data []byte
}{{"text", text(1 << 20)}, {"random", testbytes.Random(1<<20, 21)}}

// BenchmarkPut stores a new 1 MiB chunk per iteration, fsyncs included.
func BenchmarkPut(b *testing.B) {
	for _, in := range benchInputs {
		b.Run(in.name, func(b *testing.B) {
			s, _ := openStore(b)
			data := append([]byte(nil), in.data...)
			b.SetBytes(int64(len(data)))
			var i uint64
			for b.Loop() {
				i++
				binary.LittleEndian.PutUint64(data, i)
				if _, err := s.Put(cas.Sum(data), data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPutExisting is the deduplicated case: the chunk is already there.
func BenchmarkPutExisting(b *testing.B) {
	s, _ := openStore(b)
	data := benchInputs[0].data
	h := cas.Sum(data)
	if _, err := s.Put(h, data); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := s.Put(cas.Sum(data), data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGet reads, decompresses and verifies a whole 1 MiB chunk and
// every part of its file into a reused buffer: what fsck --verify, scrub
// and unseal pay per chunk.
func BenchmarkGet(b *testing.B) {
	for _, in := range benchInputs {
		b.Run(in.name, func(b *testing.B) {
			s, _ := openStore(b)
			h := cas.Sum(in.data)
			if _, err := s.Put(h, in.data); err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 0, len(in.data))
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = s.Get(h, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadAt reads a 1 MiB chunk whose file is in the page cache by
// ranges of the sizes FUSE asks for, each verified alone: the read path of
// sealed content without the disk. Its MB/s bound what one core can serve.
func BenchmarkReadAt(b *testing.B) {
	for _, in := range benchInputs {
		for _, size := range []int{4 << 10, 128 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("%s/%dKiB", in.name, size>>10), func(b *testing.B) {
				s, _ := openStore(b)
				s.SetReadCache(0)
				h := cas.Sum(in.data)
				if _, err := s.Put(h, in.data); err != nil {
					b.Fatal(err)
				}
				p := make([]byte, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				off := 0
				for b.Loop() {
					if _, err := s.ReadAt(h, p, int64(off)); err != nil {
						b.Fatal(err)
					}
					off = (off + size) % len(in.data)
				}
			})
		}
	}
}

// BenchmarkReadAtCached reads a 1 MiB chunk in 4 KiB ranges, over and
// over, with the read cache, which soon holds every group: a read then
// opens no file.
func BenchmarkReadAtCached(b *testing.B) {
	data := benchInputs[1].data
	s, _ := openStore(b)
	h := cas.Sum(data)
	if _, err := s.Put(h, data); err != nil {
		b.Fatal(err)
	}
	p := make([]byte, 4<<10)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	off := 0
	for b.Loop() {
		if _, err := s.ReadAt(h, p, int64(off)); err != nil {
			b.Fatal(err)
		}
		off = (off + len(p)) % len(data)
	}
}
