package test

import (
	"bytes"
	bin "encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/internal/storetest"
)

// groupSize is the unit a read of sealed content verifies (cas.GroupSize).
const groupSize = 16 << 10

// Reads of sealed content of every size and offset, within a group, across
// groups and across chunks, through the daemon and through an mmap, return
// the file's bytes.
func TestSealedReadsAnyRange(t *testing.T) {
	m := mountFS(t, "--seal-delay", "0")
	data := append(pseudoRandom(5<<20, 7), bytes.Repeat([]byte("checkpoint state of operator map-1\n"), 80000)...)
	p := m.Path("f")
	putFile(t, p, data, 0o644)
	waitAllSealed(t, m)
	m.Restart() // nothing of the file in the daemon's memory

	f, err := os.Open(p)
	require.NoError(t, err)
	defer f.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		off := rng.IntN(len(data))
		n := 1 + rng.IntN(200<<10)
		if i%3 == 0 {
			n = 4096
		}
		require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
		buf := make([]byte, n)
		got, err := f.ReadAt(buf, int64(off))
		if err != nil && got != len(data)-off {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v", n, off, got, err)
		}
		if !bytes.Equal(buf[:got], data[off:off+got]) {
			t.Fatalf("ReadAt(%d bytes at %d) returned other bytes", n, off)
		}
	}
	mm, err := unix.Mmap(int(f.Fd()), 0, len(data), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(mm)
	require.True(t, bytes.Equal(mm, data), "an mmap of sealed content differs from the file")
}

// The kernel keeps the pages of sealed content from one open to the next
// (the daemon reads a file once), and a file whose content changed and was
// sealed again is never served from the old pages, read or mapped.
func TestSealedPagesCachedNeverStale(t *testing.T) {
	addr := freeAddr(t)
	m := mountFS(t, "--seal-delay", "0", "--metrics-addr", addr)
	p := m.Path("f")
	const size = 4 << 20
	old := pseudoRandom(size, 8)
	putFile(t, p, old, 0o644)
	waitAllSealed(t, m)
	requireContent(t, p, old) // the first open reads through the daemon
	before := scrapeMetrics(t, addr).value("statefs_fuse_read_bytes_total", "")
	for range 3 {
		requireContent(t, p, old)
	}
	if d := scrapeMetrics(t, addr).value("statefs_fuse_read_bytes_total", "") - before; d > size/4 {
		t.Errorf("three more reads of a sealed 4 MiB file read %v bytes through the daemon, want them from the page cache", d)
	}

	// Rewritten while a reader holds it open and mapped.
	r, err := os.Open(p)
	require.NoError(t, err)
	mm, err := unix.Mmap(int(r.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	require.True(t, bytes.Equal(mm, old))
	updated := pseudoRandom(size, 9)
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = w.WriteAt(updated, 0)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.True(t, bytes.Equal(mm, updated), "a mapping made before the rewrite shows old bytes")
	buf := make([]byte, 4096)
	_, err = r.ReadAt(buf, size/2)
	require.NoError(t, err)
	require.Equal(t, updated[size/2:size/2+4096], buf, "a reader open across the rewrite reads old bytes")
	require.NoError(t, unix.Munmap(mm))
	require.NoError(t, r.Close())

	// Sealed again: new opens and mappings see the new content, twice.
	waitAllSealed(t, m)
	for range 2 {
		requireContent(t, p, updated)
		r, err := os.Open(p)
		require.NoError(t, err)
		mm, err := unix.Mmap(int(r.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
		require.NoError(t, err)
		require.True(t, bytes.Equal(mm, updated), "a mapping of the file sealed again shows old bytes")
		require.NoError(t, unix.Munmap(mm))
		require.NoError(t, r.Close())
	}
	// And the same after a truncate that keeps the size.
	require.NoError(t, os.Truncate(p, size/2))
	require.NoError(t, os.Truncate(p, size))
	want := append(bytes.Clone(updated[:size/2]), make([]byte, size/2)...)
	requireContent(t, p, want)
	waitAllSealed(t, m)
	requireContent(t, p, want)
}

// A damaged 16 KiB group of a sealed chunk fails the reads that need it with
// EIO, and a log line names the file, the offset and the chunk; the other
// groups of the same chunk still read.
func TestDamagedGroupFailsOnlyItsReads(t *testing.T) {
	storetest.LeaveDamaged(t, "it flips a bit of a chunk")
	m := mountFS(t, "--seal-delay", "0", "--seal-as", "chunks")
	contents, chunks := faultFiles(t, m, "f")
	data := contents["f"]
	victim := chunks["f"][0]
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	// A raw chunk file (the package documentation of cas): the header, the
	// tree, zeros up to a page boundary, then the groups.
	require.Equal(t, byte(2), b[4], "chunk format version")
	require.Equal(t, byte(0), b[5], "random content is stored raw")
	size := int(bin.LittleEndian.Uint64(b[8:]))
	groups := (size + groupSize - 1) / groupSize
	payload := (20 + 64*(groups-1) + 4095) &^ 4095
	require.Equal(t, payload+size, len(b))
	at := bytes.Index(data, b[payload:payload+256]) // where the chunk starts in the file
	require.GreaterOrEqual(t, at, 0)
	require.True(t, bytes.Equal(data[at:at+size], b[payload:]))

	m.Unmount()
	b[payload+groupSize+100] ^= 0x01 // in the chunk's second group
	require.NoError(t, os.WriteFile(victim, b, 0o600))
	m.Start()

	// O_DIRECT: the daemon gets exactly the range asked for, where a read
	// through the page cache would ask for the kernel's read-ahead too.
	f, err := os.OpenFile(m.Path("f"), os.O_RDONLY|syscall.O_DIRECT, 0)
	require.NoError(t, err)
	defer f.Close()
	buf := alignedBuf(t, 4096)
	_, err = f.ReadAt(buf, int64(at+groupSize))
	require.True(t, errors.Is(err, syscall.EIO), "read of the damaged group: %v, want EIO", err)
	up := func(off int) int { return (off + 4095) &^ 4095 }
	for _, off := range []int{up(at), up(at + 2*groupSize), (at + size - 4096) &^ 4095} {
		n, err := f.ReadAt(buf, int64(off))
		require.NoError(t, err, "read at %d of an undamaged group of the damaged chunk (at %d, size %d):\n%s", off, at, size, tail(m.Log(), 3000))
		require.Equal(t, data[off:off+n], buf[:n])
	}
	waitLogLine(t, m, 5*time.Second, "unreadable content", "file=f", fmt.Sprintf("offset=%d", at+groupSize), "chunk="+filepath.Base(victim))
}

// alignedBuf returns n bytes aligned to a page, as O_DIRECT needs.
func alignedBuf(t *testing.T, n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}
