package test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/internal/storetest"
)

// The fault tests break the disk under a mounted store — fill it, damage
// chunk files, make the index read-only — and check that writers get the
// right errno, readers get EIO and never wrong bytes, the daemon keeps
// serving and unmounts cleanly, and `statefs fsck`, `fsck --repair` and
// `statefs scrub` report and repair exactly the damage.

// requireServing fails unless the daemon is alive and answers a stat of
// the mount root within 10 seconds (a wedged daemon never answers).
func requireServing(t *testing.T, m *Mount, when string) {
	t.Helper()
	for _, fatal := range []string{"fatal error", "SIGBUS", "panic:"} {
		if strings.Contains(m.Log(), fatal) {
			t.Fatalf("%s: the daemon died (%q in its log):\n%s", when, fatal, tail(m.Log(), 4000))
		}
	}
	done := make(chan error, 1)
	go func() { _, err := os.Stat(m.Path(".")); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: stat of the mount root: %v\n%s", when, err, tail(m.Log(), 4000))
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the daemon does not answer a stat within 10s\n%s", when, tail(m.Log(), 4000))
	}
}

// fill writes files of 4 MiB, each fsync'd, in the directory dir until one
// fails, and returns the ones that were stored (write, fsync and close
// succeeded). The failure must be ENOSPC or EDQUOT. The files' names and
// contents follow from seed.
func fill(t *testing.T, dir string, seed int64) map[string][]byte {
	t.Helper()
	stored := map[string][]byte{}
	for i := 0; ; i++ {
		require.Less(t, i, 1000, "4 GB written to a small disk without ENOSPC")
		path := filepath.Join(dir, fmt.Sprintf("f%d", seed+int64(i)))
		data := pseudoRandom(4<<20, seed+int64(i))
		if err := createSynced(path, data); err != nil {
			requireNoSpace(t, err, "writing "+path)
			return stored
		}
		stored[path] = data
	}
}

