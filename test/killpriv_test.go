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

// killPrivCase is one change to a file or directory owned by nobody, by
// root (in the test) or by nobody (in a child that is also in otherGroup).
type killPrivCase struct {
	name   string
	files  bool                    // applies to regular files
	dirs   bool                    // applies to directories
	byRoot func(path string) error // nil: done by the owner
	child  string                  // the owner's op, with %s for the path
}

var killPrivCases = []killPrivCase{
	{name: "chown of the owner by root", files: true, dirs: true, byRoot: func(p string) error { return os.Chown(p, 1234, -1) }},
	{name: "chown of the group by root", files: true, dirs: true, byRoot: func(p string) error { return os.Chown(p, -1, otherGroup) }},
	{name: "chown of the group by the owner", files: true, dirs: true, child: "chownto %s -1 " + strconv.Itoa(otherGroup)},
	{name: "fchown of the group by the owner", files: true, dirs: true, child: "fchownto %s -1 " + strconv.Itoa(otherGroup)},
	{name: "lchown of the group by the owner", files: true, dirs: true, child: "lchownto %s -1 " + strconv.Itoa(otherGroup)},
	{name: "chown to the same owner and group by the owner", files: true, dirs: true, child: "chownto %s " + strconv.Itoa(nobody) + " " + strconv.Itoa(nobody)},
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
}

// firstErr is a if it is an error, else b.
func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// After a change of owner or group, a truncate or a write, a file's
// setuid and setgid bits are what the kernel leaves on the machine's own
// disk for the same steps: statefs, which negotiates HANDLE_KILLPRIV_V2,
// clears them itself. Each case runs on a mount and on a plain directory
// side by side, with passthrough on and off; the expectation is the
// kernel's, not a table.
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
				dir  bool
			}
			var subjects []subject
			for _, c := range killPrivCases {
				for _, mode := range []uint32{0o6555, 0o6755, 0o4777, 0o2755, 0o2745} {
					if c.files {
						subjects = append(subjects, subject{c, mode, false})
					}
				}
				if c.dirs {
					subjects = append(subjects, subject{c, 0o2755, true})
				}
			}
			name := func(i int) string { return fmt.Sprintf("s%03d", i) }
			var ops []string
			var opOf []string // for each op, "root name"
			result := map[string]string{}
			for i, s := range subjects {
				for root, dir := range roots {
					p := filepath.Join(dir, name(i))
					if s.dir {
						require.NoError(t, os.Mkdir(p, 0o755))
					} else {
						putFile(t, p, []byte("data"), 0o644)
					}
					require.NoError(t, os.Chown(p, nobody, nobody))
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
			for i, s := range subjects {
				kind := "file"
				if s.dir {
					kind = "directory"
				}
				st := map[string]uint32{}
				for root, dir := range roots {
					st[root] = lstatOf(t, filepath.Join(dir, name(i))).Mode
				}
				what := fmt.Sprintf("%s of a %s of mode %#o", s.c.name, kind, s.mode)
				require.Equal(t, result["disk "+name(i)], result["statefs "+name(i)], "the result of %s", what)
				require.Equal(t, fmt.Sprintf("%#o", st["disk"]), fmt.Sprintf("%#o", st["statefs"]), "the mode after %s", what)
			}
		})
	}
}
