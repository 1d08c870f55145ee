package test

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
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
