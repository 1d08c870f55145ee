package test

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"
)

// TestModel drives a real mount through random sequences of create, write
// (at any offset: overlapping, past the end, leaving holes), truncate,
// rename (over files and directories, across directories, with and without
// RENAME_NOREPLACE), link, unlink, mkdir, rmdir, chmod and utimes,
// interleaved with clean restarts and SIGKILLs of the daemon, and compares
// every result with an in-memory model: each call's errno, and after every
// step the whole tree (names, file types, permission bits, sizes, contents,
// link counts, which names share an inode, and mtimes the model set).
//
// Durability: every operation that succeeds is followed by fsync of what it
// changed (the file, or the directories whose entries changed), as an
// application that wants it durable does; so after a SIGKILL the whole model
// must still hold (DESIGN invariant 1), not only part of it. Files are
// sealed as soon as they are closed (--seal-delay 0), so writes and
// truncates also meet sealed and inline content, and kills land during
// seals.
//
// One store and mount serve each rapid check. By default it runs a few
// checks of many steps (about 20 s here); run it longer with, for example,
//
//	go test -run TestModel ./test/ -rapid.checks=50 -rapid.steps=300
//
// A failure prints the shrunk sequence of steps and writes a fail file to
// replay (-rapid.failfile).
func TestModel(t *testing.T) {
	withRapidDefaults(t, map[string]string{"rapid.checks": "5", "rapid.steps": "150"})
	umask := uint32(unix.Umask(0o022)) // the kernel applies it to create and mkdir
	unix.Umask(int(umask))
	rapid.Check(t, func(rt *rapid.T) {
		m := mountStore(t, filepath.Join(t.TempDir(), "store"), "--seal-delay", "0")
		defer m.Unmount()
		h := &modelHarness{m: m, root: newModelDir(), umask: umask}
		actions := map[string]func(*rapid.T){
			"create":   h.create,
			"write":    h.write,
			"write2":   h.write, // writes are most of what Flink does: twice the weight
			"truncate": h.truncate,
			"rename":   h.rename,
			"link":     h.link,
			"unlink":   h.unlink,
			"mkdir":    h.mkdir,
			"rmdir":    h.rmdir,
			"chmod":    h.chmod,
			"utimes":   h.utimes,
			"restart": func(rt *rapid.T) {
				if rapid.Bool().Draw(rt, "kill") {
					m.Kill()
					h.kills++
				} else {
					m.Unmount()
					h.restarts++
				}
				m.Start()
			},
			"": h.check,
		}
		rt.Repeat(actions)
		t.Logf("check: %d calls succeeded, %d failed as the model said, %d restarts, %d kills", h.ok, h.failed, h.restarts, h.kills)
	})
}

// withRapidDefaults sets rapid's flags to defaults of this test's choosing,
// unless the command line or rapid's environment variables set them, and
// puts them back when the test ends.
func withRapidDefaults(t *testing.T, defaults map[string]string) {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, value := range defaults {
		env := "RAPID_" + strings.ToUpper(strings.TrimPrefix(name, "rapid."))
		if set[name] || os.Getenv(env) != "" {
			continue
		}
		f := flag.Lookup(name)
		old := f.Value.String()
		if err := f.Value.Set(value); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Value.Set(old) })
	}
}

// modelNode is a file or directory of the model. Files with several names
// are one *modelNode under each.
type modelNode struct {
	dir      bool
	perm     uint32
	data     []byte                // a file's content
	children map[string]*modelNode // a directory's entries
	mtime    int64                 // set by utimes; 0: unknown since (any change moves it)
}

func newModelDir() *modelNode {
	return &modelNode{dir: true, perm: 0o755, children: map[string]*modelNode{}}
}

type modelHarness struct {
	m     *Mount
	root  *modelNode
	umask uint32
	// What the check did, for the log.
	ok, failed, restarts, kills int
}

// The names paths are made of: few, so that operations collide.
var modelNames = []string{"a", "b", "c", "d"}

