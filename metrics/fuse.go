package metrics

import (
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// FUSE returns raw with every kernel operation counted and timed, and the
// bytes of reads and writes counted; on a nil *Metrics it returns raw.
//
// go-fuse's own hook, fuse.Server.RecordLatencies, does nothing since
// go-fuse v2 (it is kept only so old callers compile), so the metrics sit
// between the server and the node tree instead: fuse.NewServer(m.FUSE(
// fs.NodeFS(root, opts)), ...). Each call costs two clock reads and one
// histogram observation on an observer looked up in New.
func (m *Metrics) FUSE(raw fuse.RawFileSystem) fuse.RawFileSystem {
	if m == nil {
		return raw
	}
	return &timedFS{RawFileSystem: raw, m: m}
}

// op is a FUSE operation, as the label the metrics give it.
type op int

const (
	opLookup op = iota
	opForget
	opGetattr
	opSetattr
	opMknod
	opMkdir
	opUnlink
	opRmdir
	opRename
	opLink
	opSymlink
	opReadlink
	opAccess
	opGetxattr
	opListxattr
	opSetxattr
	opRemovexattr
	opCreate
	opTmpfile
	opOpen
	opRead
	opLseek
	opGetlk
	opSetlk
	opSetlkw
	opRelease
	opWrite
	opCopyFileRange
	opIoctl
	opFlush
	opFsync
	opFallocate
	opOpendir
	opReaddir
	opReaddirplus
	opReleasedir
	opFsyncdir
	opStatfs
	opStatx
	numOps
)

// opNames are the kernel's names of the operations (FUSE_LOOKUP, ...),
// lower case.
var opNames = [numOps]string{
	opLookup: "lookup", opForget: "forget", opGetattr: "getattr", opSetattr: "setattr",
	opMknod: "mknod", opMkdir: "mkdir", opUnlink: "unlink", opRmdir: "rmdir",
	opRename: "rename", opLink: "link", opSymlink: "symlink", opReadlink: "readlink",
	opAccess: "access", opGetxattr: "getxattr", opListxattr: "listxattr", opSetxattr: "setxattr",
	opRemovexattr: "removexattr", opCreate: "create", opTmpfile: "tmpfile", opOpen: "open",
	opRead: "read", opLseek: "lseek", opGetlk: "getlk", opSetlk: "setlk", opSetlkw: "setlkw",
	opRelease: "release", opWrite: "write", opCopyFileRange: "copy_file_range", opIoctl: "ioctl",
	opFlush: "flush", opFsync: "fsync", opFallocate: "fallocate", opOpendir: "opendir",
	opReaddir: "readdir", opReaddirplus: "readdirplus", opReleasedir: "releasedir",
	opFsyncdir: "fsyncdir", opStatfs: "statfs", opStatx: "statx",
}

// timedFS passes every operation on to the node tree and records it.
// String, SetDebug, Init and OnUnmount pass through the embedded interface
// untimed: they are not requests.
type timedFS struct {
	fuse.RawFileSystem
	m *Metrics
}

var _ fuse.RawFileSystem = (*timedFS)(nil)

// done records one operation that began at start. Callers defer it with
// the start evaluated at the defer, which allocates nothing.
func (t *timedFS) done(o op, start time.Time) {
	t.m.opLatency[o].Observe(time.Since(start).Seconds())
}

func (t *timedFS) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	defer t.done(opLookup, time.Now())
	return t.RawFileSystem.Lookup(cancel, header, name, out)
}

func (t *timedFS) Forget(nodeid, nlookup uint64) {
	defer t.done(opForget, time.Now())
	t.RawFileSystem.Forget(nodeid, nlookup)
}

func (t *timedFS) GetAttr(cancel <-chan struct{}, input *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	defer t.done(opGetattr, time.Now())
	return t.RawFileSystem.GetAttr(cancel, input, out)
}

func (t *timedFS) SetAttr(cancel <-chan struct{}, input *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	defer t.done(opSetattr, time.Now())
	return t.RawFileSystem.SetAttr(cancel, input, out)
}

