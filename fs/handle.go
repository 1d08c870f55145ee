package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/crashpoint"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/owner"
	"github.com/statefs/statefs/store"
)

// handle is one open file description. On staging content it reads and
// writes the staging file (or lets the kernel do it, with passthrough); on
// sealed content it reads its object (or lets the kernel do it) or
// verified chunks.
type handle struct {
	fs      *FS
	inode   *gofs.Inode // for the path in log lines
	st      *file
	staging *os.File // nil for a handle on sealed content
	// backing is the file the kernel reads (and writes) itself when
	// passthrough is set: the staging file, or the object.
	backing     *os.File
	passthrough bool
	writable    bool
	staleAttrs  bool // opening it cleared setuid/setgid or unsealed the file: the kernel's attributes are stale
}

var (
	_ = (gofs.FileReader)((*handle)(nil))
	_ = (gofs.FileWriter)((*handle)(nil))
	_ = (gofs.FilePassthroughFder)((*handle)(nil))
	_ = (gofs.FileFsyncer)((*handle)(nil))
	_ = (gofs.FileReleaser)((*handle)(nil))
	_ = (gofs.FileAllocater)((*handle)(nil))
)

func writable(flags uint32) bool { return flags&syscall.O_ACCMODE != syscall.O_RDONLY }

func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if n.StableAttr().Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, 0, syscall.EINVAL
	}
	if writable(flags) && n.fs.store.Full() {
		return nil, 0, syscall.ENOSPC
	}
	st := n.fs.acquire(n.ino())
	uid, _ := caller(ctx)
	h, fuseFlags, err := n.fs.open(st, &n.warm, flags, uid != 0)
	if err != nil {
		n.fs.release(st)
		var oe *store.ObjectError
		if errors.As(err, &oe) {
			slog.Error("cannot open sealed content", "file", n.Path(nil), "inode", oe.Ino, "object", oe.Hash.String(), "err", oe.Err)
		}
		return nil, 0, errno(err)
	}
	h.inode = &n.Inode
	if h.staleAttrs {
		// The kernel cached the mode with the bits, or the blocks the
		// sealed content took. Before the reply, so that the opener's
		// next stat asks: an attribute invalidation takes no page or
		// inode lock the open may hold.
		n.NotifyContent(-1, 0)
	}
	return h, fuseFlags | noFlush, 0
}

// noFlush spares every close(2) a FLUSH request (FOPEN_NOFLUSH): a close
// has nothing to write back or report here. Content reaches the staging
// file as it is written, durability is fsync's, and POSIX locks are the
// kernel's own.
const noFlush = fuse.FOPEN_NOFLUSH

// privBits are the mode bits a write by an unprivileged caller clears, as
// on a local filesystem: set-user-ID, and set-group-ID where it means that
// (with group execute).
func privBits(mode uint32) uint32 {
	bits := mode & syscall.S_ISUID
	if mode&(syscall.S_ISGID|syscall.S_IXGRP) == syscall.S_ISGID|syscall.S_IXGRP {
		bits |= syscall.S_ISGID
	}
	return bits
}

