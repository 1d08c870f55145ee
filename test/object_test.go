package test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statefs/statefs/internal/storetest"
)

// objectFiles lists the paths of the object files of store.
func objectFiles(t *testing.T, store string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(store, "objects", "??", "*"))
	require.NoError(t, err)
	var objects []string
	for _, p := range paths {
		if !strings.HasPrefix(filepath.Base(p), ".") {
			objects = append(objects, p)
		}
	}
	return objects
}

// sealedAs is how inspect says the file at rel is kept: "object",
// "chunks", or "" for inline or staging content.
func sealedAs(t *testing.T, m *Mount, rel string) string {
	t.Helper()
	var in struct {
		As string `json:"as"`
	}
	cliJSON(t, &in, "inspect", "--store", m.Store, "--json", rel)
	return in.As
}

// A file sealed as an object is read by the kernel itself, through
// passthrough: reading all of it, cold, sends the daemon no READ. The
// same file kept as chunks (--seal-as chunks) is read through the daemon,
// which shows that the count would see reads.
func TestObjectReadThroughPassthrough(t *testing.T) {
	for _, tc := range []struct {
		sealAs    string
		wantReads bool
	}{{"auto", false}, {"chunks", true}} {
		t.Run(tc.sealAs, func(t *testing.T) {
			addr := freeAddr(t)
			m := mountFS(t, "--passthrough=true", "--seal-delay", "0", "--metrics-addr", addr, "--seal-as", tc.sealAs)
			content := pseudoRandom(8<<20, 70)
			writeSyncedWithDir(t, m.Path("d/000012.sst"), content)
			waitAllSealed(t, m)
			want := map[bool]string{false: "object", true: "chunks"}[tc.wantReads]
			require.Equal(t, want, sealedAs(t, m, "d/000012.sst"))
			m.Restart() // nothing of it in the kernel's caches or open
			dropCache(t, m.Path("d/000012.sst"))
			before := scrapeMetrics(t, addr).value("statefs_fuse_op_duration_seconds", "read")
			requireContent(t, m.Path("d/000012.sst"), content)
			reads := scrapeMetrics(t, addr).value("statefs_fuse_op_duration_seconds", "read") - before
			if tc.wantReads {
				require.Greater(t, reads, 0.0, "reads of chunks reached the daemon")
			} else {
				require.Zero(t, reads, "the daemon answered READs of a file sealed as an object")
			}
		})
	}
}

// Identical files share one object, and the store's bytes show it; a file
// whose content compresses is kept as chunks.
func TestObjectsDeduplicateWholeFiles(t *testing.T) {
	m := mountFS(t, "--seal-delay", "0")
	sst := pseudoRandom(6<<20, 71)
	for _, p := range []string{"chk_1/000007.sst", "chk_2/000007.sst", "chk_3/000007.sst"} {
		writeSyncedWithDir(t, m.Path(p), sst)
	}
	heap := bytes.Repeat([]byte("key-17 -> {count: 3, sum: 1.5} "), 100_000)
	writeSyncedWithDir(t, m.Path("chk_3/heap-snapshot"), heap)
	waitAllSealed(t, m)
	require.Len(t, objectFiles(t, m.Store), 1, "three identical files sealed into other than one object")
	var stats struct {
		ObjectFiles   int   `json:"object_files"`
		ObjectBytes   int64 `json:"object_bytes"`
		ChunkBytes    int64 `json:"chunk_bytes"`
		PhysicalBytes int64 `json:"physical_bytes"`
	}
	require.NoError(t, json.Unmarshal(fileBytes(t, m.Path(".statefs", "stats.json")), &stats))
	require.Equal(t, 1, stats.ObjectFiles)
	require.LessOrEqual(t, stats.ObjectBytes, int64(len(sst))+4096, "the object takes more than one copy")
	require.Less(t, stats.PhysicalBytes, int64(len(sst))+int64(len(heap))/2, "the store keeps more than one copy of the SST and the compressed heap")
	require.Equal(t, "chunks", sealedAs(t, m, "chk_3/heap-snapshot"))
	for _, p := range []string{"chk_1/000007.sst", "chk_2/000007.sst", "chk_3/000007.sst"} {
		require.Equal(t, "object", sealedAs(t, m, p))
		requireContent(t, m.Path(p), sst)
	}
	requireContent(t, m.Path("chk_3/heap-snapshot"), heap)
	// The executor's removals free the object with the last file, without
	// a collector run.
	for _, p := range []string{"chk_1", "chk_2", "chk_3"} {
		require.NoError(t, os.RemoveAll(m.Path(p)))
	}
	require.Empty(t, objectFiles(t, m.Store), "the object outlived the files that were it")
}

