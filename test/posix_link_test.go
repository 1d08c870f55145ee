package test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestPosixUnlink(t *testing.T) {
	m := mountFS(t)
	p := m.Path("f")
	data := pseudoRandom(300_000, 21)
	putFile(t, p, data, 0o644)

	// RocksDB unlinks SST files that readers still hold open.
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, os.Remove(p))
	_, err = os.Lstat(p)
	requireSysErr(t, err, unix.ENOENT)
	require.NotContains(t, direntNames(t, getdents(t, m.Dir, 4096)), "f")
	require.Equal(t, uint64(0), uint64(fstatOf(t, f).Nlink), "nlink of an unlinked open file")

	got := make([]byte, len(data))
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	requireSameBytes(t, data, got, "read after unlink")
	_, err = f.WriteAt([]byte("still writable"), 1000)
	require.NoError(t, err)
	copy(data[1000:], "still writable")
	_, err = f.WriteAt([]byte("grows"), int64(len(data)))
	require.NoError(t, err)
	data = append(data, "grows"...)
	got = make([]byte, len(data))
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	requireSameBytes(t, data, got, "read after writing to an unlinked file")
	require.Equal(t, int64(len(data)), fstatOf(t, f).Size)

	// A new file under the same name is another file.
	putFile(t, p, []byte("new"), 0o644)
	requireContent(t, p, []byte("new"))
	_, err = f.ReadAt(got[:10], 0)
	require.NoError(t, err)
	require.Equal(t, data[:10], got[:10], "the unlinked file changed when its name was reused")
	require.NoError(t, f.Close())
	requireContent(t, p, []byte("new"))

	// A second descriptor keeps it alive after the first is closed.
	q := m.Path("q")
	putFile(t, q, []byte("two fds"), 0o644)
	a, err := os.Open(q)
	require.NoError(t, err)
	b, err := os.Open(q)
	require.NoError(t, err)
	require.NoError(t, os.Remove(q))
	require.NoError(t, a.Close())
	all, err := io.ReadAll(b)
	require.NoError(t, err)
	require.Equal(t, "two fds", string(all))
	require.NoError(t, b.Close())

	require.NoError(t, os.Mkdir(m.Path("d"), 0o755))
	requireSysErr(t, unix.Unlink(m.Path("missing")), unix.ENOENT)
	requireSysErr(t, unix.Unlink(m.Path("d", "missing")), unix.ENOENT)
	requireSysErr(t, unix.Unlink(m.Path("d")), unix.EISDIR) // Linux; POSIX also allows EPERM
	requireSysErr(t, unix.Unlinkat(unix.AT_FDCWD, m.Path("f"), unix.AT_REMOVEDIR), unix.ENOTDIR)
	requireSysErr(t, unix.Unlink(m.Path("f", "x")), unix.ENOTDIR)
	require.NoError(t, unix.Unlinkat(unix.AT_FDCWD, m.Path("d"), unix.AT_REMOVEDIR))

	// Unlinking a symlink removes the link, not its target.
	require.NoError(t, os.Symlink("f", m.Path("sym")))
	require.NoError(t, unix.Unlink(m.Path("sym")))
	requireContent(t, p, []byte("new"))
}

