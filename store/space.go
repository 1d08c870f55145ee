package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A full disk must give writers ENOSPC and leave the daemon serving
// (DESIGN invariant 7). badger makes that hard: it keeps its write-ahead
// log in memory-mapped files that it creates sparse (a memtable's .mem file
// is truncated to twice the memtable size and written through the
// mapping), and it writes new tables through mappings too. When the disk is
// full the kernel cannot back a page the daemon touches for the first time
// and sends SIGBUS, which the Go runtime cannot turn into an error: the
// daemon dies at its next metadata change. Two measures keep the index
// writable:
//
//   - Log files are allocated (fallocate) as soon as they appear, at Open
//     and then every spaceInterval, as far as badger can write them before
//     it moves to a new memtable: appending to the log needs no new block.
//     A log is allocated long before it can fill (16 MiB of changes).
//   - Two reserve files hold reserveSize bytes that writers cannot take.
//     When the free space falls below half the reserve, the first is
//     removed: a writer that stopped short of a full disk (RocksDB's
//     fallocate of a new table fails whole) leaves room for badger's next
//     memtable flush and log. A writer that goes on takes that space too,
//     and gets ENOSPC at a full disk; then the second is removed, for badger
//     alone if the writer stops at ENOSPC, as RocksDB and Flink do. Full
//     means settled as well as nearly nothing free: a writer between two
//     files at a few MiB free has not seen ENOSPC yet, and would take the
//     second half whole if it were released then. The reserve is made
//     again once twice its size is free. The daemon's own
//     writes keep out of that space: a seal refuses to start when it would
//     leave less than half the reserve free (roomFor), and the file stays
//     in staging.
//
// Once the second half is released the disk is full (Full): the file
// system takes no new content (new files, writable opens, growth) until
// twice the reserve is free again and the reserve is made again, so a
// writer that retries after ENOSPC, as Flink's next checkpoint does, cannot
// take badger's room.
//
// What this does not cover: a writer that keeps writing through a file it
// opened before the disk was full, through passthrough (the daemon refuses
// the writes it sees, but never sees those), which can take the second
// half before badger's next flush; and values that badger puts in its value log (over 64 KiB: the
// manifest of a file of more than about 1,500 chunks).

// ReserveNames are the two reserve files in the store directory, in the
// order they are released. They hold no data: tools that measure what the
// store's content takes leave them out.
var ReserveNames = [2]string{"reserve-1", "reserve-2"}

// spaceInterval is how often the daemon allocates new log files and
// releases or remakes the reserve.
const spaceInterval = 100 * time.Millisecond

// settle is how long the free space must not fall before the disk counts
// as full and the second reserve file is released: writers have stopped.
const settle = 300 * time.Millisecond

// maxReserve is the reserve on a disk of 1 GiB or more. Each half holds
// what badger needs to move to a new memtable: the new log (20 MiB
// allocated), the table flushed from the old one (up to 16 MiB) and the
// start of a compaction.
const maxReserve = 128 << 20

// reserveSize is the reserve for a filesystem of total bytes: maxReserve,
// or an eighth of a smaller disk (too little there for every flush, but a
// disk that small holds no real state).
func reserveSize(total int64) int64 { return min(total/8, maxReserve) }

// releaseBelow is the free space under which reserve file i is released:
// half the reserve for the first, 1/32 of it (a full disk) for the second.
func releaseBelow(i int, reserve int64) int64 {
	if i == 0 {
		return reserve / 2
	}
	return reserve / 32
}

// disk is what statfs says of the filesystem holding a store.
//
// The reserve's decisions count the space free as root counts it (free):
// the daemon runs as root, and its writes, badger's through its mappings and
// the kernel's through passthrough on the daemon's behalf, may use the
// blocks ext4 keeps for root, so that is the room badger really has. People
// read the space other users have (avail), which df shows as Avail and
// statefs_disk_free_bytes gives; the log says both (attrs), so that its
// "free" is df's number and "free_to_root" the one the reserve went by.
type disk struct {
	free  int64 // bytes free to root (f_bfree)
	avail int64 // bytes free to other users (f_bavail), as df shows them
	total int64
}

