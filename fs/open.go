package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/crashpoint"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/store"
)

// writable reports whether an open with flags may write: any access mode
// but O_RDONLY.
func writable(flags uint32) bool { return flags&syscall.O_ACCMODE != syscall.O_RDONLY }

// noFlush spares every close(2) a FLUSH request (FOPEN_NOFLUSH): a close
// has nothing to write back or report here. Content reaches the staging
// file as it is written, durability is fsync's, and POSIX locks are the
// kernel's own.
const noFlush = fuse.FOPEN_NOFLUSH

// Open opens a regular file (FS.open). The opener is unprivileged unless
// it is root: the daemon cannot see a caller's capabilities.
func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if n.StableAttr().Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, 0, syscall.EINVAL
	}
	if writable(flags) && flags&reopening == 0 && n.fs.store.Full() {
		return nil, 0, syscall.ENOSPC
	}
	cached := flags&reopenCached != 0
	flags &^= reopenCached | reopening
	st := n.fs.acquire(n.ino())
	uid, _ := caller(ctx)
	h, fuseFlags, err := n.fs.open(st, &n.warm, flags, uid != 0, cached)
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

// Create makes a regular file whose content is a new, empty staging file,
// and opens it for writing.
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
	err = n.create(ctx, name, rec, func(tx *index.Tx) error {
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
// A cached open is served through the kernel's page cache, never by
// passthrough: one a takeover makes again of a handle the kernel was given
// without a backing id (resume.go).
//
// An unprivileged writer (unprivileged: the caller is not root) clears the
// setuid and setgid bits at open rather than at its first write, as ext4
// does: writes through passthrough never reach the daemon, and go-fuse does
// not pass on the kernel's FUSE_WRITE_KILL_SUIDGID.
func (f *FS) open(st *file, warm *atomic.Bool, flags uint32, unprivileged, cached bool) (*handle, uint32, error) {
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
			passthrough: f.opts.Passthrough && st.cached == 0 && !cached, staleAttrs: killed || unsealed}
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
		if f.opts.Passthrough && !f.opts.VerifyReads && st.cached == 0 && !cached {
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