func TestPosixRenameFile(t *testing.T) {
	m := mountFS(t)
	a, b := m.Path("a"), m.Path("b")
	putFile(t, a, []byte("content of a"), 0o600)
	putFile(t, b, []byte("content of b, longer"), 0o644)
	inoA := lstatOf(t, a).Ino
	oldB, err := os.Open(b)
	require.NoError(t, err)
	defer oldB.Close()

	require.NoError(t, unix.Rename(a, b))
	_, err = os.Lstat(a)
	requireSysErr(t, err, unix.ENOENT)
	requireContent(t, b, []byte("content of a"))
	st := lstatOf(t, b)
	require.Equal(t, inoA, st.Ino, "rename keeps the inode")
	require.Equal(t, uint32(unix.S_IFREG|0o600), st.Mode)
	got, err := io.ReadAll(oldB)
	require.NoError(t, err)
	require.Equal(t, "content of b, longer", string(got), "an fd open on the replaced file reads its old content")
	names := direntNames(t, getdents(t, m.Dir, 4096))
	require.Contains(t, names, "b")
	require.NotContains(t, names, "a")

	// Into another directory and back.
	require.NoError(t, os.Mkdir(m.Path("d"), 0o755))
	require.NoError(t, unix.Rename(b, m.Path("d", "c")))
	requireContent(t, m.Path("d", "c"), []byte("content of a"))
	require.Equal(t, inoA, lstatOf(t, m.Path("d", "c")).Ino)
	require.NoError(t, unix.Rename(m.Path("d", "c"), b))

	// Onto itself, and between two names of the same inode: nothing happens.
	require.NoError(t, unix.Rename(b, b))
	require.NoError(t, os.Link(b, m.Path("b2")))
	require.NoError(t, unix.Rename(b, m.Path("b2")))
	requireContent(t, b, []byte("content of a"))
	requireContent(t, m.Path("b2"), []byte("content of a"))
	require.Equal(t, uint64(2), uint64(lstatOf(t, b).Nlink))

	// A symlink is renamed, not its target.
	require.NoError(t, os.Symlink("b", m.Path("s")))
	require.NoError(t, unix.Rename(m.Path("s"), m.Path("s2")))
	target, err := os.Readlink(m.Path("s2"))
	require.NoError(t, err)
	require.Equal(t, "b", target)
	requireContent(t, m.Path("s2"), []byte("content of a"))

	requireSysErr(t, unix.Rename(m.Path("missing"), m.Path("x")), unix.ENOENT)
	requireSysErr(t, unix.Rename(b, m.Path("nodir", "x")), unix.ENOENT)
	requireSysErr(t, unix.Rename(b, m.Path("d")), unix.EISDIR)
	requireSysErr(t, unix.Rename(m.Path("d"), b), unix.ENOTDIR)
	requireContent(t, b, []byte("content of a"))
}

// TestPosixRenameAtomic replaces a file over and over while readers open it:
// a reader never misses the name and always sees one whole version (the
// write-tmp-then-rename pattern of CURRENT and _task_state_snapshot).
func TestPosixRenameAtomic(t *testing.T) {
	m := mountFS(t)
	target := m.Path("CURRENT")
	version := func(i int) []byte { return []byte(fmt.Sprintf("MANIFEST-%06d\n%s", i, strings.Repeat("x", i%5000))) }
	putFile(t, target, version(0), 0o644)

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				b, err := os.ReadFile(target)
				if err != nil {
					errs <- fmt.Errorf("reader: %w", err)
					return
				}
				var i int
				if _, err := fmt.Sscanf(string(b), "MANIFEST-%06d\n", &i); err != nil || string(b) != string(version(i)) {
					errs <- fmt.Errorf("reader saw a torn or unknown version: %.40q (%d bytes)", b, len(b))
					return
				}
			}
		}()
	}
	for i := 1; i <= 300; i++ {
		tmp := m.Path(fmt.Sprintf("CURRENT.%d.tmp", i))
		putFile(t, tmp, version(i), 0o644)
		require.NoError(t, unix.Rename(tmp, target))
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	requireContent(t, target, version(300))
	names := direntNames(t, getdents(t, m.Dir, 1<<16))
	require.Len(t, names, 1+len(rootExtras(t, m)), "only CURRENT is left: %v", names)
}

// rootExtras are the entries the filesystem itself shows at the mount root
// (the read-only .statefs directory).
func rootExtras(t testing.TB, m *Mount) []string {
	t.Helper()
	var extras []string
	if _, err := os.Lstat(m.Path(".statefs")); err == nil {
		extras = append(extras, ".statefs")
	}
	return extras
}

