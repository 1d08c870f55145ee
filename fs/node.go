package fs

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/crashpoint"
)

// node is every inode of the tree: directory, file or symlink. Its identity
// is the inode number in the index; all its state lives there or, while it
// is open, in the FS's file map.
type node struct {
	gofs.Inode
	fs *FS
	// warm says that the kernel's page cache holds the inode's current
	// sealed content, so that the next open of it may keep the cache. It
	// lives as long as the kernel knows the inode, as the cache does, and
	// is cleared whenever the content may change (a writable open or an open
	// of staging content, a truncate).
	warm atomic.Bool
}

var (
	_ = (gofs.NodeLookuper)((*node)(nil))
	_ = (gofs.NodeGetattrer)((*node)(nil))
	_ = (gofs.NodeSetattrer)((*node)(nil))
	_ = (gofs.NodeMkdirer)((*node)(nil))
	_ = (gofs.NodeMknoder)((*node)(nil))
	_ = (gofs.NodeCreater)((*node)(nil))
	_ = (gofs.NodeOpener)((*node)(nil))
	_ = (gofs.NodeSymlinker)((*node)(nil))
	_ = (gofs.NodeReadlinker)((*node)(nil))
	_ = (gofs.NodeLinker)((*node)(nil))
	_ = (gofs.NodeUnlinker)((*node)(nil))
	_ = (gofs.NodeRmdirer)((*node)(nil))
	_ = (gofs.NodeRenamer)((*node)(nil))
	_ = (gofs.NodeStatfser)((*node)(nil))
	_ = (gofs.NodeOnAdder)((*node)(nil))
	_ = (gofs.NodeFsyncer)((*node)(nil))
	_ = (gofs.NodeOnForgetter)((*node)(nil))
)

// Fsync of a file syncs its handle; of a directory (fsync of the directory
// RocksDB does after a rename), the index, which holds every entry.
func (n *node) Fsync(ctx context.Context, f gofs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.Fsync(ctx, flags)
	}
	return errno(n.fs.store.Sync())
}

// nameMax is the longest name a directory entry may have.
const nameMax = 255

func (n *node) ino() uint64 { return n.StableAttr().Ino }

func checkName(name string) syscall.Errno {
	if len(name) > nameMax {
		return syscall.ENAMETOOLONG
	}
	return 0
}

// inode reads this node's inode record.
func (n *node) inode() (*index.Inode, error) {
	var rec *index.Inode
	err := n.fs.store.Index.View(func(tx *index.Tx) (err error) {
		rec, err = tx.Inode(n.ino())
		return err
	})
	return rec, err
}

// newChild returns the go-fuse inode for rec, whose attributes are in out,
// creating its node if the kernel does not know it yet.
func (n *node) newChild(ctx context.Context, rec *index.Inode, out *fuse.EntryOut) *gofs.Inode {
	ch := n.NewInode(ctx, &node{fs: n.fs}, gofs.StableAttr{Mode: rec.Mode & syscall.S_IFMT, Ino: rec.Ino})
	n.fs.known(rec.Ino, ch)
	return ch
}

// OnForget runs when the kernel has dropped the inode: one that lost its
// last name can go now.
func (n *node) OnForget() {
	n.fs.forgotten(&n.Inode, n.ino())
}

// newEntry fills out with a freshly made inode's attributes and returns
// its node.
func (n *node) newEntry(ctx context.Context, rec *index.Inode, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if err := n.fs.fillAttr(rec, &out.Attr); err != nil {
		// A seal removed the staging file after rec was read.
		if rec, err = n.fs.loadAttr(rec.Ino, "", &out.Attr); err != nil {
			return nil, errno(err)
		}
	}
	return n.newChild(ctx, rec, out), 0
}

// OnAdd hangs the read-only .statefs directory under the root.
func (n *node) OnAdd(ctx context.Context) {
	if n.ino() == index.RootIno {
		n.AddChild(statusDirName, n.fs.newStatusDir(ctx, &n.Inode), true)
		n.fs.known(index.RootIno, &n.Inode)
	}
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := checkName(name); e != 0 {
		return nil, e
	}
	if n.ino() == index.RootIno && name == statusDirName {
		ch := n.GetChild(statusDirName)
		statusDirAttr(&out.Attr)
		return ch, 0
	}
	rec, err := n.fs.loadAttr(n.ino(), name, &out.Attr)
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, rec, out), 0 // loadAttr filled out already
}

func (n *node) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	_, err := n.fs.loadAttr(n.ino(), "", &out.Attr)
	return errno(err)
}

// newInode builds the record of an inode created now by the caller of ctx,
// owned by the caller's user and group (create adjusts the group to the
// directory's). The mode is used as given: the kernel already applied the
// caller's umask (DESIGN invariant 6). On a full disk (store.Full) no inode
// is made: ENOSPC.
func (n *node) newInode(ctx context.Context, mode uint32) (*index.Inode, error) {
	if n.fs.store.Full() {
		return nil, syscall.ENOSPC
	}
	uid, gid := caller(ctx)
	return n.fs.store.Index.NewInode(mode, uid, gid)
}

