package fs

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Past MaxKernelInodes the kernel is asked to drop names, enough to bring
// what it knows under the bound, never the name of an open file.
func TestEvictionAsksTheKernelToDropNames(t *testing.T) {
	t.Parallel()
	const bound, files = 20, 60
	k := newKernel(t, Options{MaxKernelInodes: bound})
	dir, errno := k.mkdir(root, rootNode, "d", 0o755)
	if errno != 0 {
		t.Fatal(errno)
	}
	open, fh, errno := k.create(root, dir.node, "open", 0o644)
	if errno != 0 {
		t.Fatal(errno)
	}
	defer k.release(open.node, fh)
	for i := range files {
		if _, errno := k.mknod(dir.node, fmt.Sprintf("f%02d", i), 0o100644, 0); errno != 0 {
			t.Fatal(errno)
		}
	}
	// The harness never forgets, so evictions go on; wait for enough.
	dropped := map[string]bool{}
	prefix := fmt.Sprintf("entry %d ", dir.node)
	for deadline := time.Now().Add(5 * time.Second); len(dropped) < files+2-bound*9/10 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, n := range k.notified() {
			if name, ok := strings.CutPrefix(n, prefix); ok {
				dropped[name] = true
			}
		}
	}
	if len(dropped) < files+2-bound*9/10 {
		t.Errorf("the kernel was asked to drop %d names, want at least %d: %v", len(dropped), files+2-bound*9/10, dropped)
	}
	if dropped["open"] {
		t.Errorf("the kernel was asked to drop the name of an open file")
	}
}

// A lookup answered while an eviction asks the kernel to drop names has
// the eviction run again: the count it started from did not include it.
func TestLookupDuringEvictionEvictsAgain(t *testing.T) {
	t.Parallel()
	const bound = 20
	k := newKernel(t, Options{MaxKernelInodes: bound})
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	k.onEntry = func() {
		once.Do(func() {
			close(started)
			<-release
		})
	}
	known := func() int {
		k.fs.mu.Lock()
		defer k.fs.mu.Unlock()
		return len(k.fs.kernelKnows)
	}
	for i := 0; known() <= bound; i++ {
		if _, errno := k.mknod(rootNode, fmt.Sprintf("f%02d", i), 0o100644, 0); errno != 0 {
			t.Fatal(errno)
		}
	}
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("no eviction past the bound")
	}
	// The first round is asking for its first name; its count is fixed.
	first := known() - bound*9/10
	if _, errno := k.mknod(rootNode, "during", 0o100644, 0); errno != 0 {
		t.Fatal(errno)
	}
	second := known() - bound*9/10 // the harness never forgets
	close(release)
	var entries int
	for deadline := time.Now().Add(2 * time.Second); entries < first+second && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, n := range k.notified() {
			if strings.HasPrefix(n, "entry ") {
				entries++
			}
		}
	}
	if entries != first+second {
		t.Errorf("asked to drop %d names, want %d from the first round and %d from a second", entries, first, second)
	}
}

// With no bound, nothing is dropped.
func TestNoEvictionWithoutABound(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	for i := range 100 {
		if _, errno := k.mknod(rootNode, fmt.Sprintf("f%02d", i), 0o100644, 0); errno != 0 {
			t.Fatal(errno)
		}
	}
	time.Sleep(50 * time.Millisecond)
	for _, n := range k.notified() {
		if strings.HasPrefix(n, "entry ") {
			t.Errorf("dropped without a bound: %s", n)
		}
	}
}