func TestPosixRenameDir(t *testing.T) {
	m := mountFS(t)
	nlink := func(p string) uint64 { return uint64(lstatOf(t, p).Nlink) }
	require.NoError(t, os.MkdirAll(m.Path("p1", "d", "sub", "deeper"), 0o755))
	require.NoError(t, os.Mkdir(m.Path("p2"), 0o755))
	putFile(t, m.Path("p1", "d", "f"), []byte("f"), 0o644)
	putFile(t, m.Path("p1", "d", "sub", "deeper", "g"), []byte("g"), 0o644)
	inoG := lstatOf(t, m.Path("p1", "d", "sub", "deeper", "g")).Ino
	inoD := lstatOf(t, m.Path("p1", "d")).Ino

	// A directory moved to another parent keeps its children; the parents'
	// link counts follow its "..".
	require.NoError(t, unix.Rename(m.Path("p1", "d"), m.Path("p2", "e")))
	_, err := os.Lstat(m.Path("p1", "d"))
	requireSysErr(t, err, unix.ENOENT)
	requireContent(t, m.Path("p2", "e", "f"), []byte("f"))
	requireContent(t, m.Path("p2", "e", "sub", "deeper", "g"), []byte("g"))
	require.Equal(t, inoG, lstatOf(t, m.Path("p2", "e", "sub", "deeper", "g")).Ino)
	require.Equal(t, inoD, lstatOf(t, m.Path("p2", "e")).Ino)
	require.Equal(t, uint64(2), nlink(m.Path("p1")))
	require.Equal(t, uint64(3), nlink(m.Path("p2")))
	dots := getdents(t, m.Path("p2", "e"), 4096)
	for _, e := range dots {
		if e.Name == ".." {
			require.Equal(t, lstatOf(t, m.Path("p2")).Ino, e.Ino, `".." after the move`)
		}
	}
	// Creating under the new name works; nothing reappears under the old one.
	putFile(t, m.Path("p2", "e", "sub", "new"), []byte("n"), 0o644)
	require.NoError(t, os.Mkdir(m.Path("p1", "d"), 0o755))
	require.Empty(t, direntNames(t, getdents(t, m.Path("p1", "d"), 4096)))

	// Over an empty directory: replaced.
	require.NoError(t, os.Mkdir(m.Path("empty"), 0o755))
	require.NoError(t, unix.Rename(m.Path("p2", "e"), m.Path("empty")))
	requireContent(t, m.Path("empty", "sub", "new"), []byte("n"))
	require.Equal(t, inoD, lstatOf(t, m.Path("empty")).Ino)
	require.Equal(t, uint64(2), nlink(m.Path("p2")))

	// Over a non-empty directory: ENOTEMPTY, and nothing moves.
	require.NoError(t, os.Mkdir(m.Path("full"), 0o755))
	putFile(t, m.Path("full", "x"), []byte("x"), 0o644)
	requireSysErr(t, unix.Rename(m.Path("empty"), m.Path("full")), unix.ENOTEMPTY, unix.EEXIST)
	requireContent(t, m.Path("full", "x"), []byte("x"))
	requireContent(t, m.Path("empty", "f"), []byte("f"))

	// Into itself or its own subdirectory: EINVAL.
	requireSysErr(t, unix.Rename(m.Path("empty"), m.Path("empty", "sub", "inside")), unix.EINVAL)
	requireSysErr(t, unix.Rename(m.Path("empty"), m.Path("empty", "sub", "deeper", "x")), unix.EINVAL)
	requireContent(t, m.Path("empty", "sub", "deeper", "g"), []byte("g"))

	// The RocksDB checkpoint step: rename(<dir>.tmp, <dir>), then fsync the parent.
	require.NoError(t, os.MkdirAll(m.Path("chk_1.tmp"), 0o755))
	putFile(t, m.Path("chk_1.tmp", "CURRENT"), []byte("MANIFEST-000001\n"), 0o644)
	require.NoError(t, unix.Rename(m.Path("chk_1.tmp"), m.Path("chk_1")))
	root, err := os.Open(m.Dir)
	require.NoError(t, err)
	require.NoError(t, root.Sync())
	require.NoError(t, root.Close())
	requireContent(t, m.Path("chk_1", "CURRENT"), []byte("MANIFEST-000001\n"))
}