// fatalf fails the check with the end of the daemon's log, which names
// what went wrong inside it (an EIO is logged there).
func (h *modelHarness) fatalf(rt *rapid.T, format string, args ...any) {
	rt.Helper()
	log := h.m.Log()
	if len(log) > 4096 {
		log = "..." + log[len(log)-4096:]
	}
	rt.Fatalf(format+"\ndaemon log:\n%s", append(args, log)...)
}

// drawPath draws a path: mostly one the model has, or a new name in one
// of its directories; sometimes one to three names at random, which often
// do not exist or pass through a file.
func (h *modelHarness) drawPath(rt *rapid.T, label string) string {
	var paths, dirs []string
	var list func(p string, n *modelNode)
	list = func(p string, n *modelNode) {
		for _, name := range slices.Sorted(maps.Keys(n.children)) {
			c := n.children[name]
			cp := path.Join(p, name)
			paths = append(paths, cp)
			if c.dir {
				dirs = append(dirs, cp)
				list(cp, c)
			}
		}
	}
	list("", h.root)
	switch kind := rapid.IntRange(0, 9).Draw(rt, label+"-kind"); {
	case kind < 4 && len(paths) > 0:
		return rapid.SampledFrom(paths).Draw(rt, label)
	case kind < 8:
		dir := rapid.SampledFrom(append([]string{""}, dirs...)).Draw(rt, label+"-dir")
		return path.Join(dir, rapid.SampledFrom(modelNames).Draw(rt, label+"-name"))
	}
	n := rapid.IntRange(1, 3).Draw(rt, label+"-depth")
	parts := make([]string, n)
	for i := range parts {
		parts[i] = rapid.SampledFrom(modelNames).Draw(rt, label)
	}
	return strings.Join(parts, "/")
}

// resolve finds p in the model, with the errno path resolution gives.
func (h *modelHarness) resolve(p string) (*modelNode, syscall.Errno) {
	n := h.root
	for _, name := range strings.Split(p, "/") {
		if !n.dir {
			return nil, syscall.ENOTDIR
		}
		c, ok := n.children[name]
		if !ok {
			return nil, syscall.ENOENT
		}
		n = c
	}
	return n, 0
}

// parent resolves the directory p would be in, and p's last name.
func (h *modelHarness) parent(p string) (*modelNode, string, syscall.Errno) {
	dir, name := path.Split(p)
	if dir == "" {
		return h.root, name, 0
	}
	d, errno := h.resolve(strings.TrimSuffix(dir, "/"))
	if errno == 0 && !d.dir {
		errno = syscall.ENOTDIR
	}
	return d, name, errno
}

func (h *modelHarness) real(p string) string { return h.m.Path(p) }

// expect fails unless the real call's error is the model's errno (0: success).
func (h *modelHarness) expect(rt *rapid.T, op string, err error, want syscall.Errno) {
	rt.Helper()
	if want == 0 {
		h.ok++
	} else {
		h.failed++
	}
	var got syscall.Errno
	if err != nil {
		e, ok := err.(syscall.Errno)
		if !ok {
			h.fatalf(rt, "%s: %v (not an errno)", op, err)
		}
		got = e
	}
	if got != want {
		h.fatalf(rt, "%s: got errno %d (%v), model says %d (%v)", op, int(got), got, int(want), want)
	}
}

