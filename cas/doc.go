// Package cas stores content-addressed chunks on disk: it cuts streams into
// content-defined chunks, names each chunk by the BLAKE3-256 hash of its
// uncompressed bytes, compresses it with zstd where that pays, and verifies
// every byte it returns against that hash (DESIGN invariant 5).
//
// It knows nothing about paths, inodes or jobs; deciding when a chunk may be
// removed (DESIGN invariant 3) belongs to the layers above.
//
// # Reading a part of a chunk
//
// A chunk is read in groups of GroupSize (16 KiB) bytes, each verified
// alone: BLAKE3 is a tree hash, and a chunk file keeps the inner nodes of
// the tree over its groups (Bao's "outboard" encoding, package
// lukechampine.com/blake3/bao), so a group is checked against the chunk's
// name by hashing it and the nodes on its path to the root. A random 4 KiB
// read of a sealed file therefore costs one 16 KiB disk read, not the whole
// chunk; the tree costs 64 bytes per group (0.4%). Each group is compressed
// alone, and stored raw when zstd saves less than 1/8 of it (SST blocks are
// already compressed), so a group decodes without its neighbours.
//
// # Layout
//
// A chunk directory has 256 fan-out subdirectories named by the first byte
// of the hash in hex; a chunk lives at <dir>/ab/abcdef...(64 hex digits).
// A chunk file is a 20-byte header, the tree, for a framed chunk a table, and
// then the groups:
//
//	offset size
//	0      4    magic "sfck"
//	4      1    format version (2)
//	5      1    kind: 0 raw (every group as it is), 2 framed (see below)
//	6      1    group size: 1 KiB << this (4: 16 KiB)
//	7      1    zero
//	8      8    uncompressed length, little endian, at most MaxChunk
//	16     4    CRC-32C of bytes 0..15, little endian
//	20     64×(G−1)  the tree: the parent nodes of the BLAKE3 tree over the
//	            G groups, in pre-order, each two 32-byte chaining values
//	            (Bao's outboard encoding without its length, which is above)
//	…      4×G  framed only: where each group's stored bytes end, little
//	            endian uint32, counted from the first group's start
//	…           raw: zeros up to the next 4 KiB boundary if G > 1, so that a
//	            group read covers no more disk pages than it must
//	…           the groups, one after the other: a framed chunk's group is a
//	            zstd frame, or its bytes as they are when the frame would
//	            not be shorter
//
// The header checksum lets a reader reject a damaged header before it
// trusts the length for an allocation. Everything after it is checked by
// the hash: a damaged tree node fails the reads of the groups under it, a
// damaged table entry the two groups it bounds, a damaged group itself;
// never another read, and never with wrong bytes. zstd frames carry no
// checksum of their own. Get checks the whole file: every group, every
// node, the table, the padding and the length.
//
// Format version 1 (one payload for the whole chunk: its bytes, or one zstd
// frame) is still read, verified as a whole; Upgrade rewrites it.
//
// # Crash safety
//
// A chunk is written to a temporary file in its fan-out directory, fsync'd,
// hard-linked to its final name and unlinked, and the directory is fsync'd.
// The name therefore appears only for a complete, synced file (DESIGN invariant
// 2), and linking (not renaming) makes exactly one of several concurrent Puts
// of the same hash the writer. Temporary files left by a crash are removed by
// RemoveStaleTemps, which keeps those of its own process: every process
// names its temporary files with a token of its own. It must not run while
// another process writes to the same directory. Open reads only the
// directory's own listing, not its subdirectories, so that opening a store
// to serve it costs the same however many chunks it holds.
package cas
