package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/statefs/statefs/index"
)

// dirBatch is how many entries' inode records a READDIRPLUS reads in one
// transaction: about what one reply of the kernel's holds.
const dirBatch = 128

// dirHandle is an open directory. Its entries are read at the first
// READDIR or READDIRPLUS; READDIRPLUS then reads the inode records of the
// next dirBatch entries in one transaction, instead of
// a lookup of its own for each entry. Listing n files with their
// attributes (ls -l, RocksDB's and Flink's directory scans, which the
// kernel serves by READDIRPLUS) costs 1 + n/dirBatch transactions, not
// 1 + n. go-fuse calls a handle's methods one at a time.
type dirHandle struct {
	dir     *node
	entries []fuse.DirEntry // nil until the first read or after a rewind
	next    int             // the index in entries of the next to return
	recs    map[string]*index.Inode
}

var (
	_ = (gofs.NodeOpendirHandler)((*node)(nil))
	_ = (gofs.FileReaddirenter)((*dirHandle)(nil))
	_ = (gofs.FileLookuper)((*dirHandle)(nil))
	_ = (gofs.FileSeekdirer)((*dirHandle)(nil))
)

// OpendirHandle lets the kernel keep the listing it reads in its cache
// and serve the next listings from it. It drops the cache when a change
// it makes (create, link, unlink, rename, mkdir, rmdir) touches the
// directory, and, since statefs mounts with AUTO_INVAL_DATA (go-fuse's
// default), when the directory's mtime moved: a change statefs makes on
// its own moves the mtime and drops the attributes the kernel cached.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return &dirHandle{dir: n}, fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if d.entries == nil {
		entries, err := d.dir.entries()
		if err != nil {
			return nil, errno(err)
		}
		for i := range entries {
			entries[i].Off = uint64(i + 1)
		}
		// next stays: a Seekdir may have come first (a listing that a new
		// server of the connection goes on with, resume.go).
		d.entries, d.recs = entries, nil
	}
	if d.next >= len(d.entries) {
		return nil, 0
	}
	d.next++
	return &d.entries[d.next-1], 0
}

// Seekdir goes to the entry after offset off; 0 starts again and reads the
// directory anew, as rewinddir(3) does.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off == 0 {
		d.entries = nil
	}
	d.next = int(off)
	return 0
}

// Lookup answers READDIRPLUS for name, the entry Readdirent returned last,
// from the records read for its batch: the name's inode now, not when the
// listing was read.
func (d *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	rec, ok := d.recs[name]
	if !ok {
		d.readBatch()
		rec = d.recs[name]
	}
	if rec == nil || d.dir.fs.fillAttr(rec, &out.Attr) != nil {
		// The view, a name gone since the listing, or content sealed
		// since the batch was read: a lookup of its own.
		return d.dir.Lookup(ctx, name, out)
	}
	return d.dir.newChild(ctx, rec, out), 0
}

// readBatch reads the names of the directory from the entry returned last
// on, as they are now, up to dirBatch of them, and their inodes' records
// in one transaction.
func (d *dirHandle) readBatch() {
	d.recs = make(map[string]*index.Inode, dirBatch)
	from := ""
	if d.next > 0 {
		from = d.entries[d.next-1].Name
	}
	// A batch that fails to read leaves each name to a lookup of its own.
	names, err := d.dir.fs.store.Index.Listing(d.dir.ino(), from, dirBatch)
	if err != nil {
		return
	}
	_ = d.dir.fs.store.Index.View(func(tx *index.Tx) error {
		for _, e := range names {
			if rec, err := tx.Inode(e.Ino); err == nil {
				d.recs[e.Name] = rec
			}
		}
		return nil
	})
}
