package fs

import (
	"context"
	"encoding/json"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/statefs/statefs/index"
)

// The read-only .statefs directory at the mount root shows the daemon's
// state as JSON files anyone can cat. Its inode numbers lie above any the
// index hands out.
const (
	statusDirName = ".statefs"
	heldDirName   = "held" // .statefs/held: the held trees, read-only
	statusDirIno  = 1<<63 | 1
)

// Status is what .statefs/status.json shows.
type Status struct {
	Version     string `json:"version"` // the daemon's, as statefs --version says it
	Store       string `json:"store"`
	SealBacklog int    `json:"seal_backlog"` // files whose content waits in staging
	OpenFiles   int    `json:"open_files"`   // inodes with open handles or seals running
	// KernelInodes are the inodes the kernel holds a node of the daemon's
	// for; the daemon asks it to drop some past --max-kernel-inodes.
	KernelInodes int  `json:"kernel_inodes"`
	Passthrough  bool `json:"passthrough"` // staging files served by the kernel directly
	DiskFull     bool `json:"disk_full"`   // new content gets ENOSPC until space is freed (store.Full)
}

// Status reports the filesystem's current state.
func (f *FS) Status() (Status, error) {
	s := Status{Version: f.opts.Version, Store: f.store.Dir, Passthrough: f.opts.Passthrough, DiskFull: f.store.Full()}
	backlog, err := f.store.SealBacklog()
	s.SealBacklog = backlog
	f.mu.Lock()
	s.OpenFiles = len(f.files)
	s.KernelInodes = len(f.kernelKnows)
	f.mu.Unlock()
	return s, err
}

type statusDir struct {
	gofs.Inode
	readOnly
}

var _ = (gofs.NodeGetattrer)((*statusDir)(nil))

func (f *FS) newStatusDir(ctx context.Context, parent *gofs.Inode) *gofs.Inode {
	dir := parent.NewPersistentInode(ctx, &statusDir{}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: statusDirIno})
	views := []struct {
		name   string
		render func() (any, error)
	}{
		{"status.json", func() (any, error) { return f.Status() }},
		{"stats.json", func() (any, error) { return f.store.Stats() }},
		{"jobs.json", func() (any, error) { return f.jobs() }},
		{"inventory.json", func() (any, error) { return f.store.Inventory() }},
		{"collected.json", func() (any, error) { return f.collected() }},
	}
	for i, v := range views {
		ino := statusDirIno + 1 + uint64(i)
		file := dir.NewPersistentInode(ctx, &statusFile{ino: ino, render: v.render}, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: ino})
		dir.AddChild(v.name, file, true)
	}
	jobs := dir.NewPersistentInode(ctx, &jobsDir{fs: f}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: jobsDirIno})
	dir.AddChild("jobs", jobs, true)
	held := dir.NewPersistentInode(ctx, &heldDir{fs: f}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: heldDirIno})
	dir.AddChild(heldDirName, held, true)
	return dir
}

// jobs is what jobs.json shows: the store's job records, [] for none.
func (f *FS) jobs() ([]*index.Job, error) {
	jobs, err := f.store.Jobs()
	if jobs == nil {
		jobs = []*index.Job{}
	}
	return jobs, err
}

// collected is what collected.json shows: the collector's latest removals
// the index records (index.MaxCollections at most), oldest first, [] for
// none; statefs jobs --collected prints the same.
func (f *FS) collected() ([]*index.Collection, error) {
	cs := []*index.Collection{}
	err := f.store.Index.View(func(tx *index.Tx) error {
		got, err := tx.Collections()
		cs = append(cs, got...)
		return err
	})
	return cs, err
}

// viewTimeout is how long the kernel may cache the names and attributes of
// the views under .statefs: they follow the index, and statefs does not
// tell the kernel when a job or a hold comes or goes.
const viewTimeout = time.Second

// shortLived has the kernel cache out, a view's name or its absence, for
// viewTimeout only.
func shortLived(out *fuse.EntryOut) {
	out.SetEntryTimeout(viewTimeout)
	out.SetAttrTimeout(viewTimeout)
}

// started is when the daemon started: the times .statefs shows.
var started = time.Now()

func statusDirAttr(a *fuse.Attr) { readOnlyDirAttr(a, statusDirIno) }

func (d *statusDir) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	statusDirAttr(&out.Attr)
	return 0
}

// statusFile is a read-only JSON view, rendered anew at every open.
type statusFile struct {
	gofs.Inode
	readOnly
	ino    uint64
	render func() (any, error)
	// changed is when what the view shows last changed, its mtime (and
	// ctime); nil: now, for a view of the daemon's state as it is.
	changed func() time.Time
}

var (
	_ = (gofs.NodeGetattrer)((*statusFile)(nil))
	_ = (gofs.NodeOpener)((*statusFile)(nil))
	_ = (gofs.NodeReader)((*statusFile)(nil))
)

func (s *statusFile) bytes() ([]byte, error) {
	v, err := s.render()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	return append(b, '\n'), err
}

func (s *statusFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	s.attr(&out.Attr)
	out.SetTimeout(viewTimeout)
	return 0
}

// attr is the view's attributes, which its lookup answers too. The size is
// not rendered here: stats.json scans the store, and ls -l should not.
// Reads are direct, so cat reads past it.
func (s *statusFile) attr(a *fuse.Attr) {
	a.Ino, a.Mode, a.Nlink = s.ino, syscall.S_IFREG|0o444, 1
	now := time.Now()
	t := now
	if s.changed != nil {
		t = s.changed()
	}
	a.SetTimes(&now, &t, &t)
}

// statusSnapshot is an open status.json: the state when it was opened.
type statusSnapshot []byte

func (s *statusFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if writable(flags) {
		return nil, 0, syscall.EROFS
	}
	b, err := s.bytes()
	if err != nil {
		return nil, 0, errno(err)
	}
	return statusSnapshot(b), fuse.FOPEN_DIRECT_IO, 0
}

func (s *statusFile) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	b := fh.(statusSnapshot)
	if off >= int64(len(b)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(b[off:min(int64(len(b)), off+int64(len(dest)))]), 0
}
