package cas

import (
	"fmt"
	"io"

	cdc "github.com/PlakarKorp/go-cdc-chunkers"
	_ "github.com/PlakarKorp/go-cdc-chunkers/chunkers/fastcdc" // registers chunkerAlgorithm
)

// Chunk size bounds. Every chunk but a stream's last is at least MinChunk bytes;
// none is more than MaxChunk. Changing any of them, or chunkerAlgorithm, moves
// the boundaries, so new chunks stop deduplicating against old ones (nothing
// breaks: chunks are named by content).
const (
	MinChunk = 512 << 10
	AvgChunk = 1 << 20
	MaxChunk = 4 << 20
)

// chunkerAlgorithm is FastCDC (normalized Gear hashing) under the library's
// frozen, versioned name, so an upgrade of the library cannot move boundaries.
// It was chosen by measurement: see choice_bench_test.go.
const chunkerAlgorithm = "fastcdc-v1.0.0"

// Chunker cuts a stream into content-defined chunks: a boundary depends only
// on the bytes just before it, so an insertion near the start of a file moves
// only nearby boundaries and the rest of the file still deduplicates.
// A Chunker is not safe for concurrent use.
type Chunker struct {
	cdc  *cdc.Chunker
	err  error // sticky: io.EOF after the last chunk, or the reader's error
	last bool  // the library returned the last chunk; the next call ends
}

// NewChunker returns a Chunker reading from r.
func NewChunker(r io.Reader) *Chunker {
	c, err := cdc.NewChunker(chunkerAlgorithm, r, &cdc.ChunkerOpts{
		MinSize:    MinChunk,
		NormalSize: AvgChunk,
		MaxSize:    MaxChunk,
	})
	if err != nil {
		// The options are constants, so this is a programming error.
		panic(fmt.Sprintf("cas: chunker %s: %v", chunkerAlgorithm, err))
	}
	return &Chunker{cdc: c}
}

// Next returns the next chunk in buf's storage (grown as needed), so the chunk
// stays valid until the caller reuses buf. After the last chunk it returns
// io.EOF; an empty stream has no chunks. A read error is returned as is, and
// again on every later call.
func (c *Chunker) Next(buf []byte) ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.last {
		c.err = io.EOF
		return nil, c.err
	}
	data, err := c.cdc.Next()
	switch {
	case err == io.EOF:
		// The library hands the final short chunk over together with io.EOF.
		c.last = true
	case err != nil:
		c.err = err
		return nil, err
	}
	if len(data) == 0 {
		c.err = io.EOF
		return nil, c.err
	}
	return append(buf[:0], data...), nil
}
