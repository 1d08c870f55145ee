package test

import (
	"bytes"
	"encoding/json"
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
	"time"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"
)

// TestModel drives a real mount through random sequences of create, write
// (at any offset: overlapping, past the end, leaving holes), truncate,
// rename (over files and directories, across directories, with and without
// RENAME_NOREPLACE), link, unlink, mkdir, rmdir, rm -rf, chmod and utimes,
// interleaved with clean restarts and SIGKILLs of the daemon, and compares
// every result with an in-memory model: each call's errno, and after every
// step the whole tree (names, file types, permission bits, sizes, contents,
// link counts, which names share an inode, and mtimes the model set).
//
// The paths go through Flink's trees (owner.FlinkRules) as well as
// through unowned ones: a live RocksDB instance of a job
// (tm_m/tmp/job_<J>_op_o_uuid_<U>/db, job level) and checkpoint directories
// of two allocations (tm_m/localState/aid_<A>/jid_<J>/vtx_<V>_sti_0/chk_<n>),
// so that one inode has names under several owners, as a RocksDB checkpoint
// and a restore from local state make.
//
// Deletes are held (mount --hold-deletes). A removal of a name in a job's
// local state is answered as done, so the tree the model checks is as
// without holding; the name moves to the attic (the shared model of held deletes,
// heldmodel_test.go, decides how) and still counts in the inode's link count, whether pending or held, on
// every name the inode keeps in the tree. Which pending trees are held
// depends on when the daemon decides, so the daemon runs with a hold
// window of an hour, never deciding on its own, and now and then a restart
// lets it decide once with a short window (modelHarness.settle); the model
// decides the same way and then the held trees are checked: `statefs held
// --json` (paths, files and bytes, each inode once) and .statefs/held
// (names, contents, inodes, link counts).
//
// Durability: every operation that succeeds is followed by fsync of what it
// changed (the file, or the directories whose entries changed), as an
// application that wants it durable does; so after a SIGKILL the whole model
// must still hold (DESIGN invariant 1), not only part of it, and so must
// the attic. Files are sealed as soon as they are closed (--seal-delay 0),
// so writes and truncates also meet sealed and inline content, and kills
// land during seals.
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
		m := mountStore(t, filepath.Join(t.TempDir(), "store"), modelMountArgs...)
		defer m.Unmount()
		h := &modelHarness{m: m, root: newModelDir(), umask: umask,
			attic: newAtticModel(func(string) *modelNode { return newModelDir() })}
		h.setUp(rt)
		actions := map[string]func(*rapid.T){
			"create":   h.create,
			"write":    h.write,
			"write2":   h.write, // writes are most of what Flink does: twice the weight
			"truncate": h.truncate,
			"rename":   h.rename,
			"link":     h.link,
			"unlink":   h.unlink,
			"mkdir":    h.mkdir,
			"mkdirAll": h.mkdirAll,
			"rmdir":    h.rmdir,
			"rmTree":   h.rmTree,
			"chmod":    h.chmod,
			"utimes":   h.utimes,
			"restart": func(rt *rapid.T) {
				kill := rapid.Bool().Draw(rt, "kill")
				if rapid.IntRange(0, 2).Draw(rt, "decide") == 0 {
					h.settle(rt, kill)
					return
				}
				h.stop(kill)
				m.Start()
			},
			"": h.check,
		}
		rt.Repeat(actions)
		h.settle(rt, false)
		h.check(rt)
		t.Logf("check: %d calls succeeded, %d failed as the model said, %d restarts, %d kills, %d decisions, %d trees held",
			h.ok, h.failed, h.restarts, h.kills, h.decisions, len(h.held))
	})
}

// The Flink trees the model's paths go through.
const (
	modelJob    = "0123456789abcdef0123456789abcdef"
	modelVertex = "fedcba9876543210fedcba9876543210"
	modelDB     = "tm_m/tmp/job_" + modelJob + "_op_o_uuid_5b1c2f3e-0a1b-4c2d-8e9f-0123456789ab/db"
)