// open makes a handle on st's inode. A writer, or any opener of staging
// content, gets the staging file; a reader of sealed content gets the
// manifest, and the kernel keeps its page cache if warm says it holds that
// content (warm is the node's; nil for a view that never keeps the cache).
//
// An unprivileged writer (unprivileged: the caller is not root) clears the
// setuid and setgid bits at open rather than at its first write, as ext4
// does: writes through passthrough never reach the daemon, and go-fuse does
// not pass on the kernel's FUSE_WRITE_KILL_SUIDGID.
func (f *FS) open(st *file, warm *atomic.Bool, flags uint32, unprivileged bool) (*handle, uint32, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var rec *index.Inode
	err := f.store.Index.View(func(tx *index.Tx) (err error) {
		rec, err = tx.Inode(st.ino)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	killed := false
	if writable(flags) && unprivileged && privBits(rec.Mode) != 0 {
		err := f.store.Index.Update(func(tx *index.Tx) (err error) {
			if rec, err = tx.Inode(st.ino); err != nil {
				return err
			}
			rec.Mode &^= privBits(rec.Mode)
			rec.Ctime = index.Now()
			return tx.PutInode(rec)
		})
		if err != nil {
			return nil, 0, err
		}
		killed = true
	}
	if writable(flags) || rec.Staging != 0 {
		if warm != nil {
			warm.Store(false)
		}
		trunc := writable(flags) && flags&syscall.O_TRUNC != 0
		unsealed := rec.Staging == 0
		if err := f.openStaging(st, rec, trunc); err != nil {
			return nil, 0, err
		}
		if writable(flags) {
			st.gen++
		}
		h := &handle{fs: f, st: st, staging: st.staging, backing: st.staging, writable: writable(flags),
			passthrough: f.opts.Passthrough && st.cached == 0, staleAttrs: killed || unsealed}
		st.opens++
		if !h.passthrough {
			st.cached++
		}
		return h, 0, nil
	}
	if st.manifest == nil {
		if st.manifest, err = f.manifest(rec.Ino); err != nil {
			return nil, 0, err
		}
	}
	if st.manifest.Object != nil {
		if st.object == nil {
			if st.object, err = f.openObject(st, st.manifest); err != nil {
				return nil, 0, err
			}
		}
		// The kernel reads the object itself, as it reads a staging
		// file: the daemon is not in the path of a sealed file's reads.
		if f.opts.Passthrough && !f.opts.VerifyReads && st.cached == 0 {
			st.opens++
			st.objectOpens++
			return &handle{fs: f, st: st, backing: st.object.File, passthrough: true}, 0, nil
		}
	}
	var fuseFlags uint32
	if warm != nil && warm.Swap(true) {
		fuseFlags = fuse.FOPEN_KEEP_CACHE
	}
	st.opens++
	st.cached++
	return &handle{fs: f, st: st}, fuseFlags, nil
}

func (f *FS) manifest(ino uint64) (*manifest.Manifest, error) {
	var m *manifest.Manifest
	err := f.store.Index.View(func(tx *index.Tx) (err error) {
		m, err = tx.Manifest(ino)
		return err
	})
	return m, err
}

// openStaging makes st's inode content a staging file that is open in
// st.staging: the existing one, a new empty one (trunc), or a copy of the
// sealed content. Called with st.mu held.
func (f *FS) openStaging(st *file, rec *index.Inode, trunc bool) error {
	if rec.Staging != 0 {
		if st.staging == nil {
			sf, err := f.store.OpenStaging(rec.Staging)
			if err != nil {
				return err
			}
			st.staging = sf
		}
		if trunc {
			st.gen++
			return st.staging.Truncate(0)
		}
		return nil
	}
	size := rec.Size
	if trunc {
		size = 0
	}
	return f.unseal(st, rec, size, true)
}

// unseal moves the sealed content of st's inode, cut or zero-extended to
// size, into a new staging file and makes that the content in the index;
// the file stays open in st.staging if keepOpen. Called with st.mu held.
func (f *FS) unseal(st *file, rec *index.Inode, size uint64, keepOpen bool) error {
	var id uint64
	var sf *os.File
	var err error
	adopted := st.objectOpens > 0
	if adopted {
		// Every open from now on shares the passthrough readers' backing
		// file, the object's inode: it becomes the staging file.
		id, sf, err = f.adopt(st, rec)
	} else {
		id, sf, err = f.store.Unseal(rec, size)
	}
	if err != nil {
		return err
	}
	crashpoint.Hit(crashpoint.UnsealBeforeCommit)
	err = f.store.Index.Update(func(tx *index.Tx) error {
		n, err := tx.Inode(rec.Ino)
		if err != nil {
			return err
		}
		_, err = tx.SetStaging(n, id)
		return err
	})
	if err != nil {
		sf.Close()
		f.store.RemoveStaging(id)
		return err
	}
	if adopted {
		if err := sf.Truncate(int64(size)); err != nil {
			slog.Error("cutting an unsealed file to its size", "inode", rec.Ino, "size", size, "err", err)
		}
	}
	st.manifest = nil
	st.stagingNamed.Store(false)
	st.gen++
	if keepOpen {
		st.staging = sf
	} else {
		sf.Close()
	}
	return nil
}

// adopt makes the inode of st's open object the staging file of st's
// inode (store.Adopt), unless another file that is the same object has it
// open: its readers would see this file's writes (EBUSY then). Called
// with st.mu held.
func (f *FS) adopt(st *file, rec *index.Inode) (uint64, *os.File, error) {
	f.objectsMu.Lock()
	defer f.objectsMu.Unlock()
	h := st.object.Hash
	if f.objectUsers[h] > 1 {
		return 0, nil, fmt.Errorf("another file with the same content is open: %w", syscall.EBUSY)
	}
	id, sf, err := f.store.Adopt(rec, st.object)
	if err != nil {
		return 0, nil, err
	}
	f.dropObjectUser(h)
	st.adopted = true
	return id, sf, nil
}

// openObject opens the object that is the content of st's inode (manifest
// m) and counts st among its users. Opening by name and counting happen
// under objectsMu, as adopt's check and detaching of a name do.
func (f *FS) openObject(st *file, m *manifest.Manifest) (*store.ObjectFile, error) {
	f.objectsMu.Lock()
	defer f.objectsMu.Unlock()
	o, err := f.store.OpenObject(st.ino, m, f.opts.VerifyReads)
	if err == nil {
		f.objectUsers[o.Hash]++
	}
	return o, err
}

// closeObject closes st's open object, which its last handle no longer
// needs.
func (f *FS) closeObject(st *file) {
	if !st.adopted {
		f.objectsMu.Lock()
		f.dropObjectUser(st.object.Hash)
		f.objectsMu.Unlock()
	}
	st.object.Close()
	st.object, st.adopted = nil, false
}

// dropObjectUser ends one file's use of object h; objectsMu is held.
func (f *FS) dropObjectUser(h cas.Hash) {
	if f.objectUsers[h]--; f.objectUsers[h] <= 0 {
		delete(f.objectUsers, h)
	}
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	if e := checkName(name); e != 0 {
		return nil, nil, 0, e
	}
	rec, err := n.newInode(ctx, syscall.S_IFREG|mode&07777)
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	id, sf, err := n.fs.store.NewStaging()
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	err = n.create(name, rec, func(tx *index.Tx) error {
		_, err := tx.SetStaging(rec, id)
		return err
	})
	if err != nil {
		sf.Close()
		n.fs.store.RemoveStaging(id)
		return nil, nil, 0, errno(err)
	}
	st := n.fs.acquire(rec.Ino)
	st.mu.Lock()
	st.staging = sf
	st.opens++
	st.gen++
	h := &handle{fs: n.fs, st: st, staging: sf, backing: sf, writable: true, passthrough: n.fs.opts.Passthrough}
	if !h.passthrough {
		st.cached++
	}
	// h.inode is set below, once the node exists.
	st.mu.Unlock()
	ch, e := n.newEntry(ctx, rec, out)
	if e != 0 {
		h.Release(ctx)
		return nil, nil, 0, e
	}
	h.inode = ch
	return ch, h, noFlush, 0
}

func (h *handle) PassthroughFd() (int, bool) {
	if !h.passthrough {
		return 0, false
	}
	return int(h.backing.Fd()), true
}

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.st.mu.RLock()
	defer h.st.mu.RUnlock()
	// A handle opened on sealed content reads the staging file once a writer
	// has made one: it must see the writer's bytes.
	if sf := h.st.staging; sf != nil {
		n, err := sf.ReadAt(dest, off)
		if err != nil && n == 0 && !isEOF(err) {
			return nil, errno(err)
		}
		return fuse.ReadResultData(dest[:n]), 0
	}
	var n int
	var err error
	if o := h.st.object; o != nil {
		n, err = o.ReadAt(dest, off)
	} else {
		n, err = h.fs.store.ReadAt(h.st.ino, h.st.manifest, dest, off)
	}
	if err != nil {
		var ce *store.ChunkError
		var oe *store.ObjectError
		if errors.As(err, &ce) {
			slog.Error("unreadable content", "file", h.inode.Path(nil), "inode", ce.Ino, "offset", ce.Off, "chunk", ce.Hash.String(), "err", ce.Err)
		} else if errors.As(err, &oe) {
			slog.Error("unreadable content", "file", h.inode.Path(nil), "inode", oe.Ino, "offset", off, "object", oe.Hash.String(), "err", oe.Err)
		} else {
			slog.Error("unreadable content", "file", h.inode.Path(nil), "err", err)
		}
		return nil, errno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if h.staging == nil {
		return 0, syscall.EBADF
	}
	if h.fs.store.Full() {
		return 0, syscall.ENOSPC // writes through passthrough never get here
	}
	n, err := h.staging.WriteAt(data, off)
	if err != nil {
		return uint32(n), errno(err)
	}
	return uint32(n), 0
}

// Fsync makes the file's content and every committed index change durable
// (DESIGN invariant 1): the staging file's bytes, its name in the staging
// directory, and the index. The three are synced at once: each waits for
// the disk, and on a journaling file system syncs in flight together share
// one journal commit.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if h.staging == nil {
		return errno(h.fs.store.Sync())
	}
	var g errgroup.Group
	g.Go(h.fs.store.Sync)
	if !h.st.stagingNamed.Load() {
		g.Go(func() error {
			if err := h.fs.store.SyncStagingName(h.staging); err != nil {
				return err
			}
			h.st.stagingNamed.Store(true)
			return nil
		})
	}
	var err error
	if flags&fsyncDataOnly != 0 {
		err = unix.Fdatasync(int(h.staging.Fd()))
	} else {
		err = h.staging.Sync()
	}
	return errno(errors.Join(err, g.Wait()))
}