// A flipped byte in an object: the scrub finds it and quarantines the
// object, and the next open of the file fails with EIO, with a log line
// naming the file and the object; fsck reports it; fsck --repair makes the
// file a hole, and the store is sound again.
func TestScrubQuarantinesADamagedObject(t *testing.T) {
	m := mountFS(t, "--seal-delay", "0")
	rotten, sound := pseudoRandom(3<<20, 72), pseudoRandom(3<<20, 73)
	// Counted before the write: with no seal delay, the seal may be done
	// by the time the write returns.
	before := objectFiles(t, m.Store)
	writeSyncedWithDir(t, m.Path("d/rotten.sst"), rotten)
	waitAllSealed(t, m)
	objects := objectFiles(t, m.Store)
	require.Len(t, objects, len(before)+1)
	victim := objects[0]
	writeSyncedWithDir(t, m.Path("d/sound.sst"), sound)
	waitAllSealed(t, m)
	flipByte(t, victim, 1<<20)

	r := runCLI(t, time.Minute, "scrub", "--store", m.Store)
	require.Equal(t, 1, r.code, "scrub of a store with a rotten object: %s\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, filepath.Base(victim))
	_, err := os.ReadFile(m.Path("d/rotten.sst"))
	require.True(t, errors.Is(err, syscall.EIO), "open of a file whose object is quarantined: %v, want EIO", err)
	waitLogLine(t, m, 5*time.Second, "cannot open sealed content", "d/rotten.sst", filepath.Base(victim), "quarantined")
	requireContent(t, m.Path("d/sound.sst"), sound)

	m.Unmount()
	ps, _ := fsck(t, m.Store, false)
	kinds := map[string]bool{}
	for _, p := range ps {
		kinds[p.Kind] = true
	}
	require.True(t, kinds["quarantined-object"] && kinds["damaged-file"], "fsck: %v", ps)
	r = runCLI(t, time.Minute, "fsck", "--store", m.Store, "--repair")
	require.Equal(t, 0, r.code, "fsck --repair: %s\n%s", r.stdout, r.stderr)
	ps, r = fsck(t, m.Store, true)
	requireOnlyLeftovers(t, "after the repair", ps, r)
	m.Start()
	requireContent(t, m.Path("d/rotten.sst"), make([]byte, len(rotten)))
	requireContent(t, m.Path("d/sound.sst"), sound)
}

// With --verify-reads the daemon serves objects and verifies each read: a
// flipped byte fails the read of its range with EIO before any scrub.
func TestVerifyReadsFailsAFlippedByte(t *testing.T) {
	storetest.LeaveDamaged(t, "it flips a byte of an object")
	m := mountFS(t, "--seal-delay", "0", "--verify-reads")
	content := pseudoRandom(3<<20, 74)
	writeSyncedWithDir(t, m.Path("d/000009.sst"), content)
	waitAllSealed(t, m)
	objects := objectFiles(t, m.Store)
	require.Len(t, objects, 1)
	flipByte(t, objects[0], 2<<20)
	dropCache(t, m.Path("d/000009.sst"))
	f, err := os.Open(m.Path("d/000009.sst"))
	require.NoError(t, err)
	defer f.Close()
	head := make([]byte, 64<<10)
	_, err = f.ReadAt(head, 0)
	require.NoError(t, err, "a read of an intact range")
	require.Equal(t, content[:len(head)], head)
	_, err = f.ReadAt(make([]byte, 4096), 2<<20)
	require.True(t, errors.Is(err, syscall.EIO), "a read of the flipped byte: %v, want EIO", err)
	waitLogLine(t, m, 5*time.Second, "unreadable content", "d/000009.sst", filepath.Base(objects[0]))
}

// flipByte inverts the byte at off of the file at path, in place.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}
