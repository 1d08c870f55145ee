package fs

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// White-box: the table of unanswered requests, as a server records into it
// and the next server of the connection reads it.

// unansweredMemory is a memory file as the keeper makes for the table.
func unansweredMemory(t *testing.T) *os.File {
	t.Helper()
	fd, err := unix.MemfdCreate("unanswered", 0)
	if err != nil {
		t.Fatalf("memfd_create: %v", err)
	}
	f := os.NewFile(uintptr(fd), "unanswered")
	t.Cleanup(func() { f.Close() })
	return f
}

func unansweredTableOf(t *testing.T, f *os.File) *unansweredTable {
	t.Helper()
	u, err := openUnansweredTable(f)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// id is the unique id the kernel gives its n-th request.
func id(n uint64) uint64 { return n * idStep }

// A server dies with requests in flight and others just done: the next
// server, mapping the same memory, lists every one of them, the ids near
// the highest (read and not yet recorded), and nothing else; once cleared,
// nothing.
func TestUnansweredListsWhatTheDeadServerLeft(t *testing.T) {
	mem := unansweredMemory(t)
	dead := unansweredTableOf(t, mem)
	const long = 10 // in flight since long before the others
	dead.begin(id(long), 1)
	for n := uint64(5000); n < 5000+2*recentSlots; n++ {
		dead.end(dead.begin(id(n), 1))
	}
	dead.begin(id(9000), 1)
	dead.begin(id(9001), 1)

	next := unansweredTableOf(t, mem)
	got := next.unanswered()
	highest := id(9001)
	for _, tc := range []struct {
		what string
		id   uint64
		want bool
	}{
		{"in flight for long", id(long), true},
		{"in flight", id(9000), true},
		{"in flight, the highest", highest, true},
		{"done last", id(5000 + 2*recentSlots - 1), true},
		{"done recentSlots requests ago", id(5000 + recentSlots), true},
		{"done more than recentSlots requests ago, far below the highest", id(5000), false},
		{"the lowest of the window", highest - unansweredWindow*idStep, true},
		{"below the window", highest - (unansweredWindow+1)*idStep, false},
		{"above the highest: read, not yet recorded", highest + idStep, true},
		{"the highest of the window", highest + unansweredWindow*idStep, true},
		{"above the window", highest + (unansweredWindow+1)*idStep, false},
		{"an interrupt's id", highest + 1, false},
	} {
		if _, found := slices.BinarySearch(got, tc.id); found != tc.want {
			t.Errorf("%s (id %d): listed %v, want %v", tc.what, tc.id, found, tc.want)
		}
	}
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("the list is not sorted without duplicates")
	}
	next.clear()
	if got, want := next.unanswered(), window(highest); !slices.Equal(got, want) {
		t.Errorf("after clear: %d ids listed from %d, want the %d of the window around %d", len(got), got[0], len(want), highest)
	}
}

// window is what the table lists around its highest id when nothing else
// is in it.
func window(highest uint64) []uint64 {
	var ids []uint64
	low := uint64(idStep)
	if highest > low+unansweredWindow*idStep {
		low = highest - unansweredWindow*idStep
	}
	for id := low; id <= highest+unansweredWindow*idStep; id += idStep {
		ids = append(ids, id)
	}
	return ids
}

// A server clears the table once it has answered what it listed, then
// reads the requests the kernel queued while no server ran and dies before
// it records one: the next server still answers them, from the window
// around the highest id cleared. Cleared again with nothing recorded, the
// window stays there.
func TestUnansweredClearKeepsTheWindow(t *testing.T) {
	mem := unansweredMemory(t)
	dead := unansweredTableOf(t, mem)
	const highest = 5000
	dead.end(dead.begin(id(highest-1), 1))
	dead.begin(id(highest), 1)

	next := unansweredTableOf(t, mem)
	next.clear()
	for range 2 {
		got := unansweredTableOf(t, mem).unanswered()
		for _, n := range []uint64{highest, highest + 1, highest + unansweredWindow} {
			if _, found := slices.BinarySearch(got, id(n)); !found {
				t.Fatalf("after clear, the id %d of a request queued after the highest cleared (%d) is not listed", id(n), id(highest))
			}
		}
		unansweredTableOf(t, mem).clear()
	}
}

