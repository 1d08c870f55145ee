package test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// otherGroup is a group the user nobody is made a member of in the child,
// to change a file's group to.
const otherGroup = 100

// killPrivCase is one change to a file or directory owned by nobody (or
// by root), by root (in the test) or by nobody (in a child that is also in
// otherGroup).
type killPrivCase struct {
	name     string
	files    bool                    // applies to regular files
	dirs     bool                    // applies to directories
	special  bool                    // applies to FIFOs, sockets and devices
	rootOwns bool                    // the subject is root's (group nobody): the child is not its owner
	byRoot   func(path string) error // nil: done by the child
	child    string                  // the child's op, with %s for the path
}

var killPrivCases = []killPrivCase{
	{name: "chown of the owner by root", files: true, dirs: true, special: true, byRoot: func(p string) error { return os.Chown(p, 1234, -1) }},
	{name: "chown of the group by root", files: true, dirs: true, special: true, byRoot: func(p string) error { return os.Chown(p, -1, otherGroup) }},
	{name: "chown of the group by the owner", files: true, dirs: true, special: true, child: "chownto %s -1 " + strconv.Itoa(otherGroup)},
	{name: "fchown of the group by the owner", files: true, dirs: true, child: "fchownto %s -1 " + strconv.Itoa(otherGroup)},
	{name: "lchown of the group by the owner", files: true, dirs: true, special: true, child: "lchownto %s -1 " + strconv.Itoa(otherGroup)},
	{name: "chown to the same owner and group by the owner", files: true, dirs: true, special: true, child: "chownto %s " + strconv.Itoa(nobody) + " " + strconv.Itoa(nobody)},
	{name: "truncate by root", files: true, byRoot: func(p string) error { return os.Truncate(p, 1) }},
	{name: "truncate by the owner", files: true, child: "truncate %s"},
	{name: "write by root", files: true, byRoot: func(p string) error {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, err = f.Write([]byte("x"))
		return firstErr(err, f.Close())
	}},
	{name: "write by the owner", files: true, child: "write %s"},
	{name: "truncate by another user", files: true, rootOwns: true, child: "truncate %s"},
	{name: "write by another user", files: true, rootOwns: true, child: "write %s"},
}

// firstErr is a if it is an error, else b.
func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// specialKinds are the file types besides regular files and directories
// that mknod and bind make, each with how to make one at a path.
var specialKinds = []struct {
	name string
	make func(path string) error
}{
	{"FIFO", func(p string) error { return unix.Mkfifo(p, 0o644) }},
	{"socket", func(p string) error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Bind(fd, &unix.SockaddrUnix{Name: p})
	}},
	{"character device", func(p string) error { return unix.Mknod(p, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3))) }},
	{"block device", func(p string) error { return unix.Mknod(p, unix.S_IFBLK|0o644, int(unix.Mkdev(7, 0))) }},
}

// After a change of owner or group, a truncate or a write, by root, the
// owner or another user, the setuid and setgid bits of a file, a
// directory, a FIFO, a socket or a device are what the kernel leaves on the
// machine's own disk for the same steps: statefs, which negotiates
// HANDLE_KILLPRIV_V2, clears them itself, and keeps what it cleared across
// a restart. Each case runs on a mount and on a plain
// directory side by side, with passthrough on and off; the expectation is
// the kernel's, not a table.
func TestKillPrivLikeTheDisk(t *testing.T) {
	for _, passthrough := range []bool{true, false} {
		t.Run(fmt.Sprintf("passthrough=%v", passthrough), func(t *testing.T) {
			m := mountFS(t, "--allow-other", "--passthrough="+strconv.FormatBool(passthrough))
			plain := filepath.Join(t.TempDir(), "plain")
			require.NoError(t, os.Mkdir(plain, 0o755))
			openUp(t, filepath.Join(plain, "x"))
			openUp(t, m.Path("x"))
			roots := map[string]string{"statefs": m.Path(), "disk": plain}

			type subject struct {
				c    killPrivCase
				mode uint32
				kind string // "file", "directory" or one of specialKinds
				make func(path string) error
			}
			var subjects []subject
			file := func(p string) error { return os.WriteFile(p, []byte("data"), 0o644) }
			for _, c := range killPrivCases {
				for _, mode := range []uint32{0o6555, 0o6755, 0o6777, 0o4777, 0o2755, 0o2745} {
					if c.files {
						subjects = append(subjects, subject{c, mode, "file", file})
					}
					if c.special && (mode == 0o6555 || mode == 0o2745) {
						for _, k := range specialKinds {
							subjects = append(subjects, subject{c, mode, k.name, k.make})
						}
					}
				}
				if c.dirs {
					subjects = append(subjects, subject{c, 0o2755, "directory", func(p string) error { return os.Mkdir(p, 0o755) }})
				}
			}
			name := func(i int) string { return fmt.Sprintf("s%03d", i) }
			var ops []string
			var opOf []string // for each op, "root name"
			result := map[string]string{}
			for i, s := range subjects {
				for root, dir := range roots {
					p := filepath.Join(dir, name(i))
					require.NoError(t, s.make(p), "making a %s", s.kind)
					owner := nobody
					if s.c.rootOwns {
						owner = 0
					}
					require.NoError(t, os.Lchown(p, owner, nobody))
					require.NoError(t, unix.Chmod(p, s.mode))
					if s.c.byRoot != nil {
						result[root+" "+name(i)] = resultOf(s.c.byRoot(p))
					} else {
						ops = append(ops, fmt.Sprintf(s.c.child, p))
						opOf = append(opOf, root+" "+name(i))
					}
				}
			}
			for i, r := range asUserIn(t, []uint32{otherGroup}, ops...) {
				result[opOf[i]] = r
			}
			compare := func(when string) {
				t.Helper()
				for i, s := range subjects {
					st := map[string]uint32{}
					for root, dir := range roots {
						st[root] = lstatOf(t, filepath.Join(dir, name(i))).Mode
					}
					what := fmt.Sprintf("%s of a %s of mode %#o", s.c.name, s.kind, s.mode)
					require.Equal(t, result["disk "+name(i)], result["statefs "+name(i)], "the result of %s", what)
					require.Equal(t, fmt.Sprintf("%#o", st["disk"]), fmt.Sprintf("%#o", st["statefs"]), "the mode %s %s", when, what)
				}
			}
			compare("after")
			m.Restart()
			compare("after a restart that followed")
		})
	}
}