var modelAllocs = []string{"a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1", "a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2"}

func modelCheckpoint(alloc string, chk int) string {
	return fmt.Sprintf("tm_m/localState/aid_%s/jid_%s/vtx_%s_sti_0/chk_%d", alloc, modelJob, modelVertex, chk)
}

// modelPrefixes are the directories drawPath puts names in now and then,
// and mkdirAll makes again after an rm -rf.
var modelPrefixes = []string{
	modelDB,
	modelCheckpoint(modelAllocs[0], 1),
	modelCheckpoint(modelAllocs[0], 2),
	modelCheckpoint(modelAllocs[1], 1),
}

// The daemon never decides held deletes on its own (an hour's window);
// settle restarts it with a short window to decide once. A full disk must
// not drop held trees under the model (--hold-min-free 0).
var (
	modelMountArgs  = []string{"--seal-delay", "0", "--hold-deletes", "--hold-window", "1h", "--hold-min-free", "0"}
	modelDecideArgs = []string{"--seal-delay", "0", "--hold-deletes", "--hold-window", "100ms", "--hold-min-free", "0"}
)

// The settle sentinel, outside the model's tree (its executor sorts after
// tm_m): a file with a name in a checkpoint that stays, made pending by an unlink
// before each decision. Its pending name goes for good in the pass that
// decides everything made pending before it, which its link count shows.
const (
	settleRoot       = "tm_zz"
	settleFile       = settleRoot + "/sentinel"
	settleCheckpoint = settleRoot + "/localState/aid_ffffffffffffffffffffffffffffffff/jid_" + modelJob +
		"/vtx_" + modelVertex + "_sti_0/chk_1"
)

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
	ino      uint64                // the inode number the mount gave it, once seen (stable across restarts)
}

func newModelDir() *modelNode {
	return &modelNode{dir: true, perm: 0o755, children: map[string]*modelNode{}}
}

// fileOf is n itself, for the attic model.
func (n *modelNode) fileOf() (any, int64) {
	if n.dir {
		return nil, 0
	}
	return n, int64(len(n.data))
}

// madePending is n: the model does not follow when names were born.
func (n *modelNode) madePending(span) *modelNode { return n }

type modelHarness struct {
	m     *Mount
	root  *modelNode
	umask uint32
	// The attic: removed names waiting for a decision, at the paths they
	// had, and the held trees, in the order held.
	attic *atticModel[*modelNode]
	held  []*modelHold[*modelNode]
	// What the check did, for the log.
	ok, failed, restarts, kills, decisions int
}

// The names paths are made of: few, so that operations collide.
var modelNames = []string{"a", "b", "c", "d"}

// fatalWithLog fails a rapid check with the end of m's log, which names
// what went wrong inside the daemon (an EIO is logged there).
func fatalWithLog(rt *rapid.T, m *Mount, format string, args ...any) {
	rt.Helper()
	rt.Fatalf(format+"\ndaemon log:\n%s", append(args, tail(m.Log(), 4096))...)
}

