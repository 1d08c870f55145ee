package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestPosixMkdirRmdir(t *testing.T) {
	m := mountFS(t)
	d := m.Path("d")
	nlink := func(p string) uint64 { return uint64(lstatOf(t, p).Nlink) }

	require.NoError(t, os.Mkdir(d, 0o755))
	require.Equal(t, uint64(2), nlink(d), "empty dir")
	require.NoError(t, os.Mkdir(filepath.Join(d, "s1"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(d, "s2"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(d, "s3"), 0o755))
	putFile(t, filepath.Join(d, "file"), []byte("x"), 0o644)
	require.NoError(t, os.Symlink("s1", filepath.Join(d, "sym")))
	require.Equal(t, uint64(5), nlink(d), "2 + 3 subdirectories; files and symlinks do not count")

	require.NoError(t, unix.Rmdir(filepath.Join(d, "s3")))
	require.Equal(t, uint64(4), nlink(d), "after rmdir of a subdirectory")
	require.NoError(t, unix.Rename(filepath.Join(d, "s2"), m.Path("moved")))
	require.Equal(t, uint64(3), nlink(d), "after moving a subdirectory out")

	cases := []struct {
		name string
		op   func() error
		want unix.Errno
	}{
		{"mkdir of an existing dir", func() error { return unix.Mkdir(d, 0o755) }, unix.EEXIST},
		{"mkdir of an existing file", func() error { return unix.Mkdir(filepath.Join(d, "file"), 0o755) }, unix.EEXIST},
		{"mkdir of an existing symlink", func() error { return unix.Mkdir(filepath.Join(d, "sym"), 0o755) }, unix.EEXIST},
		{"mkdir under a file", func() error { return unix.Mkdir(filepath.Join(d, "file", "x"), 0o755) }, unix.ENOTDIR},
		{"mkdir under a missing dir", func() error { return unix.Mkdir(m.Path("nope", "x"), 0o755) }, unix.ENOENT},
		{"rmdir of a non-empty dir", func() error { return unix.Rmdir(d) }, unix.ENOTEMPTY},
		{"rmdir of a dir holding only a file", func() error {
			require.NoError(t, os.Mkdir(m.Path("onefile"), 0o755))
			putFile(t, m.Path("onefile", "f"), nil, 0o644)
			return unix.Rmdir(m.Path("onefile"))
		}, unix.ENOTEMPTY},
		{"rmdir of a file", func() error { return unix.Rmdir(filepath.Join(d, "file")) }, unix.ENOTDIR},
		{"rmdir of a symlink to a dir", func() error { return unix.Rmdir(filepath.Join(d, "sym")) }, unix.ENOTDIR},
		{"rmdir of a missing name", func() error { return unix.Rmdir(m.Path("nope")) }, unix.ENOENT},
		{"rmdir of .", func() error { return unix.Rmdir(filepath.Join(d, "s1") + "/.") }, unix.EINVAL},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { requireSysErr(t, c.op(), c.want) })
	}

	// The failed calls changed nothing.
	require.Equal(t, uint64(3), nlink(d))
	requireContent(t, filepath.Join(d, "file"), []byte("x"))

	// Emptied, the directory goes; its name is then free.
	for _, n := range []string{"s1", "file", "sym"} {
		require.NoError(t, os.Remove(filepath.Join(d, n)))
	}
	require.NoError(t, unix.Rmdir(d))
	_, err := os.Lstat(d)
	requireSysErr(t, err, unix.ENOENT)
	putFile(t, d, []byte("now a file"), 0o644)
	requireContent(t, d, []byte("now a file"))
	require.NoError(t, unix.Rmdir(m.Path("moved")))
}

func TestPosixReaddir(t *testing.T) {
	m := mountFS(t)
	root := m.Path("top")
	require.NoError(t, os.Mkdir(root, 0o755))
	d := filepath.Join(root, "d")
	require.NoError(t, os.Mkdir(d, 0o755))

	want := map[string]uint8{}
	for i := range 300 {
		name := fmt.Sprintf("file-%03d-%s", i, strings.Repeat("x", i%40))
		putFile(t, filepath.Join(d, name), nil, 0o644)
		want[name] = unix.DT_REG
	}
	require.NoError(t, os.Mkdir(filepath.Join(d, "sub"), 0o755))
	want["sub"] = unix.DT_DIR
	require.NoError(t, os.Symlink("file-000-", filepath.Join(d, "link")))
	want["link"] = unix.DT_LNK

	for _, bufSize := range []int{300, 4096, 1 << 16} {
		t.Run(fmt.Sprintf("getdents buffer %d", bufSize), func(t *testing.T) {
			ents := getdents(t, d, bufSize)
			var dot, dotdot []rawDirent
			for _, e := range ents {
				switch e.Name {
				case ".":
					dot = append(dot, e)
				case "..":
					dotdot = append(dotdot, e)
				}
			}
			require.Len(t, dot, 1, `"." listed once`)
			require.Len(t, dotdot, 1, `".." listed once`)
			require.Equal(t, uint8(unix.DT_DIR), dot[0].Type)
			require.Equal(t, uint8(unix.DT_DIR), dotdot[0].Type)
			require.Equal(t, lstatOf(t, d).Ino, dot[0].Ino, `"." is the directory itself`)
			require.Equal(t, lstatOf(t, root).Ino, dotdot[0].Ino, `".." is the parent`)

			got := direntNames(t, ents)
			require.Len(t, got, len(want))
			for name, typ := range want {
				e, ok := got[name]
				require.True(t, ok, "readdir is missing %q", name)
				require.Equal(t, typ, e.Type, "d_type of %q", name)
				require.Equal(t, lstatOf(t, filepath.Join(d, name)).Ino, e.Ino, "d_ino of %q", name)
			}
		})
	}

	// os.ReadDir (what Flink's File.list does) sees the same, sorted.
	des, err := os.ReadDir(d)
	require.NoError(t, err)
	require.Len(t, des, len(want))

	// An empty directory lists only "." and "..".
	empty := getdents(t, filepath.Join(d, "sub"), 4096)
	require.Len(t, empty, 2)
	require.Empty(t, direntNames(t, empty))

	// Rewinding an open directory lists it again from the start.
	f, err := os.Open(d)
	require.NoError(t, err)
	defer f.Close()
	first, err := f.Readdirnames(-1)
	require.NoError(t, err)
	_, err = f.Seek(0, 0)
	require.NoError(t, err)
	again, err := f.Readdirnames(-1)
	require.NoError(t, err)
	require.ElementsMatch(t, first, again)

	// Entries removed after the directory was read are gone on the next read.
	require.NoError(t, os.Remove(filepath.Join(d, "file-000-")))
	require.NoError(t, unix.Rename(filepath.Join(d, "file-001-x"), filepath.Join(d, "renamed")))
	got := direntNames(t, getdents(t, d, 4096))
	require.NotContains(t, got, "file-000-")
	require.NotContains(t, got, "file-001-x")
	require.Contains(t, got, "renamed")
	require.Len(t, got, len(want)-1)
}

func TestPosixBigDirectory(t *testing.T) {
	t.Parallel() // long, on a mount of its own: it runs beside the other long tests
	m := mountFS(t)
	const n = 100_000
	d := m.Path("big")
	require.NoError(t, os.Mkdir(d, 0o755))
	name := func(i int) string { return fmt.Sprintf("entry-%06d", i) }

	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				// mknod makes the same empty regular file as open(O_CREAT)
				// and close, in one request instead of four.
				if err := unix.Mknod(filepath.Join(d, name(i)), unix.S_IFREG|0o644, 0); err != nil {
					errs <- fmt.Errorf("mknod %s: %w", name(i), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	created := time.Since(start)

	ents := getdents(t, d, 1<<16)
	listed := time.Since(start) - created
	got := direntNames(t, ents)
	require.Len(t, got, n)
	for i := range n {
		if _, ok := got[name(i)]; !ok {
			t.Fatalf("readdir is missing %s", name(i))
		}
	}
	require.Equal(t, len(ents), n+2, `entries besides "." and ".."`)

	for _, i := range []int{0, 1, 4242, n / 2, n - 1} {
		st := lstatOf(t, filepath.Join(d, name(i)))
		require.Equal(t, uint32(unix.S_IFREG|0o644), st.Mode)
		require.Equal(t, int64(0), st.Size)
		require.Equal(t, got[name(i)].Ino, st.Ino)
	}
	_, err := os.Lstat(filepath.Join(d, name(n)))
	requireSysErr(t, err, unix.ENOENT)
	require.Equal(t, uint64(2), uint64(lstatOf(t, d).Nlink))
	t.Logf("created %d files in %v, listed them in %v", n, created, listed)
}

// TestPosixNames: a name may hold any byte but '/' and NUL and be up to 255
// bytes (DESIGN invariant 6).
func TestPosixNames(t *testing.T) {
	m := mountFS(t)
	long := strings.Repeat("n", 255)
	names := []string{
		long,
		strings.Repeat("€", 85), // 255 bytes of UTF-8
		"with space", " leading", "trailing ", "new\nline", "tab\there",
		"\xff\xfe not utf-8", "-dash", "*?[]", "back\\slash", "quote\"'", "..dots", "...",
		"UPPER", "upper", ".hidden", "%s%d", "ünïcødé", "日本語",
	}
	require.NoError(t, os.Mkdir(m.Path("d"), 0o755))
	for _, name := range names {
		p := m.Path("d", name)
		putFile(t, p, []byte(name), 0o644)
		requireContent(t, p, []byte(name))
	}
	got := direntNames(t, getdents(t, m.Path("d"), 4096))
	require.Len(t, got, len(names))
	for _, name := range names {
		require.Contains(t, got, name)
	}
	// "UPPER" and "upper" are different files.
	requireContent(t, m.Path("d", "UPPER"), []byte("UPPER"))

	// 255 bytes work for every kind of entry.
	long2 := strings.Repeat("m", 255)
	require.NoError(t, os.Mkdir(m.Path(long2), 0o755))
	require.NoError(t, os.Symlink(long, m.Path(long2, long)))
	require.NoError(t, os.Link(m.Path("d", long), m.Path(long2, strings.Repeat("h", 255))))
	require.NoError(t, unix.Rename(m.Path("d", "UPPER"), m.Path("d", strings.Repeat("r", 255))))
	require.NoError(t, unix.Lsetxattr(m.Path("d", long), "user."+strings.Repeat("x", 250), []byte("v"), 0))

	tooLong := strings.Repeat("t", 256)
	cases := []struct {
		name string
		op   func() error
	}{
		{"create", func() error { return os.WriteFile(m.Path(tooLong), nil, 0o644) }},
		{"lookup", func() error { _, err := os.Lstat(m.Path(tooLong)); return err }},
		{"open", func() error { _, err := os.Open(m.Path(tooLong)); return err }},
		{"mkdir", func() error { return os.Mkdir(m.Path(tooLong), 0o755) }},
		{"symlink", func() error { return os.Symlink("x", m.Path(tooLong)) }},
		{"link", func() error { return os.Link(m.Path("d", long), m.Path(tooLong)) }},
		{"rename", func() error { return unix.Rename(m.Path("d", long), m.Path(tooLong)) }},
		{"create in a subdirectory", func() error { return os.WriteFile(m.Path("d", tooLong), nil, 0o644) }},
	}
	for _, c := range cases {
		t.Run(c.name+" of a 256-byte name", func(t *testing.T) {
			requireSysErr(t, c.op(), unix.ENAMETOOLONG)
		})
	}
	requireContent(t, m.Path("d", long), []byte(long))
}

// TestPosixDeepPath builds a path of exactly PATH_MAX-1 bytes (the longest the
// kernel passes) out of 255-byte directory names.
func TestPosixDeepPath(t *testing.T) {
	m := mountFS(t)
	const pathMax = 4096
	p := m.Dir
	var dirs []string
	for {
		rest := pathMax - 2 - len(p) // the leaf's length if we stop here
		if rest <= 255 {
			break
		}
		p = filepath.Join(p, strings.Repeat(string(rune('a'+len(dirs)%26)), min(255, rest-2)))
		require.NoError(t, os.Mkdir(p, 0o755), "mkdir at depth %d (%d bytes)", len(dirs), len(p))
		dirs = append(dirs, p)
	}
	leaf := strings.Repeat("f", pathMax-1-len(p)-1)
	file := filepath.Join(p, leaf)
	require.Len(t, file, pathMax-1)
	require.LessOrEqual(t, len(leaf), 255)

	putFile(t, file, []byte("deep"), 0o644)
	requireContent(t, file, []byte("deep"))
	st := lstatOf(t, file)
	require.Equal(t, int64(4), st.Size)
	require.NoError(t, unix.Lsetxattr(file, "user.deep", []byte("yes"), 0))

	// One byte more is too long for the kernel.
	requireSysErr(t, os.WriteFile(file+"x", nil, 0o644), unix.ENAMETOOLONG)

	// The same file reached through relative paths from the mount root.
	root, err := os.Open(m.Dir)
	require.NoError(t, err)
	rel, err := filepath.Rel(m.Dir, file)
	require.NoError(t, err)
	fd, err := unix.Openat(int(root.Fd()), rel, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	buf := make([]byte, 10)
	n, err := unix.Read(fd, buf)
	require.NoError(t, err)
	require.Equal(t, "deep", string(buf[:n]))
	require.NoError(t, unix.Close(fd))
	require.NoError(t, root.Close()) // an open fd would keep the mount busy

	m.Restart()
	requireContent(t, file, []byte("deep"))
	require.Equal(t, st.Ino, lstatOf(t, file).Ino)
	require.Len(t, dirs, strings.Count(rel, "/"))
}
