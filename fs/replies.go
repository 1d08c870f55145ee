package fs

import (
	"context"
	"errors"
	"log/slog"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/crashpoint"
)

// Exactly once (DESIGN.md, "Exactly once"; invariant 8). A server that dies leaves the
// kernel every request it read and did not answer, and the kernel sends
// them again to the next server of the connection, the unique id marked
// with resentUnique. One that changes the namespace, an inode's
// attributes or its extended attributes may have committed before the
// server died: applied again, a create with O_EXCL would fail with EEXIST,
// an unlink with ENOENT, a link would add a second name. So each such
// request records a reply in the index transaction that applies it (an
// index.Reply under its unique id), and a request sent again that has a
// record is answered from it, not applied again.

// resentUnique is the bit the kernel sets in the unique id of a request
// it sends again to a new server (FUSE_NOTIFY_RESEND).
const resentUnique = 1 << 63

// replies is the RawFileSystem layer that makes the unique id of each
// mutating request known to the node method that serves it, and answers a
// request sent again from its reply record. Every other request passes
// through untouched.
//
// go-fuse's node bridge gives a node method a context whose Cancel is the
// request's own channel, the same one the layer is called with, and no
// other trace of the request: FS.requests maps the channel to the unique
// id while the request is served (FS.request). A request without a channel
// or a unique id (one the layer makes itself, or a test's) records nothing.
type replies struct {
	fuse.RawFileSystem
	fs *FS
}

var _ = (fuse.RawFileSystem)((*replies)(nil))

// serving makes the unique id of the request of h known, by its channel
// cancel, to the node method that serves it, and returns it: 0 for a
// request that records nothing. served ends that.
func (f *FS) serving(cancel <-chan struct{}, h *fuse.InHeader) uint64 {
	unique := h.Unique &^ resentUnique
	if unique == 0 || cancel == nil || f.opts.ConnectedAt == 0 {
		return 0 // no keeper: no request is sent again
	}
	f.requestsMu.Lock()
	f.requests[cancel] = unique
	f.requestsMu.Unlock()
	return unique
}

func (f *FS) served(cancel <-chan struct{}, unique uint64) {
	if unique == 0 {
		return
	}
	f.requestsMu.Lock()
	delete(f.requests, cancel)
	f.requestsMu.Unlock()
}

// request is the unique id of the kernel's request that ctx serves, for
// its transaction to record the reply under (recordReply); 0 for none.
func (f *FS) request(ctx context.Context) uint64 {
	c, ok := ctx.(*fuse.Context)
	if !ok || c.Cancel == nil {
		return 0
	}
	f.requestsMu.Lock()
	defer f.requestsMu.Unlock()
	return f.requests[c.Cancel]
}

// recordReply records in tx, the transaction that applies the kernel's
// request unique, that the request committed; ino is the inode a request
// that answers an entry answers, 0 for the others. A request of unique id
// 0 (no keeper: FS.serving) records nothing, but reaches the crash point.
func recordReply(tx *index.Tx, unique, ino uint64) error {
	tx.OnCommit(func() { crashpoint.Hit(crashpoint.ReplyCommitted) })
	if unique == 0 {
		return nil
	}
	return tx.PutReply(unique, index.Reply{At: index.Now(), Ino: ino})
}

// recorded is the reply record of the request of h if the kernel sent it
// again and it committed before; nil if it did not. A record written
// before the connection was made is an earlier connection's, whose
// requests were numbered from the start again: it answers nothing.
func (r *replies) recorded(h *fuse.InHeader) (*index.Reply, fuse.Status) {
	if h.Unique&resentUnique == 0 || r.fs.opts.ConnectedAt == 0 {
		return nil, fuse.OK
	}
	var rec *index.Reply
	err := r.fs.store.Index.View(func(tx *index.Tx) (err error) {
		rec, err = tx.Reply(h.Unique &^ resentUnique)
		return err
	})
	if errors.Is(err, index.ErrNotFound) || err == nil && rec.At < r.fs.opts.ConnectedAt {
		return nil, fuse.OK
	}
	if err != nil {
		return nil, fuse.Status(errno(err))
	}
	return rec, fuse.OK
}

// answered answers the request of h, one that answers no entry, if it was
// sent again and committed before: it succeeded.
func (r *replies) answered(h *fuse.InHeader) (fuse.Status, bool) {
	rec, st := r.recorded(h)
	return st, rec != nil || !st.Ok()
}