// create adds rec under name in this directory in one transaction
// (index.Tx.CreateOwned: its owner follows from its path, by the rules),
// with extra run inside it and the reply to the request ctx serves
// recorded.
func (n *node) create(ctx context.Context, name string, rec *index.Inode, extra func(*index.Tx) error) error {
	owner := n.fs.rules.Owner(n.childPath(name))
	unique := n.fs.request(ctx)
	return n.fs.store.Index.Update(func(tx *index.Tx) error {
		if err := tx.CreateOwned(n.ino(), name, rec, owner); err != nil {
			return err
		}
		if extra != nil {
			if err := extra(tx); err != nil {
				return err
			}
		}
		return recordReply(tx, unique, rec.Ino)
	})
}

// childPath is the path, relative to the mount root, of name in this
// directory.
func (n *node) childPath(name string) string {
	if p := n.Path(nil); p != "" {
		return p + "/" + name
	}
	return name
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := checkName(name); e != 0 {
		return nil, e
	}
	rec, err := n.newInode(ctx, syscall.S_IFDIR|mode&07777)
	if err == nil {
		err = n.create(ctx, name, rec, nil)
	}
	if err != nil {
		return nil, errno(err)
	}
	return n.newEntry(ctx, rec, out)
}

func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := checkName(name); e != 0 {
		return nil, e
	}
	if mode&syscall.S_IFMT == syscall.S_IFDIR || mode&syscall.S_IFMT == syscall.S_IFLNK {
		return nil, syscall.EINVAL
	}
	rec, err := n.newInode(ctx, mode)
	if err == nil {
		rec.Rdev = dev
		err = n.create(ctx, name, rec, nil)
	}
	if err != nil {
		return nil, errno(err)
	}
	return n.newEntry(ctx, rec, out)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := checkName(name); e != 0 {
		return nil, e
	}
	rec, err := n.newInode(ctx, syscall.S_IFLNK|0o777)
	if err == nil {
		rec.Target = target
		rec.Size = uint64(len(target))
		err = n.create(ctx, name, rec, nil)
	}
	if err != nil {
		return nil, errno(err)
	}
	return n.newEntry(ctx, rec, out)
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	rec, err := n.inode()
	if err != nil {
		return nil, errno(err)
	}
	if rec.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		return nil, syscall.EINVAL
	}
	return []byte(rec.Target), 0
}

func (n *node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if e := checkName(name); e != 0 {
		return nil, e
	}
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EPERM
	}
	owner := n.fs.rules.Owner(n.childPath(name))
	unique := n.fs.request(ctx)
	var rec *index.Inode
	err := n.fs.store.Index.Update(func(tx *index.Tx) (err error) {
		if rec, err = tx.LinkOwned(n.ino(), name, t.ino(), owner); err != nil {
			return err
		}
		return recordReply(tx, unique, rec.Ino)
	})
	if errors.Is(err, index.ErrIsDir) {
		return nil, syscall.EPERM
	}
	if err != nil {
		return nil, errno(err)
	}
	return n.newEntry(ctx, rec, out)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if e := checkName(name); e != 0 {
		return e
	}
	if n.ino() == index.RootIno && name == statusDirName {
		return syscall.EPERM
	}
	victim, err := n.removeName(ctx, name, false)
	if err != nil {
		return errno(err)
	}
	n.fs.reapIfUnused(victim)
	return 0
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if e := checkName(name); e != 0 {
		return e
	}
	if n.ino() == index.RootIno && name == statusDirName {
		return syscall.EPERM
	}
	victim, err := n.removeName(ctx, name, true)
	if err != nil {
		return errno(err)
	}
	n.fs.reapIfUnused(victim)
	return 0
}

func (n *node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if e := checkName(newName); e != 0 {
		return e
	}
	np, ok := newParent.(*node)
	if !ok {
		// Every other directory is part of a read-only view (.statefs).
		return syscall.EROFS
	}
	if (n.ino() == index.RootIno && name == statusDirName) || (np.ino() == index.RootIno && newName == statusDirName) {
		return syscall.EPERM
	}
	unique := n.fs.request(ctx)
	var victim *index.Inode
	err := n.fs.store.Index.Update(func(tx *index.Tx) (err error) {
		// State that moves between owners changes owner with it.
		victim, err = tx.RenameOwned(n.ino(), name, np.ino(), newName, flags, n.childPath(name), np.childPath(newName), n.fs.rules)
		if err == nil {
			err = recordReply(tx, unique, 0)
		}
		if err == nil && flags&index.RenameExchange == 0 {
			crashpoint.Hit(crashpoint.RenameBeforeCommit)
		}
		return err
	})
	if err != nil {
		return errno(err)
	}
	crashpoint.Hit(crashpoint.RenameCommitted)
	n.fs.reapIfUnused(victim)
	return 0
}

