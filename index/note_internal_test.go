package index

import (
	"testing"

	"github.com/statefs/statefs/owner"
)

// A note whose transaction began before its records were deleted is not
// remembered when it commits after: the next write notes them again.
func TestNoteFromBeforeAForgetIsNotRemembered(t *testing.T) {
	var n notes
	o := owner.Owner{Executor: "tm-1"}
	due, gen := n.due(o, 100)
	if !due {
		t.Fatal("the first write under an owner is not due")
	}
	n.forget()
	n.noted(o, 100, gen)
	if due, _ := n.due(o, 200); !due {
		t.Error("a note committed after a forget was remembered: the write after it is not due")
	}
	_, gen = n.due(o, 200)
	n.noted(o, 200, gen)
	if due, _ := n.due(o, 300); due {
		t.Error("a write 100 ns after a remembered note is due")
	}
}
