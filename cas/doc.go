// Package cas stores content-addressed chunks on disk: it cuts streams into
// content-defined chunks, names each chunk by the BLAKE3-256 hash of its
// uncompressed bytes, compresses it with zstd when that pays, and verifies every
// chunk against its hash when it is read back (DESIGN invariant 5).
//
// It knows nothing about paths, inodes or jobs; deciding when a chunk may be
// removed (DESIGN invariant 3) belongs to the layers above.
//
// # Layout
//
// A store is one directory with 256 fan-out subdirectories named by the first
// byte of the hash in hex; a chunk lives at <dir>/ab/abcdef...(64 hex digits).
// A chunk file is a 20-byte header followed by the payload:
//
//	offset size
//	0      4    magic "sfck"
//	4      1    format version (1)
//	5      1    kind: 0 raw, 1 zstd (one frame)
//	6      2    zero
//	8      8    uncompressed length, little endian, at most MaxChunk
//	16     4    CRC-32C of bytes 0..15, little endian
//
// The header checksum lets Get reject a damaged header before it trusts the
// length for an allocation; the payload itself is checked by hashing the
// uncompressed bytes, so zstd frames are written without their own checksum.
//
// # Crash safety
//
// A chunk is written to a temporary file in its fan-out directory, fsync'd,
// hard-linked to its final name and unlinked, and the directory is fsync'd.
// The name therefore appears only for a complete, synced file (DESIGN invariant
// 2), and linking (not renaming) makes exactly one of several concurrent Puts
// of the same hash the writer. Temporary files left by a crash are removed by
// Open, so Open must not run while another process writes to the same store.
package cas
