package test

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The kernel caches names, their absence and attributes of the executor's
// tree for --cache-timeout, an hour by default. These tests fill its caches,
// change the tree behind its back through each path on which statefs
// changes it itself, and check that the very next stat, open and readdir
// see the change.

// requireStatFresh checks that lstat(2) of path, which the kernel may answer
// from its caches, gives what the daemon answers now: statx(2) with
// AT_STATX_FORCE_SYNC, which a FUSE mount always asks the daemon for.
func requireStatFresh(t *testing.T, path, after string) {
	t.Helper()
	cached := lstatOf(t, path)
	var fresh unix.Statx_t
	require.NoError(t, unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_FORCE_SYNC, unix.STATX_BASIC_STATS, &fresh))
	type attrs struct {
		Mode, Nlink, Uid, Gid uint32
		Size, Blocks          int64
		Atime, Mtime, Ctime   int64
	}
	ns := func(t unix.StatxTimestamp) int64 { return t.Sec*1e9 + int64(t.Nsec) }
	got := attrs{cached.Mode, uint32(cached.Nlink), cached.Uid, cached.Gid, cached.Size, cached.Blocks,
		cached.Atim.Nano(), cached.Mtim.Nano(), cached.Ctim.Nano()}
	want := attrs{uint32(fresh.Mode), fresh.Nlink, fresh.Uid, fresh.Gid, int64(fresh.Size), int64(fresh.Blocks),
		ns(fresh.Atime), ns(fresh.Mtime), ns(fresh.Ctime)}
	require.Equal(t, want, got, "stat of %s after %s answered from a stale cache", path, after)
}

// cacheTree has the kernel look up, stat and list every file of files and
// every directory above them.
func cacheTree(t *testing.T, m *Mount, files map[string][]byte) {
	t.Helper()
	for p := range files {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			_, err := os.ReadDir(m.Path(dir))
			require.NoError(t, err)
			lstatOf(t, m.Path(dir))
		}
		lstatOf(t, m.Path(p))
	}
}

// forgetNames has the kernel drop every name and inode it holds no use of,
// on every filesystem: afterwards a directory's attributes can be cached
// while none of its names is.
func forgetNames(t *testing.T) {
	t.Helper()
	require.NoError(t, os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0))
}

// The collector removes a gone job's files and directories: their names
// go, the directories they were in show their new link counts and times,
// whether the kernel had their names cached or not, and a file that keeps
// a name outside the job shows its new link count.
func TestCacheSeesTheCollector(t *testing.T) {
	m := mountFS(t)
	gone := flinkTree(t, m, jobGone, 90)
	live := flinkTree(t, m, jobLive, 91)
	var snapshot string
	for p := range gone {
		if path.Base(p) == "000012.sst" {
			snapshot = p
		}
	}
	kept := "tm_tm-1/localState/kept.sst" // the executor's, not the job's
	require.NoError(t, os.Link(m.Path(snapshot), m.Path(kept)))
	forgetNames(t)
	// The job's checkpoint with every name; its database directory, under
	// tmp, with none.
	localState := map[string][]byte{}
	for p, b := range gone {
		if strings.HasPrefix(p, "tm_tm-1/localState/") {
			localState[p] = b
		}
	}
	cacheTree(t, m, localState)
	lstatOf(t, m.Path("tm_tm-1/tmp"))
	lstatOf(t, m.Path(kept))
	allocDir := "tm_tm-1/localState/aid_" + holdAlloc

	mustCLI(t, "job", "--store", m.Store, "gone", jobGone)
	require.Contains(t, mustCLI(t, "gc", "--store", m.Store, "--grace", "0"), "removed job "+jobGone)

	// The listing first: a stat would refresh the directory's times, and
	// the kernel would drop the listing it cached on seeing them change.
	names, err := readDirNames(m.Path(allocDir))
	require.NoError(t, err)
	require.Equal(t, []string{"jid_" + jobLive}, names, "a listing after the collection")
	requireStatFresh(t, m.Path(allocDir), "the collection")
	requireStatFresh(t, m.Path("tm_tm-1/tmp"), "the collection")
	requireStatFresh(t, m.Path(kept), "the collection")
	requireTree(t, m, gone, false)
	requireTree(t, m, live, true)
	require.EqualValues(t, 1, lstatOf(t, m.Path(kept)).Nlink, "the link count of a file the collection took a name of")
	requireContent(t, m.Path(kept), gone[snapshot])
}

