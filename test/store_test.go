package test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statefs/statefs/internal/storetest"
)

// Two copies of the same 64 MiB SST cost the disk one copy; text-like
// content is compressed.
func TestStoreDedupAndCompression(t *testing.T) {
	m := mountFS(t, "--seal-delay", "0", "--seal-as", "chunks")
	sst := pseudoRandom(64<<20, 1)
	putFile(t, m.Path("a.sst"), sst, 0o644)
	require.NoError(t, os.Mkdir(m.Path("chk"), 0o755))
	putFile(t, m.Path("chk", "a-copy.sst"), sst, 0o644)
	waitAllSealed(t, m)
	used := chunkBytes(t, m)
	require.LessOrEqual(t, used, int64(len(sst))*105/100, "two copies of 64 MiB take %d bytes of chunks", used)
	require.GreaterOrEqual(t, used, int64(len(sst)), "incompressible content cannot take less than itself")

	text := bytes.Repeat([]byte("key=value;timestamp=1796011008;operator=window-agg\n"), 300_000)
	putFile(t, m.Path("log.txt"), text, 0o644)
	waitAllSealed(t, m)
	grew := chunkBytes(t, m) - used
	require.Less(t, grew, int64(len(text))/4, "%d bytes of text took %d bytes of chunks", len(text), grew)

	m.Restart()
	requireContent(t, m.Path("chk", "a-copy.sst"), sst)
	requireContent(t, m.Path("log.txt"), text)
}

// A corrupt chunk gives EIO and a log line naming the chunk and the file,
// never wrong bytes (DESIGN invariant 5).
func TestStoreCorruptChunkGivesEIO(t *testing.T) {
	storetest.LeaveDamaged(t, "it flips a byte of a chunk")
	m := mountFS(t, "--seal-delay", "0", "--seal-as", "chunks")
	data := pseudoRandom(6<<20, 2)
	putFile(t, m.Path("victim"), data, 0o644)
	waitAllSealed(t, m)
	m.Unmount() // no chunk or page stays cached

	chunks := chunkFiles(t, m.Store)
	require.NotEmpty(t, chunks)
	chunk := chunks[0]
	b, err := os.ReadFile(chunk)
	require.NoError(t, err)
	b[len(b)/2] ^= 0x40
	require.NoError(t, os.WriteFile(chunk, b, 0o600))

	m.Start()
	_, err = os.ReadFile(m.Path("victim"))
	require.True(t, errors.Is(err, syscall.EIO), "reading a file with a corrupt chunk: %v", err)
	waitLogLine(t, m, 20*time.Second, "chunk="+filepath.Base(chunk)) // the log names the chunk
	waitLogLine(t, m, 20*time.Second, "file=victim")                 // and the file
}

// A full disk gives the writer ENOSPC; what was written before stays, the
// daemon keeps serving, and the store is usable again once space is freed.
func TestStoreFullDisk(t *testing.T) {
	disk := smallDisk(t, 160)
	m := mountStore(t, filepath.Join(disk, "store"), "--seal-delay", "0")

	keep := pseudoRandom(1<<20, 3)
	putFile(t, m.Path("keep"), keep, 0o644)
	waitAllSealed(t, m)

	f, err := os.Create(m.Path("filler"))
	require.NoError(t, err)
	block := pseudoRandom(1<<20, 4)
	var werr error
	for i := 0; i < 400 && werr == nil; i++ {
		_, werr = f.Write(block)
	}
	if werr == nil {
		werr = f.Sync()
	}
	f.Close()
	requireNoSpace(t, werr, "writing the filler")

	requireContent(t, m.Path("keep"), keep)
	require.NoError(t, os.Remove(m.Path("filler")))
	// The space comes back once the kernel forgets the unlinked inode.
	deadline := time.Now().Add(10 * time.Second)
	for freeBytes(t, m.Dir) < 100<<20 {
		require.True(t, time.Now().Before(deadline), "unlinking the filler freed no space within 10s")
		time.Sleep(10 * time.Millisecond)
	}
	fresh := pseudoRandom(8<<20, 5)
	putFile(t, m.Path("fresh"), fresh, 0o644)
	waitAllSealed(t, m)

	m.Restart()
	requireContent(t, m.Path("keep"), keep)
	requireContent(t, m.Path("fresh"), fresh)
	_, err = os.Stat(m.Path("filler"))
	require.True(t, errors.Is(err, fs.ErrNotExist))
}