func TestPosixRenameFlags(t *testing.T) {
	m := mountFS(t)
	rename2 := func(from, to string, flags uint) error {
		return unix.Renameat2(unix.AT_FDCWD, m.Path(from), unix.AT_FDCWD, m.Path(to), flags)
	}
	putFile(t, m.Path("a"), []byte("A"), 0o644)
	putFile(t, m.Path("b"), []byte("B"), 0o600)
	require.NoError(t, os.MkdirAll(m.Path("d", "child"), 0o755))
	inoA, inoB, inoD := lstatOf(t, m.Path("a")).Ino, lstatOf(t, m.Path("b")).Ino, lstatOf(t, m.Path("d")).Ino

	t.Run("RENAME_NOREPLACE", func(t *testing.T) {
		requireSysErr(t, rename2("a", "b", unix.RENAME_NOREPLACE), unix.EEXIST)
		requireSysErr(t, rename2("a", "d", unix.RENAME_NOREPLACE), unix.EEXIST)
		requireContent(t, m.Path("a"), []byte("A"))
		requireContent(t, m.Path("b"), []byte("B"))
		require.NoError(t, rename2("a", "c", unix.RENAME_NOREPLACE))
		requireContent(t, m.Path("c"), []byte("A"))
		require.NoError(t, rename2("c", "a", unix.RENAME_NOREPLACE))
	})

	t.Run("RENAME_EXCHANGE of two files", func(t *testing.T) {
		err := rename2("a", "b", unix.RENAME_EXCHANGE)
		require.NoError(t, err, "RENAME_EXCHANGE must be implemented (EINVAL/ENOSYS here is a missing feature)")
		requireContent(t, m.Path("a"), []byte("B"))
		requireContent(t, m.Path("b"), []byte("A"))
		require.Equal(t, inoB, lstatOf(t, m.Path("a")).Ino)
		require.Equal(t, inoA, lstatOf(t, m.Path("b")).Ino)
		require.Equal(t, uint32(unix.S_IFREG|0o600), lstatOf(t, m.Path("a")).Mode)
	})

	t.Run("RENAME_EXCHANGE of a file and a directory", func(t *testing.T) {
		require.NoError(t, os.Mkdir(m.Path("e"), 0o755))
		require.NoError(t, rename2("a", "d", unix.RENAME_EXCHANGE))
		require.Equal(t, inoD, lstatOf(t, m.Path("a")).Ino)
		require.Equal(t, inoB, lstatOf(t, m.Path("d")).Ino)
		requireContent(t, m.Path("d"), []byte("B"))
		_, err := os.Lstat(m.Path("a", "child"))
		require.NoError(t, err)
		require.NoError(t, rename2("a", "d", unix.RENAME_EXCHANGE))
		_, err = os.Lstat(m.Path("d", "child"))
		require.NoError(t, err)
	})

	t.Run("RENAME_EXCHANGE across directories", func(t *testing.T) {
		putFile(t, m.Path("d", "inner"), []byte("inner"), 0o644)
		require.NoError(t, rename2("d/inner", "b", unix.RENAME_EXCHANGE))
		requireContent(t, m.Path("b"), []byte("inner"))
		requireContent(t, m.Path("d", "inner"), []byte("A"))
	})

	t.Run("RENAME_EXCHANGE with a missing name", func(t *testing.T) {
		requireSysErr(t, rename2("a", "missing", unix.RENAME_EXCHANGE), unix.ENOENT)
		requireContent(t, m.Path("a"), []byte("B"))
	})

	t.Run("NOREPLACE with EXCHANGE", func(t *testing.T) {
		requireSysErr(t, rename2("a", "b", unix.RENAME_EXCHANGE|unix.RENAME_NOREPLACE), unix.EINVAL)
	})
}