// The window stops at the first id the kernel gives; with nothing ever
// recorded (a server that died before it recorded its first request), it
// starts there.
func TestUnansweredWindowStartsAtTheFirstRequest(t *testing.T) {
	u := unansweredTableOf(t, unansweredMemory(t))
	if got, want := u.unanswered(), window(0); !slices.Equal(got, want) {
		t.Errorf("with nothing recorded: %d ids listed, want the %d from the first id", len(got), len(want))
	}
	u.begin(id(3), 1)
	got := u.unanswered()
	if got[0] != id(1) {
		t.Fatalf("the lowest id listed is %d, want %d", got[0], id(1))
	}
}

// With every slot taken, a request is not recorded, and its end frees no
// other request's slot.
func TestUnansweredFullTable(t *testing.T) {
	u := unansweredTableOf(t, unansweredMemory(t))
	for n := range uint64(inFlightSlots) {
		if s := u.begin(id(n+1), 1); s == inFlightSlots {
			t.Fatalf("request %d found no slot of %d", n+1, inFlightSlots)
		}
	}
	s := u.begin(id(inFlightSlots+1), 1)
	if s != inFlightSlots {
		t.Fatalf("a request beyond %d in flight got slot %d", inFlightSlots, s)
	}
	u.end(s)
	for i := range u.inFlight {
		if u.inFlight[i].unique.Load() == 0 {
			t.Fatalf("slot %d was freed by a request that had none", i)
		}
	}
}

// Requests recorded and done from many goroutines at once: while each is
// in flight, the table lists it, and none takes another's slot.
func TestUnansweredConcurrentRequests(t *testing.T) {
	u := unansweredTableOf(t, unansweredMemory(t))
	const workers, each = 8, 2000
	var wg sync.WaitGroup
	errs := make(chan uint64, workers)
	for w := range uint64(workers) {
		wg.Go(func() {
			for n := range uint64(each) {
				unique := id(w*each + n + 1)
				s := u.begin(unique, 1)
				if u.inFlight[s].unique.Load() != unique {
					errs <- unique
					return
				}
				u.end(s)
			}
		})
	}
	wg.Wait()
	close(errs)
	for unique := range errs {
		t.Errorf("request %d lost its slot while in flight", unique)
	}
	for i := range u.inFlight {
		if v := u.inFlight[i].unique.Load(); v != 0 {
			t.Errorf("slot %d holds %d after every request was done", i, v)
		}
	}
}

// The recorder layer records a request while the layers below serve it,
// and keeps it among those done after: its answer is written after the
// layer returns.
func TestRecorderRecordsWhileServing(t *testing.T) {
	c := &Connection{}
	if err := c.RecordUnanswered(unansweredMemory(t)); err != nil {
		t.Fatal(err)
	}
	inner := &listingFS{t: c.unanswered}
	raw := c.Recording(inner)
	const unique = 42
	var out fuse.AttrOut
	raw.GetAttr(nil, &fuse.GetAttrIn{InHeader: fuse.InHeader{Unique: unique}}, &out)
	if !slices.Contains(inner.during, unique) {
		t.Errorf("while served, the table listed %v, not the request", inner.during)
	}
	if !slices.Contains(c.unanswered.unanswered(), unique) {
		t.Errorf("once served, the table lists no request %d: its answer is not written yet", unique)
	}
	raw.Forget(7, 1)
	if inner.forgets != 1 {
		t.Errorf("the FORGET was not passed on")
	}
	if (&Connection{}).Recording(inner) != fuse.RawFileSystem(inner) {
		t.Errorf("a connection that does not record added a layer")
	}
}

// listingFS notes what the table listed while it served a GETATTR.
type listingFS struct {
	fuse.RawFileSystem
	t       *unansweredTable
	during  []uint64
	forgets int
}

func (l *listingFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	l.during = l.t.unanswered()
	return fuse.OK
}

func (l *listingFS) Forget(nodeid, nlookup uint64) { l.forgets++ }

