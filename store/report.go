package store

import (
	"cmp"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/manifest"
	"github.com/statefs/statefs/owner"
)

// Reports are the read-only views of a store: Stats (.statefs/stats.json
// and the metrics), Inventory (.statefs/inventory.json and
// .statefs/jobs/), Jobs and SealBacklog (.statefs/jobs.json and
// status.json, `statefs jobs`, the metrics), Inspect and DU (`statefs
// inspect` and `statefs du`, offline or through the control socket). They
// are here, in the store, because Stats counts the chunk, object and
// staging files, which are the store's own.
//
// Each report reads the index in one transaction, so its inodes,
// manifests, reference counts and quarantine marks are of one commit; the
// sizes of chunk, object and staging files are read from the disk
// afterwards, so on a store a daemon is changing they are of a moment
// later. A report that goes through the namespace walks it one way,
// index.Tx.Walk; the index itself is counted by index.Tx.Usage.

// Stats is the store's use of its disk, as .statefs/stats.json shows it.
type Stats struct {
	index.Usage
	ChunkFiles    int     `json:"chunk_files"`
	ChunkBytes    int64   `json:"chunk_bytes"` // on disk, compressed
	ObjectFiles   int     `json:"object_files"`
	ObjectBytes   int64   `json:"object_bytes"`  // on disk
	StagingFiles  int     `json:"staging_files"` // includes files open for writing
	StagingBytes  int64   `json:"staging_bytes"`
	LogicalBytes  int64   `json:"logical_bytes"`  // sealed + staging
	PhysicalBytes int64   `json:"physical_bytes"` // chunks + objects + staging (the index aside)
	SavedRatio    float64 `json:"saved_ratio"`    // logical / physical: dedup and compression together
}

