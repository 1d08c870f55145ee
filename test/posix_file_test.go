package test

import (
	"bytes"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/internal/crashpoint"
)

func TestPosixOpenFlags(t *testing.T) {
	m := mountFS(t)
	putFile(t, m.Path("file"), []byte("content"), 0o644)
	require.NoError(t, os.Mkdir(m.Path("dir"), 0o755))
	require.NoError(t, os.Symlink("nowhere", m.Path("dangling")))

	cases := []struct {
		name  string
		path  string
		flags int
		want  syscall.Errno // 0: the open succeeds
	}{
		{"O_CREAT|O_EXCL on a new name", "new", unix.O_CREAT | unix.O_EXCL | unix.O_WRONLY, 0},
		{"O_CREAT|O_EXCL on an existing file", "file", unix.O_CREAT | unix.O_EXCL | unix.O_WRONLY, unix.EEXIST},
		{"O_CREAT|O_EXCL on a directory", "dir", unix.O_CREAT | unix.O_EXCL | unix.O_RDONLY, unix.EEXIST},
		{"O_CREAT|O_EXCL on a dangling symlink", "dangling", unix.O_CREAT | unix.O_EXCL | unix.O_WRONLY, unix.EEXIST},
		{"O_CREAT on an existing file", "file", unix.O_CREAT | unix.O_RDWR, 0},
		{"missing file", "missing", unix.O_RDONLY, unix.ENOENT},
		{"missing file for writing", "missing", unix.O_WRONLY, unix.ENOENT},
		{"O_CREAT in a missing directory", "nodir/new", unix.O_CREAT | unix.O_WRONLY, unix.ENOENT},
		{"a file used as a directory", "file/x", unix.O_RDONLY, unix.ENOTDIR},
		{"O_DIRECTORY on a file", "file", unix.O_RDONLY | unix.O_DIRECTORY, unix.ENOTDIR},
		{"a directory for writing", "dir", unix.O_WRONLY, unix.EISDIR},
		{"a directory read-only", "dir", unix.O_RDONLY, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fd, err := unix.Open(m.Path(c.path), c.flags|unix.O_CLOEXEC, 0o644)
			if c.want != 0 {
				requireSysErr(t, err, c.want)
				return
			}
			require.NoError(t, err)
			require.NoError(t, unix.Close(fd))
		})
	}
	requireContent(t, m.Path("file"), []byte("content"))
	require.Equal(t, int64(0), lstatOf(t, m.Path("new")).Size)
	_, err := os.Lstat(m.Path("missing"))
	requireSysErr(t, err, unix.ENOENT)
}