func TestPosixHardLink(t *testing.T) {
	m := mountFS(t)
	require.NoError(t, os.MkdirAll(m.Path("db"), 0o755))
	require.NoError(t, os.MkdirAll(m.Path("chk", "sub"), 0o755))
	src, dst := m.Path("db", "000012.sst"), m.Path("chk", "sub", "000012.sst")
	data := pseudoRandom(2<<20, 31)
	putFile(t, src, data, 0o644)

	require.NoError(t, os.Link(src, dst))
	s1, s2 := lstatOf(t, src), lstatOf(t, dst)
	require.Equal(t, s1.Ino, s2.Ino, "both names are one inode")
	require.Equal(t, uint64(2), uint64(s1.Nlink))
	require.Equal(t, uint64(2), uint64(s2.Nlink))
	require.Equal(t, s1.Size, s2.Size)
	requireContent(t, dst, data)

	// Writes through one name are read through the other, also with both open.
	f, err := os.OpenFile(dst, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("through the link"), 12345)
	require.NoError(t, err)
	copy(data[12345:], "through the link")
	g, err := os.Open(src)
	require.NoError(t, err)
	got := make([]byte, len(data))
	_, err = g.ReadAt(got, 0)
	require.NoError(t, err)
	requireSameBytes(t, data, got, "read through the other name while open")
	require.NoError(t, f.Close())
	require.NoError(t, g.Close())
	requireContent(t, src, data)

	// Attributes are the inode's: chmod through one name shows on the other.
	require.NoError(t, os.Chmod(src, 0o600))
	require.Equal(t, uint32(unix.S_IFREG|0o600), lstatOf(t, dst).Mode)
	require.NoError(t, unix.Lsetxattr(dst, "user.shared", []byte("yes"), 0))
	buf := make([]byte, 8)
	n, err := unix.Lgetxattr(src, "user.shared", buf)
	require.NoError(t, err)
	require.Equal(t, "yes", string(buf[:n]))

	// A third link, then unlink of each name in turn.
	third := m.Path("third")
	require.NoError(t, os.Link(dst, third))
	require.Equal(t, uint64(3), uint64(lstatOf(t, src).Nlink))
	require.NoError(t, os.Remove(src))
	require.Equal(t, uint64(2), uint64(lstatOf(t, dst).Nlink))
	requireContent(t, dst, data)
	require.NoError(t, os.Remove(dst))
	require.Equal(t, uint64(1), uint64(lstatOf(t, third).Nlink))
	requireContent(t, third, data)

	// Linking back to the original name revives it.
	require.NoError(t, os.Link(third, src))
	requireContent(t, src, data)
	require.Equal(t, lstatOf(t, third).Ino, lstatOf(t, src).Ino)
	require.Equal(t, uint64(2), uint64(lstatOf(t, src).Nlink))
	require.Equal(t, s1.Ino, lstatOf(t, src).Ino)

	// Linking a symlink links the symlink itself (linkat without AT_SYMLINK_FOLLOW).
	require.NoError(t, os.Symlink("third", m.Path("sym")))
	require.NoError(t, os.Link(m.Path("sym"), m.Path("sym2")))
	require.Equal(t, uint32(unix.S_IFLNK), lstatOf(t, m.Path("sym2")).Mode&unix.S_IFMT)
	require.Equal(t, lstatOf(t, m.Path("sym")).Ino, lstatOf(t, m.Path("sym2")).Ino)

	requireSysErr(t, os.Link(m.Path("db"), m.Path("dirlink")), unix.EPERM)
	requireSysErr(t, os.Link(third, src), unix.EEXIST)
	requireSysErr(t, os.Link(third, m.Path("db")), unix.EEXIST)
	requireSysErr(t, os.Link(m.Path("missing"), m.Path("x")), unix.ENOENT)
	requireSysErr(t, os.Link(third, m.Path("nodir", "x")), unix.ENOENT)
	require.Equal(t, uint64(2), uint64(lstatOf(t, third).Nlink), "failed links changed nlink")

	m.Restart()
	require.Equal(t, lstatOf(t, third).Ino, lstatOf(t, src).Ino)
	require.Equal(t, uint64(2), uint64(lstatOf(t, src).Nlink))
	requireContent(t, src, data)
	require.NoError(t, os.Remove(third))
	requireContent(t, src, data)
	require.Equal(t, uint64(1), uint64(lstatOf(t, src).Nlink))
}