func (t *timedFS) Mknod(cancel <-chan struct{}, input *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	defer t.done(opMknod, time.Now())
	return t.RawFileSystem.Mknod(cancel, input, name, out)
}

func (t *timedFS) Mkdir(cancel <-chan struct{}, input *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	defer t.done(opMkdir, time.Now())
	return t.RawFileSystem.Mkdir(cancel, input, name, out)
}

func (t *timedFS) Unlink(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	defer t.done(opUnlink, time.Now())
	return t.RawFileSystem.Unlink(cancel, header, name)
}

func (t *timedFS) Rmdir(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	defer t.done(opRmdir, time.Now())
	return t.RawFileSystem.Rmdir(cancel, header, name)
}

func (t *timedFS) Rename(cancel <-chan struct{}, input *fuse.RenameIn, oldName string, newName string) fuse.Status {
	defer t.done(opRename, time.Now())
	return t.RawFileSystem.Rename(cancel, input, oldName, newName)
}

func (t *timedFS) Link(cancel <-chan struct{}, input *fuse.LinkIn, filename string, out *fuse.EntryOut) fuse.Status {
	defer t.done(opLink, time.Now())
	return t.RawFileSystem.Link(cancel, input, filename, out)
}

func (t *timedFS) Symlink(cancel <-chan struct{}, header *fuse.InHeader, pointedTo string, linkName string, out *fuse.EntryOut) fuse.Status {
	defer t.done(opSymlink, time.Now())
	return t.RawFileSystem.Symlink(cancel, header, pointedTo, linkName, out)
}

func (t *timedFS) Readlink(cancel <-chan struct{}, header *fuse.InHeader) ([]byte, fuse.Status) {
	defer t.done(opReadlink, time.Now())
	return t.RawFileSystem.Readlink(cancel, header)
}

func (t *timedFS) Access(cancel <-chan struct{}, input *fuse.AccessIn) fuse.Status {
	defer t.done(opAccess, time.Now())
	return t.RawFileSystem.Access(cancel, input)
}

func (t *timedFS) GetXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	defer t.done(opGetxattr, time.Now())
	return t.RawFileSystem.GetXAttr(cancel, header, attr, dest)
}

func (t *timedFS) ListXAttr(cancel <-chan struct{}, header *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	defer t.done(opListxattr, time.Now())
	return t.RawFileSystem.ListXAttr(cancel, header, dest)
}

func (t *timedFS) SetXAttr(cancel <-chan struct{}, input *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	defer t.done(opSetxattr, time.Now())
	return t.RawFileSystem.SetXAttr(cancel, input, attr, data)
}

func (t *timedFS) RemoveXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string) fuse.Status {
	defer t.done(opRemovexattr, time.Now())
	return t.RawFileSystem.RemoveXAttr(cancel, header, attr)
}

func (t *timedFS) Create(cancel <-chan struct{}, input *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	defer t.done(opCreate, time.Now())
	return t.RawFileSystem.Create(cancel, input, name, out)
}

func (t *timedFS) Tmpfile(cancel <-chan struct{}, input *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	defer t.done(opTmpfile, time.Now())
	return t.RawFileSystem.Tmpfile(cancel, input, out)
}

func (t *timedFS) Open(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	defer t.done(opOpen, time.Now())
	return t.RawFileSystem.Open(cancel, input, out)
}

func (t *timedFS) Read(cancel <-chan struct{}, input *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	defer t.done(opRead, time.Now())
	r, status := t.RawFileSystem.Read(cancel, input, buf)
	if status.Ok() && r != nil {
		t.m.readBytes.Add(float64(r.Size()))
	}
	return r, status
}

func (t *timedFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	defer t.done(opLseek, time.Now())
	return t.RawFileSystem.Lseek(cancel, in, out)
}

func (t *timedFS) GetLk(cancel <-chan struct{}, input *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	defer t.done(opGetlk, time.Now())
	return t.RawFileSystem.GetLk(cancel, input, out)
}