func TestPosixOpenTrunc(t *testing.T) {
	m := mountFS(t)
	p := m.Path("f")
	putFile(t, p, pseudoRandom(100_000, 1), 0o644)

	f, err := os.OpenFile(p, os.O_RDWR|os.O_TRUNC, 0)
	require.NoError(t, err)
	require.Equal(t, int64(0), fstatOf(t, f).Size, "fstat right after O_TRUNC")
	_, err = f.Write([]byte("new"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	requireContent(t, p, []byte("new"))
}

func TestPosixAppend(t *testing.T) {
	m := mountFS(t)
	p := m.Path("log")
	putFile(t, p, []byte("start\n"), 0o644)

	a, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer a.Close()
	b, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	defer b.Close()

	want := []byte("start\n")
	for i := range 50 {
		w := a
		if i%2 == 1 {
			w = b
		}
		// An explicit seek does not matter: every O_APPEND write goes to the end.
		_, err := w.Seek(0, io.SeekStart)
		require.NoError(t, err)
		line := bytes.Repeat([]byte{byte('a' + i%26)}, i+1)
		line = append(line, '\n')
		_, err = w.Write(line)
		require.NoError(t, err)
		want = append(want, line...)
	}
	requireContent(t, p, want)
	require.Equal(t, int64(len(want)), lstatOf(t, p).Size)
}

func TestPosixPreadPwrite(t *testing.T) {
	m := mountFS(t)
	p := m.Path("f")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()

	// model is what the file must contain after each write.
	var model []byte
	writes := []struct {
		off int64
		n   int
	}{
		{0, 10}, {4095, 2}, {4096, 4096}, {65_535, 3}, {131_075, 200_000},
		{1<<20 - 1, 1}, {5, 1}, {100, 70_000}, {400_000, 1 << 20}, {0, 1},
	}
	for i, w := range writes {
		data := pseudoRandom(w.n, int64(i+10))
		n, err := f.WriteAt(data, w.off)
		require.NoError(t, err)
		require.Equal(t, w.n, n)
		if end := int(w.off) + w.n; end > len(model) {
			model = append(model, make([]byte, end-len(model))...)
		}
		copy(model[w.off:], data)

		// Read back around the write through the same fd.
		lo := max(0, w.off-3)
		got := make([]byte, min(int64(len(model)), w.off+int64(w.n)+3)-lo)
		n, err = f.ReadAt(got, lo)
		require.NoError(t, err)
		require.Equal(t, len(got), n)
		requireSameBytes(t, model[lo:lo+int64(n)], got, "pread after pwrite")
	}
	require.Equal(t, int64(len(model)), fstatOf(t, f).Size)

	// pread past the end gives 0 bytes; straddling it gives the tail.
	buf := make([]byte, 100)
	n, err := unix.Pread(int(f.Fd()), buf, int64(len(model))+10)
	require.NoError(t, err)
	require.Equal(t, 0, n)
	n, err = unix.Pread(int(f.Fd()), buf, int64(len(model))-7)
	require.NoError(t, err)
	require.Equal(t, 7, n)
	require.Equal(t, model[len(model)-7:], buf[:7])

	// Sequential reads with an odd buffer size through a new descriptor.
	g, err := os.Open(p)
	require.NoError(t, err)
	defer g.Close()
	var seq []byte
	chunk := make([]byte, 7777)
	for {
		n, err := g.Read(chunk)
		seq = append(seq, chunk[:n]...)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	requireSameBytes(t, model, seq, "sequential read")
}

func TestPosixSparse(t *testing.T) {
	m := mountFS(t)
	const big = 5 << 30 // past 4 GiB: offsets must not wrap at 32 bits
	p := m.Path("sparse")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("at-1MiB"), 1<<20)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("at-5GiB"), big)
	require.NoError(t, err)
	require.Equal(t, int64(big+7), fstatOf(t, f).Size)
	require.NoError(t, f.Close())

	st := lstatOf(t, p)
	require.Equal(t, int64(big+7), st.Size)

	g, err := os.Open(p)
	require.NoError(t, err)
	defer g.Close()
	reads := []struct {
		name string
		off  int64
		want []byte
	}{
		{"hole at the start", 0, make([]byte, 64<<10)},
		{"hole before 1MiB", 1<<20 - 3, append(make([]byte, 3), "at-1MiB"...)},
		{"data at 1MiB", 1 << 20, []byte("at-1MiB")},
		{"hole after 1MiB", 1<<20 + 7, make([]byte, 128<<10)},
		{"hole at 4GiB", 4 << 30, make([]byte, 64<<10)},
		{"hole across 4GiB", 4<<30 - 100, make([]byte, 200)},
		{"hole just before 5GiB", big - 5, append(make([]byte, 5), "at-5GiB"...)},
		{"data at 5GiB", big, []byte("at-5GiB")},
	}
	for _, r := range reads {
		got := make([]byte, len(r.want))
		n, err := g.ReadAt(got, r.off)
		require.NoError(t, err, r.name)
		require.Equal(t, len(r.want), n, r.name)
		requireSameBytes(t, r.want, got, r.name)
	}
	// Reading at the end gives EOF, not more zeros.
	n, err := g.ReadAt(make([]byte, 10), big+7)
	require.Equal(t, 0, n)
	require.ErrorIs(t, err, io.EOF)
}

func TestPosixTruncate(t *testing.T) {
	m := mountFS(t)
	orig := pseudoRandom(3<<20+123, 7) // spans several chunks once sealed

	cases := []struct {
		name  string
		sizes []int64 // applied in order
		byFd  bool    // ftruncate on an open fd instead of truncate(path)
	}{
		{"shrink", []int64{1000}, false},
		{"shrink to zero", []int64{0}, true},
		{"grow", []int64{5 << 20}, false},
		{"grow by fd", []int64{4<<20 + 1}, true},
		{"shrink then grow shows zeros, not old bytes", []int64{1<<20 + 7, 3 << 20}, false},
		{"shrink then grow by fd", []int64{100, 2 << 20}, true},
		{"same size", []int64{int64(len(orig))}, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := m.Path("f" + string(rune('a'+i)))
			putFile(t, p, orig, 0o644)
			want := append([]byte(nil), orig...)
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			require.NoError(t, err)
			defer f.Close()
			for _, size := range c.sizes {
				if c.byFd {
					require.NoError(t, f.Truncate(size))
					require.Equal(t, size, fstatOf(t, f).Size)
				} else {
					require.NoError(t, os.Truncate(p, size))
				}
				require.Equal(t, size, lstatOf(t, p).Size)
				if size <= int64(len(want)) {
					want = want[:size]
				} else {
					want = append(want, make([]byte, size-int64(len(want)))...)
				}
			}
			requireContent(t, p, want)
			got := make([]byte, len(want))
			_, err = f.ReadAt(got, 0)
			if len(want) > 0 {
				require.NoError(t, err)
			}
			requireSameBytes(t, want, got, "read through the open fd")
		})
	}

	_, err := os.Stat(m.Path("missing"))
	requireSysErr(t, err, unix.ENOENT)
	requireSysErr(t, os.Truncate(m.Path("missing"), 10), unix.ENOENT)
	require.NoError(t, os.Mkdir(m.Path("dir"), 0o755))
	requireSysErr(t, os.Truncate(m.Path("dir"), 0), unix.EISDIR)
	requireSysErr(t, os.Truncate(m.Path("fa"), -1), unix.EINVAL)
}

