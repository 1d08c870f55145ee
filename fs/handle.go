package fs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/crashpoint"
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

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// fsyncDataOnly is FUSE_FSYNC_FDATASYNC: the caller asked for fdatasync.
const fsyncDataOnly = 1