func (t *timedFS) SetLk(cancel <-chan struct{}, input *fuse.LkIn) fuse.Status {
	defer t.done(opSetlk, time.Now())
	return t.RawFileSystem.SetLk(cancel, input)
}

func (t *timedFS) SetLkw(cancel <-chan struct{}, input *fuse.LkIn) fuse.Status {
	defer t.done(opSetlkw, time.Now())
	return t.RawFileSystem.SetLkw(cancel, input)
}

func (t *timedFS) Release(cancel <-chan struct{}, input *fuse.ReleaseIn) {
	defer t.done(opRelease, time.Now())
	t.RawFileSystem.Release(cancel, input)
}

func (t *timedFS) Write(cancel <-chan struct{}, input *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	defer t.done(opWrite, time.Now())
	n, status := t.RawFileSystem.Write(cancel, input, data)
	if status.Ok() {
		t.m.writtenBytes.Add(float64(n))
	}
	return n, status
}

// Writev is how go-fuse hands over every WRITE; it falls back to Write
// only on ENOSYS, which then is the one recorded.
func (t *timedFS) Writev(cancel <-chan struct{}, input *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	start := time.Now()
	n, status := t.RawFileSystem.Writev(cancel, input, data)
	if status == fuse.ENOSYS {
		return n, status
	}
	t.done(opWrite, start)
	if status.Ok() {
		t.m.writtenBytes.Add(float64(n))
	}
	return n, status
}

func (t *timedFS) CopyFileRange(cancel <-chan struct{}, input *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	defer t.done(opCopyFileRange, time.Now())
	return t.RawFileSystem.CopyFileRange(cancel, input)
}

func (t *timedFS) Ioctl(cancel <-chan struct{}, input *fuse.IoctlIn, inbuf []byte, output *fuse.IoctlOut, outbuf []byte) fuse.Status {
	defer t.done(opIoctl, time.Now())
	return t.RawFileSystem.Ioctl(cancel, input, inbuf, output, outbuf)
}

func (t *timedFS) Flush(cancel <-chan struct{}, input *fuse.FlushIn) fuse.Status {
	defer t.done(opFlush, time.Now())
	return t.RawFileSystem.Flush(cancel, input)
}

func (t *timedFS) Fsync(cancel <-chan struct{}, input *fuse.FsyncIn) fuse.Status {
	defer t.done(opFsync, time.Now())
	return t.RawFileSystem.Fsync(cancel, input)
}

func (t *timedFS) Fallocate(cancel <-chan struct{}, input *fuse.FallocateIn) fuse.Status {
	defer t.done(opFallocate, time.Now())
	return t.RawFileSystem.Fallocate(cancel, input)
}

func (t *timedFS) OpenDir(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	defer t.done(opOpendir, time.Now())
	return t.RawFileSystem.OpenDir(cancel, input, out)
}

func (t *timedFS) ReadDir(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	defer t.done(opReaddir, time.Now())
	return t.RawFileSystem.ReadDir(cancel, input, out)
}

func (t *timedFS) ReadDirPlus(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	defer t.done(opReaddirplus, time.Now())
	return t.RawFileSystem.ReadDirPlus(cancel, input, out)
}

func (t *timedFS) ReleaseDir(input *fuse.ReleaseIn) {
	defer t.done(opReleasedir, time.Now())
	t.RawFileSystem.ReleaseDir(input)
}

func (t *timedFS) FsyncDir(cancel <-chan struct{}, input *fuse.FsyncIn) fuse.Status {
	defer t.done(opFsyncdir, time.Now())
	return t.RawFileSystem.FsyncDir(cancel, input)
}

func (t *timedFS) StatFs(cancel <-chan struct{}, input *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	defer t.done(opStatfs, time.Now())
	return t.RawFileSystem.StatFs(cancel, input, out)
}

func (t *timedFS) Statx(cancel <-chan struct{}, input *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	defer t.done(opStatx, time.Now())
	return t.RawFileSystem.Statx(cancel, input, out)
}
