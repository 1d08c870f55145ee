package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestPosixStat(t *testing.T) {
	m := mountFS(t)
	p := m.Path("f")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write(make([]byte, 12345))
	require.NoError(t, err)

	for name, st := range map[string]unix.Stat_t{"fstat": fstatOf(t, f), "lstat": lstatOf(t, p)} {
		require.Equal(t, int64(12345), st.Size, name)
		require.Equal(t, uint64(1), uint64(st.Nlink), name)
		require.Equal(t, uint32(unix.S_IFREG|0o640), st.Mode, name)
		require.Equal(t, uint32(0), st.Uid, name)
		require.Equal(t, uint32(0), st.Gid, name)
		require.NotZero(t, st.Ino, name)
		require.Greater(t, st.Blksize, int64(0), name)
	}

	require.NoError(t, os.Mkdir(m.Path("d"), 0o751))
	st := lstatOf(t, m.Path("d"))
	require.Equal(t, uint32(unix.S_IFDIR|0o751), st.Mode)
	require.Equal(t, uint64(2), uint64(st.Nlink))

	// A new file's times are "now", give or take clock granularity.
	now := time.Now()
	for _, ts := range []unix.Timespec{st.Atim, st.Mtim, st.Ctim} {
		at := time.Unix(ts.Unix())
		require.WithinDuration(t, now, at, 5*time.Second)
	}
}

func TestPosixTimes(t *testing.T) {
	m := mountFS(t)
	p := m.Path("f")
	putFile(t, p, []byte("abc"), 0o644)
	pause := func() { time.Sleep(30 * time.Millisecond) } // beyond the kernel's timestamp granularity
	after := func(a, b unix.Timespec) bool { return time.Unix(a.Unix()).After(time.Unix(b.Unix())) }

	t.Run("write changes mtime and ctime", func(t *testing.T) {
		before := lstatOf(t, p)
		pause()
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte("X"), 1)
		require.NoError(t, err)
		st := fstatOf(t, f)
		require.True(t, after(st.Mtim, before.Mtim), "fstat mtime did not advance on write")
		require.True(t, after(st.Ctim, before.Ctim), "fstat ctime did not advance on write")
		require.NoError(t, f.Close())
		st2 := lstatOf(t, p)
		require.True(t, after(st2.Mtim, before.Mtim), "stat mtime did not advance on write")
		require.True(t, after(st2.Ctim, before.Ctim), "stat ctime did not advance on write")
	})

	t.Run("truncate changes mtime and ctime", func(t *testing.T) {
		before := lstatOf(t, p)
		pause()
		require.NoError(t, os.Truncate(p, 1))
		st := lstatOf(t, p)
		require.True(t, after(st.Mtim, before.Mtim), "mtime did not advance on truncate")
		require.True(t, after(st.Ctim, before.Ctim), "ctime did not advance on truncate")
	})

	t.Run("chmod changes ctime only", func(t *testing.T) {
		before := lstatOf(t, p)
		pause()
		require.NoError(t, os.Chmod(p, 0o600))
		st := lstatOf(t, p)
		require.True(t, after(st.Ctim, before.Ctim), "ctime did not advance on chmod")
		require.Equal(t, before.Mtim, st.Mtim, "chmod changed mtime")
	})

	t.Run("utimensat keeps nanoseconds", func(t *testing.T) {
		atime := unix.Timespec{Sec: 1_600_000_000, Nsec: 123_456_789}
		mtime := unix.Timespec{Sec: 1_500_000_000, Nsec: 987_654_321}
		before := lstatOf(t, p)
		pause()
		require.NoError(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{atime, mtime}, 0))
		st := lstatOf(t, p)
		require.Equal(t, atime, st.Atim)
		require.Equal(t, mtime, st.Mtim)
		require.True(t, after(st.Ctim, before.Ctim), "ctime did not advance on utimensat")

		// UTIME_OMIT leaves one of them alone.
		mtime2 := unix.Timespec{Sec: 1_400_000_000, Nsec: 1}
		require.NoError(t, unix.UtimesNanoAt(unix.AT_FDCWD, p,
			[]unix.Timespec{{Nsec: unix.UTIME_OMIT}, mtime2}, 0))
		st = lstatOf(t, p)
		require.Equal(t, atime, st.Atim)
		require.Equal(t, mtime2, st.Mtim)

		// Times before 1970 and far in the future.
		old := unix.Timespec{Sec: -86_400, Nsec: 5}
		future := unix.Timespec{Sec: 4_102_444_800, Nsec: 999_999_999} // 2100
		require.NoError(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{old, future}, 0))
		st = lstatOf(t, p)
		require.Equal(t, old, st.Atim)
		require.Equal(t, future, st.Mtim)
	})

	t.Run("utimensat on a symlink itself", func(t *testing.T) {
		l := m.Path("link")
		require.NoError(t, os.Symlink("f", l))
		target := lstatOf(t, p)
		ts := unix.Timespec{Sec: 1_234_567_890, Nsec: 42}
		require.NoError(t, unix.UtimesNanoAt(unix.AT_FDCWD, l, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW))
		require.Equal(t, ts, lstatOf(t, l).Mtim)
		require.Equal(t, target.Mtim, lstatOf(t, p).Mtim, "the target's mtime changed")
	})

	t.Run("creating a file changes the directory's mtime", func(t *testing.T) {
		require.NoError(t, os.Mkdir(m.Path("d"), 0o755))
		before := lstatOf(t, m.Path("d"))
		pause()
		putFile(t, m.Path("d", "new"), nil, 0o644)
		st := lstatOf(t, m.Path("d"))
		require.True(t, after(st.Mtim, before.Mtim), "dir mtime did not advance on create")
		require.True(t, after(st.Ctim, before.Ctim), "dir ctime did not advance on create")
		pause()
		require.NoError(t, os.Remove(m.Path("d", "new")))
		st2 := lstatOf(t, m.Path("d"))
		require.True(t, after(st2.Mtim, st.Mtim), "dir mtime did not advance on unlink")
	})
}