func TestPosixSymlink(t *testing.T) {
	m := mountFS(t)
	require.NoError(t, os.MkdirAll(m.Path("a", "b"), 0o755))
	putFile(t, m.Path("a", "target"), []byte("target content"), 0o644)
	long := "/" + strings.Repeat("long/", 799) + "ends" // 4000 bytes
	require.Len(t, long, 4000)

	cases := []struct {
		name, link, target string
		resolves           string // content when followed; "" if it does not resolve
	}{
		{"relative", "a/b/rel", "../target", "target content"},
		{"same directory", "a/same", "target", "target content"},
		{"absolute", "a/abs", m.Path("a", "target"), "target content"},
		{"absolute outside", "a/outside", "/etc/statefs-does-not-exist", ""},
		{"dangling", "a/dangling", "nowhere", ""},
		{"4000-byte target", "a/long", long, ""},
		{"odd bytes", "a/odd", "sp ace\n\xff/..", ""},
		{"chain", "a/chain", "same", "target content"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := m.Path(c.link)
			require.NoError(t, os.Symlink(c.target, p))
			got, err := os.Readlink(p)
			require.NoError(t, err)
			require.Equal(t, c.target, got)
			st := lstatOf(t, p)
			require.Equal(t, uint32(unix.S_IFLNK|0o777), st.Mode)
			require.Equal(t, int64(len(c.target)), st.Size, "a symlink's size is its target's length")
			require.Equal(t, uint64(1), uint64(st.Nlink))
			if c.resolves != "" {
				requireContent(t, p, []byte(c.resolves))
			} else {
				_, err := os.Stat(p)
				requireSysErr(t, err, unix.ENOENT, unix.ENOTDIR)
			}
		})
	}

	// readlink into a short buffer truncates without error, as readlink(2) does.
	buf := make([]byte, 3)
	n, err := unix.Readlink(m.Path("a", "b", "rel"), buf)
	require.NoError(t, err)
	require.Equal(t, "../", string(buf[:n]))

	// A symlink to a directory is followed in paths.
	require.NoError(t, os.Symlink("a/b", m.Path("dirlink")))
	putFile(t, m.Path("dirlink", "via"), []byte("via link"), 0o644)
	requireContent(t, m.Path("a", "b", "via"), []byte("via link"))
	// A loop gives ELOOP.
	require.NoError(t, os.Symlink("loop2", m.Path("loop1")))
	require.NoError(t, os.Symlink("loop1", m.Path("loop2")))
	_, err = os.Stat(m.Path("loop1"))
	requireSysErr(t, err, unix.ELOOP)

	requireSysErr(t, os.Symlink("x", m.Path("a", "target")), unix.EEXIST)
	requireSysErr(t, os.Symlink("x", m.Path("a")), unix.EEXIST)
	requireSysErr(t, os.Symlink("x", m.Path("nodir", "l")), unix.ENOENT)
	_, err = os.Readlink(m.Path("a", "target"))
	requireSysErr(t, err, unix.EINVAL)
	_, err = os.Readlink(m.Path("missing"))
	requireSysErr(t, err, unix.ENOENT)
	requireSysErr(t, unix.Symlink("", m.Path("empty")), unix.ENOENT)

	m.Restart()
	for _, c := range cases {
		got, err := os.Readlink(m.Path(c.link))
		require.NoError(t, err)
		require.Equal(t, c.target, got, "%s after restart", c.name)
	}
	requireContent(t, m.Path("a", "b", "rel"), []byte("target content"))
	requireContent(t, filepath.Join(m.Path("dirlink"), "via"), []byte("via link"))
}
