package cas_test

// Benchmarks that chose the hash (zeebo/blake3) and the chunker (PlakarKorp's
// FastCDC) against the alternatives. They run only with -bench.

import (
	"bytes"
	"crypto/sha256"
	"io"
	"strconv"
	"testing"

	chunkers "github.com/PlakarKorp/go-cdc-chunkers"
	_ "github.com/PlakarKorp/go-cdc-chunkers/chunkers/fastcdc"
	_ "github.com/PlakarKorp/go-cdc-chunkers/chunkers/ultracdc"
	jotfs "github.com/jotfs/fastcdc-go"
	restic "github.com/restic/chunker"
	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/internal/testbytes"
	zeebo "github.com/zeebo/blake3"
	luke "lukechampine.com/blake3"
)

// Every chunker gets the package's size bounds.
const (
	benchMin = cas.MinChunk
	benchAvg = cas.AvgChunk
	benchMax = cas.MaxChunk
)

func BenchmarkChoiceHash(b *testing.B) {
	hashes := []struct {
		name string
		sum  func([]byte) [32]byte
	}{
		{"sha256", sha256.Sum256},
		{"zeebo-blake3", zeebo.Sum256},
		{"lukechampine-blake3", func(p []byte) [32]byte { return luke.Sum256(p) }},
	}
	for _, size := range []int{64 << 10, 1 << 20, 4 << 20} {
		data := testbytes.Random(size, 1)
		for _, h := range hashes {
			b.Run(h.name+"/"+sizeName(size), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					h.sum(data)
				}
			})
		}
	}
}

// chunkFunc cuts data into chunks and returns their lengths.
type chunkFunc func(b testing.TB, data []byte) []int

var chunkCandidates = []struct {
	name  string
	chunk chunkFunc
}{
	{"restic-rabin", func(b testing.TB, data []byte) []int {
		// The polynomial must be fixed so boundaries are stable across runs.
		c := restic.NewWithBoundaries(bytes.NewReader(data), restic.Pol(0x3DA3358B4DC173), benchMin, benchMax)
		buf := make([]byte, benchMax)
		var lens []int
		for {
			ch, err := c.Next(buf)
			if err == io.EOF {
				return lens
			}
			if err != nil {
				b.Fatal(err)
			}
			lens = append(lens, int(ch.Length))
		}
	}},
	{"jotfs-fastcdc", func(b testing.TB, data []byte) []int {
		c, err := jotfs.NewChunker(bytes.NewReader(data), jotfs.Options{MinSize: benchMin, AverageSize: benchAvg, MaxSize: benchMax})
		if err != nil {
			b.Fatal(err)
		}
		var lens []int
		for {
			ch, err := c.Next()
			if err == io.EOF {
				return lens
			}
			if err != nil {
				b.Fatal(err)
			}
			lens = append(lens, ch.Length)
		}
	}},
	{"plakar-fastcdc", plakar("fastcdc-v1.0.0")},
	{"cas.Chunker", func(b testing.TB, data []byte) []int {
		c := cas.NewChunker(bytes.NewReader(data))
		var lens []int
		var buf []byte
		for {
			chunk, err := c.Next(buf)
			if err == io.EOF {
				return lens
			}
			if err != nil {
				b.Fatal(err)
			}
			lens = append(lens, len(chunk))
			buf = chunk
		}
	}},
	{"plakar-ultracdc", plakar("ultracdc")},
}

func plakar(algo string) chunkFunc {
	return func(b testing.TB, data []byte) []int {
		c, err := chunkers.NewChunker(algo, bytes.NewReader(data), &chunkers.ChunkerOpts{MinSize: benchMin, NormalSize: benchAvg, MaxSize: benchMax})
		if err != nil {
			b.Fatal(err)
		}
		var lens []int
		for {
			ch, err := c.Next()
			if err != nil && err != io.EOF {
				b.Fatal(err)
			}
			if len(ch) > 0 {
				lens = append(lens, len(ch))
			}
			if err == io.EOF {
				return lens
			}
		}
	}
}

func BenchmarkChoiceChunker(b *testing.B) {
	data := testbytes.Random(256<<20, 2)
	for _, cand := range chunkCandidates {
		b.Run(cand.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			var n int
			for b.Loop() {
				n = len(cand.chunk(b, data))
			}
			b.ReportMetric(float64(len(data))/float64(n)/(1<<10), "avgKiB")
		})
	}
}

// BenchmarkChoiceChunkerDedup inserts 100 bytes at the front of a 64 MiB buffer
// and reports how many of the new chunks already existed.
func BenchmarkChoiceChunkerDedup(b *testing.B) {
	orig := testbytes.Random(64<<20, 3)
	edited := append(testbytes.Random(100, 4), orig...)
	for _, cand := range chunkCandidates {
		b.Run(cand.name, func(b *testing.B) {
			var reused, total int
			for b.Loop() {
				seen := map[[32]byte]bool{}
				for _, c := range split(orig, cand.chunk(b, orig)) {
					seen[sha256.Sum256(c)] = true
				}
				chunks := split(edited, cand.chunk(b, edited))
				reused, total = 0, len(chunks)
				for _, c := range chunks {
					if seen[sha256.Sum256(c)] {
						reused++
					}
				}
			}
			b.ReportMetric(float64(reused), "reused")
			b.ReportMetric(float64(total), "chunks")
		})
	}
}

func split(data []byte, lens []int) [][]byte {
	out := make([][]byte, 0, len(lens))
	for _, n := range lens {
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MiB"
	}
	return strconv.Itoa(n>>10) + "KiB"
}
