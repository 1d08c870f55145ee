package control_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/storetest"
	"github.com/statefs/statefs/internal/testbytes"
	"github.com/statefs/statefs/store"
)

const (
	jobA   = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	jobB   = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	alloc  = "0123456789abcdef0123456789abcdef"
	vertex = "cccccccccccccccccccccccccccccccc"
)

// chk is the checkpoint directory of job in Flink's layout.
func chk(job string) string {
	return "tm_tm-1/localState/aid_" + alloc + "/jid_" + job + "/vtx_" + vertex + "_sti_0/chk_7"
}

// fixture builds a store's namespace through the index as the fs layer
// would (storetest).
type fixture struct{ *storetest.Fixture }

func newFixture(t *testing.T) *fixture { return &fixture{storetest.NewWithObjects(t)} }

// text is n random letters of four, the same for the same seed: they
// compress, so past store.InlineMax a seal cuts them into chunks, and the
// chunks of two seeds never deduplicate.
func text(n int, seed uint64) []byte {
	b := testbytes.Random(n, seed)
	for i, c := range b {
		b[i] = "acgt"[c&3]
	}
	return b
}

func (f *fixture) inspect(p string) *store.Inspection {
	f.T.Helper()
	in, err := f.S.Inspect(p)
	if err != nil {
		f.T.Fatalf("Inspect(%s): %v", p, err)
	}
	return in
}

func (f *fixture) du(by store.Grouping) *store.DiskUsage {
	f.T.Helper()
	du, err := f.S.DU(by)
	if err != nil {
		f.T.Fatalf("DU(%s): %v", by, err)
	}
	return du
}

// diskBytes sums the on-disk sizes of the distinct chunks of in's extents.
func (f *fixture) diskBytes(in *store.Inspection) int64 {
	f.T.Helper()
	var sum int64
	seen := map[string]bool{}
	for _, e := range in.Extents {
		if seen[e.Chunk] {
			continue
		}
		seen[e.Chunk] = true
		h, err := cas.ParseHash(e.Chunk)
		if err != nil {
			f.T.Fatal(err)
		}
		size, err := f.S.ChunkSize(h)
		if err != nil {
			f.T.Fatal(err)
		}
		sum += size
	}
	return sum
}

// The store the tests inspect: job A's checkpoint holds a file that job B's
// holds too (deduplicated: the same chunks), one only A has (with a second
// name), one not sealed yet and a small one; the executor and the root hold
// a file each that no job owns, the executor's one sealed as an object.
const (
	sharedSize = 2<<20 + 12345
	uniqueSize = 1<<20 + 777
	sparseSize = 4<<20 + 600<<10
	stageSize  = 100 << 10
	inlineSize = 1000
	execSize   = 50 << 10
	rootSize   = 3000
)

var (
	sharedA = chk(jobA) + "/shared.sst"
	sharedB = chk(jobB) + "/shared.sst"
	uniqueA = chk(jobA) + "/000012.sst"
	linkA   = chk(jobA) + "/hardlink.sst"
	sparseA = chk(jobA) + "/sparse.sst"
	stageA  = chk(jobA) + "/LOG"
	inlineA = chk(jobA) + "/_task_state_snapshot"
	execF   = "tm_tm-1/blobStorage/blob"
	rootF   = "notes.txt"
)

func buildStore(t *testing.T) *fixture {
	f := newFixture(t)
	shared := text(sharedSize, 1)
	f.Write(sharedA, shared, 0, true)
	f.Write(sharedB, shared, 0, true)
	f.Link(linkA, f.Write(uniqueA, text(uniqueSize, 2), 0, true))
	f.Write(sparseA, text(600<<10, 3), 4<<20, true)
	f.Write(stageA, testbytes.Random(stageSize, 4), 0, false)
	f.Write(inlineA, testbytes.Random(inlineSize, 5), 0, true)
	f.Write(execF, testbytes.Random(execSize, 6), 0, true)
	f.Write(rootF, testbytes.Random(rootSize, 7), 0, true)
	return f
}

