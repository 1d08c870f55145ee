package test

import (
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/statefs/statefs/owner"
)

// The model of held deletes (DESIGN.md, "held deletes"; package hold) that
// the property tests share: TestModel, TestLinkedStateProperty and
// TestCrashCampaign each keep their own operations and checks, and ask this
// model which removals are made pending, which pending directories the
// holder holds whole, what a held tree holds and when its names were born.
//
// It states the policy on its own, from the design, rather than calling
// hold.MakesPending and hold.HeldWhole: a model that asks the code it checks
// agrees with it whatever it does.

// makesPending reports whether removing the name at p, if its job is not
// gone, makes it pending: a name in a job's local state, allocation level or
// deeper by the path's owner (owner.FlinkRules). An allocation's directory
// itself belongs to no job: its removal is not made pending.
func makesPending(p string) bool {
	o := owner.FlinkRules().Owner(p)
	return o.Job != "" && o.Level >= owner.LevelAllocation
}

// heldWhole reports whether a pending directory at p is held whole once the
// tree no longer has it: an allocation, a job in an allocation, or a
// subtask; not a checkpoint, which is pruned and never held.
func heldWhole(p string) bool {
	switch owner.FlinkRules().Owner(p).Level {
	case owner.LevelAllocation, owner.LevelJobInAllocation, owner.LevelSubtask:
		return true
	}
	return false
}

// atticName is a name as a test's model has it, and what the attic model
// needs of it.
type atticName[N any] interface {
	comparable
	// fileOf is the file a name is of, the same for each of its names
	// (a held tree counts each file once), and its size; nil for a
	// directory.
	fileOf() (any, int64)
	// madePending is the name as made pending during born (a span of the
	// wall clock): a name in the attic was born when it was made pending,
	// and holding and restoring keep that. A model that does not follow
	// births returns the name itself.
	madePending(born span) N
}

// atticModel is the attic of the model: the names removals made pending, by
// the path they had in the tree, until the holder decides them.
type atticModel[N atticName[N]] struct {
	pending map[string]N
	// gone reports whether a job is known gone, whose removals are not
	// made pending; nil: no job is.
	gone func(job string) bool
	// dir is the name of the tree's directory at p, which the attic copies
	// on the way to a name made pending below it.
	dir func(p string) N
}

func newAtticModel[N atticName[N]](dir func(p string) N) *atticModel[N] {
	return &atticModel[N]{pending: map[string]N{}, dir: dir}
}

func isAtticDir[N atticName[N]](n N) bool {
	f, _ := n.fileOf()
	return f == nil
}

// makePending takes in the removal of name n at p, during born, and reports
// whether the policy makes it pending (its job not gone). It moves to the
// same path in pending as index.Tx.MakePending moves it: the directories on
// the way are made, as copies of the tree's; a pending directory already
// at p stays and the removed name goes for good (an empty directory whose
// children went first, or a name that changed kind); a pending file there
// is replaced; a pending file where a directory must go makes the removal
// one for good.
func (a *atticModel[N]) makePending(p string, n N, born span) bool {
	if !makesPending(p) || (a.gone != nil && a.gone(owner.FlinkRules().Owner(p).Job)) {
		return false
	}
	q := ""
	for _, c := range strings.Split(path.Dir(p), "/") {
		q = path.Join(q, c)
		if m, ok := a.pending[q]; ok {
			if !isAtticDir(m) {
				return true
			}
			continue
		}
		a.pending[q] = a.dir(q).madePending(born)
	}
	if old, ok := a.pending[p]; ok && (isAtticDir(old) || isAtticDir(n)) {
		return true
	}
	a.pending[p] = n.madePending(born)
	return true
}

// count is the number of pending names of file f.
func (a *atticModel[N]) count(f N) int { return namesOf(a.pending, f) }

// namesOf is the number of names in names that are file f.
func namesOf[N comparable](names map[string]N, f N) int {
	c := 0
	for _, n := range names {
		if n == f {
			c++
		}
	}
	return c
}

// decide is the holder's decision over everything pending (hold.Holder):
// a pending directory of a level held whole, not empty, whose path the tree
// no longer has as a directory (live says whether it has), is held whole;
// the outermost such. Everything else pending goes for good. It returns
// the new held trees, in the order of their paths.
func (a *atticModel[N]) decide(live func(p string) bool) []*modelHold[N] {
	var held []*modelHold[N]
	// Sorted, a directory comes before what is below it.
	for _, p := range slices.Sorted(maps.Keys(a.pending)) {
		n, ok := a.pending[p]
		if !ok || !isAtticDir(n) || !heldWhole(p) || live(p) {
			continue // held already, or not to hold
		}
		hd := &modelHold[N]{path: p, names: map[string]N{}}
		for q, m := range a.pending {
			if rel, below := strings.CutPrefix(q, p+"/"); below {
				hd.names[rel] = m
			}
		}
		if len(hd.names) == 0 {
			continue // an empty directory: nothing to hold
		}
		hd.names[""] = n
		seen := map[any]bool{}
		for rel, m := range hd.names {
			delete(a.pending, path.Join(p, rel))
			if f, size := m.fileOf(); f != nil && !seen[f] {
				seen[f] = true
				hd.files++
				hd.bytes += size
			}
		}
		held = append(held, hd)
	}
	clear(a.pending)
	return held
}

// modelHold is a held tree of the model: what was pending at path, and
// its files and bytes when it was held, each file once, as `statefs held`
// reports them.
type modelHold[N atticName[N]] struct {
	path  string
	names map[string]N // by path below path; "" is the top
	files int
	bytes int64
}

// count is the number of names file f has in the held tree.
func (hd *modelHold[N]) count(f N) int { return namesOf(hd.names, f) }

// children lists the names in directory rel of the held tree, sorted.
func (hd *modelHold[N]) children(rel string) []string {
	dir := rel
	if dir == "" {
		dir = "." // path.Dir's name for the top
	}
	var names []string
	for q := range hd.names {
		if q != "" && path.Dir(q) == dir {
			names = append(names, path.Base(q))
		}
	}
	slices.Sort(names)
	return names
}

// span is when a call ran: nanoseconds of the wall clock before and after.
type span struct{ from, to int64 }