// A held tree restored into the executor's tree is there at once, though
// the kernel had cached its absence; the directory it is restored into
// shows its new link count and times though the kernel had cached none of
// its names; the hold's view under .statefs/held is gone.
func TestCacheSeesARestore(t *testing.T) {
	m := mountFS(t, holdArgs...)
	const otherAlloc = "00000000000000000000000000000001"
	allocs := []string{"tm_tm-1/localState/aid_" + holdAlloc, "tm_tm-1/localState/aid_" + otherAlloc}
	kept := writeCheckpoint(t, m, subtaskDir(holdAlloc, jobLive), 3, 3)
	writeCheckpoint(t, m, subtaskDir(otherAlloc, jobLive), 3, 4)
	for _, a := range allocs {
		require.NoError(t, os.RemoveAll(m.Path(a)))
	}
	hs := waitHolds(t, m, 2)
	views := map[string]string{}
	for _, h := range hs {
		views[h.Path] = m.Path(".statefs/held", h.ID)
		lstatOf(t, views[h.Path])
	}

	// The kernel caches the absence of the first allocation.
	requireAbsent(t, m.Path(allocs[0]))
	mustCLI(t, "restore", "--store", m.Store, views[allocs[0]], m.Path(allocs[0]))
	requireTree(t, m, kept, true)
	requireAbsent(t, views[allocs[0]])

	// The kernel caches the attributes of their directory, and no name in it.
	forgetNames(t)
	lstatOf(t, m.Path("tm_tm-1/localState"))
	mustCLI(t, "restore", "--store", m.Store, views[allocs[1]], m.Path(allocs[1]))
	requireStatFresh(t, m.Path("tm_tm-1/localState"), "the restore")
	names, err := readDirNames(m.Path("tm_tm-1/localState"))
	require.NoError(t, err)
	require.Equal(t, []string{"aid_" + otherAlloc, "aid_" + holdAlloc}, names)

	// The kernel caches the directory's listing: a restore into it is in
	// the next listing, with no stat between to show the directory's new
	// times.
	require.NoError(t, os.RemoveAll(m.Path(allocs[1])))
	hs = waitHolds(t, m, 1)
	names, err = readDirNames(m.Path("tm_tm-1/localState"))
	require.NoError(t, err)
	require.Equal(t, []string{"aid_" + holdAlloc}, names)
	// The directory stays open, so its cached listing stays while the
	// kernel forgets its names (the cached absence of the one restored
	// among them): no entry the kernel holds tells it of the restore.
	dir, err := os.Open(m.Path("tm_tm-1/localState"))
	require.NoError(t, err)
	defer dir.Close()
	forgetNames(t)
	mustCLI(t, "restore", "--store", m.Store, m.Path(".statefs/held", hs[0].ID), m.Path(allocs[1]))
	names, err = readDirNames(m.Path("tm_tm-1/localState"))
	require.NoError(t, err)
	require.Equal(t, []string{"aid_" + otherAlloc, "aid_" + holdAlloc}, names, "a listing the kernel had cached, after a restore")
}

// A held tree dropped (here: emptied by its job's collection, then dropped
// by the holder) leaves its view at once.
func TestCacheSeesAHoldGo(t *testing.T) {
	m := mountFS(t, holdArgs...)
	sub := subtaskDir(holdAlloc, jobGone)
	writeCheckpoint(t, m, sub, 4, 4)
	alloc := "tm_tm-1/localState/aid_" + holdAlloc
	require.NoError(t, os.RemoveAll(m.Path(alloc)))
	hs := waitHolds(t, m, 1)
	view := m.Path(".statefs/held", hs[0].ID)
	_, err := os.ReadDir(view)
	require.NoError(t, err)
	mustCLI(t, "job", "--store", m.Store, "gone", jobGone)

	// The view's name is cached for a second: fresh in the kernel's cache
	// when the collection starts, and asked for as soon as the holder has
	// dropped the emptied tree (a pass comes every quarter of the hold
	// window).
	lstatOf(t, view)
	mustCLI(t, "gc", "--store", m.Store, "--grace", "0")
	waitHolds(t, m, 0)
	requireAbsent(t, view)
	entries, err := os.ReadDir(m.Path(".statefs/held"))
	require.NoError(t, err)
	require.Empty(t, entries)
}

// A seal moves a closed file's content from its staging file into chunks;
// an open for writing moves it back. Neither changes the file's size or
// times, but its blocks change with where the content is, and the next
// stat shows them.
func TestCacheSeesSealAndUnseal(t *testing.T) {
	m := mountFS(t, "--seal-delay", "1s")
	p := m.Path("tm_tm-1/localState/sparse")
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	f, err := os.Create(p)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("end"), 1<<20) // a hole the staging file does not allocate
	require.NoError(t, err)
	require.NoError(t, f.Close())
	before := lstatOf(t, p)

	waitAllSealed(t, m)
	// The seal tells the kernel just after its commit, which the status
	// shows: the blocks change within moments, or never.
	require.Eventually(t, func() bool { return lstatOf(t, p).Blocks != before.Blocks }, 2*time.Second, 10*time.Millisecond,
		"the kernel still has the staging file's blocks")
	requireStatFresh(t, p, "the seal")
	sealed := lstatOf(t, p)
	require.EqualValues(t, (1<<20+3+511)/512, sealed.Blocks, "blocks of the sealed file, from its size")
	require.NotEqual(t, before.Blocks, sealed.Blocks, "the test needs a seal that changes the blocks")
	require.Equal(t, before.Mtim, sealed.Mtim)
	require.Equal(t, before.Ctim, sealed.Ctim)

	start := time.Now()
	f, err = os.OpenFile(p, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	requireStatFresh(t, p, "the unseal")
	require.Less(t, time.Since(start), time.Second, "the unsealed file may have been sealed again meanwhile")
	unsealed := lstatOf(t, p)
	require.Equal(t, sealed.Mtim, unsealed.Mtim, "an open for writing changed the mtime")
	require.Equal(t, sealed.Ctim, unsealed.Ctim, "an open for writing changed the ctime")
	requireContent(t, p, append(make([]byte, 1<<20), "end"...))
}