func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if h.staging == nil {
		return syscall.EBADF
	}
	if mode&unix.FALLOC_FL_PUNCH_HOLE == 0 && h.fs.store.Full() {
		return syscall.ENOSPC
	}
	return errno(unix.Fallocate(int(h.staging.Fd()), mode, int64(off), int64(size)))
}

// Release closes the handle. The last one closes the staging file and
// schedules the seal, or reaps an inode that lost its last name.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	st := h.st
	st.mu.Lock()
	st.opens--
	switch {
	case h.passthrough && h.staging == nil: // on the object
		st.objectOpens--
	case !h.passthrough:
		st.cached--
	}
	if st.opens == 0 && st.staging != nil {
		st.staging.Close()
		st.staging = nil
	}
	if st.opens == 0 && st.object != nil {
		h.fs.closeObject(st)
	}
	last := st.opens == 0
	st.mu.Unlock()
	if h.writable || last {
		h.fs.afterClose(st.ino, h.writable, last)
	}
	h.fs.release(st)
	crashpoint.Hit(crashpoint.HandleReleased)
	return 0
}

// afterClose runs when a handle on inode ino closed: a writer's close
// notes the write in the inode's job, if it has one (when a writer closes,
// not on every write: the write path stays the kernel's); the last close
// reaps an inode that has no name left, or schedules the seal of one whose
// content is in staging.
func (f *FS) afterClose(ino uint64, wrote, last bool) {
	if !wrote && !last {
		return // a reader while others have the file open: nothing to do
	}
	var rec *index.Inode
	var o owner.Owner
	err := f.store.Index.View(func(tx *index.Tx) (err error) {
		if rec, err = tx.Inode(ino); err != nil || !wrote {
			return err
		}
		o, err = tx.Owner(rec.Owner)
		return err
	})
	if err == nil && wrote {
		err = f.store.Index.NoteWrite(o, index.Now())
	}
	if err != nil {
		if !errors.Is(err, index.ErrNotFound) {
			slog.Error("after closing a file", "inode", ino, "err", err)
		}
		if rec == nil {
			return
		}
	}
	switch {
	case !last:
	case rec.Nlink == 0:
		f.reapIfUnused(rec)
	case rec.Staging != 0:
		f.scheduleSeal(ino)
	}
}

