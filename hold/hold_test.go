package hold_test

import (
	"testing"

	"github.com/statefs/statefs/hold"
	"github.com/statefs/statefs/owner"
)

// Only the removal of a subtask, a job in an allocation or an allocation
// is held whole; a checkpoint is pruned, never held, and the levels above
// an allocation are not a job's.
func TestLevel(t *testing.T) {
	for l, want := range map[owner.Level]bool{
		owner.LevelNone: false, owner.LevelExecutor: false, owner.LevelJob: false,
		owner.LevelAllocation: true, owner.LevelJobInAllocation: true, owner.LevelSubtask: true,
		owner.LevelCheckpoint: false,
	} {
		if got := hold.HeldWhole(l); got != want {
			t.Errorf("Level(%v) = %v, want %v", l, got, want)
		}
	}
}
