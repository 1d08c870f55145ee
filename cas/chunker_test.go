package cas_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/internal/testbytes"
)

// chunkAll returns copies of the chunks NewChunker cuts from data.
func chunkAll(t *testing.T, r io.Reader) [][]byte {
	t.Helper()
	c := cas.NewChunker(r)
	var chunks [][]byte
	var buf []byte
	for {
		chunk, err := c.Next(buf)
		if err == io.EOF {
			return chunks
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		chunks = append(chunks, bytes.Clone(chunk))
		buf = chunk
	}
}

func TestChunkerReassemblesAndRespectsBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"one byte", []byte{7}},
		{"below min", testbytes.Random(cas.MinChunk-1, 1)},
		{"exactly min", testbytes.Random(cas.MinChunk, 1)},
		{"random 20MiB", testbytes.Random(20<<20, 2)},
		{"zeros 20MiB", make([]byte, 20<<20)}, // no boundary is ever found: cut at max
	} {
		t.Run(tc.name, func(t *testing.T) {
			chunks := chunkAll(t, bytes.NewReader(tc.data))
			if !bytes.Equal(bytes.Join(chunks, nil), tc.data) {
				t.Fatal("chunks do not concatenate back to the input")
			}
			if len(tc.data) == 0 && len(chunks) != 0 {
				t.Fatalf("empty input gave %d chunks", len(chunks))
			}
			for i, c := range chunks {
				if len(c) > cas.MaxChunk {
					t.Errorf("chunk %d is %d bytes, more than MaxChunk %d", i, len(c), cas.MaxChunk)
				}
				if len(c) < cas.MinChunk && i != len(chunks)-1 {
					t.Errorf("chunk %d of %d is %d bytes, less than MinChunk %d", i, len(chunks), len(c), cas.MinChunk)
				}
				if len(c) == 0 {
					t.Errorf("chunk %d is empty", i)
				}
			}
		})
	}
}

func TestChunkerIsDeterministic(t *testing.T) {
	data := testbytes.Random(16<<20, 3)
	a := chunkAll(t, bytes.NewReader(data))
	b := chunkAll(t, iotest.HalfReader(bytes.NewReader(data)))
	if len(a) < 4 {
		t.Fatalf("16 MiB gave only %d chunks", len(a))
	}
	if len(a) != len(b) {
		t.Fatalf("%d chunks, then %d", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("chunk %d differs between two runs", i)
		}
	}
}

func TestChunkerAverageSize(t *testing.T) {
	data := testbytes.Random(64<<20, 4)
	chunks := chunkAll(t, bytes.NewReader(data))
	avg := len(data) / len(chunks)
	if avg < cas.AvgChunk/2 || avg > 2*cas.AvgChunk {
		t.Fatalf("average chunk is %d bytes, want about AvgChunk %d", avg, cas.AvgChunk)
	}
}

// An insertion at the front moves only the first boundary or two: the rest of
// the file deduplicates.
func TestChunkerInsertAtFrontReusesChunks(t *testing.T) {
	orig := testbytes.Random(64<<20, 5)
	edited := append(testbytes.Random(100, 6), orig...)
	seen := map[cas.Hash]bool{}
	for _, c := range chunkAll(t, bytes.NewReader(orig)) {
		seen[cas.Sum(c)] = true
	}
	chunks := chunkAll(t, bytes.NewReader(edited))
	reused := 0
	for _, c := range chunks {
		if seen[cas.Sum(c)] {
			reused++
		}
	}
	if reused < len(chunks)-2 {
		t.Fatalf("%d of %d chunks reused after a 100-byte insertion at the front, want all but at most 2", reused, len(chunks))
	}
}

func TestChunkerReturnsReadError(t *testing.T) {
	boom := errors.New("boom")
	c := cas.NewChunker(io.MultiReader(bytes.NewReader(testbytes.Random(3*cas.MaxChunk, 7)), iotest.ErrReader(boom)))
	var err error
	for err == nil {
		_, err = c.Next(nil)
	}
	if !errors.Is(err, boom) {
		t.Fatalf("Next ended with %v, want the reader's error", err)
	}
	if _, err := c.Next(nil); !errors.Is(err, boom) {
		t.Fatalf("Next after the error gave %v, want the reader's error again", err)
	}
}