// reapIfUnused deletes an inode that lost its last name, unless a handle
// still has it open or the kernel still knows it (a process may have looked
// it up and be about to open it, as on a local filesystem); the last
// Release or the kernel's FORGET reaps it then. After a crash, Open of the
// store reaps what is left (index orphans).
func (f *FS) reapIfUnused(rec *index.Inode) { f.reap(rec, true) }

// reap deletes inode rec, which has no name left, unless a handle has it
// open or, with kernelKnows set, the kernel still holds it. It reports
// whether the inode is gone.
func (f *FS) reap(rec *index.Inode, kernelKnows bool) bool {
	if rec == nil || rec.Nlink > 0 {
		return false
	}
	st := f.acquire(rec.Ino)
	defer f.release(st)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.opens > 0 || kernelKnows && f.reapAtForget(rec.Ino) {
		return false
	}
	err := f.store.Index.Update(func(tx *index.Tx) error {
		// Before the staging file goes.
		tx.OnCommit(func() { crashpoint.Hit(crashpoint.ReapCommitted) })
		_, err := tx.Reap(rec.Ino)
		return err
	})
	if err != nil {
		errno(err)
		return false
	}
	st.gen++
	return true
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// fsyncDataOnly is FUSE_FSYNC_FDATASYNC: the caller asked for fdatasync.
const fsyncDataOnly = 1