func (h *modelHarness) fatalf(rt *rapid.T, format string, args ...any) {
	rt.Helper()
	fatalWithLog(rt, h.m, format, args...)
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
	switch kind := rapid.IntRange(0, 11).Draw(rt, label+"-kind"); {
	case kind < 4 && len(paths) > 0:
		return rapid.SampledFrom(paths).Draw(rt, label)
	case kind < 7:
		dir := rapid.SampledFrom(append([]string{""}, dirs...)).Draw(rt, label+"-dir")
		return path.Join(dir, rapid.SampledFrom(modelNames).Draw(rt, label+"-name"))
	case kind < 10:
		// A name in a Flink directory, which may be gone (ENOENT).
		dir := rapid.SampledFrom(modelPrefixes).Draw(rt, label+"-flink")
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
	h.doMkdir(rt, p, perm)
}

func (h *modelHarness) doMkdir(rt *rapid.T, p string, perm uint32) {
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

// mkdirAll makes a Flink directory and what is missing on the way, as
// mkdir -p does: it stops at a name that is a file (EEXIST).
func (h *modelHarness) mkdirAll(rt *rapid.T) {
	p := rapid.SampledFrom(modelPrefixes).Draw(rt, "path")
	h.doMkdirAll(rt, p)
}

func (h *modelHarness) doMkdirAll(rt *rapid.T, p string) {
	parts := strings.Split(p, "/")
	for i := range parts {
		q := strings.Join(parts[:i+1], "/")
		n, errno := h.resolve(q)
		if errno == 0 && n.dir {
			continue
		}
		h.doMkdir(rt, q, 0o755)
		if errno == 0 {
			return
		}
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

func (h *modelHarness) unlink(rt *rapid.T) { h.doUnlink(rt, h.drawPath(rt, "path")) }

func (h *modelHarness) doUnlink(rt *rapid.T, p string) {
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
		h.attic.makePending(p, dir.children[name], span{})
		delete(dir.children, name)
		dir.mtime = 0
		h.fsyncParent(rt, p)
	}
}

func (h *modelHarness) rmdir(rt *rapid.T) { h.doRmdir(rt, h.drawPath(rt, "path")) }

func (h *modelHarness) doRmdir(rt *rapid.T, p string) {
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
		h.attic.makePending(p, dir.children[name], span{})
		delete(dir.children, name)
		dir.mtime = 0
		h.fsyncParent(rt, p)
	}
}

// rmTree removes a tree as rm -rf (and Flink freeing a slot) does: each
// file, then each directory once empty, bottom up.
func (h *modelHarness) rmTree(rt *rapid.T) {
	p := h.drawPath(rt, "path")
	n, errno := h.resolve(p)
	if errno != 0 {
		return
	}
	var remove func(p string, n *modelNode)
	remove = func(p string, n *modelNode) {
		if !n.dir {
			h.doUnlink(rt, p)
			return
		}
		for _, name := range slices.Sorted(maps.Keys(n.children)) {
			remove(path.Join(p, name), n.children[name])
		}
		h.doRmdir(rt, p)
	}
	remove(p, n)
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
		if !n.dir {
			if n.ino != 0 && n.ino != st.Ino {
				h.fatalf(rt, "%q: inode %d, it had inode %d before", p, st.Ino, n.ino)
			}
			n.ino = st.Ino
		}
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
			h.checkFile(rt, p, n, &st)
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
			if p == "" && (e.Name() == ".statefs" || e.Name() == settleRoot) {
				continue // the read-only view, which the root's link count leaves out, and the settle sentinel's tree
			}
			got = append(got, e.Name())
		}
		if want := slices.Sorted(maps.Keys(n.children)); !slices.Equal(got, want) {
			h.fatalf(rt, "directory %q lists %q, model %q", p, got, want)
		}
		if p == "" {
			subdirs++ // the settle sentinel's tree
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

// checkFile compares file n, seen at p (in the tree or in .statefs/held)
// with stat st, with the model: link count, size and content.
func (h *modelHarness) checkFile(rt *rapid.T, p string, n *modelNode, st *unix.Stat_t) {
	if want := uint64(h.links(n)); st.Nlink != want {
		h.fatalf(rt, "%q: %d links, model %d (%d in the tree, %d pending, %d held)", p, st.Nlink, want,
			countNames(h.root, n), h.attic.count(n), want-uint64(countNames(h.root, n)+h.attic.count(n)))
	}
	if st.Size != int64(len(n.data)) {
		h.fatalf(rt, "%q: size %d, model %d", p, st.Size, len(n.data))
	}
	got, err := os.ReadFile(h.m.Path(p))
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
}

// links is file n's link count: its names in the tree and in the attic.
// A removed name that is pending or held still counts (so a checkpoint's
// SST held after its allocation went keeps nlink 2 on its name in the live
// RocksDB instance), until it goes for good or is restored.
func (h *modelHarness) links(n *modelNode) int {
	c := countNames(h.root, n) + h.attic.count(n)
	for _, hd := range h.held {
		c += hd.count(n)
	}
	return c
}

// countNames is the number of names file n has below directory dir.
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

// setUp makes the Flink directories the paths go through, in the model,
// and the settle sentinel's tree outside it.
func (h *modelHarness) setUp(rt *rapid.T) {
	for _, p := range modelPrefixes[:2] {
		h.doMkdirAll(rt, p)
	}
	h.doMkdirAll(rt, modelPrefixes[3])
	if err := os.MkdirAll(h.real(settleCheckpoint), 0o755); err != nil {
		h.fatalf(rt, "making the settle sentinel's checkpoint: %v", err)
	}
}

// stop ends the daemon, by SIGKILL or cleanly.
func (h *modelHarness) stop(kill bool) {
	if kill {
		h.m.Kill()
		h.kills++
	} else {
		h.m.Unmount()
		h.restarts++
	}
}

// decide is the daemon's decision over what is pending, as the attic
// model takes it: the tree has a path still if it has a directory there.
func (h *modelHarness) decide() {
	h.held = append(h.held, h.attic.decide(func(p string) bool {
		n, errno := h.resolve(p)
		return errno == 0 && n.dir
	})...)
	h.decisions++
}

// settle lets the daemon decide what is pending, once: it stops (by kill
// or cleanly), starts with a short hold window, and once the sentinel
// made pending last is decided (its name in a checkpoint that stays goes for
// good, so its link count falls to 1), stops cleanly, which waits for the
// decision pass under way, and starts again as before. Then the held trees
// are compared with the model's.
func (h *modelHarness) settle(rt *rapid.T, kill bool) {
	if err := sentinelMadePending(h.m); err != nil {
		h.fatalf(rt, "%v", err)
	}
	h.stop(kill)
	h.m.Args = modelDecideArgs
	h.m.Start()
	if err := awaitSentinel(h.m); err != nil {
		h.fatalf(rt, "%v", err)
	}
	h.m.Unmount()
	h.m.Args = modelMountArgs
	h.m.Start()
	h.decide()
	h.checkHeld(rt)
}

// sentinelMadePending makes a new settle sentinel and makes pending its name in the
// sentinel's checkpoint (settleCheckpoint, made if missing), keeping one in
// the executor's tree (settleFile): its link count is 2 until the daemon
// decides the pending name, which goes for good (a pruned checkpoint's).
// The file is made in the checkpoint and linked out: today's daemon owns an
// inode by where it was made.
func sentinelMadePending(m *Mount) error {
	madePending := m.Path(settleCheckpoint, "s")
	if err := os.MkdirAll(filepath.Dir(madePending), 0o755); err != nil {
		return fmt.Errorf("making the settle sentinel's checkpoint: %w", err)
	}
	if err := os.WriteFile(madePending, []byte("sentinel"), 0o644); err != nil {
		return fmt.Errorf("making the settle sentinel: %w", err)
	}
	if err := os.Remove(m.Path(settleFile)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing the last settle sentinel: %w", err)
	}
	if err := os.Link(madePending, m.Path(settleFile)); err != nil {
		return fmt.Errorf("linking the settle sentinel: %w", err)
	}
	if err := os.Remove(madePending); err != nil {
		return fmt.Errorf("unlinking the settle sentinel: %w", err)
	}
	for _, dir := range []string{settleCheckpoint, settleRoot} {
		if err := fsyncPath(m.Path(dir)); err != nil {
			return err
		}
	}
	if n, err := sentinelLinks(m); err != nil || n != 2 {
		return fmt.Errorf("the settle sentinel has %d links (%v) after its name in a checkpoint was removed, want 2: the pending name counts", n, err)
	}
	return nil
}

// awaitSentinel waits until the daemon has decided the pending sentinel.
// Its pending name is the newest, and its executor's tree (tm_zz) sorts
// after every other, so the pass that decides it has decided all that was
// pending before it.
func awaitSentinel(m *Mount) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := sentinelLinks(m)
		if err != nil || n == 1 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the daemon did not decide the pending settle sentinel within 20s (%d links)", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sentinelLinks is the settle sentinel's link count, asked of the daemon.
func sentinelLinks(m *Mount) (uint32, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, m.Path(settleFile), unix.AT_STATX_FORCE_SYNC, unix.STATX_NLINK, &st); err != nil {
		return 0, fmt.Errorf("statx %s: %w", settleFile, err)
	}
	return st.Nlink, nil
}

// checkHeld compares `statefs held --json` and .statefs/held with the
// model's held trees: the same trees at the same paths (a path held twice,
// in the order held: ids sort by time), each inode once in files and
// bytes, and in each the names, inodes, link counts and contents.
func (h *modelHarness) checkHeld(rt *rapid.T) {
	out, err := statefs("held", "--store", h.m.Store, "--json")
	if err != nil {
		h.fatalf(rt, "statefs held: %v\n%s", err, out)
	}
	var got []heldTree
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		h.fatalf(rt, "statefs held --json: %v\n%s", err, out)
	}
	slices.SortStableFunc(got, func(a, b heldTree) int { return strings.Compare(a.ID, b.ID) })
	var want []string
	for _, hd := range h.held {
		want = append(want, hd.path)
	}
	var paths []string
	for _, g := range got {
		paths = append(paths, g.Path)
	}
	if !slices.Equal(slices.Sorted(slices.Values(paths)), slices.Sorted(slices.Values(want))) {
		h.fatalf(rt, "held trees at %q, model %q", paths, want)
	}
	used := make([]bool, len(got))
	for _, hd := range h.held {
		i := 0
		for used[i] || got[i].Path != hd.path {
			i++
		}
		used[i] = true
		g := got[i]
		if g.Files != hd.files || g.Bytes != hd.bytes {
			h.fatalf(rt, "held tree %s (%s): %d files, %d bytes; model %d files, %d bytes (each inode once)", g.ID, g.Path, g.Files, g.Bytes, hd.files, hd.bytes)
		}
		h.checkHeldTree(rt, path.Join(".statefs/held", g.ID), hd, "")
	}
}

// checkHeldTree compares the tree .statefs/held shows at p with directory
// rel of the model's held tree hd.
func (h *modelHarness) checkHeldTree(rt *rapid.T, p string, hd *modelHold[*modelNode], rel string) {
	entries, err := os.ReadDir(h.real(p))
	if err != nil {
		h.fatalf(rt, "readdir %q: %v", p, err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if want := hd.children(rel); !slices.Equal(got, want) {
		h.fatalf(rt, "held directory %q lists %q, model %q", p, got, want)
	}
	for _, name := range got {
		c, cp := hd.names[path.Join(rel, name)], path.Join(p, name)
		var st unix.Stat_t
		if err := unix.Lstat(h.real(cp), &st); err != nil {
			h.fatalf(rt, "lstat %q: %v", cp, err)
		}
		if c.dir {
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				h.fatalf(rt, "%q: mode %#o, model has a directory", cp, st.Mode)
			}
			h.checkHeldTree(rt, cp, hd, path.Join(rel, name))
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			h.fatalf(rt, "%q: mode %#o, model has a regular file", cp, st.Mode)
		}
		if ino := st.Ino &^ heldViewInoBits; ino != c.ino {
			h.fatalf(rt, "%q: inode %d, the file's is %d", cp, ino, c.ino)
		}
		h.checkFile(rt, cp, c, &st)
	}
}
