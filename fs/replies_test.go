package fs

import (
	"maps"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/hold"
	"github.com/statefs/statefs/index"
)

// White-box: the tests of exactly once send a mutating request to one
// server and, as the kernel does after that server died without
// answering, the same request again, its unique id marked resentUnique, to
// the server that takes the connection over (a new FS on the same store
// and handle table, resuming: resume_test.go).

// server serves the store in dir as the server of generation gen of the
// connection whose handle table is mem; one after the first resumes.
func server(t *testing.T, dir string, mem *os.File, gen uint64) *kernel {
	t.Helper()
	return serveKernel(t, dir, Options{}, connection(t, mem, gen))
}

// header is the header of root's request of unique id unique on node.
func header(node, unique uint64) fuse.InHeader {
	h := root.header(node)
	h.Unique = unique
	return h
}

// cancel is a request's own channel, as go-fuse gives each request.
func cancel() <-chan struct{} { return make(chan struct{}) }

// answer is what a request answered: its errno, and the inode of its
// entry or the size and change time in its attributes.
type answer struct {
	errno syscall.Errno
	ino   uint64
	size  uint64
	ctime int64 // ns since the epoch
}

func entryAnswer(st fuse.Status, out *fuse.EntryOut) answer {
	if !st.Ok() {
		return answer{errno: errnoOf(st)}
	}
	if out.NodeId == 0 {
		return answer{errno: syscall.EIO} // no node id: the kernel would get no entry
	}
	return answer{ino: out.Attr.Ino}
}

// nameState is what a name of the tree shows: its inode, link count,
// size and type.
type nameState struct {
	ino, size uint64
	nlink     uint32
	mode      uint32
}

// tree is every name under the root but the views, and the number of
// inodes in the index: what a request applied twice would change twice.
func (k *kernel) tree() (map[string]nameState, int) {
	k.t.Helper()
	names := map[string]nameState{}
	var walk func(node uint64, dir string)
	walk = func(node uint64, dir string) {
		entries, errno := k.readdir(node)
		if errno != 0 {
			k.t.Fatalf("readdir %q: %v", dir, errno)
		}
		for name := range entries {
			if name == "." || name == ".." || node == rootNode && name == statusDirName {
				continue
			}
			e, errno := k.lookup(node, name)
			if errno != 0 {
				k.t.Fatalf("lookup %q in %q: %v", name, dir, errno)
			}
			p := filepath.Join(dir, name)
			names[p] = nameState{e.attr.Ino, e.attr.Size, e.attr.Nlink, e.attr.Mode}
			if e.attr.Mode&syscall.S_IFMT == syscall.S_IFDIR {
				walk(e.node, p)
			}
		}
	}
	walk(rootNode, "")
	n, err := k.store.Index.CountInodes()
	if err != nil {
		k.t.Fatal(err)
	}
	return names, n
}