// entries lists this directory as readdir returns it: ".", "..", the
// .statefs view in the root, then the names in order, as the latest commit
// left them (index.DB.Listing).
func (n *node) entries() ([]fuse.DirEntry, error) {
	rec, err := n.inode()
	if err != nil {
		return nil, err
	}
	names, err := n.fs.store.Index.Listing(n.ino(), "", 0)
	if err != nil {
		return nil, err
	}
	entries := make([]fuse.DirEntry, 0, 3+len(names))
	entries = append(entries,
		fuse.DirEntry{Name: ".", Ino: rec.Ino, Mode: syscall.S_IFDIR},
		fuse.DirEntry{Name: "..", Ino: rec.Parent, Mode: syscall.S_IFDIR})
	if rec.Ino == index.RootIno {
		entries = append(entries, fuse.DirEntry{Name: statusDirName, Ino: statusDirIno, Mode: syscall.S_IFDIR})
	}
	for _, d := range names {
		entries = append(entries, fuse.DirEntry{Name: d.Name, Ino: d.Ino, Mode: d.Mode})
	}
	return entries, nil
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	st, err := n.fs.store.Statfs()
	if err != nil {
		return errno(err)
	}
	out.Blocks, out.Bfree, out.Bavail = st.Blocks, st.Bfree, st.Bavail
	out.Files, out.Ffree = st.Files, st.Ffree
	out.Bsize, out.Frsize = uint32(st.Bsize), uint32(st.Frsize)
	out.NameLen = nameMax
	return 0
}

// fillAttr turns an inode record into the attributes the kernel gets. A
// file whose content is in staging takes size, blocks and times from its
// staging file, which the kernel may have written directly. It fails only
// if that staging file is gone: sealed meanwhile, so the caller reads the
// record again.
func (f *FS) fillAttr(rec *index.Inode, a *fuse.Attr) error {
	a.Ino = rec.Ino
	a.Mode = rec.Mode
	a.Nlink = rec.Nlink
	a.Uid, a.Gid = rec.Uid, rec.Gid
	a.Rdev = rec.Rdev
	a.Size = rec.Size
	a.Blocks = (rec.Size + 511) / 512
	a.Blksize = 4096
	atime, mtime, ctime := rec.Atime, rec.Mtime, rec.Ctime
	if rec.Staging != 0 {
		var st unix.Stat_t
		if err := f.statStaging(rec, &st); err != nil {
			return err
		}
		a.Size, a.Blocks = uint64(st.Size), uint64(st.Blocks)
		// A write changes the staging file's mtime, and the file's ctime
		// with it; the staging file's own ctime also moves when statefs
		// moves content into it or sets its times.
		atime, mtime = st.Atim.Nano(), st.Mtim.Nano()
		ctime = max(ctime, mtime)
	}
	a.Atime, a.Atimensec = splitTime(atime)
	a.Mtime, a.Mtimensec = splitTime(mtime)
	a.Ctime, a.Ctimensec = splitTime(ctime)
	return nil
}

// splitTime turns nanoseconds since the epoch into the seconds (two's
// complement for times before 1970) and the non-negative nanoseconds the
// kernel takes.
func splitTime(ns int64) (uint64, uint32) {
	sec, nsec := ns/1e9, ns%1e9
	if nsec < 0 {
		sec, nsec = sec-1, nsec+1e9
	}
	return uint64(sec), uint32(nsec)
}

// loadAttr reads inode ino (looked up by name in parent, if name is not
// empty) and its attributes, reading again if a seal moved the content
// from staging to chunks in between.
func (f *FS) loadAttr(parent uint64, name string, a *fuse.Attr) (*index.Inode, error) {
	for try := 0; ; try++ {
		var rec *index.Inode
		err := f.store.Index.View(func(tx *index.Tx) error {
			ino := parent
			if name != "" {
				d, err := tx.Lookup(parent, name)
				if err != nil {
					return err
				}
				ino = d.Ino
			}
			var err error
			rec, err = tx.Inode(ino)
			return err
		})
		if err != nil {
			return nil, err
		}
		err = f.fillAttr(rec, a)
		if !errors.Is(err, os.ErrNotExist) || try == 2 {
			return rec, err
		}
	}
}

// statStaging stats the staging file of rec, through its open descriptor
// when the file is open.
func (f *FS) statStaging(rec *index.Inode, st *unix.Stat_t) error {
	if of := f.lookupFile(rec.Ino); of != nil {
		of.mu.RLock()
		defer of.mu.RUnlock()
		if of.staging != nil {
			return unix.Fstat(int(of.staging.Fd()), st)
		}
	}
	return unix.Stat(f.store.StagingPath(rec.Staging), st)
}
