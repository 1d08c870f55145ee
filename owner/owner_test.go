package owner_test

import (
	"testing"

	"github.com/statefs/statefs/owner"
)

func TestLevelString(t *testing.T) {
	for l, want := range map[owner.Level]string{
		owner.LevelNone:            "none",
		owner.LevelExecutor:        "executor",
		owner.LevelJob:             "job",
		owner.LevelAllocation:      "allocation",
		owner.LevelJobInAllocation: "job-in-allocation",
		owner.LevelSubtask:         "subtask",
		owner.LevelCheckpoint:      "checkpoint",
		owner.Level(42):            "Level(42)",
	} {
		if got := l.String(); got != want {
			t.Errorf("Level(%d).String() = %q, want %q", uint8(l), got, want)
		}
	}
}