func diskOf(st *unix.Statfs_t) disk {
	return disk{free: int64(st.Bfree) * st.Bsize, avail: int64(st.Bavail) * st.Bsize, total: int64(st.Blocks) * st.Bsize}
}

// diskSpace is the space of the filesystem holding dir.
func diskSpace(dir string) (disk, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return disk{}, err
	}
	return diskOf(&st), nil
}

// grown is d after n more bytes are free (n < 0: taken), to root and to
// other users alike.
func (d disk) grown(n int64) disk {
	d.free += n
	d.avail += n
	return d
}

// attrs are the log attributes of d's free space: free as df shows it,
// free_to_root as the reserve counts it.
func (d disk) attrs() []any { return []any{"free", d.avail, "free_to_root", d.free} }

// spaceKeeper runs the two measures for an open store.
type spaceKeeper struct {
	dir      string
	stop     chan struct{}
	done     chan struct{}
	warnOnce sync.Once
	full     atomic.Bool

	mu     sync.Mutex   // one tick at a time
	free   int64        // the free space at the last tick
	fell   time.Time    // when the free space was last seen falling
	ticked atomic.Int64 // when the last tick began, in Unix nanoseconds
}

// Full says whether the disk is full: the second reserve file is released
// and not made again. The file system refuses new content with ENOSPC
// meanwhile. A store opened for a check is never full.
func (s *Store) Full() bool { return s.space != nil && s.space.isFull() }

// fullRecheck is how old a full disk's last look may be before isFull
// looks again.
const fullRecheck = 10 * time.Millisecond

// isFull is the keeper's answer to Full. While the disk is full it looks
// again (a tick) if the last look is older than fullRecheck, so that space
// just freed is taken without waiting for the next tick, and a writer that
// retries in a loop does not run a tick per request; otherwise it costs
// one atomic load.
func (k *spaceKeeper) isFull() bool {
	if !k.full.Load() {
		return false
	}
	if now := time.Now(); now.UnixNano()-k.ticked.Load() >= int64(fullRecheck) {
		k.tick(now)
	}
	return k.full.Load()
}

// releaseReserveIfFull releases the reserve of the store in dir as the
// keeper would: badger needs room to open (a new log, the flush of the
// old one), before any keeper runs. Nothing else writes yet, so the free
// space is settled.
func releaseReserveIfFull(dir string) {
	if d, err := diskSpace(dir); err == nil {
		releaseReserve(dir, d, reserveSize(d.total), true)
	}
}

// releaseReserve removes the reserve files whose threshold the free space
// of d is below, the second only once the free space has settled, and
// returns the disk after.
func releaseReserve(dir string, d disk, size int64, settled bool) disk {
	for i, name := range ReserveNames {
		if d.free >= releaseBelow(i, size) || i == 1 && !settled {
			continue
		}
		path := filepath.Join(dir, name)
		fi, err := os.Lstat(path)
		if err != nil {
			continue
		}
		if err := os.Remove(path); err != nil {
			slog.Error("cannot release the disk reserve", "file", path, "err", err)
			continue
		}
		slog.Warn("disk nearly full: released the reserve for the index", append([]any{"file", path, "released", fi.Size()}, d.attrs()...)...)
		d = d.grown(fi.Size())
	}
	return d
}

// keepSpace allocates the index's log files and starts the keeper; Close
// stops it.
func (s *Store) keepSpace() {
	k := &spaceKeeper{dir: s.Dir, stop: make(chan struct{}), done: make(chan struct{})}
	k.tick(time.Now())
	go func() {
		defer close(k.done)
		t := time.NewTicker(spaceInterval)
		defer t.Stop()
		for {
			select {
			case <-k.stop:
				return
			case now := <-t.C:
				k.tick(now)
			}
		}
	}()
	s.space = k
}

// stopKeepingSpace stops the keeper, if one runs.
func (s *Store) stopKeepingSpace() {
	if s.space != nil {
		close(s.space.stop)
		<-s.space.done
		s.space = nil
	}
}

