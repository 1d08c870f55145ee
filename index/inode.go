package index

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"time"
)

const (
	modeType = syscall.S_IFMT
	modeDir  = syscall.S_IFDIR
	modeReg  = syscall.S_IFREG
	modeLnk  = syscall.S_IFLNK
	dirSize  = 4096
)

// Inode is the metadata of one file, directory or symlink. Times are
// nanoseconds since the Unix epoch.
type Inode struct {
	Ino    uint64
	Mode   uint32 // file type and permission bits, as stat(2) gives them
	Uid    uint32
	Gid    uint32
	Nlink  uint32 // names that refer to the inode; for a directory 2 + subdirectories
	Rdev   uint32
	Size   uint64 // of sealed content; a staging file has its own size
	Atime  int64
	Mtime  int64
	Ctime  int64
	Btime  int64  // creation: set once, moved by nothing (the collector's cutoff)
	Parent uint64 // a directory's parent (directories have exactly one)
	// Staging, when not zero, names the staging file that holds the content;
	// otherwise a regular file's content is its manifest (none: empty).
	Staging uint64
	Owner   uint64 // the interned owner (Tx.Owner); 0: unowned
	Target  string // a symlink's target
}

// IsDir reports whether the inode is a directory.
func (n *Inode) IsDir() bool { return n.Mode&modeType == modeDir }

// IsRegular reports whether the inode is a regular file.
func (n *Inode) IsRegular() bool { return n.Mode&modeType == modeReg }

// Now is the current time as an inode timestamp.
func Now() int64 { return time.Now().UnixNano() }

const inodeV1 = 1

// inodeFixed is the encoded length of everything but Target.
const inodeFixed = 1 + 5*4 + 8 + 4*8 + 8 + 8 + 8

func (n *Inode) marshal() []byte {
	b := make([]byte, inodeFixed, inodeFixed+len(n.Target))
	b[0] = inodeV1
	p := b[1:]
	for _, v := range []uint32{n.Mode, n.Uid, n.Gid, n.Nlink, n.Rdev} {
		binary.BigEndian.PutUint32(p, v)
		p = p[4:]
	}
	for _, v := range []uint64{n.Size, uint64(n.Atime), uint64(n.Mtime), uint64(n.Ctime), uint64(n.Btime), n.Parent, n.Staging, n.Owner} {
		binary.BigEndian.PutUint64(p, v)
		p = p[8:]
	}
	return append(b, n.Target...)
}

func unmarshalInode(ino uint64, b []byte) (*Inode, error) {
	if len(b) < inodeFixed || b[0] != inodeV1 {
		return nil, fmt.Errorf("inode %d: corrupt record (%d bytes)", ino, len(b))
	}
	n := &Inode{Ino: ino}
	p := b[1:]
	for _, v := range []*uint32{&n.Mode, &n.Uid, &n.Gid, &n.Nlink, &n.Rdev} {
		*v = binary.BigEndian.Uint32(p)
		p = p[4:]
	}
	var at, mt, ct, bt uint64
	for _, v := range []*uint64{&n.Size, &at, &mt, &ct, &bt, &n.Parent, &n.Staging, &n.Owner} {
		*v = binary.BigEndian.Uint64(p)
		p = p[8:]
	}
	n.Atime, n.Mtime, n.Ctime, n.Btime = int64(at), int64(mt), int64(ct), int64(bt)
	n.Target = string(p)
	return n, nil
}

// Inode reads inode ino; ErrNotFound if it does not exist.
func (tx *Tx) Inode(ino uint64) (*Inode, error) {
	b, err := tx.get(inoKey(prefixInode, ino))
	if err != nil {
		return nil, err
	}
	return unmarshalInode(ino, b)
}

// PutInode writes n.
func (tx *Tx) PutInode(n *Inode) error {
	return tx.set(inoKey(prefixInode, n.Ino), n.marshal())
}