// A request in flight leaves the node it is on and the names it changes
// (a rename's two) for the next server to invalidate; one done leaves
// none.
func TestUnansweredStaleNodesAndNames(t *testing.T) {
	mem := unansweredMemory(t)
	c := &Connection{}
	if err := c.RecordUnanswered(mem); err != nil {
		t.Fatal(err)
	}
	inner := &renamingFS{entered: make(chan struct{}), block: make(chan struct{})}
	t.Cleanup(func() { close(inner.block) })
	raw := c.Recording(inner)
	raw.Mkdir(nil, &fuse.MkdirIn{InHeader: fuse.InHeader{Unique: id(1), NodeId: 4}}, "done", &fuse.EntryOut{})
	go raw.Rename(nil, &fuse.RenameIn{InHeader: fuse.InHeader{Unique: id(2), NodeId: 5}, Newdir: 6}, "from", "to")
	<-inner.entered

	next := &Connection{}
	if err := next.RecordUnanswered(mem); err != nil {
		t.Fatal(err)
	}
	var listed []uint64
	next.FailUnanswered(func(ids []uint64) int { listed = ids; return 0 })
	if !slices.Contains(listed, id(2)) {
		t.Fatalf("the rename in flight is not listed")
	}
	if want := []uint64{5}; !slices.Equal(next.staleNodes, want) {
		t.Errorf("stale nodes %v, want %v", next.staleNodes, want)
	}
	if want := []staleName{{5, "from"}, {6, "to"}}; !slices.Equal(next.staleNames, want) {
		t.Errorf("stale names %v, want %v", next.staleNames, want)
	}
}

// renamingFS serves a mkdir, and a rename that waits for block, as one its
// server died in.
type renamingFS struct {
	fuse.RawFileSystem
	entered, block chan struct{}
}

func (r *renamingFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	return fuse.OK
}

func (r *renamingFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	close(r.entered)
	<-r.block
	return fuse.OK
}

// What a request pays for being recorded, on a kernel without resend.
func BenchmarkUnansweredRecord(b *testing.B) {
	fd, err := unix.MemfdCreate("unanswered", 0)
	if err != nil {
		b.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "unanswered")
	defer f.Close()
	u, err := openUnansweredTable(f)
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u.end(u.begin(id(n.Add(1)), 1))
		}
	})
}

// A server dies releasing a handle (its RELEASE recorded in flight): the
// next server releases it from the handle table, so that nothing keeps it
// open until the mount ends, and one that dies after that and before it
// clears the table leaves the server after it nothing to release; a
// release whose handle was released and its slot given to another open
// before the server died is left alone, the other open kept.
func TestUnansweredReleaseIsDone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reopened bool
	}{{"the handle released", false}, {"the slot given to another open", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			handles, unanswered := handleMemory(t), unansweredMemory(t)
			c1 := connection(t, handles, 1)
			if err := c1.RecordUnanswered(unanswered); err != nil {
				t.Fatal(err)
			}
			k1 := serveKernel(t, dir, Options{Passthrough: true}, c1)
			f := k1.writeFile(rootNode, "f", []byte("kept"))
			h := root.header(f.node)
			h.Unique = id(7)
			var out fuse.OpenOut
			if st := k1.raw.Open(nil, &fuse.OpenIn{InHeader: h, Flags: syscall.O_RDONLY}, &out); !st.Ok() {
				t.Fatalf("open: %v", st)
			}
			fh := out.Fh
			s := c1.unanswered.begin(id(1000), f.node)
			c1.unanswered.releasing(s, fh, c1.handles.slots[uint32(fh)].unique)
			if tc.reopened {
				h.Unique = id(1001)
				k1.raw.Release(nil, &fuse.ReleaseIn{InHeader: h, Fh: fh})
				h.Unique = id(1002)
				if st := k1.raw.Open(nil, &fuse.OpenIn{InHeader: h, Flags: syscall.O_RDONLY}, &out); !st.Ok() {
					t.Fatalf("open again: %v", st)
				}
				if out.Fh != fh {
					t.Fatalf("the second open got handle %#x, not the first's %#x: its slot is not reused", out.Fh, fh)
				}
			}
			k1.close()

			c2 := connection(t, handles, 2)
			if err := c2.RecordUnanswered(unanswered); err != nil {
				t.Fatal(err)
			}
			k2 := serveKernel(t, dir, Options{Passthrough: true}, c2)
			if k2.resumed.Reopened != 1 {
				t.Fatalf("resumed %+v, want the open handle reopened", k2.resumed)
			}
			released := c2.releaseUnanswered()
			open := len(c2.handles.open())
			if !tc.reopened && (released != 1 || open != 0) {
				t.Errorf("released %d, %d handles left open; want the one released", released, open)
			}
			if tc.reopened && (released != 0 || open != 1) {
				t.Errorf("released %d, %d handles left open; want the other open's kept", released, open)
			}
			k2.close()

			c3 := connection(t, handles, 3)
			if err := c3.RecordUnanswered(unanswered); err != nil {
				t.Fatal(err)
			}
			serveKernel(t, dir, Options{Passthrough: true}, c3)
			if released := c3.releaseUnanswered(); released != 0 {
				t.Errorf("a server after one that died before clearing the table released %d handles again, want 0", released)
			}
			if got := len(c3.handles.open()); got != open {
				t.Errorf("%d handles open after the third server, want %d", got, open)
			}
		})
	}
}