func TestInspectFile(t *testing.T) {
	f := buildStore(t)

	shared := f.inspect(sharedA)
	if shared.Type != "file" || shared.Mode != "0644" || shared.Permissions != "-rw-r--r--" || shared.Nlink != 1 {
		t.Errorf("%s: type %s, mode %s %s, nlink %d; want file, 0644 -rw-r--r--, 1", sharedA, shared.Type, shared.Mode, shared.Permissions, shared.Nlink)
	}
	wantOwner := store.InspectedOwner{Level: "checkpoint", Executor: "tm-1", Allocation: alloc, Job: jobA, Vertex: vertex, Subtask: "0", Checkpoint: "7"}
	if shared.Owner != wantOwner {
		t.Errorf("%s: owner %+v, want %+v", sharedA, shared.Owner, wantOwner)
	}
	if shared.Content != "sealed" || shared.As != "chunks" || shared.Object != nil || shared.Size != sharedSize || len(shared.Extents) < 2 {
		t.Fatalf("%s: content %s as %s (object %v), size %d, %d extents; want sealed as chunks, %d, several",
			sharedA, shared.Content, shared.As, shared.Object, shared.Size, len(shared.Extents), sharedSize)
	}
	var end uint64
	for _, e := range shared.Extents {
		if e.Refs != 2 || e.Off != end || e.Missing {
			t.Errorf("%s: extent %+v: want refs 2 (deduplicated with %s) at offset %d", sharedA, e, sharedB, end)
		}
		end += uint64(e.Len)
	}
	want := store.ContentSharing{SharedBytes: sharedSize, SharedChunks: len(shared.Extents)}
	if *shared.Sharing != want {
		t.Errorf("%s: sharing %+v, want %+v", sharedA, *shared.Sharing, want)
	}
	if other := f.inspect(sharedB); other.Owner.Job != jobB || !equalChunks(other.Extents, shared.Extents) {
		t.Errorf("%s: job %s, extents %+v; want job B and the extents of %s", sharedB, other.Owner.Job, other.Extents, sharedA)
	}

	unique := f.inspect(linkA) // either name shows the inode
	if unique.Nlink != 2 || unique.Ino != f.inspect(uniqueA).Ino {
		t.Errorf("%s: nlink %d, inode %d; want 2 and the inode of %s", linkA, unique.Nlink, unique.Ino, uniqueA)
	}
	var disk int64
	for _, e := range unique.Extents {
		if e.Refs != 1 || e.DiskBytes <= 0 || e.DiskBytes >= int64(e.Len) {
			t.Errorf("%s: extent %+v: want refs 1 and the chunk compressed (text compresses)", linkA, e)
		}
		disk += e.DiskBytes
	}
	want = store.ContentSharing{UniqueBytes: uniqueSize, UniqueChunks: len(unique.Extents), UniqueDiskBytes: f.diskBytes(unique)}
	if *unique.Sharing != want || disk != want.UniqueDiskBytes {
		t.Errorf("%s: sharing %+v (extents on disk %d), want %+v", linkA, *unique.Sharing, disk, want)
	}

	sparse := f.inspect(sparseA).Sharing
	if sparse.UniqueBytes+sparse.SharedBytes+sparse.HoleBytes != sparseSize || sparse.UniqueBytes < 600<<10 || sparse.HoleBytes == 0 {
		t.Errorf("%s: sharing %+v; want a hole and 600 KiB of data adding up to %d", sparseA, *sparse, sparseSize)
	}

	for _, c := range []struct {
		path, content string
		size          uint64
	}{
		{stageA, "staging", stageSize},
		{inlineA, "inline", inlineSize},
	} {
		in := f.inspect(c.path)
		if in.Content != c.content || in.Size != c.size || in.Sharing != nil || len(in.Extents) != 0 {
			t.Errorf("%s: content %s, size %d, sharing %v, %d extents; want %s, %d, no chunks", c.path, in.Content, in.Size, in.Sharing, len(in.Extents), c.content, c.size)
		}
	}
	if in := f.inspect(rootF); in.Owner != (store.InspectedOwner{Level: "none"}) {
		t.Errorf("%s: owner %+v, want unowned", rootF, in.Owner)
	}
	if in := f.inspect(execF); in.Content != "sealed" || in.As != "object" || in.Object == nil || in.Extents != nil || in.Sharing != nil {
		t.Errorf("%s: content %s as %s, object %+v, extents %v, sharing %v; want sealed as an object, without chunks",
			execF, in.Content, in.As, in.Object, in.Extents, in.Sharing)
	}
}

// objectSize is the size on disk of the object in's file is.
func (f *fixture) objectSize(in *store.Inspection) int64 {
	f.T.Helper()
	if in.Object == nil {
		f.T.Fatalf("%s is not sealed as an object: %+v", in.Path, in)
	}
	size, err := f.S.ObjectSize(f.object(in))
	if err != nil {
		f.T.Fatal(err)
	}
	return size
}

// object is the hash of the object in's file is.
func (f *fixture) object(in *store.Inspection) cas.Hash {
	f.T.Helper()
	h, err := cas.ParseHash(in.Object.Hash)
	if err != nil {
		f.T.Fatal(err)
	}
	return h
}