func TestPosixFsync(t *testing.T) {
	m := mountFS(t)
	require.NoError(t, os.Mkdir(m.Path("d"), 0o755))
	f, err := os.OpenFile(m.Path("d", "f"), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write(pseudoRandom(1<<20, 3))
	require.NoError(t, err)
	require.NoError(t, unix.Fsync(int(f.Fd())), "fsync")
	_, err = f.WriteAt([]byte("more"), 10)
	require.NoError(t, err)
	require.NoError(t, unix.Fdatasync(int(f.Fd())), "fdatasync")
	require.NoError(t, unix.Syncfs(int(f.Fd())), "syncfs")

	// RocksDB fsyncs the directory after creating or renaming files in it.
	for _, dir := range []string{m.Path("d"), m.Path()} {
		d, err := os.Open(dir)
		require.NoError(t, err)
		require.NoError(t, unix.Fsync(int(d.Fd())), "fsync of directory %s", dir)
		require.NoError(t, unix.Fdatasync(int(d.Fd())), "fdatasync of directory %s", dir)
		require.NoError(t, d.Close())
	}
	// A read-only descriptor may be fsync'd too.
	r, err := os.Open(m.Path("d", "f"))
	require.NoError(t, err)
	require.NoError(t, unix.Fsync(int(r.Fd())))
	require.NoError(t, r.Close())
}

// TestPosixFallocate accepts either a real fallocate or EOPNOTSUPP, but never
// a success that leaves the wrong size or loses data.
func TestPosixFallocate(t *testing.T) {
	m := mountFS(t)
	p := m.Path("f")
	data := pseudoRandom(10_000, 5)
	putFile(t, p, data, 0o644)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	fd := int(f.Fd())

	err = unix.Fallocate(fd, 0, 0, 1<<20)
	if err != nil {
		requireSysErr(t, err, unix.EOPNOTSUPP)
		t.Log("fallocate: EOPNOTSUPP")
		require.Equal(t, int64(len(data)), fstatOf(t, f).Size, "a failed fallocate changed the size")
		requireSysErr(t, unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, 1<<20), unix.EOPNOTSUPP)
		requireContent(t, p, data)
		return
	}
	want := append(append([]byte(nil), data...), make([]byte, 1<<20-len(data))...)
	require.Equal(t, int64(1<<20), fstatOf(t, f).Size, "fallocate mode 0 must grow the file")
	require.Equal(t, int64(1<<20), lstatOf(t, p).Size)
	requireContent(t, p, want)

	// Beyond the end, with a gap.
	require.NoError(t, unix.Fallocate(fd, 0, 2<<20, 1<<20))
	want = append(want, make([]byte, 2<<20)...)
	require.Equal(t, int64(3<<20), lstatOf(t, p).Size)

	// KEEP_SIZE allocates past the end without changing the size.
	require.NoError(t, unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, 8<<20))
	require.Equal(t, int64(3<<20), fstatOf(t, f).Size, "FALLOC_FL_KEEP_SIZE changed the size")
	require.Equal(t, int64(3<<20), lstatOf(t, p).Size)

	// Inside existing data: nothing changes.
	require.NoError(t, unix.Fallocate(fd, 0, 100, 1000))
	require.Equal(t, int64(3<<20), lstatOf(t, p).Size)
	requireContent(t, p, want)

	// Writes after fallocate land where they should.
	_, err = f.WriteAt([]byte("tail"), 3<<20)
	require.NoError(t, err)
	requireContent(t, p, append(want, "tail"...))
}

