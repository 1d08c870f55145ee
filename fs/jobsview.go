package fs

import (
	"context"
	"hash/fnv"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/statefs/statefs/index"
)

// .statefs/jobs/ has one directory per job the store holds state of, each
// with a status.json: the job's record (writes, executors, allocations,
// verdict and evidence), as `statefs jobs --json` prints it.
const jobsDirIno = statusDirIno + 100

type jobsDir struct {
	gofs.Inode
	readOnly
	fs *FS
}

var (
	_ = (gofs.NodeLookuper)((*jobsDir)(nil))
	_ = (gofs.NodeReaddirer)((*jobsDir)(nil))
	_ = (gofs.NodeGetattrer)((*jobsDir)(nil))
)

// jobIno is the inode number of job's directory in the view: above every
// number the index hands out, stable for a job id; its status.json is the
// next one.
func jobIno(job string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(job))
	return 1<<62 | h.Sum64()&^(3<<62)&^1
}

func readOnlyDirAttr(a *fuse.Attr, ino uint64) {
	a.Ino, a.Mode, a.Nlink = ino, syscall.S_IFDIR|0o555, 2
	a.SetTimes(&started, &started, &started)
}

func (d *jobsDir) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	readOnlyDirAttr(&out.Attr, jobsDirIno)
	return 0
}

func (d *jobsDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	jobs, err := d.fs.jobs()
	if err != nil {
		return nil, errno(err)
	}
	entries := []fuse.DirEntry{{Name: ".", Ino: jobsDirIno, Mode: syscall.S_IFDIR}, {Name: "..", Ino: statusDirIno, Mode: syscall.S_IFDIR}}
	for _, j := range jobs {
		entries = append(entries, fuse.DirEntry{Name: j.ID, Ino: jobIno(j.ID), Mode: syscall.S_IFDIR})
	}
	return gofs.NewListDirStream(entries), 0
}

func (d *jobsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	var job *index.Job
	err := d.fs.store.Index.View(func(tx *index.Tx) (err error) {
		job, err = tx.Job(name)
		return err
	})
	if err != nil {
		return nil, errno(err)
	}
	ino := jobIno(job.ID)
	readOnlyDirAttr(&out.Attr, ino)
	dir := d.NewInode(ctx, &jobDir{ino: ino}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: ino})
	id := job.ID
	status := dir.NewInode(ctx, &statusFile{ino: ino + 1, render: func() (any, error) {
		var j *index.Job
		return j, d.fs.store.Index.View(func(tx *index.Tx) (err error) {
			j, err = tx.Job(id)
			return err
		})
	}}, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: ino + 1})
	dir.AddChild("status.json", status, true)
	return dir, 0
}

// jobDir is one job's directory in the view.
type jobDir struct {
	gofs.Inode
	readOnly
	ino uint64
}

var _ = (gofs.NodeGetattrer)((*jobDir)(nil))

func (d *jobDir) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	readOnlyDirAttr(&out.Attr, d.ino)
	return 0
}