func TestPosixChmodChown(t *testing.T) {
	m := mountFS(t)
	p := m.Path("f")
	putFile(t, p, []byte("x"), 0o644)
	require.NoError(t, os.Mkdir(m.Path("d"), 0o755))

	for _, mode := range []uint32{0, 0o600, 0o644, 0o777, 0o4755, 0o2755, 0o1777, 0o7777, 0o640} {
		require.NoError(t, unix.Chmod(p, mode))
		require.Equal(t, unix.S_IFREG|mode, lstatOf(t, p).Mode, "file chmod %#o", mode)
		require.NoError(t, unix.Chmod(m.Path("d"), mode))
		require.Equal(t, unix.S_IFDIR|mode, lstatOf(t, m.Path("d")).Mode, "dir chmod %#o", mode)
	}
	require.NoError(t, unix.Chmod(m.Path("d"), 0o755))

	require.NoError(t, os.Chown(p, 1234, 5678))
	st := lstatOf(t, p)
	require.Equal(t, uint32(1234), st.Uid)
	require.Equal(t, uint32(5678), st.Gid)
	require.Equal(t, uint32(unix.S_IFREG|0o640), st.Mode, "chown changed the mode")

	// -1 leaves one id alone.
	require.NoError(t, os.Chown(p, -1, 42))
	st = lstatOf(t, p)
	require.Equal(t, uint32(1234), st.Uid)
	require.Equal(t, uint32(42), st.Gid)
	require.NoError(t, os.Chown(p, 7, -1))
	st = lstatOf(t, p)
	require.Equal(t, uint32(7), st.Uid)
	require.Equal(t, uint32(42), st.Gid)

	require.NoError(t, os.Chown(m.Path("d"), 1234, 5678))
	st = lstatOf(t, m.Path("d"))
	require.Equal(t, uint32(1234), st.Uid)
	require.Equal(t, uint32(5678), st.Gid)

	// lchown changes the link, not its target.
	require.NoError(t, os.Symlink("f", m.Path("l")))
	require.NoError(t, os.Lchown(m.Path("l"), 99, 98))
	require.Equal(t, uint32(99), lstatOf(t, m.Path("l")).Uid)
	require.Equal(t, uint32(7), lstatOf(t, p).Uid)

	// fchmod / fchown through an open descriptor.
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Chmod(0o611))
	require.NoError(t, f.Chown(11, 12))
	st = fstatOf(t, f)
	require.Equal(t, uint32(unix.S_IFREG|0o611), st.Mode)
	require.Equal(t, uint32(11), st.Uid)
	require.Equal(t, uint32(12), st.Gid)

	requireSysErr(t, os.Chmod(m.Path("missing"), 0o644), unix.ENOENT)
	requireSysErr(t, os.Chown(m.Path("missing"), 1, 1), unix.ENOENT)
}