// tick does the keeper's work once, at now.
func (k *spaceKeeper) tick(now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ticked.Store(now.UnixNano())
	k.allocateLogs()
	d, err := diskSpace(k.dir)
	if err != nil {
		return
	}
	if k.fell.IsZero() || d.free < k.free {
		k.fell = now
	}
	defer func() { k.free = d.free }() // after what this tick releases or makes
	size := reserveSize(d.total)
	d = releaseReserve(k.dir, d, size, now.Sub(k.fell) >= settle)
	if d.free < 2*size || size < 2 {
		_, err := os.Lstat(filepath.Join(k.dir, ReserveNames[1]))
		k.setFull(size >= 2 && errors.Is(err, os.ErrNotExist), d, size)
		return
	}
	k.setFull(false, d, size)
	for _, name := range ReserveNames {
		path := filepath.Join(k.dir, name)
		if _, err := os.Lstat(path); err == nil {
			continue
		}
		if err := makeReserve(path, size/2); err != nil {
			k.warnOnce.Do(func() { slog.Warn("cannot make the disk reserve", "file", path, "err", err) })
			return
		}
		d = d.grown(-size / 2)
		slog.Info("made the disk reserve", append([]any{"file", path, "bytes", size / 2}, d.attrs()...)...)
	}
}

// setFull records whether the disk is full, and logs when that changes.
func (k *spaceKeeper) setFull(full bool, d disk, size int64) {
	if k.full.Swap(full) == full {
		return
	}
	if full {
		slog.Warn("disk full: new files, writable opens and growth get ENOSPC until twice the reserve is free to root",
			append(d.attrs(), "needed", 2*size)...)
	} else {
		slog.Info("disk has room again: new content is taken", d.attrs()...)
	}
}

// makeReserve writes the reserve: allocated blocks (fallocate), synced,
// under a temporary name so that a crash never leaves half a reserve.
func makeReserve(path string, size int64) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// allocateLogs allocates the blocks of badger's memory-mapped log files
// that badger may write and that are not allocated yet: of a memtable's
// .mem file (twice the memtable size) the first memtable size and the
// largest batch badger writes past it (15%: badger's maxBatchSize) before
// it moves to a new memtable; all of DISCARD. fallocate with mode 0 only
// fills holes: it never changes a byte, so it is safe while badger writes
// the files.
func (k *spaceKeeper) allocateLogs() {
	dir := filepath.Join(k.dir, "index")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".mem") && e.Name() != "DISCARD" {
			continue
		}
		if err := allocate(filepath.Join(dir, e.Name()), strings.HasSuffix(e.Name(), ".mem")); err != nil && !errors.Is(err, os.ErrNotExist) {
			k.warnOnce.Do(func() {
				slog.Warn("cannot allocate the index's log: a full disk may stop the daemon", "file", e.Name(), "err", err)
			})
		}
	}
}

func allocate(path string, log bool) error {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	n := st.Size
	if log {
		n = st.Size/2 + st.Size/2*15/100
	}
	if st.Blocks*512 >= n {
		return nil
	}
	return unix.Fallocate(int(f.Fd()), 0, 0, n)
}

// Reserved is the bytes the reserve files hold now: the whole reserve
// (reserveSize) while the disk has room, half of it once the first file is
// released, nothing once the disk is full or where the reserve could not
// be made. It costs two lstats and changes nothing, so the metrics read it
// at every scrape.
func (s *Store) Reserved() int64 {
	var n int64
	for _, name := range ReserveNames {
		if fi, err := os.Lstat(filepath.Join(s.Dir, name)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// roomFor fails with ENOSPC unless n bytes can be written and leave half
// the reserve free: the daemon's own writes (seals) never make the keeper
// release the reserve.
func (s *Store) roomFor(n int64) error {
	d, err := diskSpace(s.Dir)
	if err != nil {
		return err
	}
	if keep := releaseBelow(0, reserveSize(d.total)); d.free-n < keep {
		return fmt.Errorf("%w: %d bytes free to root, %d needed and %d kept for the index", syscall.ENOSPC, d.free, n, keep)
	}
	return nil
}
