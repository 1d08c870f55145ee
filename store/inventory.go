package store

import (
	"cmp"
	"errors"
	"slices"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/owner"
)

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
// in each of them.
type CheckpointInventory struct {
	Checkpoint string `json:"checkpoint"`
	Path       string `json:"path"` // of the checkpoint directory, from the mount root
	Files      int    `json:"files"`
	Bytes      int64  `json:"bytes"`
	Complete   bool   `json:"complete"`
}

// snapshotName is the file Flink writes last into a local checkpoint.
const snapshotName = "_task_state_snapshot"

// Inventory walks every job's roots once.
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
				if err := s.inventoryDir(tx, root, path, subtasks, nil); err != nil {
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

// inventoryDir adds what directory dir holds: a checkpoint directory (one
// whose owner names a checkpoint) starts an entry, and every file name
// below it counts in that entry (chk, when not nil).
func (s *Store) inventoryDir(tx *index.Tx, dir uint64, path string, subtasks map[[4]string]*SubtaskInventory, chk *CheckpointInventory) error {
	top := false // dir is the checkpoint directory itself
	if chk == nil {
		n, err := tx.Inode(dir)
		if err != nil {
			return err
		}
		o, err := tx.Owner(n.Owner)
		if err != nil {
			return err
		}
		if o.Level == owner.LevelCheckpoint {
			key := [4]string{o.Executor, o.Allocation, o.Vertex, o.Subtask}
			st := subtasks[key]
			if st == nil {
				st = &SubtaskInventory{Executor: o.Executor, Allocation: o.Allocation, Vertex: o.Vertex, Subtask: o.Subtask}
				subtasks[key] = st
			}
			chk, top = &CheckpointInventory{Checkpoint: o.Checkpoint, Path: path}, true
			defer func() { st.Checkpoints = append(st.Checkpoints, *chk) }()
		}
	}
	var entries []index.Dirent
	if err := tx.ReadDir(dir, func(d index.Dirent) bool { entries = append(entries, d); return true }); err != nil {
		return err
	}
	for _, d := range entries {
		child, err := tx.Inode(d.Ino)
		if err != nil {
			return err
		}
		switch {
		case child.IsDir():
			if err := s.inventoryDir(tx, d.Ino, path+"/"+d.Name, subtasks, chk); err != nil {
				return err
			}
		case chk != nil:
			chk.Files++
			chk.Bytes += s.size(child)
			chk.Complete = chk.Complete || top && d.Name == snapshotName
		}
	}
	return nil
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
