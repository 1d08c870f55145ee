// Package owner says who the state at a path belongs to: the executor,
// allocation, job, subtask and checkpoint the path names, and how deep in
// that hierarchy it lies. Flink's directory layout is built in (FlinkRules);
// a rules file describes any other (Rules). An owner depends on the path
// alone: whether its job still lives is for the collector to judge.
package owner

import "strconv"

// Level is how deep in the ownership hierarchy a path lies. Levels are
// ordered: a path's level is never lower than its parent directory's.
type Level uint8

const (
	LevelNone            Level = iota // unowned: never collected automatically
	LevelExecutor                     // tm_<resource-id>
	LevelJob                          // a job's tree, e.g. tmp/job_<id>_op_... (no allocation)
	LevelAllocation                   // aid_<id>
	LevelJobInAllocation              // aid_<a>/jid_<j>
	LevelSubtask                      // vtx_<v>_sti_<n>
	LevelCheckpoint                   // chk_<n>
)

// levelNames are the levels' names, which are also the level keywords of a
// rules file.
var levelNames = [...]string{
	LevelNone:            "none",
	LevelExecutor:        "executor",
	LevelJob:             "job",
	LevelAllocation:      "allocation",
	LevelJobInAllocation: "job-in-allocation",
	LevelSubtask:         "subtask",
	LevelCheckpoint:      "checkpoint",
}

func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return "Level(" + strconv.Itoa(int(l)) + ")"
}

// Owner is who a path's state belongs to; empty fields are unknown at that
// depth. A path with no Job is never collected under a job's verdict
// (DESIGN invariant 4). The strings are substrings of the path Owner was
// asked about.
type Owner struct {
	Executor   string // resource id from tm_<resource-id>
	Allocation string // from aid_<id>
	Job        string // from jid_<id>, tmp/job_<id>_op_<...>, or tmp/<id>/ (Flink 2's asynchronous ForSt)
	Vertex     string // from vtx_<v>_sti_<n>
	Subtask    string // the n of sti_<n>
	Checkpoint string // from chk_<n>
	Level      Level  // the deepest level the path reached
}