// TestPosixUmask checks DESIGN invariant 6: the kernel applies the caller's
// umask and the daemon adds none of its own.
func TestPosixUmask(t *testing.T) {
	m := mountFS(t)
	require.Contains(t, strings.Split(mountSuperOptions(t, m.Dir), ","), "default_permissions")

	old := unix.Umask(0)
	defer unix.Umask(old)
	cases := []struct {
		umask, perm, want uint32
	}{
		{0, 0o777, 0o777},
		{0, 0o666, 0o666},
		{0o022, 0o777, 0o755},
		{0o022, 0o666, 0o644},
		{0o077, 0o777, 0o700},
		{0o002, 0o775, 0o775},
		{0, 0o1777, 0o1777},
	}
	for i, c := range cases {
		unix.Umask(int(c.umask))
		name := string(rune('a' + i))
		fd, err := unix.Open(m.Path("f"+name), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, c.perm)
		require.NoError(t, err)
		require.NoError(t, unix.Close(fd))
		require.NoError(t, unix.Mkdir(m.Path("d"+name), c.perm))
		unix.Umask(int(old))
		require.Equal(t, unix.S_IFREG|c.want, lstatOf(t, m.Path("f"+name)).Mode, "file %#o under umask %#o", c.perm, c.umask)
		require.Equal(t, unix.S_IFDIR|c.want, lstatOf(t, m.Path("d"+name)).Mode, "dir %#o under umask %#o", c.perm, c.umask)
	}
}

// TestPosixPermissions runs commands as another user: default_permissions
// makes the kernel check modes, and other users can use the mount at all
// (a Flink pod does not run as the user that mounted).
func TestPosixPermissions(t *testing.T) {
	m := mountFS(t, "--allow-other") // other users reach the mount only with allow_other
	// The test's temp directories are 0700; let the other user reach the mount.
	for dir := filepath.Dir(m.Dir); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		require.NoError(t, os.Chmod(dir, 0o755))
	}
	putFile(t, m.Path("public"), []byte("public\n"), 0o644)
	putFile(t, m.Path("private"), []byte("private\n"), 0o600)
	require.NoError(t, os.Chmod(m.Path("public"), 0o644))
	require.NoError(t, os.Chmod(m.Path("private"), 0o600))
	require.NoError(t, os.Mkdir(m.Path("mine"), 0o755))
	require.NoError(t, os.Chown(m.Path("mine"), 1234, 5678))

	as := func(script string) (string, error) {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1234, Gid: 5678}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := as("cat " + m.Path("public"))
	require.NoError(t, err, "uid 1234 cannot read a 0644 file (is the mount allow_other?): %s", out)
	require.Equal(t, "public\n", out)

	out, err = as("cat " + m.Path("private"))
	require.Error(t, err, "uid 1234 read a 0600 root file: %s", out)
	require.Contains(t, out, "Permission denied")

	out, err = as("echo x > " + m.Path("public"))
	require.Error(t, err, "uid 1234 wrote a 0644 root file")
	require.Contains(t, out, "Permission denied")

	out, err = as("echo hi > " + m.Path("mine", "f") + " && cat " + m.Path("mine", "f"))
	require.NoError(t, err, out)
	st := lstatOf(t, m.Path("mine", "f"))
	require.Equal(t, uint32(1234), st.Uid, "a file's owner is its creator")
	require.Equal(t, uint32(5678), st.Gid, "a file's group is its creator's")

	out, err = as("touch " + m.Path("denied"))
	require.Error(t, err, "uid 1234 created a file in a 0755 root directory")
	require.Contains(t, out, "Permission denied")
}

func TestPosixLsLong(t *testing.T) {
	m := mountFS(t)
	require.NoError(t, os.Mkdir(m.Path("d"), 0o755))
	putFile(t, m.Path("d", "file"), make([]byte, 12345), 0o644)
	require.NoError(t, os.Chmod(m.Path("d", "file"), 0o640))
	require.NoError(t, os.Chown(m.Path("d", "file"), 1234, 5678))
	require.NoError(t, os.Link(m.Path("d", "file"), m.Path("d", "hard")))
	require.NoError(t, os.Mkdir(m.Path("d", "sub"), 0o700))
	require.NoError(t, os.Symlink("file", m.Path("d", "sym")))
	ts := unix.Timespec{Sec: 1_700_000_000}
	for _, n := range []string{"file", "sub"} {
		require.NoError(t, unix.UtimesNanoAt(unix.AT_FDCWD, m.Path("d", n), []unix.Timespec{ts, ts}, 0))
	}

	out, err := exec.Command("ls", "-ln", "--time-style=+%s", m.Path("d")).CombinedOutput()
	require.NoError(t, err, string(out))
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.True(t, strings.HasPrefix(lines[0], "total "), "ls -l output: %s", out)
	var got []string
	for _, l := range lines[1:] {
		got = append(got, strings.Join(strings.Fields(l), " "))
	}
	sort.Strings(got)
	want := []string{
		"-rw-r----- 2 1234 5678 12345 1700000000 file",
		"-rw-r----- 2 1234 5678 12345 1700000000 hard",
		"drwx------ 2 0 0 SIZE 1700000000 sub",
		"lrwxrwxrwx 1 0 0 4 MTIME sym -> file",
	}
	require.Len(t, got, len(want), "ls -l output: %s", out)
	for i := range want {
		w := strings.Fields(want[i])
		g := strings.Fields(got[i])
		require.Len(t, g, len(w), "ls -l line %q", got[i])
		for j := range w {
			if w[j] == "SIZE" || w[j] == "MTIME" {
				continue
			}
			require.Equal(t, w[j], g[j], "ls -l line %q, field %d", got[i], j)
		}
	}
	require.NotContains(t, string(out), "?", "ls could not stat something: %s", out)
}