// fsync makes the change to p durable, as DESIGN invariant 1 asks of it.
func (h *modelHarness) fsync(rt *rapid.T, p string) {
	rt.Helper()
	fd, err := unix.Open(h.real(p), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		h.fatalf(rt, "open %s for fsync: %v", p, err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		h.fatalf(rt, "fsync %s: %v", p, err)
	}
}

// fsyncParent syncs the directory holding p.
func (h *modelHarness) fsyncParent(rt *rapid.T, p string) {
	rt.Helper()
	h.fsync(rt, path.Dir(p))
}

func (h *modelHarness) create(rt *rapid.T) {
	p := h.drawPath(rt, "path")
	perm := rapid.SampledFrom([]uint32{0o644, 0o600, 0o755, 0o444}).Draw(rt, "perm")
	dir, name, want := h.parent(p)
	if want == 0 && dir.children[name] != nil {
		want = syscall.EEXIST
	}
	fd, err := unix.Open(h.real(p), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, perm)
	if err == nil {
		unix.Close(fd)
	}
	h.expect(rt, "create "+p, err, want)
	if want == 0 {
		dir.children[name] = &modelNode{perm: perm &^ h.umask}
		dir.mtime = 0
		h.fsyncParent(rt, p)
	}
}

func (h *modelHarness) mkdir(rt *rapid.T) {
	p := h.drawPath(rt, "path")
	perm := rapid.SampledFrom([]uint32{0o755, 0o700, 0o777}).Draw(rt, "perm")
	dir, name, want := h.parent(p)
	if want == 0 && dir.children[name] != nil {
		want = syscall.EEXIST
	}
	h.expect(rt, "mkdir "+p, unix.Mkdir(h.real(p), perm), want)
	if want == 0 {
		n := newModelDir()
		n.perm = perm &^ h.umask
		dir.children[name] = n
		dir.mtime = 0
		h.fsyncParent(rt, p)
	}
}

// pattern is n bytes that differ with seed and position, so that a byte at
// the wrong offset shows.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>9)
	}
	return b
}

