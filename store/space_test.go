package store

import (
	"errors"
	"os"
	"path/filepath"
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