// A file sealed as an object shows the object: its hash, the files that
// are it (a file of two names counts once), its size on disk, and whether
// a scrub quarantined it, with why; du splits its size among those files.
func TestInspectObject(t *testing.T) {
	f := newFixture(t)
	const size = 200<<10 + 5
	data := testbytes.Random(size, 9)
	a, b := chk(jobA)+"/000009.sst", chk(jobB)+"/000009.sst"
	f.Link(chk(jobA)+"/000009.link", f.Write(a, data, 0, true))
	f.Write(b, data, 0, true)
	alone := chk(jobA) + "/000010.sst"
	f.Write(alone, testbytes.Random(size, 10), 0, true)

	in := f.inspect(a)
	if in.Content != "sealed" || in.As != "object" || in.Size != size || in.Nlink != 2 || in.Extents != nil || in.Sharing != nil || in.Object == nil {
		t.Fatalf("%s: content %s as %s, size %d, nlink %d, extents %v, sharing %v, object %v; want sealed as an object of %d bytes and 2 names",
			a, in.Content, in.As, in.Size, in.Nlink, in.Extents, in.Sharing, in.Object, size)
	}
	want := store.ObjectContent{Hash: cas.Sum(data).String(), Refs: 2, DiskBytes: f.objectSize(in)}
	if *in.Object != want || want.DiskBytes < size {
		t.Errorf("%s: object %+v, want %+v of at least %d bytes on disk", a, *in.Object, want, size)
	}
	if other := f.inspect(b).Object; other == nil || *other != want {
		t.Errorf("%s: object %+v, want the same object as %s: %+v", b, other, a, want)
	}
	if other := f.inspect(alone).Object; other == nil || other.Refs != 1 || other.Hash == want.Hash || other.Quarantined {
		t.Errorf("%s: object %+v, want an object of its own, refs 1, not quarantined", alone, other)
	}

	du := f.du(store.ByJob)
	half := want.DiskBytes / 2
	if len(du.Groups) != 2 || du.Groups[0].PhysicalBytes != want.DiskBytes-half+f.objectSize(f.inspect(alone)) || du.Groups[1].PhysicalBytes != half ||
		du.UnreferencedObjects != 0 || du.MissingObjects != 0 {
		t.Errorf("du: %+v; want A and B to split the shared object's %d bytes, A to pay for its own", du, want.DiskBytes)
	}

	before := time.Now()
	storetest.LeaveDamaged(t, "it quarantines an object")
	if marked, err := f.S.Index.Quarantine(f.object(in), "bytes 0-16384 are not the object's"); err != nil || !marked {
		t.Fatalf("Quarantine: %v, %v", marked, err)
	}
	q := f.inspect(b).Object
	if q == nil || !q.Quarantined || q.QuarantinedWhy != "bytes 0-16384 are not the object's" ||
		q.QuarantinedAt.Before(before.Truncate(time.Second)) || q.QuarantinedAt.After(time.Now()) {
		t.Errorf("%s after its object was quarantined: %+v, want it quarantined now, with why", b, q)
	}
	if other := f.inspect(alone).Object; other.Quarantined {
		t.Errorf("%s: quarantined with another file's object", alone)
	}

	// Removed while open, the last file of an object leaves it unreferenced.
	ino := f.Lookup(alone)
	err := f.S.Index.Update(func(tx *index.Tx) error {
		_, err := tx.Remove(f.Lookup(chk(jobA)), "000010.sst")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	after := f.du(store.ByJob)
	if after.UnreferencedObjects != 1 || after.UnreferencedObjectBytes != int64(size) {
		t.Errorf("du with %s (inode %d) removed while open: %d objects, %d bytes unreferenced; want 1, %d",
			alone, ino, after.UnreferencedObjects, after.UnreferencedObjectBytes, size)
	}
}

func equalChunks(a, b []store.ChunkExtent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestInspectDirectory(t *testing.T) {
	f := buildStore(t)
	for _, c := range []struct {
		path    string
		entries int
		owner   store.InspectedOwner
	}{
		{chk(jobA), 6, store.InspectedOwner{Level: "checkpoint", Executor: "tm-1", Allocation: alloc, Job: jobA, Vertex: vertex, Subtask: "0", Checkpoint: "7"}},
		{"tm_tm-1/localState/aid_" + alloc, 2, store.InspectedOwner{Level: "allocation", Executor: "tm-1", Allocation: alloc}},
		{"tm_tm-1/", 2, store.InspectedOwner{Level: "executor", Executor: "tm-1"}},
		{".", 2, store.InspectedOwner{Level: "none"}},
	} {
		in := f.inspect(c.path)
		if in.Type != "directory" || in.Entries == nil || *in.Entries != c.entries || in.Owner != c.owner || in.Content != "" {
			t.Errorf("%s: type %s, entries %d, owner %+v, content %q; want a directory of %d entries owned by %+v",
				c.path, in.Type, deref(in.Entries), in.Owner, in.Content, c.entries, c.owner)
		}
	}
}

func deref(n *int) int {
	if n == nil {
		return -1
	}
	return *n
}

func TestInspectRefuses(t *testing.T) {
	f := buildStore(t)
	for _, c := range []struct {
		path, says string
		is         error
	}{
		{"", "empty", nil},
		{"/" + sharedA, "absolute", nil},
		{"tm_tm-1/../" + rootF, "'..'", nil},
		{"tm_tm-1/nothing/here", "tm_tm-1/nothing: not found", index.ErrNotFound},
		{rootF + "/x", "not a directory", index.ErrNotDir},
		{".statefs/stats.json", "not found", index.ErrNotFound}, // the daemon's, not the store's
	} {
		_, err := f.S.Inspect(c.path)
		if err == nil || !strings.Contains(err.Error(), c.says) || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("Inspect(%q) = %v, want an error saying %q", c.path, err, c.says)
		}
	}
}

// du sums every inode once, in the group of its owner, and the physical
// shares add up to the chunk store's size plus the staging files'.
func TestDU(t *testing.T) {
	f := buildStore(t)
	var unique, shared, sparse, inline, exec, root, stage *store.Inspection
	for _, x := range []struct {
		in **store.Inspection
		p  string
	}{{&unique, uniqueA}, {&shared, sharedA}, {&sparse, sparseA}, {&inline, inlineA}, {&exec, execF}, {&root, rootF}, {&stage, stageA}} {
		*x.in = f.inspect(x.p)
	}
	sharedDisk := f.diskBytes(shared)
	stats, err := f.S.Stats()
	if err != nil {
		t.Fatal(err)
	}

	du := f.du(store.ByJob)
	if len(du.Groups) != 4 {
		t.Fatalf("groups %+v, want A, B, (no job), (unowned)", du.Groups)
	}
	a, b := du.Groups[0], du.Groups[1]
	wantA := store.GroupUsage{Group: jobA, Files: 5,
		LogicalBytes: sharedSize + uniqueSize + sparseSize + stageSize + inlineSize}
	wantB := store.GroupUsage{Group: jobB, Files: 1, LogicalBytes: sharedSize}
	// A and B each pay half of the shared chunks, the odd bytes to A (first
	// in name order: jid_aaa… before jid_bbb…).
	var halfA, halfB int64
	for _, e := range shared.Extents {
		halfA, halfB = halfA+(e.DiskBytes+1)/2, halfB+e.DiskBytes/2
	}
	wantA.PhysicalBytes = f.diskBytes(unique) + f.diskBytes(sparse) + stageSize + halfA
	wantB.PhysicalBytes = halfB
	for _, c := range []struct{ got, want store.GroupUsage }{
		{a, wantA},
		{b, wantB},
		{du.Groups[2], store.GroupUsage{Group: "(no job)", Files: 1, LogicalBytes: execSize, PhysicalBytes: f.objectSize(exec)}},
		{du.Groups[3], store.GroupUsage{Group: "(unowned)", Files: 1, LogicalBytes: rootSize}},
	} {
		if c.got != c.want {
			t.Errorf("group %+v, want %+v", c.got, c.want)
		}
	}
	total := store.GroupUsage{Group: "total", Files: 8, LogicalBytes: stats.LogicalBytes, PhysicalBytes: stats.PhysicalBytes}
	if du.Total != total || du.UnreferencedBytes != 0 || du.MissingChunks != 0 {
		t.Errorf("total %+v, unreferenced %d, missing %d; want %+v (the store's stats), 0, 0",
			du.Total, du.UnreferencedBytes, du.MissingChunks, total)
	}
	if stats.PhysicalBytes != stats.ChunkBytes+stats.ObjectBytes+stageSize || stats.ObjectFiles != 1 {
		t.Fatalf("stats: physical %d, chunks %d, %d objects of %d bytes: the fixture should have one staging file and one object",
			stats.PhysicalBytes, stats.ChunkBytes, stats.ObjectFiles, stats.ObjectBytes)
	}

	byExec := f.du(store.ByExecutor)
	wantExec := []store.GroupUsage{
		{Group: "tm-1", Files: 7, LogicalBytes: total.LogicalBytes - rootSize, PhysicalBytes: total.PhysicalBytes},
		{Group: "(unowned)", Files: 1, LogicalBytes: rootSize},
	}
	if len(byExec.Groups) != 2 || byExec.Groups[0] != wantExec[0] || byExec.Groups[1] != wantExec[1] || byExec.Total != total {
		t.Errorf("by executor: %+v, total %+v; want %+v, total %+v", byExec.Groups, byExec.Total, wantExec, total)
	}
	byAlloc := f.du(store.ByAllocation)
	if len(byAlloc.Groups) != 3 || byAlloc.Groups[0].Group != alloc || byAlloc.Groups[1].Group != "(no allocation)" || byAlloc.Groups[0].Files != 6 {
		t.Errorf("by allocation: %+v; want %s with 6 files, (no allocation), (unowned)", byAlloc.Groups, alloc)
	}

	// Removing B's copy leaves A the only user of the shared chunks; removing
	// the unique file (both names) leaves its chunks unreferenced.
	f.Remove(sharedB)
	f.Remove(linkA)
	f.Remove(uniqueA)
	after := f.du(store.ByJob)
	if len(after.Groups) != 3 || after.Groups[0].PhysicalBytes != f.diskBytes(sparse)+stageSize+sharedDisk {
		t.Errorf("after removing B's copy: %+v; want A alone paying the %d shared bytes", after.Groups, sharedDisk)
	}
	if after.UnreferencedBytes != f.diskBytes(unique) || after.UnreferencedChunks != len(unique.Extents) ||
		after.Total.PhysicalBytes+after.UnreferencedBytes != stats.PhysicalBytes {
		t.Errorf("after removing %s: unreferenced %d chunks, %d bytes, total %+v; want %d chunks, %d bytes and the rest",
			uniqueA, after.UnreferencedChunks, after.UnreferencedBytes, after.Total, len(unique.Extents), f.diskBytes(unique))
	}
	if s := f.inspect(sharedA).Sharing; s.UniqueBytes != sharedSize || s.UniqueDiskBytes != sharedDisk {
		t.Errorf("%s after its copy went: sharing %+v, want all %d bytes unique", sharedA, *s, sharedSize)
	}

	if _, err := f.S.DU("vertex"); err == nil || !strings.Contains(err.Error(), "vertex") {
		t.Errorf(`DU(by "vertex") = %v, want an error naming it`, err)
	}
}

// The daemon's socket answers with what the functions compute offline.
func TestInspectThroughDaemon(t *testing.T) {
	f := buildStore(t)
	srv := &control.Server{Store: f.S}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client, err := control.Dial(f.S.Dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range []string{sharedA, execF, chk(jobA), stageA, "."} {
		in, err := client.Inspect(ctx, p)
		if err != nil {
			t.Fatalf("client.Inspect(%s): %v", p, err)
		}
		if got, want := asJSON(t, in), asJSON(t, f.inspect(p)); got != want {
			t.Errorf("client.Inspect(%s) = %s\nwant %s", p, got, want)
		}
	}
	du, err := client.DU(ctx, store.ByJob)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := asJSON(t, du), asJSON(t, f.du(store.ByJob)); got != want {
		t.Errorf("client.DU = %s\nwant %s", got, want)
	}
	if _, err := client.Inspect(ctx, "../x"); err == nil || !strings.Contains(err.Error(), "'..'") {
		t.Errorf("client.Inspect(../x) = %v, want the refusal", err)
	}
	if _, err := client.DU(ctx, "vertex"); err == nil || !strings.Contains(err.Error(), "vertex") {
		t.Errorf("client.DU(vertex) = %v, want the refusal", err)
	}
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A file with a name in the tree and one in the attic (a held or pending
// removal) is on the disk once: du counts it once.
func TestDUCountsAFileOnce(t *testing.T) {
	f := newFixture(t)
	data := testbytes.Random(300<<10, 7)
	live := chk(jobA) + "/000001.sst"
	ino := f.Write(live, data, 0, true)
	f.Link(chk(jobA)+"/000001.sst.link", ino)
	dir := f.Lookup(chk(jobA))
	err := f.S.Index.Update(func(tx *index.Tx) error {
		_, err := tx.MakePending(dir, "000001.sst.link", chk(jobA))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	du := f.du(store.ByJob)
	if len(du.Groups) != 1 || du.Groups[0].Files != 1 || du.Groups[0].LogicalBytes != int64(len(data)) {
		t.Fatalf("du by job: %+v; want job %s with 1 file of %d bytes", du.Groups, jobA, len(data))
	}
}