// TestFullDisk fills a store's disk through the mount. Writers get ENOSPC,
// never success for bytes that were not stored; once the disk is full the
// daemon takes no new content (new files, writable opens, growth), so that
// writers that retry cannot take the reserve its index needs to flush a
// memtable (badger writes through memory maps: without room it dies of
// SIGBUS); it keeps serving metadata changes, even with no free block at
// all; a seal that finds no room leaves the file in staging, readable;
// once files are deleted the store takes writes again, fsck finds it
// consistent, and every file whose fsync succeeded reads back byte for
// byte.
func TestFullDisk(t *testing.T) {
	t.Parallel() // long, on a disk of its own: it runs beside the other long tests
	disk := smallDisk(t, 1024)
	addr := freeAddr(t)
	m := mountStore(t, filepath.Join(disk, "store"), "--seal-delay", "0", "--metrics-addr", addr, "--seal-as", "chunks")
	var status struct {
		DiskFull    *bool `json:"disk_full"`
		Passthrough bool  `json:"passthrough"`
	}
	// requireFull checks what status.json and /metrics say of the disk.
	requireFull := func(want bool, when string) {
		t.Helper()
		raw, err := os.ReadFile(m.Path(".statefs", "status.json"))
		require.NoError(t, err)
		status.DiskFull = nil
		require.NoError(t, json.Unmarshal(raw, &status))
		require.NotNil(t, status.DiskFull, "status.json has no disk_full: %s", raw)
		require.Equal(t, want, *status.DiskFull, "status.json's disk_full %s", when)
		s := scrapeMetrics(t, addr)
		require.NotNil(t, s["statefs_disk_full"], "/metrics has no statefs_disk_full")
		require.Equal(t, map[bool]float64{true: 1}[want], s.value("statefs_disk_full", ""), "statefs_disk_full %s", when)
	}
	requireFull(false, "before the disk filled")
	reserveLeft := func() (n int) {
		for _, name := range []string{"reserve-1", "reserve-2"} {
			if _, err := os.Stat(filepath.Join(m.Store, name)); err == nil {
				n++
			}
		}
		return n
	}
	require.Equal(t, 2, reserveLeft(), "the daemon keeps a reserve")

	// The victim stays open (a reader) until the disk is full, so that its
	// seal runs then.
	victim := pseudoRandom(24<<20, 70)
	f, err := os.Create(m.Path("victim"))
	require.NoError(t, err)
	require.NoError(t, writeAndSync(f, victim))
	hold, err := os.Open(m.Path("victim"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	fi, err := hold.Stat()
	require.NoError(t, err)
	victimIno := fi.Sys().(*syscall.Stat_t).Ino
	// A writer whose file was open before the disk filled, as RocksDB's
	// log is.
	late, err := os.Create(m.Path("late"))
	require.NoError(t, err)
	defer late.Close()
	require.NoError(t, os.Mkdir(m.Path("fill1"), 0o755))
	require.NoError(t, os.Mkdir(m.Path("more"), 0o755))

	// The writer stops at ENOSPC. The daemon releases the first half of the
	// reserve when less than that is free, maybe while the writer still ran,
	// which took it; if not, a writer that goes on takes it now and stops
	// at ENOSPC again. Then the daemon releases the second half, once the
	// free space stopped falling: the disk is full.
	stored := fill(t, m.Path("fill1"), 1000)
	require.NotEmpty(t, stored)
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(m.Log(), "disk full: new files") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(m.Log(), "disk full: new files") {
		maps.Copy(stored, fill(t, m.Path("fill1"), 2000))
	}
	waitLogLine(t, m, 20*time.Second, "disk full: new files")
	requireFull(true, "once the second reserve file is released")
	// A restart would free nothing: the daemon stays healthy.
	code, body := get(t, addr, "/healthz")
	require.Equal(t, http.StatusOK, code, "GET /healthz on a full disk: %s", body)
	require.Zero(t, reserveLeft(), "the disk is full with a reserve file left")
	require.GreaterOrEqual(t, freeBytes(t, disk), int64(32<<20), "the daemon released too little of its reserve")

	// The disk is full: new content gets ENOSPC, and writers that go on
	// after it leave the released reserve to the index.
	_, err = os.Create(m.Path("new"))
	requireNoSpace(t, err, "creating a file")
	requireNoSpace(t, os.Mkdir(m.Path("newdir"), 0o755), "mkdir")
	_, err = os.OpenFile(slices.Sorted(maps.Keys(stored))[0], os.O_WRONLY, 0)
	requireNoSpace(t, err, "opening a stored file for writing")
	requireNoSpace(t, unix.Setxattr(m.Path("victim"), "user.blob", []byte("x"), 0), "setxattr")
	for round := range 3 {
		require.Empty(t, fill(t, m.Path("more"), int64(2000+100*round)), "a file was stored on a full disk")
		time.Sleep(300 * time.Millisecond)
	}
	require.GreaterOrEqual(t, freeBytes(t, disk), int64(32<<20), "writers took the reserve of a full disk")

	// Metadata changes that move and remove state go on, and fill a
	// memtable: badger flushes it into a new table, in the released reserve.
	tables := func() int {
		names, err := filepath.Glob(filepath.Join(m.Store, "index", "*.sst"))
		require.NoError(t, err)
		return len(names)
	}
	names := [2]string{strings.Repeat("a", 255), strings.Repeat("b", 255)}
	require.NoError(t, os.Rename(m.Path("more"), m.Path(names[0])))
	before := tables()
	i := 0
	for ; tables() == before; i++ {
		require.Less(t, i, 200000, "200,000 renames did not fill a memtable")
		require.NoError(t, os.Rename(m.Path(names[i%2]), m.Path(names[(i+1)%2])), "rename on a full disk")
	}
	t.Logf("a memtable flushed on a full disk after %d renames", i)
	requireServing(t, m, "after a memtable flush on a full disk")

	// The writer whose file was open before: without passthrough its
	// writes reach the daemon, which refuses them too. Through passthrough
	// they do not, and it could take the reserve (README, "Full disk").
	if !status.Passthrough {
		_, err := late.Write(pseudoRandom(1<<20, 3000))
		requireNoSpace(t, err, "writing through the daemon a file opened before the disk was full")
		require.GreaterOrEqual(t, freeBytes(t, disk), int64(32<<20), "a write through the daemon took the reserve of a full disk")
	}
	// Something else on the disk takes whatever is left: no free block at
	// all.
	other, err := os.Create(filepath.Join(disk, "other"))
	require.NoError(t, err)
	_, err = other.Write(pseudoRandom(256<<20, 3001))
	requireNoSpace(t, err, "filling the disk beside the store")
	require.NoError(t, other.Close())
	require.Zero(t, reserveLeft(), "a reserve file on a full disk")
	require.Less(t, freeBytes(t, disk), int64(1<<20), "the disk has room after a writer got ENOSPC")
	// Metadata changes on a disk with no free block at all: each one
	// succeeds or fails with ENOSPC, and the daemon lives on.
	for j := range 300 {
		if err := os.Rename(m.Path(names[i%2]), m.Path(names[(i+1)%2])); err == nil {
			i++
		} else {
			requireNoSpace(t, err, "rename")
		}
		if err := os.Chmod(m.Path("victim"), 0o600|os.FileMode(j%2)<<5); err != nil {
			requireNoSpace(t, err, "chmod")
		}
	}
	requireServing(t, m, "after metadata changes on a full disk")
	require.NoError(t, late.Close())

	// Now the victim's seal runs and finds no room: the file stays in
	// staging, whole and readable.
	require.NoError(t, hold.Close())
	waitLogLine(t, m, 20*time.Second, fmt.Sprintf("sealing failed; the file stays in staging\" inode=%d ", victimIno))
	found := false
	err = filepath.WalkDir(filepath.Join(m.Store, "staging"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil && info.Size() == int64(len(victim)) {
				found = true
			}
		}
		return err
	})
	require.NoError(t, err)
	require.True(t, found, "the victim's staging file is gone although its seal failed")
	dropCache(t, m.Path("victim"))
	requireContent(t, m.Path("victim"), victim)
	for path, data := range stored {
		requireContent(t, path, data)
	}
	requireServing(t, m, "after reading on a full disk")

	// Free space: the store takes writes again and remakes its reserve.
	require.NoError(t, os.Remove(m.Path("late")))
	require.NoError(t, os.Remove(filepath.Join(disk, "other")))
	for i, path := range slices.Sorted(maps.Keys(stored)) {
		if i >= 8 {
			require.NoError(t, os.Remove(path))
			delete(stored, path)
		}
	}
	// Sealed files' chunks go with the next sweep: statefs gc, through the
	// daemon.
	deadline = time.Now().Add(20 * time.Second)
	for freeBytes(t, disk) < 512<<20 {
		require.True(t, time.Now().Before(deadline), "deleting files and gc freed no space within 20s")
		r := runCLI(t, time.Minute, "gc", "--store", m.Store)
		require.Equal(t, 0, r.code, "statefs gc on a full disk: %s\n%s", r.stdout, r.stderr)
		time.Sleep(100 * time.Millisecond)
	}
	waitLogLine(t, m, 20*time.Second, "disk has room again")
	requireFull(false, "once space was freed")
	require.Equal(t, 2, reserveLeft(), "the reserve is made again")
	after := pseudoRandom(8<<20, 71)
	require.NoError(t, createSynced(m.Path("after"), after))
	requireServing(t, m, "after space was freed")

	m.Unmount() // exits 0 and leaves no mount: Unmount checks
	ps, r := fsck(t, m.Store, true)
	require.Equal(t, 0, r.code, "fsck after a full disk: %v\n%s", ps, r.stderr)
	for _, p := range ps {
		require.Contains(t, []string{"garbage-chunk"}, p.Kind, "fsck after a full disk: %s: %s", p.Kind, p.Detail)
	}

	m.Start() // seals the victim, which waited in staging
	waitAllSealed(t, m)
	requireContent(t, m.Path("victim"), victim)
	requireContent(t, m.Path("after"), after)
	for path, data := range stored {
		requireContent(t, path, data)
	}
}

// TestFullDiskObjects fills a store's disk with the seal's default choice
// (--seal-as auto), which keeps random content as objects: a file sealed
// into objects/ before the disk filled reads back whole; a writer gets
// ENOSPC; unlinking its file, large and never sealed, gives its space back,
// as the mount's statfs shows, without a sweep; and the store takes new
// files again, sealed as objects, across a restart.
func TestFullDiskObjects(t *testing.T) {
	disk := smallDisk(t, 160)
	m := mountStore(t, filepath.Join(disk, "store"), "--seal-delay", "0")

	keep := pseudoRandom(1<<20, 80)
	putFile(t, m.Path("keep"), keep, 0o644)
	waitAllSealed(t, m)
	require.Len(t, objectFiles(t, m.Store), 1, "a file of random content is not sealed as an object")
	require.Empty(t, chunkFiles(t, m.Store), "a file of random content sealed as chunks")

	// The filler stays open until it is unlinked, so that no seal makes
	// an object of it: its space is its staging file's.
	filler, err := os.Create(m.Path("filler"))
	require.NoError(t, err)
	block := pseudoRandom(1<<20, 81)
	var werr error
	for i := 0; i < 400 && werr == nil; i++ {
		_, werr = filler.Write(block)
	}
	if werr == nil {
		werr = filler.Sync()
	}
	requireNoSpace(t, werr, "writing the filler")
	requireContent(t, m.Path("keep"), keep)

	require.NoError(t, os.Remove(m.Path("filler")))
	require.NoError(t, filler.Close())
	// The space comes back once the kernel forgets the unlinked inode.
	deadline := time.Now().Add(10 * time.Second)
	for freeBytes(t, m.Dir) < 100<<20 {
		require.True(t, time.Now().Before(deadline), "unlinking the filler freed no space within 10s: %d bytes free", freeBytes(t, m.Dir))
		time.Sleep(10 * time.Millisecond)
	}
	if strings.Contains(m.Log(), "disk full: new files") {
		waitLogLine(t, m, 20*time.Second, "disk has room again")
	}
	fresh := pseudoRandom(8<<20, 82)
	require.NoError(t, createSynced(m.Path("fresh"), fresh))
	waitAllSealed(t, m)
	require.Len(t, objectFiles(t, m.Store), 2, "the store seals new files as objects once space is freed")

	m.Restart()
	requireContent(t, m.Path("keep"), keep)
	requireContent(t, m.Path("fresh"), fresh)
	_, err = os.Stat(m.Path("filler"))
	require.True(t, errors.Is(err, fs.ErrNotExist), "the unlinked filler after a restart: %v", err)
}

// faultFiles writes files of distinct random content, sealed one at a
// time, and returns each one's content and the chunk files it added.
func faultFiles(t *testing.T, m *Mount, names ...string) (map[string][]byte, map[string][]string) {
	t.Helper()
	contents, chunks := map[string][]byte{}, map[string][]string{}
	for i, name := range names {
		before := chunkFiles(t, m.Store)
		contents[name] = pseudoRandom(3<<20, int64(100+i))
		putFile(t, m.Path(name), contents[name], 0o644)
		waitAllSealed(t, m)
		for _, c := range chunkFiles(t, m.Store) {
			if !slices.Contains(before, c) {
				chunks[name] = append(chunks[name], c)
			}
		}
		require.GreaterOrEqual(t, len(chunks[name]), 2, "%s: 3 MiB sealed into fewer than two chunks", name)
	}
	return contents, chunks
}

// requireEIO reads path and expects EIO, and a log line of the daemon that
// names the file and the chunk. The line may reach the test's copy of the
// log a moment after the read's reply.
func requireEIO(t *testing.T, m *Mount, name, chunk string) {
	t.Helper()
	dropCache(t, m.Path(name))
	_, err := os.ReadFile(m.Path(name))
	require.True(t, errors.Is(err, syscall.EIO), "reading %s with a damaged chunk: %v, want EIO", name, err)
	waitLogLine(t, m, 5*time.Second, "unreadable content", name, filepath.Base(chunk))
}

// damagedFiles is the damaged-file problems fsck reported, by file name.
func damagedFiles(ps []fsckProblem) []string {
	var names []string
	for _, p := range ps {
		if p.Kind == "damaged-file" {
			name, _, _ := strings.Cut(strings.TrimPrefix(p.Detail, "file "), " (")
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// TestIOErrorDamagedChunks damages chunk files three ways — cut short,
// replaced by a directory, a byte flipped — while the daemon runs. Reads of
// the three files give EIO with a log line naming the file and the chunk;
// the fourth file, the daemon and new writes are unaffected. fsck reports
// exactly the three files and changes nothing; fsck --repair lists the
// lost ranges and makes them holes; the repaired files keep their names and
// sizes and read as before but with zeros in the lost ranges.
func TestIOErrorDamagedChunks(t *testing.T) {
	m := mountFS(t, "--seal-delay", "0", "--seal-as", "chunks")
	names := []string{"truncated", "directory", "flipped", "intact"}
	contents, chunks := faultFiles(t, m, names...)
	m.Restart() // the daemon's read cache and the kernel's pages start empty

	lost := map[string]string{} // file -> its damaged chunk file
	for _, name := range names[:3] {
		lost[name] = chunks[name][len(chunks[name])-1]
	}
	require.NoError(t, os.Truncate(lost["truncated"], 100))
	require.NoError(t, os.Remove(lost["directory"]))
	require.NoError(t, os.Mkdir(lost["directory"], 0o700))
	b, err := os.ReadFile(lost["flipped"])
	require.NoError(t, err)
	b[len(b)/2] ^= 0x10
	require.NoError(t, os.WriteFile(lost["flipped"], b, 0o600))

	for _, name := range names[:3] {
		requireEIO(t, m, name, lost[name])
	}
	requireContent(t, m.Path("intact"), contents["intact"])
	fresh := pseudoRandom(5<<20, 200)
	require.NoError(t, createSynced(m.Path("fresh"), fresh))
	requireServing(t, m, "after reads of damaged chunks")
	m.Unmount()

	// fsck without --verify sees the chunk that is not a file; with it,
	// all three. It changes nothing: the second run sees the same.
	ps, r := fsck(t, m.Store, false)
	require.Equal(t, 1, r.code, "fsck of a damaged store must fail: %v", ps)
	require.Equal(t, []string{"directory"}, damagedFiles(ps))
	for range 2 {
		ps, r = fsck(t, m.Store, true)
		require.Equal(t, 1, r.code, "fsck --verify of a damaged store must fail: %v", ps)
		require.Equal(t, []string{"directory", "flipped", "truncated"}, damagedFiles(ps), "fsck --verify: %v", ps)
	}
	fi, err := os.Stat(lost["directory"])
	require.NoError(t, err)
	require.True(t, fi.IsDir(), "fsck changed the damaged chunk")

	r = runCLI(t, time.Minute, "fsck", "--store", m.Store, "--repair", "--json")
	require.Equal(t, 0, r.code, "fsck --repair: %s\n%s", r.stdout, r.stderr)
	var rep struct {
		Repaired []struct {
			Paths     []string `json:"paths"`
			Size      uint64   `json:"size"`
			LostBytes uint64   `json:"lost_bytes"`
			Holes     []struct {
				Off   uint64 `json:"offset"`
				Len   uint64 `json:"length"`
				Chunk string `json:"chunk"`
			} `json:"holes"`
		} `json:"repaired"`
		Removed  []string      `json:"removed_chunks"`
		Problems []fsckProblem `json:"problems"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.Len(t, rep.Repaired, 3, "fsck --repair: %s", r.stdout)
	require.Len(t, rep.Removed, 3)
	holes := map[string][2]uint64{}
	for _, f := range rep.Repaired {
		require.Len(t, f.Paths, 1)
		require.Len(t, f.Holes, 1)
		name := f.Paths[0]
		require.Equal(t, filepath.Base(lost[name]), f.Holes[0].Chunk, "%s: the hole's chunk", name)
		require.Equal(t, uint64(len(contents[name])), f.Size)
		holes[name] = [2]uint64{f.Holes[0].Off, f.Holes[0].Len}
	}
	for _, p := range rep.Problems {
		require.Equal(t, "garbage-chunk", p.Kind, "after --repair: %s", p.Detail)
	}
	for _, name := range names[:3] {
		_, err := os.Lstat(lost[name])
		require.True(t, errors.Is(err, fs.ErrNotExist), "fsck --repair left damaged chunk %s: %v", lost[name], err)
	}
	ps, r = fsck(t, m.Store, true)
	require.Equal(t, 0, r.code, "fsck --verify after --repair: %v", ps)

	m.Start()
	for _, name := range names[:3] {
		want := bytes.Clone(contents[name])
		h := holes[name]
		clear(want[h[0] : h[0]+h[1]])
		requireContent(t, m.Path(name), want)
	}
	requireContent(t, m.Path("intact"), contents["intact"])
	requireContent(t, m.Path("fresh"), fresh)
	// Content written again is stored afresh, not deduplicated against the
	// chunk that was damaged.
	putFile(t, m.Path("again"), contents["flipped"], 0o644)
	waitAllSealed(t, m)
	m.Restart()
	requireContent(t, m.Path("again"), contents["flipped"])
}

// TestIOErrorReadOnlyIndex makes the index directory read-only (a
// read-only bind mount over it) under a running daemon: files keep
// reading, changes succeed or fail with an errno, and the daemon neither
// dies nor hangs; a daemon started on the read-only index refuses with one
// line naming the index. Once the index is writable again, the store is
// consistent and every file whose fsync succeeded is intact.
func TestIOErrorReadOnlyIndex(t *testing.T) {
	m := mountFS(t, "--seal-delay", "0")
	old := pseudoRandom(3<<20, 300)
	putFile(t, m.Path("old"), old, 0o644)
	waitAllSealed(t, m)

	indexDir := filepath.Join(m.Store, "index")
	readOnly := func() {
		t.Helper()
		require.NoError(t, unix.Mount(indexDir, indexDir, "", unix.MS_BIND, ""))
		require.NoError(t, unix.Mount("", indexDir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""))
	}
	writable := func() { require.NoError(t, unix.Unmount(indexDir, 0)) }
	readOnly()
	t.Cleanup(func() { unix.Unmount(indexDir, unix.MNT_DETACH) })

	synced := map[string][]byte{}
	for i := range 20 {
		name := fmt.Sprintf("new%02d", i)
		data := pseudoRandom(1<<20, int64(400+i))
		if err := createSynced(m.Path(name), data); err != nil {
			var errno syscall.Errno
			require.True(t, errors.As(err, &errno), "writing %s on a read-only index: %v, want an errno", name, err)
			continue
		}
		synced[name] = data
	}
	if err := os.Mkdir(m.Path("dir"), 0o755); err != nil {
		var errno syscall.Errno
		require.True(t, errors.As(err, &errno), "mkdir on a read-only index: %v", err)
	}
	dropCache(t, m.Path("old"))
	requireContent(t, m.Path("old"), old)
	requireServing(t, m, "with a read-only index")
	writable()
	m.Unmount()

	readOnly()
	r := runCLI(t, time.Minute, "mount", "--store", m.Store, m.Dir)
	requireOneLineError(t, r, "index")
	requireNotMounted(t, m.Dir)
	writable()

	ps, r := fsck(t, m.Store, true)
	require.Equal(t, 0, r.code, "fsck after a read-only index: %v\n%s", ps, r.stderr)
	m.Start()
	requireContent(t, m.Path("old"), old)
	for name, data := range synced {
		requireContent(t, m.Path(name), data)
	}
}

// TestBitRotScrub flips one byte of a chunk under a running daemon: the
// next read of the file gives EIO (never wrong bytes), other files read
// fine, and `statefs scrub` finds the chunk and names the file, exits 1,
// and changes nothing; on a sound store it exits 0. It scrubs a store a
// daemon serves through the daemon, and one no daemon serves itself; the
// daemon keeps to --max-rate (6 MiB at 2 MiB/s: 3 s at the least).
func TestBitRotScrub(t *testing.T) {
	storetest.LeaveDamaged(t, "it flips a byte of a chunk")
	m := mountFS(t, "--seal-delay", "0", "--seal-as", "chunks")
	contents, chunks := faultFiles(t, m, "rotten", "sound")
	m.Restart()
	r := runCLI(t, time.Minute, "scrub", "--store", m.Store, "--max-rate", "lots")
	requireOneLineError(t, r, "--max-rate")
	start := time.Now()
	r = runCLI(t, time.Minute, "scrub", "--store", m.Store, "--max-rate", "2MiB")
	require.Equal(t, 0, r.code, "scrub of a sound store through the daemon: %s\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "0 damaged chunks, 0 damaged files")
	require.GreaterOrEqual(t, time.Since(start), 2500*time.Millisecond, "the daemon scrubbed 6 MiB faster than --max-rate 2MiB")

	victim := chunks["rotten"][0]
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	b[len(b)-1] ^= 0x01
	require.NoError(t, os.WriteFile(victim, b, 0o600))
	requireEIO(t, m, "rotten", victim)
	requireContent(t, m.Path("sound"), contents["sound"])
	requireServing(t, m, "after a read of a rotten chunk")

	for i := range 3 {
		if i == 1 {
			m.Unmount() // the second and third scrub read the store themselves
		}
		r = runCLI(t, time.Minute, "scrub", "--store", m.Store)
		require.Equal(t, 1, r.code, "scrub of a store with a rotten chunk: %s\n%s", r.stdout, r.stderr)
		require.Contains(t, r.stdout, "damaged chunk "+filepath.Base(victim)+" (used)")
		require.Contains(t, r.stdout, "damaged file rotten ")
		require.NotContains(t, r.stdout, "sound")
		require.NotContains(t, r.stdout+r.stderr, "\r", "a progress bar on output that is not a terminal")
		require.Contains(t, r.stderr, "fsck --repair")
	}
	r = runCLI(t, time.Minute, "scrub", "--store", m.Store, "--json")
	var rep struct {
		Chunks  int `json:"chunks"`
		Damaged []struct {
			Hash string `json:"hash"`
		} `json:"damaged"`
		Files []struct {
			Paths []string `json:"paths"`
		} `json:"files"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.Equal(t, len(chunks["rotten"])+len(chunks["sound"]), rep.Chunks)
	require.Len(t, rep.Damaged, 1)
	require.Equal(t, filepath.Base(victim), rep.Damaged[0].Hash)
	require.Len(t, rep.Files, 1)
	require.Equal(t, []string{"rotten"}, rep.Files[0].Paths)

	// Put the byte back: scrub finds nothing and exits 0.
	b[len(b)-1] ^= 0x01
	require.NoError(t, os.WriteFile(victim, b, 0o600))
	r = runCLI(t, time.Minute, "scrub", "--store", m.Store)
	require.Equal(t, 0, r.code, "scrub of a sound store: %s\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "0 damaged chunks, 0 damaged files")
}