func (h *modelHarness) write(rt *rapid.T) {
	p := h.drawPath(rt, "path")
	off := rapid.SampledFrom([]int{0, 1, 4095, 4096, 30000, 40000, 100000, 700000}).Draw(rt, "off") +
		rapid.IntRange(0, 100).Draw(rt, "jitter")
	n := rapid.SampledFrom([]int{1, 100, 4096, 33000, 70000}).Draw(rt, "len")
	data := pattern(n, rapid.Byte().Draw(rt, "seed"))
	node, want := h.resolve(p)
	if want == 0 && node.dir {
		want = syscall.EISDIR
	}
	fd, err := unix.Open(h.real(p), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	h.expect(rt, "open for writing "+p, err, want)
	if want != 0 {
		return
	}
	defer unix.Close(fd)
	if w, err := unix.Pwrite(fd, data, int64(off)); err != nil || w != n {
		h.fatalf(rt, "pwrite %s at %d, %d bytes: %d, %v", p, off, n, w, err)
	}
	if err := unix.Fsync(fd); err != nil {
		h.fatalf(rt, "fsync %s: %v", p, err)
	}
	if end := off + n; end > len(node.data) {
		node.data = append(node.data, make([]byte, end-len(node.data))...)
	}
	copy(node.data[off:], data)
	node.mtime = 0
}

func (h *modelHarness) truncate(rt *rapid.T) {
	p := h.drawPath(rt, "path")
	size := rapid.SampledFrom([]int{0, 1, 4096, 32768, 32769, 50000, 800000}).Draw(rt, "size")
	node, want := h.resolve(p)
	if want == 0 && node.dir {
		want = syscall.EISDIR
	}
	h.expect(rt, fmt.Sprintf("truncate %s to %d", p, size), unix.Truncate(h.real(p), int64(size)), want)
	if want != 0 {
		return
	}
	h.fsync(rt, p)
	if size <= len(node.data) {
		node.data = node.data[:size:size]
	} else {
		node.data = append(node.data, make([]byte, size-len(node.data))...)
	}
	node.mtime = 0
}

func (h *modelHarness) unlink(rt *rapid.T) {
	p := h.drawPath(rt, "path")
	dir, name, want := h.parent(p)
	if want == 0 {
		switch c := dir.children[name]; {
		case c == nil:
			want = syscall.ENOENT
		case c.dir:
			want = syscall.EISDIR
		}
	}
	h.expect(rt, "unlink "+p, unix.Unlink(h.real(p)), want)
	if want == 0 {
		delete(dir.children, name)
		dir.mtime = 0
		h.fsyncParent(rt, p)
	}
}

func (h *modelHarness) rmdir(rt *rapid.T) {
	p := h.drawPath(rt, "path")
	dir, name, want := h.parent(p)
	if want == 0 {
		switch c := dir.children[name]; {
		case c == nil:
			want = syscall.ENOENT
		case !c.dir:
			want = syscall.ENOTDIR
		case len(c.children) > 0:
			want = syscall.ENOTEMPTY
		}
	}
	h.expect(rt, "rmdir "+p, unix.Rmdir(h.real(p)), want)
	if want == 0 {
		delete(dir.children, name)
		dir.mtime = 0
		h.fsyncParent(rt, p)
	}
}

// link follows linkat(2)'s order of checks: the old name, the new name's
// directory, an existing new name, then a directory as the old name.
func (h *modelHarness) link(rt *rapid.T) {
	oldp, newp := h.drawPath(rt, "old"), h.drawPath(rt, "new")
	old, want := h.resolve(oldp)
	var dir *modelNode
	var name string
	if want == 0 {
		dir, name, want = h.parent(newp)
	}
	switch {
	case want != 0:
	case dir.children[name] != nil:
		want = syscall.EEXIST
	case old.dir:
		want = syscall.EPERM
	}
	h.expect(rt, "link "+oldp+" "+newp, unix.Link(h.real(oldp), h.real(newp)), want)
	if want == 0 {
		dir.children[name] = old
		dir.mtime = 0
		h.fsyncParent(rt, newp)
	}
}

// rename follows renameat2(2)'s order of checks: both directories, the old
// name, RENAME_NOREPLACE, a directory moved below itself (EINVAL), a target
// above the source (ENOTEMPTY), the same inode (nothing happens), then the
// file types and an empty target directory.
func (h *modelHarness) rename(rt *rapid.T) {
	oldp, newp := h.drawPath(rt, "old"), h.drawPath(rt, "new")
	noReplace := rapid.Bool().Draw(rt, "noreplace")
	od, oname, want := h.parent(oldp)
	var nd *modelNode
	var nname string
	if want == 0 {
		nd, nname, want = h.parent(newp)
	}
	var src, dst *modelNode
	if want == 0 {
		if src = od.children[oname]; src == nil {
			want = syscall.ENOENT
		}
	}
	if want == 0 {
		dst = nd.children[nname]
		switch {
		case noReplace && dst != nil:
			want = syscall.EEXIST
		case strings.HasPrefix(newp, oldp+"/"):
			want = syscall.EINVAL
		case strings.HasPrefix(oldp, newp+"/"):
			want = syscall.ENOTEMPTY
		case src == dst:
		case dst == nil:
		case src.dir && !dst.dir:
			want = syscall.ENOTDIR
		case !src.dir && dst.dir:
			want = syscall.EISDIR
		case dst.dir && len(dst.children) > 0:
			want = syscall.ENOTEMPTY
		}
	}
	var flags uint
	if noReplace {
		flags = unix.RENAME_NOREPLACE
	}
	err := unix.Renameat2(unix.AT_FDCWD, h.real(oldp), unix.AT_FDCWD, h.real(newp), flags)
	h.expect(rt, fmt.Sprintf("rename %s %s (noreplace %v)", oldp, newp, noReplace), err, want)
	if want != 0 || src == dst {
		return
	}
	delete(od.children, oname)
	nd.children[nname] = src
	od.mtime, nd.mtime = 0, 0
	h.fsyncParent(rt, oldp)
	h.fsyncParent(rt, newp)
}

func (h *modelHarness) chmod(rt *rapid.T) {
	p := h.drawPath(rt, "path")
	perm := rapid.SampledFrom([]uint32{0, 0o600, 0o644, 0o755, 0o700, 0o1777, 0o444}).Draw(rt, "perm")
	node, want := h.resolve(p)
	h.expect(rt, fmt.Sprintf("chmod %s %#o", p, perm), unix.Chmod(h.real(p), perm), want)
	if want == 0 {
		node.perm = perm
		h.fsync(rt, p)
	}
}

func (h *modelHarness) utimes(rt *rapid.T) {
	p := h.drawPath(rt, "path")
	mtime := rapid.Int64Range(-1e18, 4e18).Draw(rt, "mtime")
	node, want := h.resolve(p)
	ts := []unix.Timespec{unix.NsecToTimespec(mtime), unix.NsecToTimespec(mtime)}
	h.expect(rt, "utimes "+p, unix.UtimesNanoAt(unix.AT_FDCWD, h.real(p), ts, unix.AT_SYMLINK_NOFOLLOW), want)
	if want == 0 {
		node.mtime = mtime
		h.fsync(rt, p)
	}
}

// check compares the whole mounted tree with the model.
func (h *modelHarness) check(rt *rapid.T) {
	inos := map[*modelNode]uint64{}
	nodes := map[uint64]*modelNode{}
	var walk func(p string, n *modelNode)
	walk = func(p string, n *modelNode) {
		var st unix.Stat_t
		if err := unix.Lstat(h.real(p), &st); err != nil {
			h.fatalf(rt, "lstat %q: %v", p, err)
		}
		if ino, ok := inos[n]; ok && ino != st.Ino {
			h.fatalf(rt, "%q: inode %d, another name of it has %d", p, st.Ino, ino)
		}
		if other, ok := nodes[st.Ino]; ok && other != n {
			h.fatalf(rt, "%q: inode %d, which another file has too", p, st.Ino)
		}
		inos[n], nodes[st.Ino] = st.Ino, n
		if got := st.Mode & 0o7777; got != n.perm {
			h.fatalf(rt, "%q: permissions %#o, model %#o", p, got, n.perm)
		}
		if n.mtime != 0 && st.Mtim.Nano() != n.mtime {
			h.fatalf(rt, "%q: mtime %d, set to %d", p, st.Mtim.Nano(), n.mtime)
		}
		if !n.dir {
			if st.Mode&unix.S_IFMT != unix.S_IFREG {
				h.fatalf(rt, "%q: mode %#o, model has a regular file", p, st.Mode)
			}
			if want := uint64(countNames(h.root, n)); st.Nlink != want {
				h.fatalf(rt, "%q: %d links, model %d", p, st.Nlink, want)
			}
			if st.Size != int64(len(n.data)) {
				h.fatalf(rt, "%q: size %d, model %d", p, st.Size, len(n.data))
			}
			got, err := os.ReadFile(h.real(p))
			if err != nil {
				h.fatalf(rt, "read %q: %v", p, err)
			}
			if !bytes.Equal(got, n.data) {
				i := 0
				for i < min(len(got), len(n.data)) && got[i] == n.data[i] {
					i++
				}
				h.fatalf(rt, "%q: content differs from the model's at offset %d (%d bytes, model %d)", p, i, len(got), len(n.data))
			}
			return
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			h.fatalf(rt, "%q: mode %#o, model has a directory", p, st.Mode)
		}
		subdirs := 0
		for _, c := range n.children {
			if c.dir {
				subdirs++
			}
		}
		entries, err := os.ReadDir(h.real(p))
		if err != nil {
			h.fatalf(rt, "readdir %q: %v", p, err)
		}
		var got []string
		for _, e := range entries {
			if p == "" && e.Name() == ".statefs" {
				continue // the read-only view, which the root's link count leaves out
			}
			got = append(got, e.Name())
		}
		if want := slices.Sorted(maps.Keys(n.children)); !slices.Equal(got, want) {
			h.fatalf(rt, "directory %q lists %q, model %q", p, got, want)
		}
		if st.Nlink != uint64(2+subdirs) {
			h.fatalf(rt, "directory %q: %d links, model %d", p, st.Nlink, 2+subdirs)
		}
		for _, name := range slices.Sorted(maps.Keys(n.children)) {
			walk(path.Join(p, name), n.children[name])
		}
	}
	walk("", h.root)
}

// countNames is the number of names file n has in the tree.
func countNames(dir, n *modelNode) int {
	c := 0
	for _, child := range dir.children {
		switch {
		case child == n:
			c++
		case child.dir:
			c += countNames(child, n)
		}
	}
	return c
}