// resentCases are the mutating requests, each with what it needs made
// first. send sends the request with unique id unique and returns its
// answer; it resolves every node by lookups, since node ids are the
// server's.
var resentCases = []struct {
	name    string
	prepare func(k *kernel)
	send    func(k *kernel, unique uint64) answer
}{
	{"create with O_EXCL", nil, func(k *kernel, unique uint64) answer {
		var out fuse.CreateOut
		in := fuse.CreateIn{InHeader: header(rootNode, unique), Flags: syscall.O_CREAT | syscall.O_EXCL | syscall.O_RDWR, Mode: 0o644}
		a := entryAnswer(k.raw.Create(cancel(), &in, "f", &out), &out.EntryOut)
		if a.errno == 0 {
			// The handle answered is open for writing.
			if _, errno := k.write(out.NodeId, out.Fh, 0, []byte("x")); errno != 0 {
				a.errno = errno
			}
			k.release(out.NodeId, out.Fh)
		}
		return a
	}},
	{"mknod", nil, func(k *kernel, unique uint64) answer {
		var out fuse.EntryOut
		in := fuse.MknodIn{InHeader: header(rootNode, unique), Mode: syscall.S_IFIFO | 0o644}
		return entryAnswer(k.raw.Mknod(cancel(), &in, "p", &out), &out)
	}},
	{"mkdir", nil, func(k *kernel, unique uint64) answer {
		var out fuse.EntryOut
		in := fuse.MkdirIn{InHeader: header(rootNode, unique), Mode: 0o755}
		return entryAnswer(k.raw.Mkdir(cancel(), &in, "d", &out), &out)
	}},
	{"symlink", nil, func(k *kernel, unique uint64) answer {
		var out fuse.EntryOut
		h := header(rootNode, unique)
		return entryAnswer(k.raw.Symlink(cancel(), &h, "target", "s", &out), &out)
	}},
	{"link", func(k *kernel) { k.writeFile(rootNode, "a", []byte("a")) }, func(k *kernel, unique uint64) answer {
		var out fuse.EntryOut
		in := fuse.LinkIn{InHeader: header(rootNode, unique), Oldnodeid: k.walk("a").node}
		return entryAnswer(k.raw.Link(cancel(), &in, "l", &out), &out)
	}},
	{"unlink", func(k *kernel) {
		k.writeFile(rootNode, "a", []byte("a"))
		if _, errno := k.link(k.walk("a").node, rootNode, "b"); errno != 0 {
			k.t.Fatal(errno)
		}
	}, func(k *kernel, unique uint64) answer {
		h := header(rootNode, unique)
		return answer{errno: errnoOf(k.raw.Unlink(cancel(), &h, "a"))}
	}},
	{"rmdir", func(k *kernel) { k.mkdirAll("d") }, func(k *kernel, unique uint64) answer {
		h := header(rootNode, unique)
		return answer{errno: errnoOf(k.raw.Rmdir(cancel(), &h, "d"))}
	}},
	{"rename over a file", func(k *kernel) {
		k.writeFile(rootNode, "a", []byte("a"))
		k.writeFile(rootNode, "b", []byte("bb"))
	}, func(k *kernel, unique uint64) answer {
		in := fuse.RenameIn{InHeader: header(rootNode, unique), Newdir: rootNode}
		return answer{errno: errnoOf(k.raw.Rename(cancel(), &in, "a", "b"))}
	}},
	{"rename with RENAME_NOREPLACE", func(k *kernel) { k.writeFile(rootNode, "a", []byte("a")) }, func(k *kernel, unique uint64) answer {
		in := fuse.RenameIn{InHeader: header(rootNode, unique), Newdir: rootNode, Flags: unix.RENAME_NOREPLACE}
		return answer{errno: errnoOf(k.raw.Rename(cancel(), &in, "a", "b"))}
	}},
	{"setattr that truncates", func(k *kernel) { k.writeFile(rootNode, "a", []byte("0123456789")) }, func(k *kernel, unique uint64) answer {
		var out fuse.AttrOut
		in := fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: header(k.walk("a").node, unique), Valid: fuse.FATTR_SIZE, Size: 3}}
		st := k.raw.SetAttr(cancel(), &in, &out)
		return answer{errno: errnoOf(st), size: out.Size, ctime: int64(out.Ctime)*1e9 + int64(out.Ctimensec)}
	}},
	{"setxattr with XATTR_CREATE", func(k *kernel) { k.writeFile(rootNode, "a", nil) }, func(k *kernel, unique uint64) answer {
		in := fuse.SetXAttrIn{InHeader: header(k.walk("a").node, unique), Size: 1, Flags: unix.XATTR_CREATE}
		return answer{errno: errnoOf(k.raw.SetXAttr(cancel(), &in, "user.k", []byte("v")))}
	}},
	{"removexattr", func(k *kernel) {
		k.writeFile(rootNode, "a", nil)
		if errno := k.setxattr(k.walk("a").node, "user.k", []byte("v"), 0); errno != 0 {
			k.t.Fatal(errno)
		}
	}, func(k *kernel, unique uint64) answer {
		h := header(k.walk("a").node, unique)
		return answer{errno: errnoOf(k.raw.RemoveXAttr(cancel(), &h, "user.k"))}
	}},
}

// A mutating request that committed, sent again to the server that takes
// the connection over, answers as it did the first time, and changes
// nothing more: the same inode, errno 0, the same names, link counts and
// sizes, and no new inode.
func TestResentRequestAnsweredFromItsRecord(t *testing.T) {
	const unique = 40
	for _, tc := range resentCases {
		t.Run(tc.name, func(t *testing.T) {
			dir, mem := filepath.Join(t.TempDir(), "store"), handleMemory(t)
			k := server(t, dir, mem, 1)
			if tc.prepare != nil {
				tc.prepare(k)
			}
			first := tc.send(k, unique)
			if first.errno != 0 {
				t.Fatalf("the request failed: %v", first.errno)
			}
			k.close()

			k = server(t, dir, mem, 2)
			names, inodes := k.tree() // as the first request left it
			if again := tc.send(k, unique|resentUnique); again != first {
				t.Errorf("sent again, the request answered %+v; the first time %+v", again, first)
			}
			if got, n := k.tree(); !maps.Equal(got, names) || n != inodes {
				t.Errorf("sent again, the request changed the tree:\n%v, %d inodes\nwant\n%v, %d inodes", got, n, names, inodes)
			}
		})
	}
}