func TestPosixXattr(t *testing.T) {
	m := mountFS(t)
	p := m.Path("f")
	putFile(t, p, []byte("data"), 0o644)
	require.NoError(t, os.Mkdir(m.Path("d"), 0o755))

	get := func(path, name string) ([]byte, error) {
		sz, err := unix.Lgetxattr(path, name, nil)
		if err != nil {
			return nil, err
		}
		buf := make([]byte, sz+1)
		n, err := unix.Lgetxattr(path, name, buf)
		if err != nil {
			return nil, err
		}
		require.Equal(t, sz, n, "size query and read disagree for %s", name)
		return buf[:n], nil
	}
	list := func(path string) []string {
		sz, err := unix.Llistxattr(path, nil)
		require.NoError(t, err)
		buf := make([]byte, sz)
		n, err := unix.Llistxattr(path, buf)
		require.NoError(t, err)
		var names []string
		for _, s := range strings.Split(string(buf[:n]), "\x00") {
			if strings.HasPrefix(s, "user.") {
				names = append(names, s)
			}
		}
		sort.Strings(names)
		return names
	}

	for _, path := range []string{p, m.Path("d")} {
		require.Empty(t, list(path))
		_, err := get(path, "user.missing")
		requireSysErr(t, err, unix.ENODATA)

		big := pseudoRandom(4096, 11)
		require.NoError(t, unix.Lsetxattr(path, "user.a", []byte("1"), 0))
		require.NoError(t, unix.Lsetxattr(path, "user.big", big, 0))
		require.NoError(t, unix.Lsetxattr(path, "user.empty", nil, 0))
		require.NoError(t, unix.Lsetxattr(path, "user.bin", []byte{0, 1, 2, 0, 255}, 0))

		v, err := get(path, "user.a")
		require.NoError(t, err)
		require.Equal(t, []byte("1"), v)
		v, err = get(path, "user.big")
		require.NoError(t, err)
		require.Equal(t, big, v)
		v, err = get(path, "user.empty")
		require.NoError(t, err)
		require.Empty(t, v)
		v, err = get(path, "user.bin")
		require.NoError(t, err)
		require.Equal(t, []byte{0, 1, 2, 0, 255}, v)
		require.Equal(t, []string{"user.a", "user.big", "user.bin", "user.empty"}, list(path))

		// A buffer too small for the value gives ERANGE.
		_, err = unix.Lgetxattr(path, "user.big", make([]byte, 10))
		requireSysErr(t, err, unix.ERANGE)

		requireSysErr(t, unix.Lsetxattr(path, "user.a", []byte("2"), unix.XATTR_CREATE), unix.EEXIST)
		requireSysErr(t, unix.Lsetxattr(path, "user.nope", []byte("2"), unix.XATTR_REPLACE), unix.ENODATA)
		_, err = get(path, "user.nope")
		requireSysErr(t, err, unix.ENODATA)
		require.NoError(t, unix.Lsetxattr(path, "user.a", []byte("replaced"), unix.XATTR_REPLACE))
		require.NoError(t, unix.Lsetxattr(path, "user.c", []byte("3"), unix.XATTR_CREATE))
		v, err = get(path, "user.a")
		require.NoError(t, err)
		require.Equal(t, []byte("replaced"), v)

		require.NoError(t, unix.Lremovexattr(path, "user.a"))
		_, err = get(path, "user.a")
		requireSysErr(t, err, unix.ENODATA)
		requireSysErr(t, unix.Lremovexattr(path, "user.a"), unix.ENODATA)
		require.Equal(t, []string{"user.big", "user.bin", "user.c", "user.empty"}, list(path))
	}

	// Through a file descriptor.
	f, err := os.Open(p)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, unix.Fsetxattr(int(f.Fd()), "user.fd", []byte("via fd"), 0))
	buf := make([]byte, 64)
	n, err := unix.Fgetxattr(int(f.Fd()), "user.fd", buf)
	require.NoError(t, err)
	require.Equal(t, "via fd", string(buf[:n]))

	// Data is untouched by xattrs.
	requireContent(t, p, []byte("data"))
	_, err = get(m.Path("missing"), "user.a")
	requireSysErr(t, err, unix.ENOENT)
}

