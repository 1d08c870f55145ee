package store

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/internal/testenv"
)

// TestSecondReserveWaitsForWritersToStop fills a small disk as a writer of
// many files does: between two files the free space is below the second
// reserve file's threshold, but the writer has not seen ENOSPC yet. The
// keeper must keep that file until the free space stops falling; released
// at once, the writer would take it whole and leave badger's next flush no
// room (a flaky TestFullDisk found this). Once it is released the disk is
// full (new content refused) until twice the reserve is free again.
func TestSecondReserveWaitsForWritersToStop(t *testing.T) {
	testenv.RequireFUSE(t) // root, to mount a small tmpfs
	disk := t.TempDir()
	if err := unix.Mount("tmpfs", disk, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatalf("mounting a 64 MiB tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(disk, unix.MNT_DETACH) })
	k := &spaceKeeper{dir: disk}
	exists := func(name string) bool {
		_, err := os.Lstat(filepath.Join(disk, name))
		return err == nil
	}
	now := time.Unix(1e9, 0)
	tick := func(d time.Duration) {
		now = now.Add(d)
		k.tick(now)
	}
	tick(0)
	if !exists(ReserveNames[0]) || !exists(ReserveNames[1]) {
		t.Fatal("the keeper made no reserve on an empty disk")
	}

	// A writer leaves a few KiB free: the first half goes (less than half
	// the reserve is free).
	writeUntilFull(t, filepath.Join(disk, "a"), 64<<10)
	tick(spaceInterval)
	if exists(ReserveNames[0]) {
		t.Fatal("the first reserve file stayed at a full disk")
	}
	// The writer goes on, takes the first half, and stops just short of a
	// full disk.
	writeUntilFull(t, filepath.Join(disk, "b"), 64<<10)
	tick(spaceInterval)
	if !exists(ReserveNames[1]) {
		t.Fatal("the second reserve file went while the free space was still falling")
	}
	tick(spaceInterval)
	if !exists(ReserveNames[1]) {
		t.Fatalf("the second reserve file went after the free space stood still for %v, less than %v", spaceInterval, settle)
	}
	if k.full.Load() {
		t.Fatal("the disk counts as full while the second reserve file is still there")
	}
	tick(settle)
	if exists(ReserveNames[1]) {
		t.Fatalf("the second reserve file stayed on a full disk that stood still for %v", settle+spaceInterval)
	}
	if !k.full.Load() {
		t.Fatal("the disk does not count as full once the second reserve file is released")
	}

	// Freed space: the disk stays full until twice the reserve is free,
	// then the reserve is made again, at the next look of a request
	// (fullRecheck after the last), not at the keeper's next tick.
	if err := os.Remove(filepath.Join(disk, "b")); err != nil {
		t.Fatal(err)
	}
	if !k.isFull() || exists(ReserveNames[1]) {
		t.Fatal("the disk stopped counting as full with less than twice the reserve free")
	}
	if err := os.Remove(filepath.Join(disk, "a")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(fullRecheck)
	if k.isFull() || !exists(ReserveNames[0]) || !exists(ReserveNames[1]) {
		t.Fatalf("with most of the disk free: full=%v, reserve files %v and %v", k.full.Load(), exists(ReserveNames[0]), exists(ReserveNames[1]))
	}
}

// writeUntilFull writes blocks of size bytes to a new file at path until
// the disk is full, and leaves the last, partial block unwritten: the
// disk keeps less than size bytes free.
func writeUntilFull(t *testing.T, path string, size int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, size)
	for i := 0; ; i++ {
		if i > 1<<20 {
			t.Fatal("64 GiB written to a 64 MiB disk")
		}
		var st unix.Statfs_t
		if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		if int64(st.Bfree)*st.Bsize < int64(size) {
			return
		}
		if _, err := f.Write(block); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatalf("filling %s: %v", path, err)
		}
	}
}

// The reserve goes by the space free to root (the daemon's writes may use
// the blocks ext4 keeps for root), and its log gives as "free" the space df
// shows (f_bavail, as statefs_disk_free_bytes) beside it, so that the log
// and df agree.
func TestReserveLogsTheSpaceDfShows(t *testing.T) {
	const block = 4096
	d := diskOf(&unix.Statfs_t{Bsize: block, Blocks: 1 << 20, Bfree: 1000, Bavail: 10})
	if d.free != 1000*block || d.avail != 10*block || d.total != (1<<20)*block {
		t.Fatalf("statfs of 1000 blocks free, 10 available and 2^20 in all reads as %+v", d)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ReserveNames[0]), make([]byte, block), 0o600); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	size := int64(2048 * block) // a reserve whose first half goes below 1024 blocks free to root
	after := releaseReserve(dir, d, size, false)
	if _, err := os.Lstat(filepath.Join(dir, ReserveNames[0])); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("1000 blocks free to root, below half a reserve of 2048: the first reserve file stayed (%v)", err)
	}
	if want := (disk{free: 1001 * block, avail: 11 * block, total: d.total}); after != want {
		t.Errorf("after releasing one block: %+v, want %+v", after, want)
	}
	if want := fmt.Sprintf("released=%d free=%d free_to_root=%d", block, 10*block, 1000*block); !strings.Contains(logged.String(), want) {
		t.Errorf("the release logged %q, want it to say %s", logged.String(), want)
	}
}