// A request sent again that did not commit before (it has no record) is
// applied.
func TestResentRequestWithoutRecordIsApplied(t *testing.T) {
	dir, mem := filepath.Join(t.TempDir(), "store"), handleMemory(t)
	server(t, dir, mem, 1).close()
	k := server(t, dir, mem, 2)
	var out fuse.EntryOut
	in := fuse.MkdirIn{InHeader: header(rootNode, 40|resentUnique), Mode: 0o755}
	if a := entryAnswer(k.raw.Mkdir(cancel(), &in, "d", &out), &out); a.errno != 0 {
		t.Fatalf("mkdir sent again without a record: %v", a.errno)
	}
	if got := k.walk("d"); got.attr.Ino != out.Attr.Ino {
		t.Errorf("d is inode %d, want the one made, %d", got.attr.Ino, out.Attr.Ino)
	}
}

// The records of a connection answer none of the requests of a new one,
// whose unique ids start again: a server that does not resume deletes
// them before it serves.
func TestRecordsOfAnEarlierConnectionAnswerNothing(t *testing.T) {
	const unique = 40
	dir := filepath.Join(t.TempDir(), "store")
	k := server(t, dir, handleMemory(t), 1)
	var out fuse.EntryOut
	in := fuse.MkdirIn{InHeader: header(rootNode, unique), Mode: 0o755}
	if st := k.raw.Mkdir(cancel(), &in, "d", &out); !st.Ok() {
		t.Fatalf("mkdir: %v", st)
	}
	k.close()

	// A new connection, whose first server dies before it answers its own
	// request of the same unique id: an unlink of a name that does not
	// exist, which the kernel sends again to the next.
	mem := handleMemory(t)
	server(t, dir, mem, 1).close()
	k = server(t, dir, mem, 2)
	h := header(rootNode, unique|resentUnique)
	if errno := errnoOf(k.raw.Unlink(cancel(), &h, "nothing")); errno != syscall.ENOENT {
		t.Errorf("an unlink of a name that does not exist answered %v, want ENOENT: the record of the earlier connection's request %d answered it", errno, unique)
	}
}

// A request sent again whose name statefs itself removed after the commit
// (the collector) is applied again as new.
func TestResentEntryWhoseNameIsGoneIsAppliedAgain(t *testing.T) {
	const unique = 40
	dir, mem := filepath.Join(t.TempDir(), "store"), handleMemory(t)
	k := server(t, dir, mem, 1)
	var out fuse.EntryOut
	in := fuse.MkdirIn{InHeader: header(rootNode, unique), Mode: 0o755}
	if st := k.raw.Mkdir(cancel(), &in, "d", &out); !st.Ok() {
		t.Fatalf("mkdir: %v", st)
	}
	first := out.Attr.Ino
	if _, err := k.fs.Remove(index.RootIno, "d"); err != nil {
		t.Fatal(err)
	}
	k.close()

	k = server(t, dir, mem, 2)
	in.InHeader = header(rootNode, unique|resentUnique)
	out = fuse.EntryOut{}
	a := entryAnswer(k.raw.Mkdir(cancel(), &in, "d", &out), &out)
	if a.errno != 0 || a.ino == first {
		t.Fatalf("mkdir sent again after d was removed answered %+v, want a new directory (not inode %d)", a, first)
	}
	if got := k.walk("d"); got.attr.Ino != a.ino {
		t.Errorf("d is inode %d, want %d", got.attr.Ino, a.ino)
	}
}

// With deletes held, an unlink that makes its file pending is recorded as
// any other: sent again, it answers success and the file stays pending,
// the one inode it was.
func TestResentUnlinkMadePendingAnsweredFromItsRecord(t *testing.T) {
	const unique = 40
	held := hold.Options{Enabled: true, Window: time.Hour} // the holder decides nothing while the test runs
	dir, mem := filepath.Join(t.TempDir(), "store"), handleMemory(t)
	k := serveKernel(t, dir, Options{Hold: held}, connection(t, mem, 1))
	chk := k.mkdirAll(subtaskPath + "/chk_5")
	file := k.writeFile(chk.node, "000001.sst", []byte("sst"))
	h := header(chk.node, unique)
	if errno := errnoOf(k.raw.Unlink(cancel(), &h, "000001.sst")); errno != 0 {
		t.Fatalf("unlink: %v", errno)
	}
	k.close()

	k = serveKernel(t, dir, Options{Hold: held}, connection(t, mem, 2))
	h = header(k.walk(subtaskPath+"/chk_5").node, unique|resentUnique)
	if errno := errnoOf(k.raw.Unlink(cancel(), &h, "000001.sst")); errno != 0 {
		t.Errorf("the unlink sent again answered %v, want success", errno)
	}
	if p := k.pending(subtaskPath + "/chk_5/000001.sst"); p == nil || p.Ino != file.attr.Ino {
		t.Errorf("pending after the unlink sent again: %+v, want inode %d", p, file.attr.Ino)
	}
}