// answerEntry answers the request of h, which made or linked name in
// directory h.NodeId, if it was sent again and committed before: as a
// lookup of name answers, which the kernel counts as its reply would have
// been. It answers nothing if name no longer names the inode the request
// answered: statefs itself removed it since (the kernel holds the
// directory locked until its request is answered), and the request is
// applied again as new.
func (r *replies) answerEntry(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) (fuse.Status, bool) {
	rec, st := r.recorded(h)
	if rec == nil {
		return st, !st.Ok()
	}
	lookup := *h
	lookup.Unique = 0
	st = r.RawFileSystem.Lookup(cancel, &lookup, name, out)
	if st.Ok() && out.NodeId != 0 && out.Attr.Ino == rec.Ino {
		return fuse.OK, true
	}
	if st.Ok() && out.NodeId != 0 {
		r.RawFileSystem.Forget(out.NodeId, 1)
	}
	slog.Warn("a request sent again committed before, but its name is gone since; applying it again",
		"directory", h.NodeId, "name", name, "inode", rec.Ino)
	*out = fuse.EntryOut{}
	return fuse.OK, false
}

func (r *replies) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if st, ok := r.answerEntry(cancel, &in.InHeader, name, out); ok {
		return st
	}
	defer r.fs.served(cancel, r.fs.serving(cancel, &in.InHeader))
	return r.RawFileSystem.Mknod(cancel, in, name, out)
}

func (r *replies) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	if st, ok := r.answerEntry(cancel, &in.InHeader, name, out); ok {
		return st
	}
	defer r.fs.served(cancel, r.fs.serving(cancel, &in.InHeader))
	return r.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (r *replies) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	if st, ok := r.answerEntry(cancel, h, name, out); ok {
		return st
	}
	defer r.fs.served(cancel, r.fs.serving(cancel, h))
	return r.RawFileSystem.Symlink(cancel, h, target, name, out)
}

func (r *replies) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if st, ok := r.answerEntry(cancel, &in.InHeader, name, out); ok {
		return st
	}
	defer r.fs.served(cancel, r.fs.serving(cancel, &in.InHeader))
	return r.RawFileSystem.Link(cancel, in, name, out)
}

// Create sent again and committed before is answered with the entry and a
// handle, opened as an open of the file with the create's flags would
// open it: the file is the empty one the create made (nobody could write
// it without a handle), so O_TRUNC has nothing to do.
func (r *replies) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if st, ok := r.answerEntry(cancel, &in.InHeader, name, &out.EntryOut); ok {
		if !st.Ok() {
			return st
		}
		open := fuse.OpenIn{InHeader: in.InHeader, Flags: in.Flags &^ (syscall.O_CREAT | syscall.O_EXCL | syscall.O_TRUNC)}
		open.NodeId, open.Unique = out.NodeId, 0
		if st := r.RawFileSystem.Open(cancel, &open, &out.OpenOut); !st.Ok() {
			r.RawFileSystem.Forget(out.NodeId, 1)
			out.EntryOut = fuse.EntryOut{}
			return st
		}
		return fuse.OK
	}
	defer r.fs.served(cancel, r.fs.serving(cancel, &in.InHeader))
	return r.RawFileSystem.Create(cancel, in, name, out)
}

// The requests below answer no entry. A new server's node bridge learns
// names from the index alone, after the commit, so it needs no news of
// one answered from its record.

func (r *replies) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if st, ok := r.answered(h); ok {
		return st
	}
	defer r.fs.served(cancel, r.fs.serving(cancel, h))
	return r.RawFileSystem.Unlink(cancel, h, name)
}

func (r *replies) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if st, ok := r.answered(h); ok {
		return st
	}
	defer r.fs.served(cancel, r.fs.serving(cancel, h))
	return r.RawFileSystem.Rmdir(cancel, h, name)
}

func (r *replies) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if st, ok := r.answered(&in.InHeader); ok {
		return st
	}
	defer r.fs.served(cancel, r.fs.serving(cancel, &in.InHeader))
	return r.RawFileSystem.Rename(cancel, in, oldName, newName)
}

// SetAttr sent again and committed before is answered with the inode's
// attributes now, as a GETATTR answers them.
func (r *replies) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if st, ok := r.answered(&in.InHeader); ok {
		if !st.Ok() {
			return st
		}
		get := fuse.GetAttrIn{InHeader: in.InHeader}
		get.Unique = 0
		if fh, ok := in.GetFh(); ok {
			get.Flags_, get.Fh_ = fuse.FUSE_GETATTR_FH, fh
		}
		return r.RawFileSystem.GetAttr(cancel, &get, out)
	}
	defer r.fs.served(cancel, r.fs.serving(cancel, &in.InHeader))
	return r.RawFileSystem.SetAttr(cancel, in, out)
}

func (r *replies) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	if st, ok := r.answered(&in.InHeader); ok {
		return st
	}
	defer r.fs.served(cancel, r.fs.serving(cancel, &in.InHeader))
	return r.RawFileSystem.SetXAttr(cancel, in, attr, data)
}

func (r *replies) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	if st, ok := r.answered(h); ok {
		return st
	}
	defer r.fs.served(cancel, r.fs.serving(cancel, h))
	return r.RawFileSystem.RemoveXAttr(cancel, h, attr)
}