func TestPosixStatfs(t *testing.T) {
	m := mountFS(t)
	var fsst, disk unix.Statfs_t
	require.NoError(t, unix.Statfs(m.Dir, &fsst))
	require.NoError(t, unix.Statfs(m.Store, &disk))

	require.Greater(t, fsst.Bsize, int64(0))
	require.Greater(t, fsst.Blocks, uint64(0))
	require.LessOrEqual(t, fsst.Bavail, fsst.Bfree)
	require.LessOrEqual(t, fsst.Bfree, fsst.Blocks)
	require.Equal(t, int64(255), fsst.Namelen, "f_namelen")

	avail := float64(fsst.Bavail) * float64(fsst.Bsize)
	want := float64(disk.Bavail) * float64(disk.Bsize)
	require.InDelta(t, want, avail, want*0.03+64<<20,
		"statfs free space %.0f bytes, the store's disk has %.0f", avail, want)
	total := float64(fsst.Blocks) * float64(fsst.Bsize)
	wantTotal := float64(disk.Blocks) * float64(disk.Bsize)
	require.InDelta(t, wantTotal, total, wantTotal*0.03, "statfs total size")

	// statfs through a file and a subdirectory answers the same.
	require.NoError(t, os.Mkdir(m.Path("d"), 0o755))
	var sub unix.Statfs_t
	require.NoError(t, unix.Statfs(m.Path("d"), &sub))
	require.Equal(t, fsst.Bsize, sub.Bsize)
	require.Equal(t, fsst.Blocks, sub.Blocks)
}

// In a setgid directory new files and directories take the directory's
// group, and new directories stay setgid, as on ext4; elsewhere they take
// the creator's. The same holds after a restart.
func TestPosixSetgidDirectory(t *testing.T) {
	m := mountFS(t)
	shared := m.Path("shared")
	require.NoError(t, os.Mkdir(shared, 0o775))
	require.NoError(t, os.Chown(shared, 0, 4321))
	require.NoError(t, os.Chmod(shared, 0o775|os.ModeSetgid))
	require.NoError(t, os.WriteFile(filepath.Join(shared, "f"), []byte("x"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(shared, "d"), 0o755))
	require.NoError(t, os.WriteFile(m.Path("plain"), []byte("x"), 0o644))
	check := func() {
		t.Helper()
		for _, c := range []struct {
			path   string
			gid    uint32
			setgid bool
		}{
			{filepath.Join(shared, "f"), 4321, false},
			{filepath.Join(shared, "d"), 4321, true},
			{m.Path("plain"), 0, false},
		} {
			var st unix.Stat_t
			require.NoError(t, unix.Stat(c.path, &st))
			require.Equal(t, c.gid, st.Gid, "group of %s", c.path)
			require.Equal(t, c.setgid, st.Mode&unix.S_ISGID != 0, "setgid bit of %s", c.path)
		}
	}
	check()
	m.Restart()
	check()
}

// A file just created and still open answers getxattr without the index
// until an attribute is set on it; once one is, it is seen at once, through
// any name.
func TestPosixXattrOnAFileBeingWritten(t *testing.T) {
	m := mountFS(t)
	p := m.Path("f")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write([]byte("data"))
	require.NoError(t, err)
	_, err = unix.Getxattr(p, "user.k", make([]byte, 16))
	require.ErrorIs(t, err, unix.ENODATA)
	require.NoError(t, os.Link(p, m.Path("g")))
	require.NoError(t, unix.Setxattr(m.Path("g"), "user.k", []byte("v"), 0))
	buf := make([]byte, 16)
	n, err := unix.Getxattr(p, "user.k", buf)
	require.NoError(t, err, "getxattr after setxattr through another name, file still open")
	require.Equal(t, "v", string(buf[:n]))
}
