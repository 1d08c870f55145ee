package index

import (
	"fmt"
	"testing"
)

// TestListingsKeepTheirBudget fills the listings cache past its budget of
// entries: the least recently listed directories go, a directory larger
// than a quarter of the budget is not kept, and changes to a directory
// that is not kept are ignored.
func TestListingsKeepTheirBudget(t *testing.T) {
	l := newListings(12)
	ents := func(n int) []Dirent {
		var d []Dirent
		for i := range n {
			d = append(d, Dirent{Name: fmt.Sprintf("%02d", i), Ino: uint64(100 + i)})
		}
		return d
	}
	for dir := uint64(1); dir <= 5; dir++ {
		l.put(dir, ents(3))
		if l.entries > 12 {
			t.Fatalf("after directory %d: %d entries held, budget 12", dir, l.entries)
		}
	}
	if _, ok := l.get(1, "", 0); ok {
		t.Error("the least recently listed directory was kept past the budget")
	}
	if got, ok := l.get(5, "", 0); !ok || len(got) != 3 {
		t.Errorf("the latest directory: %v, %v", got, ok)
	}
	l.put(9, ents(4))
	if _, ok := l.get(9, "", 0); ok {
		t.Error("a directory of more than a quarter of the budget was kept")
	}
	l.apply([]direntChange{{dir: 1, name: "x", d: &Dirent{Name: "x", Ino: 7}}})
	if _, ok := l.get(1, "", 0); ok {
		t.Error("a change to a directory not kept put it in the cache")
	}
	before := l.entries
	l.apply([]direntChange{{dir: 5, name: "00"}, {dir: 5, name: "zz", d: &Dirent{Name: "zz", Ino: 8}}, {dir: 5, name: "01", d: &Dirent{Name: "01", Ino: 9}}})
	got, _ := l.get(5, "", 0)
	want := []Dirent{{Name: "01", Ino: 9}, {Name: "02", Ino: 102}, {Name: "zz", Ino: 8}}
	if fmt.Sprint(got) != fmt.Sprint(want) || l.entries != before {
		t.Errorf("after changes: %v (%d entries held, was %d); want %v", got, l.entries, before, want)
	}
	l.reset()
	if l.entries != 0 {
		t.Errorf("reset left %d entries counted", l.entries)
	}
}