// Stats scans the index, the chunk store and the staging directory. It
// reads every name once: cheap for a person's cat, not for a hot loop.
func (s *Store) Stats() (Stats, error) {
	var st Stats
	err := s.Index.View(func(tx *index.Tx) (err error) {
		st.Usage, err = tx.Usage()
		return err
	})
	if err != nil {
		return st, err
	}
	err = s.chunks.Walk(func(_ cas.Hash, size int64) error {
		st.ChunkFiles++
		st.ChunkBytes += size
		return nil
	})
	if err != nil {
		return st, err
	}
	err = s.objects.Walk(func(_ cas.Hash, size int64) error {
		st.ObjectFiles++
		st.ObjectBytes += size
		return nil
	})
	if err != nil {
		return st, err
	}
	err = s.walkStaging(func(f stagingFile) error {
		if info, err := f.info.Info(); err == nil && f.ok {
			st.StagingFiles++
			st.StagingBytes += info.Size()
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	st.LogicalBytes = st.SealedBytes + st.StagingBytes
	st.PhysicalBytes = st.ChunkBytes + st.ObjectBytes + st.StagingBytes
	if st.PhysicalBytes > 0 {
		st.SavedRatio = float64(st.LogicalBytes) / float64(st.PhysicalBytes)
	}
	return st, nil
}

// SealBacklog is the number of files whose content waits in staging.
func (s *Store) SealBacklog() (int, error) {
	var n int
	err := s.Index.View(func(tx *index.Tx) (err error) {
		n, err = tx.CountStaging()
		return err
	})
	return n, err
}

// Jobs lists the job records of the store; nil when it has none.
func (s *Store) Jobs() ([]*index.Job, error) {
	var jobs []*index.Job
	err := s.Index.View(func(tx *index.Tx) (err error) {
		jobs, err = tx.Jobs()
		return err
	})
	return jobs, err
}

// Executors lists the executor records of the store, ordered by id.
func (s *Store) Executors() ([]*index.Executor, error) {
	var es []*index.Executor
	err := s.Index.View(func(tx *index.Tx) (err error) {
		es, err = tx.Executors()
		return err
	})
	return es, err
}

// Inventory is, per job, which checkpoints of which subtasks the store
// holds: what a scheduler needs to place a restarted task where its local
// state already is.
type Inventory []JobInventory

// JobInventory is what the store holds of one job.
type JobInventory struct {
	Job      string             `json:"job"`
	Subtasks []SubtaskInventory `json:"subtasks"`
}

// SubtaskInventory is what the store holds of one subtask of a job.
type SubtaskInventory struct {
	Executor    string                `json:"executor"`
	Allocation  string                `json:"allocation"`
	Vertex      string                `json:"vertex"`
	Subtask     string                `json:"subtask"`
	Checkpoints []CheckpointInventory `json:"checkpoints"`
}

// CheckpointInventory is one checkpoint directory held locally. Complete
// means Flink's _task_state_snapshot is there: the checkpoint can be
// restored from. A file shared by hard links with other checkpoints counts
// in each of them (once in each).
type CheckpointInventory struct {
	Checkpoint string `json:"checkpoint"`
	Path       string `json:"path"` // of the checkpoint directory, from the mount root
	Files      int    `json:"files"`
	Bytes      int64  `json:"bytes"`
	Complete   bool   `json:"complete"`
}

// snapshotName is the file Flink writes last into a local checkpoint.
const snapshotName = "_task_state_snapshot"

// Inventory walks every job's roots, and then each checkpoint directory
// found in them.
func (s *Store) Inventory() (Inventory, error) {
	inv := Inventory{}
	err := s.Index.View(func(tx *index.Tx) error {
		jobs, err := tx.Jobs()
		if err != nil {
			return err
		}
		for _, j := range jobs {
			roots, err := tx.JobRoots(j.ID)
			if err != nil {
				return err
			}
			subtasks := map[[4]string]*SubtaskInventory{}
			for _, root := range roots {
				path, err := tx.DirPath(root)
				if errors.Is(err, index.ErrNotDir) || errors.Is(err, index.ErrDetached) {
					continue // a file, or held: no checkpoint Flink can use
				}
				if err != nil {
					return err
				}
				if err := s.inventoryRoot(tx, root, path, subtasks); err != nil {
					return err
				}
			}
			if len(subtasks) == 0 {
				continue
			}
			ji := JobInventory{Job: j.ID}
			for _, st := range subtasks {
				slices.SortFunc(st.Checkpoints, func(a, b CheckpointInventory) int {
					return cmp.Or(cmp.Compare(len(a.Checkpoint), len(b.Checkpoint)), cmp.Compare(a.Checkpoint, b.Checkpoint))
				})
				ji.Subtasks = append(ji.Subtasks, *st)
			}
			slices.SortFunc(ji.Subtasks, func(a, b SubtaskInventory) int {
				return cmp.Or(cmp.Compare(a.Vertex, b.Vertex), cmp.Compare(a.Subtask, b.Subtask),
					cmp.Compare(a.Allocation, b.Allocation), cmp.Compare(a.Executor, b.Executor))
			})
			inv = append(inv, ji)
		}
		return nil
	})
	return inv, err
}

// inventoryRoot adds the checkpoint directories at or below directory
// root, at path: those whose owner names a checkpoint, but for those
// inside another.
func (s *Store) inventoryRoot(tx *index.Tx, root uint64, path string, subtasks map[[4]string]*SubtaskInventory) error {
	// checkpoint adds directory n at path if it is a checkpoint directory.
	checkpoint := func(path string, n *index.Inode) (bool, error) {
		o, err := tx.Owner(n.Owner)
		if err != nil || o.Level != owner.LevelCheckpoint {
			return false, err
		}
		key := [4]string{o.Executor, o.Allocation, o.Vertex, o.Subtask}
		st := subtasks[key]
		if st == nil {
			st = &SubtaskInventory{Executor: o.Executor, Allocation: o.Allocation, Vertex: o.Vertex, Subtask: o.Subtask}
			subtasks[key] = st
		}
		chk, err := s.inventoryCheckpoint(tx, n.Ino, o.Checkpoint, path)
		st.Checkpoints = append(st.Checkpoints, chk)
		return true, err
	}
	n, err := tx.Inode(root)
	if err != nil {
		return err
	}
	if found, err := checkpoint(path, n); found || err != nil {
		return err
	}
	inside := "" // the checkpoint directory the walk is in, relative to root
	return tx.Walk(root, func(p string, n *index.Inode) error {
		if !n.IsDir() || inside != "" && strings.HasPrefix(p, inside+"/") {
			return nil
		}
		found, err := checkpoint(path+"/"+p, n)
		if found {
			inside = p
		}
		return err
	})
}

// inventoryCheckpoint counts the files below checkpoint directory dir.
func (s *Store) inventoryCheckpoint(tx *index.Tx, dir uint64, checkpoint, path string) (CheckpointInventory, error) {
	chk := CheckpointInventory{Checkpoint: checkpoint, Path: path}
	err := tx.Walk(dir, func(p string, n *index.Inode) error {
		if !n.IsDir() {
			chk.Files++
			chk.Bytes += s.size(n)
			chk.Complete = chk.Complete || p == snapshotName
		}
		return nil
	})
	return chk, err
}

// size is a file's logical size: its staging file's while it has one.
func (s *Store) size(n *index.Inode) int64 {
	if n.Staging != 0 {
		if st, err := s.StagingStat(n.Staging); err == nil {
			return st.Size()
		}
	}
	return int64(n.Size)
}

// CheckPath refuses a path Inspect cannot take: it must be relative to the
// mount root ("." is the root itself) and go downwards only.
func CheckPath(path string) error {
	switch {
	case path == "":
		return errors.New("the path is empty (. is the mount root)")
	case strings.HasPrefix(path, "/"):
		return fmt.Errorf("%s is absolute: give the path relative to the mount root, such as tm_<resource-id>/localState", path)
	case slices.Contains(strings.Split(path, "/"), ".."):
		return fmt.Errorf("%s has a '..' component: give the path relative to the mount root, downwards only", path)
	}
	return nil
}

// Inspection is what `statefs inspect` shows about one inode.
type Inspection struct {
	Path        string         `json:"path"`
	Ino         uint64         `json:"ino"`
	Type        string         `json:"type"`        // file, directory, symlink, fifo, socket, char-device, block-device
	Mode        string         `json:"mode"`        // permission bits in octal, with setuid, setgid and sticky
	Permissions string         `json:"permissions"` // as ls -l shows them
	Size        uint64         `json:"size"`        // of a staging file: the staging file's size now
	Nlink       uint32         `json:"nlink"`
	Uid         uint32         `json:"uid"`
	Gid         uint32         `json:"gid"`
	Atime       time.Time      `json:"atime"`
	Mtime       time.Time      `json:"mtime"`
	Ctime       time.Time      `json:"ctime"`
	Btime       time.Time      `json:"btime,omitzero"` // creation; the root has none
	Owner       InspectedOwner `json:"owner"`

	Target  string `json:"target,omitempty"`  // a symlink's
	Entries *int   `json:"entries,omitempty"` // a directory's names

	// Content is where a regular file's bytes are: "inline" (in the index),
	// "sealed" (As says how), "staging" (staging file Staging, not sealed
	// yet) or "empty".
	Content string `json:"content,omitempty"`
	// As is how sealed content is kept: "chunks" (Extents, Sharing) or
	// "object" (Object).
	As      string          `json:"as,omitempty"`
	Staging uint64          `json:"staging,omitempty"`
	Extents []ChunkExtent   `json:"extents,omitempty"`
	Sharing *ContentSharing `json:"sharing,omitempty"` // of a file sealed as chunks
	Object  *ObjectContent  `json:"object,omitempty"`  // of a file sealed as an object
}

// ObjectContent is the object a file sealed whole is, with what the store
// knows of it.
type ObjectContent struct {
	Hash string `json:"hash"`
	// Refs are the files whose content is the object, this one included
	// (a file counts once however many names it has).
	Refs      uint64 `json:"refs"`
	DiskBytes int64  `json:"disk_bytes"` // the object file's size
	Missing   bool   `json:"missing,omitempty"`
	// Quarantined is set when a scrub found the object damaged: opens of
	// its files fail with EIO. QuarantinedAt and QuarantinedWhy say when
	// and what the check said.
	Quarantined    bool      `json:"quarantined"`
	QuarantinedAt  time.Time `json:"quarantined_at,omitzero"`
	QuarantinedWhy string    `json:"quarantined_why,omitempty"`
}

// InspectedOwner is owner.Owner as inspect shows it; an unowned inode has level
// "none" and no ids.
type InspectedOwner struct {
	Level      string `json:"level"`
	Executor   string `json:"executor,omitempty"`
	Allocation string `json:"allocation,omitempty"`
	Job        string `json:"job,omitempty"`
	Vertex     string `json:"vertex,omitempty"`
	Subtask    string `json:"subtask,omitempty"`
	Checkpoint string `json:"checkpoint,omitempty"`
}

// ChunkExtent is one extent of a sealed file with what the store knows of
// its chunk.
type ChunkExtent struct {
	Off       uint64 `json:"off"`
	Len       uint32 `json:"len"`
	Chunk     string `json:"chunk"`      // the chunk's hash
	DiskBytes int64  `json:"disk_bytes"` // the chunk file's size (compressed or not)
	Refs      uint64 `json:"refs"`       // extents in the whole store that use the chunk
	Missing   bool   `json:"missing,omitempty"`
}

// ContentSharing sums a sealed file's extents by whether other files use
// their chunks too. UniqueBytes + SharedBytes + HoleBytes is the size.
type ContentSharing struct {
	UniqueBytes     int64 `json:"unique_bytes"`      // in extents whose chunk only this file uses
	UniqueChunks    int   `json:"unique_chunks"`     // distinct
	UniqueDiskBytes int64 `json:"unique_disk_bytes"` // what a sweep frees once the file is gone
	SharedBytes     int64 `json:"shared_bytes"`      // in extents whose chunk other files use too
	SharedChunks    int   `json:"shared_chunks"`
	HoleBytes       int64 `json:"hole_bytes"`
}

// Inspect describes the inode at path, relative to the mount root (see
// CheckPath).
func (s *Store) Inspect(path string) (*Inspection, error) {
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	var in *Inspection
	var m *manifest.Manifest
	err := s.Index.View(func(tx *index.Tx) error {
		n, err := tx.Resolve(path)
		if err != nil {
			return err
		}
		o, err := tx.Owner(n.Owner)
		if err != nil {
			return err
		}
		in = newInspection(path, n, o)
		switch {
		case n.IsDir():
			entries, err := tx.CountEntries(n.Ino)
			in.Entries = &entries
			return err
		case !n.IsRegular():
			return nil
		case n.Staging != 0:
			in.Content, in.Staging = "staging", n.Staging
			return nil
		}
		if m, err = tx.Manifest(n.Ino); err != nil {
			return err
		}
		switch {
		case m.Inline != nil:
			in.Content = "inline"
		case m.Object != nil:
			in.Content, in.As = "sealed", string(AsObject)
			refs, err := tx.ObjectRefs(*m.Object)
			if err != nil {
				return err
			}
			in.Object = &ObjectContent{Hash: m.Object.String(), Refs: refs}
			q, err := tx.Quarantined(*m.Object)
			if err != nil || q == nil {
				return err
			}
			in.Object.Quarantined, in.Object.QuarantinedAt, in.Object.QuarantinedWhy = true, time.Unix(0, q.At).UTC(), q.Why
		case len(m.Extents) == 0 && m.Size == 0:
			in.Content = "empty"
		default:
			in.Content, in.As = "sealed", string(AsChunks)
			in.Extents = make([]ChunkExtent, len(m.Extents))
			for i, e := range m.Extents {
				refs, err := tx.ChunkRefs(e.Hash)
				if err != nil {
					return err
				}
				in.Extents[i] = ChunkExtent{Off: e.Off, Len: e.Len, Chunk: e.Hash.String(), Refs: refs}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if in.Content == "staging" {
		fi, err := s.StagingStat(in.Staging)
		if err != nil {
			return nil, fmt.Errorf("%s: staging file: %w", path, err)
		}
		in.Size = uint64(fi.Size())
	}
	switch in.As {
	case string(AsChunks):
		if err := in.share(s, m); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	case string(AsObject):
		size, err := s.ObjectSize(*m.Object)
		switch {
		case errors.Is(err, cas.ErrNotFound):
			in.Object.Missing = true
		case err != nil:
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		in.Object.DiskBytes = size
	}
	return in, nil
}

func newInspection(path string, n *index.Inode, o owner.Owner) *Inspection {
	typ, mode := fileMode(n.Mode)
	t := func(ns int64) time.Time { return time.Unix(0, ns).UTC() }
	in := &Inspection{
		Path: path, Ino: n.Ino, Type: typ, Mode: fmt.Sprintf("%04o", n.Mode&0o7777), Permissions: mode.String(),
		Size: n.Size, Nlink: n.Nlink, Uid: n.Uid, Gid: n.Gid,
		Atime: t(n.Atime), Mtime: t(n.Mtime), Ctime: t(n.Ctime),
		Owner: InspectedOwner{Level: o.Level.String(), Executor: o.Executor, Allocation: o.Allocation, Job: o.Job,
			Vertex: o.Vertex, Subtask: o.Subtask, Checkpoint: o.Checkpoint},
		Target: n.Target,
	}
	if n.Btime != 0 {
		in.Btime = t(n.Btime)
	}
	return in
}

// fileMode names the file type of a stat(2) mode and converts the mode to
// Go's form, for printing.
func fileMode(m uint32) (string, iofs.FileMode) {
	mode := iofs.FileMode(m & 0o777)
	for _, bit := range []struct {
		sys  uint32
		mode iofs.FileMode
	}{{syscall.S_ISUID, iofs.ModeSetuid}, {syscall.S_ISGID, iofs.ModeSetgid}, {syscall.S_ISVTX, iofs.ModeSticky}} {
		if m&bit.sys != 0 {
			mode |= bit.mode
		}
	}
	switch m & syscall.S_IFMT {
	case syscall.S_IFREG:
		return "file", mode
	case syscall.S_IFDIR:
		return "directory", mode | iofs.ModeDir
	case syscall.S_IFLNK:
		return "symlink", mode | iofs.ModeSymlink
	case syscall.S_IFIFO:
		return "fifo", mode | iofs.ModeNamedPipe
	case syscall.S_IFSOCK:
		return "socket", mode | iofs.ModeSocket
	case syscall.S_IFCHR:
		return "char-device", mode | iofs.ModeDevice | iofs.ModeCharDevice
	case syscall.S_IFBLK:
		return "block-device", mode | iofs.ModeDevice
	}
	return fmt.Sprintf("type-%o", m&syscall.S_IFMT), mode | iofs.ModeIrregular
}

// share fills in the chunks' sizes on disk and the file's Sharing. A chunk
// is unique to the file when all its references are the file's own
// extents (content repeated inside one file is still unique to it).
func (in *Inspection) share(s *Store, m *manifest.Manifest) error {
	own := map[string]uint64{}
	for _, e := range in.Extents {
		own[e.Chunk]++
	}
	sh := &ContentSharing{HoleBytes: int64(m.Size)}
	counted := map[string]bool{}
	for i := range in.Extents {
		e := &in.Extents[i]
		size, err := s.ChunkSize(m.Extents[i].Hash)
		switch {
		case errors.Is(err, cas.ErrNotFound):
			e.Missing = true
		case err != nil:
			return err
		}
		e.DiskBytes = size
		sh.HoleBytes -= int64(e.Len)
		unique := e.Refs <= own[e.Chunk]
		first := !counted[e.Chunk]
		counted[e.Chunk] = true
		if unique {
			sh.UniqueBytes += int64(e.Len)
			if first {
				sh.UniqueChunks++
				sh.UniqueDiskBytes += size
			}
		} else {
			sh.SharedBytes += int64(e.Len)
			if first {
				sh.SharedChunks++
			}
		}
	}
	in.Sharing = sh
	return nil
}

// Grouping is what DU sums by: the job, executor or allocation that owns
// each file.
type Grouping string

const (
	ByJob        Grouping = "job"
	ByExecutor   Grouping = "executor"
	ByAllocation Grouping = "allocation"
)

// ParseGrouping reads a --by value.
func ParseGrouping(s string) (Grouping, error) {
	switch g := Grouping(s); g {
	case ByJob, ByExecutor, ByAllocation:
		return g, nil
	}
	return "", fmt.Errorf("cannot group by %q: job, executor or allocation", s)
}

// The groups of files with no id to group by.
const (
	GroupUnowned = "(unowned)" // no rule matched the path: never collected
	groupNoID    = "(no %s)"   // owned, but at a level above the grouping's (executor state by job)
)

func (g Grouping) group(o owner.Owner) string {
	if o.Level == owner.LevelNone {
		return GroupUnowned
	}
	id := map[Grouping]string{ByJob: o.Job, ByExecutor: o.Executor, ByAllocation: o.Allocation}[g]
	if id == "" {
		return fmt.Sprintf(groupNoID, g)
	}
	return id
}

// DiskUsage is the store's use of its disk summed by owner.
type DiskUsage struct {
	By     Grouping     `json:"by"`
	Groups []GroupUsage `json:"groups"` // by name, the groups in parentheses last
	Total  GroupUsage   `json:"total"`
	// UnreferencedBytes are on disk in chunks no file in the namespace uses:
	// garbage the next sweep removes, or the content of files that were
	// removed while open. Total.PhysicalBytes - staging + UnreferencedBytes
	// + UnreferencedObjectBytes is the size of the chunk and object stores
	// (but for object files no manifest is at all, which a crash can leave
	// and the next sweep removes).
	UnreferencedChunks int   `json:"unreferenced_chunks"`
	UnreferencedBytes  int64 `json:"unreferenced_bytes"`
	// UnreferencedObjects are objects that only files with no name left
	// are (removed while open), and their bytes on disk.
	UnreferencedObjects     int   `json:"unreferenced_objects"`
	UnreferencedObjectBytes int64 `json:"unreferenced_object_bytes"`
	// MissingChunks and MissingObjects are used by files but not on disk
	// (statefs fsck says more); they count no physical bytes.
	MissingChunks  int `json:"missing_chunks,omitempty"`
	MissingObjects int `json:"missing_objects,omitempty"`
}

// GroupUsage sums the regular files of one group, each inode once however
// many names it has.
type GroupUsage struct {
	Group string `json:"group"`
	Files int    `json:"files"`
	// LogicalBytes are the files' sizes (of an unsealed file, its staging
	// file's size).
	LogicalBytes int64 `json:"logical_bytes"`
	// PhysicalBytes are the group's share of the disk: each chunk's size
	// divided evenly among the extents that use it, and each object's
	// among the files that are it (the remainder bytes to the first ones
	// in name order, so that shares add up to the file's size exactly),
	// plus the staging files. Inline content lives in the index and counts
	// nothing.
	PhysicalBytes int64 `json:"physical_bytes"`
}

// stored is a file of the chunk or the object store.
type stored struct {
	hash   cas.Hash
	object bool
}

// DU walks the namespace once and sums its files by owner.
func (s *Store) DU(by Grouping) (*DiskUsage, error) {
	if _, err := ParseGrouping(string(by)); err != nil {
		return nil, err
	}
	type use struct {
		group int
		of    stored
	}
	var (
		groups  []*GroupUsage
		byName  = map[string]int{}
		ofOwner = map[uint64]int{} // owner id -> group
		uses    []use              // every extent and object, in walk order
		users   = map[stored]int64{}
		staging = map[uint64]int{}  // staging id -> group
		seen    = map[uint64]bool{} // inodes counted: a file of several names counts once
	)
	err := s.Index.View(func(tx *index.Tx) error {
		count := func(_ string, n *index.Inode) error {
			if !n.IsRegular() || seen[n.Ino] {
				return nil
			}
			if n.Nlink > 1 {
				seen[n.Ino] = true
			}
			g, ok := ofOwner[n.Owner]
			if !ok {
				o, err := tx.Owner(n.Owner)
				if err != nil {
					return err
				}
				name := by.group(o)
				if g, ok = byName[name]; !ok {
					g = len(groups)
					byName[name] = g
					groups = append(groups, &GroupUsage{Group: name})
				}
				ofOwner[n.Owner] = g
			}
			groups[g].Files++
			if n.Staging != 0 {
				staging[n.Staging] = g
				return nil
			}
			groups[g].LogicalBytes += int64(n.Size)
			m, err := tx.Manifest(n.Ino)
			if err != nil {
				return err
			}
			if m.Object != nil {
				o := stored{*m.Object, true}
				uses = append(uses, use{g, o})
				users[o]++
			}
			for _, e := range m.Extents {
				c := stored{e.Hash, false}
				uses = append(uses, use{g, c})
				users[c]++
			}
			return nil
		}
		// Held state is on the disk too: the attic counts with the tree.
		attic, err := tx.AtticInos()
		if err != nil {
			return err
		}
		for _, top := range append([]uint64{index.RootIno}, attic...) {
			if err := tx.Walk(top, count); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	du := &DiskUsage{By: by}
	sizes := map[stored]int64{}
	err = s.WalkChunks(func(h cas.Hash, size int64) error {
		if users[stored{h, false}] == 0 {
			du.UnreferencedChunks++
			du.UnreferencedBytes += size
		} else {
			sizes[stored{h, false}] = size
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	objects, err := s.Index.UsedObjects()
	if err != nil {
		return nil, err
	}
	for _, h := range objects {
		if users[stored{h, true}] > 0 {
			continue // sized below
		}
		size, err := s.ObjectSize(h)
		switch {
		case errors.Is(err, cas.ErrNotFound):
			continue // freed since, or missing: fsck's business
		case err != nil:
			return nil, err
		}
		du.UnreferencedObjects++
		du.UnreferencedObjectBytes += size
	}
	for c := range users {
		if !c.object {
			if _, ok := sizes[c]; !ok {
				du.MissingChunks++
			}
			continue
		}
		size, err := s.ObjectSize(c.hash)
		switch {
		case errors.Is(err, cas.ErrNotFound):
			du.MissingObjects++
		case err != nil:
			return nil, err
		default:
			sizes[c] = size
		}
	}
	shared := map[stored]int64{} // uses of the file given their share so far
	for _, u := range uses {
		size, k := sizes[u.of], users[u.of]
		share := size / k
		if shared[u.of] < size%k {
			share++
		}
		shared[u.of]++
		groups[u.group].PhysicalBytes += share
	}
	for id, g := range staging {
		fi, err := s.StagingStat(id)
		if errors.Is(err, os.ErrNotExist) {
			continue // sealed since the index was read
		}
		if err != nil {
			return nil, err
		}
		groups[g].LogicalBytes += fi.Size()
		groups[g].PhysicalBytes += fi.Size()
	}
	du.Groups = []GroupUsage{}
	for _, g := range groups {
		du.Groups = append(du.Groups, *g)
		du.Total.Files += g.Files
		du.Total.LogicalBytes += g.LogicalBytes
		du.Total.PhysicalBytes += g.PhysicalBytes
	}
	du.Total.Group = "total"
	slices.SortFunc(du.Groups, func(a, b GroupUsage) int {
		pa, pb := strings.HasPrefix(a.Group, "("), strings.HasPrefix(b.Group, "(")
		if pa != pb {
			if pa {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Group, b.Group)
	})
	return du, nil
}