// The recorder notes which handle a RELEASE in flight releases, and the
// open that made it.
func TestRecorderNotesTheHandleReleased(t *testing.T) {
	c := connection(t, handleMemory(t), 1)
	if err := c.RecordUnanswered(unansweredMemory(t)); err != nil {
		t.Fatal(err)
	}
	fh, err := c.handles.add(9, id(3), syscall.O_RDONLY, false, 1, &fuse.OpenOut{})
	if err != nil {
		t.Fatal(err)
	}
	inner := &releasingFS{entered: make(chan struct{}), block: make(chan struct{})}
	t.Cleanup(func() { close(inner.block) })
	go c.Recording(inner).Release(nil, &fuse.ReleaseIn{InHeader: fuse.InHeader{Unique: id(4), NodeId: 9}, Fh: fh})
	<-inner.entered
	fhs, opened := c.unanswered.releases()
	if !slices.Equal(fhs, []uint64{fh}) || !slices.Equal(opened, []uint64{id(3)}) {
		t.Errorf("releases in flight: handles %v opened by %v, want %d opened by %d", fhs, opened, fh, id(3))
	}
}

// releasingFS is a release that waits for block, as one its server died in.
type releasingFS struct {
	fuse.RawFileSystem
	entered, block chan struct{}
}

func (r *releasingFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	close(r.entered)
	<-r.block
}

// notRecorded are the methods of fuse.RawFileSystem that the recorder
// leaves to the layer below: no request, or no answer the kernel waits for.
var notRecorded = map[string]bool{
	"String":    true, // not a request
	"SetDebug":  true,
	"Init":      true, // go-fuse's, with the server; the INIT request is answered before any layer
	"OnUnmount": true,
	"Forget":    true, // no answer
}

// The recorder records every request with an answer: each method of
// fuse.RawFileSystem but notRecorded is its own and begins by recording
// the request, so that one go-fuse adds is not served unrecorded. The
// layer below is missing, so each call panics there, after its record.
func TestRecorderRecordsEveryRequest(t *testing.T) {
	c := &Connection{}
	if err := c.RecordUnanswered(unansweredMemory(t)); err != nil {
		t.Fatal(err)
	}
	r := reflect.ValueOf(&recorder{t: c.unanswered})
	api := reflect.TypeFor[fuse.RawFileSystem]()
	for i := range api.NumMethod() {
		name := api.Method(i).Name
		if notRecorded[name] {
			continue
		}
		unique := id(uint64(i) + 1)
		m := r.MethodByName(name)
		args := make([]reflect.Value, m.Type().NumIn())
		for j := range args {
			in := m.Type().In(j)
			args[j] = reflect.Zero(in)
			if in.Kind() == reflect.Pointer && in.Elem().Kind() == reflect.Struct {
				args[j] = reflect.New(in.Elem())
				if f := args[j].Elem().FieldByName("Unique"); f.IsValid() {
					f.SetUint(unique)
				}
			}
		}
		func() {
			defer func() { recover() }()
			m.Call(args)
		}()
		if c.unanswered.highest() != unique {
			t.Errorf("%s is not recorded", name)
		}
	}
}
