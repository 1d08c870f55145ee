package fs

import (
	"context"
	"hash/fnv"
	"slices"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/statefs/statefs/index"
)

// .statefs/jobs/ has one directory per job the store holds state of, each
// with a status.json (the job's record: writes, executors, allocations,
// verdict and evidence, as `statefs jobs --json` prints it) and the job's
// checkpoints arranged allocation → subtask → checkpoint.
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
		entries = append(entries, fuse.DirEntry{Name: j.ID, Ino: viewIno([]string{j.ID}), Mode: syscall.S_IFDIR})
	}
	return gofs.NewListDirStream(entries), 0
}

func (d *jobsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	shortLived(out)
	err := d.fs.store.Index.View(func(tx *index.Tx) error {
		_, err := tx.Job(name)
		return err
	})
	if err != nil {
		return nil, errno(err)
	}
	return newViewDir(ctx, &d.Inode, d.fs, []string{name}, out), 0
}

// viewDir is a directory of a job's view: the job itself
// (.statefs/jobs/<job>/, with status.json), one of its allocations, or
// one of its subtasks, whose entries are symlinks to the checkpoint
// directories the store holds, so ls and cat reach the same files (the
// same inodes) as the executor's tree. Its entries are read anew from the
// index at every lookup.
type viewDir struct {
	gofs.Inode
	readOnly
	fs   *FS
	path []string // job, then allocation, then vertex_subtask
	ino  uint64
}

var (
	_ = (gofs.NodeLookuper)((*viewDir)(nil))
	_ = (gofs.NodeReaddirer)((*viewDir)(nil))
	_ = (gofs.NodeGetattrer)((*viewDir)(nil))
)

// viewIno is the inode number of a view entry: above every number the
// index hands out, stable for the entry's path.
func viewIno(path []string) uint64 {
	h := fnv.New64a()
	for _, p := range path {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return 1<<62 | h.Sum64()&^(3<<62)
}

func newViewDir(ctx context.Context, parent *gofs.Inode, f *FS, path []string, out *fuse.EntryOut) *gofs.Inode {
	ino := viewIno(path)
	readOnlyDirAttr(&out.Attr, ino)
	return parent.NewInode(ctx, &viewDir{fs: f, path: path, ino: ino}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: ino})
}

func (d *viewDir) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	readOnlyDirAttr(&out.Attr, d.ino)
	return 0
}

// viewEntry is one entry of a viewDir: a directory, or a symlink to target.
type viewEntry struct {
	name   string
	target string
}

// entries lists what d holds now, from the store's inventory of its job.
func (d *viewDir) entries() ([]viewEntry, error) {
	inv, err := d.fs.store.Inventory()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var es []viewEntry
	add := func(e viewEntry) {
		if !seen[e.name] {
			seen[e.name] = true
			es = append(es, e)
		}
	}
	// From a subtask's directory (.statefs/jobs/J/aid_A/vtx_V_sti_N) up to
	// the mount root.
	up := strings.Repeat("../", 2+len(d.path))
	for _, j := range inv {
		if j.Job != d.path[0] {
			continue
		}
		for _, st := range j.Subtasks {
			alloc, sub := "aid_"+st.Allocation, "vtx_"+st.Vertex+"_sti_"+st.Subtask
			switch {
			case len(d.path) == 1:
				add(viewEntry{name: alloc})
			case len(d.path) == 2 && d.path[1] == alloc:
				add(viewEntry{name: sub})
			case len(d.path) == 3 && d.path[1] == alloc && d.path[2] == sub:
				for _, c := range st.Checkpoints {
					add(viewEntry{name: "chk_" + c.Checkpoint, target: up + c.Path})
				}
			}
		}
	}
	return es, nil
}

func (d *viewDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	es, err := d.entries()
	if err != nil {
		return nil, errno(err)
	}
	list := []fuse.DirEntry{{Name: ".", Ino: d.ino, Mode: syscall.S_IFDIR}, {Name: "..", Mode: syscall.S_IFDIR}}
	if len(d.path) == 1 {
		list = append(list, fuse.DirEntry{Name: "status.json", Ino: d.ino + 1, Mode: syscall.S_IFREG})
	}
	for _, e := range es {
		mode := uint32(syscall.S_IFDIR)
		if e.target != "" {
			mode = syscall.S_IFLNK
		}
		list = append(list, fuse.DirEntry{Name: e.name, Ino: viewIno(append(slices.Clone(d.path), e.name)), Mode: mode})
	}
	return gofs.NewListDirStream(list), 0
}

func (d *viewDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	shortLived(out)
	if len(d.path) == 1 && name == "status.json" {
		job := d.path[0]
		read := func() (*index.Job, error) {
			var j *index.Job
			err := d.fs.store.Index.View(func(tx *index.Tx) (err error) {
				j, err = tx.Job(job)
				return err
			})
			return j, err
		}
		file := &statusFile{ino: d.ino + 1, render: func() (any, error) { return read() }, changed: func() time.Time {
			j, err := read()
			if err != nil {
				return time.Now()
			}
			return jobChanged(j)
		}}
		file.attr(&out.Attr)
		return d.NewInode(ctx, file, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: d.ino + 1}), 0
	}
	es, err := d.entries()
	if err != nil {
		return nil, errno(err)
	}
	for _, e := range es {
		if e.name != name {
			continue
		}
		path := append(slices.Clone(d.path), name)
		if e.target == "" {
			return newViewDir(ctx, &d.Inode, d.fs, path, out), 0
		}
		ino := viewIno(path)
		out.Ino, out.Mode, out.Nlink, out.Size = ino, syscall.S_IFLNK|0o777, 1, uint64(len(e.target))
		out.SetTimes(&started, &started, &started)
		return d.NewInode(ctx, &gofs.MemSymlink{Data: []byte(e.target), Attr: out.Attr}, gofs.StableAttr{Mode: syscall.S_IFLNK, Ino: ino}), 0
	}
	return nil, syscall.ENOENT
}

// jobChanged is when the record of j last changed: a write of the job's
// state, a verdict that began or was confirmed, the operator's word.
func jobChanged(j *index.Job) time.Time {
	return time.Unix(0, max(j.FirstWrite, j.LastWrite, j.Since, j.CheckedAt, j.OperatorAt))
}