func TestPosixMmap(t *testing.T) {
	m := mountFS(t)
	data := pseudoRandom(3*4096+1234, 9)
	putFile(t, m.Path("f"), data, 0o644)
	putFile(t, m.Path("small"), []byte("hello mmap"), 0o644)

	check := func() {
		t.Helper()
		for name, want := range map[string][]byte{"f": data, "small": []byte("hello mmap")} {
			f, err := os.Open(m.Path(name))
			require.NoError(t, err)
			b, err := unix.Mmap(int(f.Fd()), 0, len(want), unix.PROT_READ, unix.MAP_SHARED)
			require.NoError(t, err, "mmap %s", name)
			requireSameBytes(t, want, b, "mmap of "+name)
			require.NoError(t, unix.Munmap(b))
			// A mapping at a page offset.
			if len(want) > 4096 {
				b, err = unix.Mmap(int(f.Fd()), 4096, len(want)-4096, unix.PROT_READ, unix.MAP_PRIVATE)
				require.NoError(t, err)
				requireSameBytes(t, want[4096:], b, "mmap at offset 4096 of "+name)
				require.NoError(t, unix.Munmap(b))
			}
			require.NoError(t, f.Close())
		}
	}
	check()
	m.Restart()
	check()
}

// Appends that each open, write, fsync and close, with a seal after every
// close, all reach the file, even when the release of one handle lags
// behind the next open: go-fuse drops the kernel's passthrough backing file
// of a released handle only after the filesystem's Release returned, and
// an open in between must not be given that backing file, the staging file
// the seal has just replaced, or its fsync'd write goes to a deleted file.
// The pause at handle-released holds every release in that window.
func TestAppendsWhileReleasesLag(t *testing.T) {
	m := mountFS(t, sealDelayZero...)
	m.Unmount()
	m.Env = []string{crashpoint.PauseEnvVar + "=" + crashpoint.HandleReleased + ":300ms"}
	m.Start()
	p := m.Path("wal")
	var want []byte
	for i := range 5 {
		record := bytes.Repeat([]byte{byte('a' + i)}, 1000+i)
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		require.NoError(t, err)
		require.NoError(t, writeAndSync(f, record))
		require.NoError(t, f.Close())
		want = append(want, record...)
		time.Sleep(100 * time.Millisecond) // the seal commits while the release lags
	}
	requireContent(t, p, want)
	m.Unmount()
	m.Env = nil
	m.Start()
	requireContent(t, p, want)
}
