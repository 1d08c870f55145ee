package test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The crash campaign (DESIGN invariants 1-4): writers that do
// what Flink and RocksDB do — new files, in-place rewrites and appends
// with fsync, atomic replace by rename, hard links, unlinks, directory
// fsyncs, files large enough to be sealed into chunks, and a RocksDB
// instance in Flink's layout, whose SSTs have names under several owners:
// the live database in the executor's tmp/, native checkpoints in local
// state that hard-link its SSTs, and restores from local state that link a
// checkpoint's SSTs back into a new instance — work on the mount while the
// collector removes jobs the operator marked gone, and the daemon is
// SIGKILLed at a random moment: during writes, while files
// are being sealed, or while gc runs. The mount holds deletes (README "Held
// deletes") with a short window and TTL, so kills also land while pruned
// checkpoints wait in the pending area, while the allocation trees of
// old rounds' executors, which each round's cleanup removes, are held, and
// while held trees are dropped. The writers journal every change in
// this process (outside the mount) once its fsync returned. After each
// kill:
//
//   - `statefs fsck` of the store as the kill left it finds no
//     inconsistency;
//   - after a mount, every journaled change is there byte for byte, no file
//     holds bytes it was never given, and a name whose change was never
//     confirmed shows the state before it or after it (crash_test.go states
//     the rules per way of writing);
//   - what earlier rounds left is unchanged, and every inode's link count is
//     its number of names, those in held trees included, once the holder has
//     decided the removals pending at the kill;
//   - each allocation tree the cleanup removed is held whole, every file as
//     it was, until the hold TTL and no longer; now and then one is restored
//     into the round's executor, every file its content, inode and link
//     count back;
//   - gc, run again, removes the gone jobs' state completely.
//
// At the end the campaign's job is marked gone and collected: its held
// trees go with it, and fsck of the unmounted store finds nothing.
//
// `make test` runs a short campaign (-campaign.kills); `make soak` runs it
// for -soak.duration and prints the figures.
var (
	soakDuration  = flag.Duration("soak.duration", 0, "run the crash campaign for this long (0: the short campaign of -campaign.kills kills)")
	soakSeed      = flag.Uint64("soak.seed", 0, "the crash campaign's seed (0: STATEFS_CRASH_SEED or the clock)")
	campaignKills = flag.Int("campaign.kills", 16, "how many times the short crash campaign kills the daemon")
)

// campaignRoundsKept is how many rounds' trees stay in the store; older
// ones are removed (which exercises unlink, rmdir and the sweep too), so
// that a long campaign's store and checks stay the same size.
const campaignRoundsKept = 3

// The campaign's mount decides held deletes quickly, and drops held trees
// after a few rounds (a round takes one to three seconds), so that they do
// not pile up and kills land while trees are held and while they are dropped.
const (
	campaignHoldWindow = 250 * time.Millisecond
	campaignHoldTTL    = 6 * time.Second
	// campaignSettle bounds the wait for the removals pending at a kill to
	// be decided after the restart: the window, the holder's passes, and
	// the kernel's attribute timeout (a second).
	campaignSettle = 10*campaignHoldWindow + 2*time.Second
)

func TestCrashCampaign(t *testing.T) {
	seed := *soakSeed
	if seed == 0 {
		seed = crashSeed(t)
	} else {
		t.Logf("seed %d", seed)
	}
	c := &campaign{t: t, rng: rand.New(rand.NewPCG(seed, 7)), survivors: map[string]string{}, removed: map[string]*removedTree{},
		attic: newAtticModel(func(string) campaignName { return "" })}
	c.job = fmt.Sprintf("%016x%016x", c.rng.Uint64(), c.rng.Uint64())
	// No free-space floor: held trees last until the TTL whatever the
	// test machine's disk.
	c.m = mountFS(t, append([]string{"--hold-deletes", "--hold-window", campaignHoldWindow.String(),
		"--hold-ttl", campaignHoldTTL.String(), "--hold-min-free", "0"}, sealDelayZero...)...)
	start := time.Now()
	lastReport := start
	for round := 0; ; round++ {
		if *soakDuration > 0 {
			if time.Since(start) >= *soakDuration {
				break
			}
		} else if round >= *campaignKills {
			break
		}
		c.round(round)
		if t.Failed() {
			c.figures.failures++
			t.Errorf("round %d failed (seed %d); daemon log:\n%s", round, seed, tail(c.m.Log(), 4000))
			break
		}
		if *soakDuration > 0 && time.Since(lastReport) >= time.Minute {
			lastReport = time.Now()
			t.Logf("after %v: %s", time.Since(start).Round(time.Second), c.figures)
		}
	}
	if !t.Failed() {
		c.collectJob()
	}
	t.Logf("crash campaign, seed %d, %v: %s; index tables on disk at the end: %s",
		seed, time.Since(start).Round(time.Second), c.figures, indexTables(t, c.m.Store))
}

// campaignFigures are what a campaign did and checked.
type campaignFigures struct {
	kills        int   // SIGKILLs of the daemon
	killsSealing int   // ... while status.json reported files waiting to be sealed
	killsGC      int   // ... while a gc run was under way (it failed with the daemon)
	killsPending int   // ... within a hold window of a removal that deletes held madePending
	killsHeld    int   // ... while a tree was held
	ops          int   // journaled durable changes verified after a kill
	bytes        int64 // bytes of journaled content verified
	gcJobs       int   // gone jobs whose collection was verified complete
	restores     int   // RocksDB restores from local state made durable and verified
	held         int   // held trees verified whole
	heldRestored int   // held trees restored and verified
	failures     int
}

func (f campaignFigures) String() string {
	return fmt.Sprintf("kills %d (%d while sealing, %d during gc, %d with removals pending, %d with trees held), operations verified %d, bytes verified %d, gone jobs collected %d, restores from local state verified %d, held trees verified %d, restored %d, failures %d",
		f.kills, f.killsSealing, f.killsGC, f.killsPending, f.killsHeld, f.ops, f.bytes, f.gcJobs, f.restores, f.held, f.heldRestored, f.failures)
}

type campaign struct {
	t *testing.T
	m *Mount
	// job is the campaign's live job: every round's RocksDB instance and
	// checkpoints are its state, and nobody marks it gone.
	job       string
	rng       *rand.Rand
	survivors map[string]string // what earlier rounds left: path → SHA-256
	kept      [][]string        // each round's top directories in survivors, oldest round first
	leftover  []string          // executor trees whose local state the last cleanup removed
	// attic decides what the cleanup's removals hold (the shared model);
	// removed are the trees it held, by the path they had, until their hold
	// goes.
	attic   *atticModel[campaignName]
	removed map[string]*removedTree
	// cleaned is when the cleanup last made a removal pending.
	cleaned time.Time
	figures campaignFigures
}

// removedTree is a tree that the round cleanup removed and held deletes
// keep: an allocation tree (tm_c<r>/localState/aid_<a>), as the model
// says.
type removedTree struct {
	path    string
	files   map[string]string // relative to path → SHA-256, as it was removed
	removed time.Time
	hold    campaignHold // once listed
}

// round runs one kill: actors on the mount, a gc of a job marked gone, the
// kill, and every check.
func (c *campaign) round(r int) {
	t, m := c.t, c.m
	dir := fmt.Sprintf("c%d", r)
	// The round's TaskManager: the RocksDB instance of job c.job lives in
	// its tmp/, its checkpoints in its local state.
	executor := "tm_" + dir
	subtask := fmt.Sprintf("localState/aid_%s/jid_%s/vtx_%s_sti_0", holdAlloc, c.job, holdVertex)
	stop := guardStall(t, m, 90*time.Second, dir+": preparing and writing")
	gone := c.goneJob(r)

	for _, d := range []string{"w/w0", "w/w1", "w/w2", "ul"} {
		require.NoError(t, os.MkdirAll(m.Path(dir, d), 0o755))
	}
	require.NoError(t, os.MkdirAll(m.Path(executor, "tmp"), 0o755))
	require.NoError(t, os.MkdirAll(m.Path(executor, subtask), 0o755))
	for _, d := range []string{"", dir, dir + "/w", dir + "/w/w0", dir + "/w/w1", dir + "/w/w2", dir + "/ul", executor, executor + "/tmp"} {
		syncDir(t, m.Path(d))
	}
	for d := subtask; d != "."; d = path.Dir(d) {
		syncDir(t, m.Path(executor, d))
	}
	root, err := os.OpenRoot(m.Dir)
	require.NoError(t, err)
	defer root.Close()

	var killed atomic.Bool
	var wg sync.WaitGroup
	var writers []*writer
	for i := range 3 {
		w := &writer{root: root, dir: fmt.Sprintf("%s/w/w%d", dir, i), rng: rand.New(rand.NewPCG(c.rng.Uint64(), uint64(i))), killed: &killed}
		writers = append(writers, w)
		wg.Go(w.run)
	}
	ul := &unlinker{actor: actor{root: root, dir: dir + "/ul", rng: rand.New(rand.NewPCG(c.rng.Uint64(), 10)), killed: &killed}}
	ck := &checkpointer{actor: actor{root: root, dir: executor, rng: rand.New(rand.NewPCG(c.rng.Uint64(), 11)), killed: &killed},
		job: c.job, operator: "KeyedProcessOperator_" + holdVertex + "__1_1_", subtask: subtask}
	wg.Go(ul.run)
	wg.Go(ck.run)
	gcr := &gcRunner{store: m.Store, killed: &killed, rng: rand.New(rand.NewPCG(c.rng.Uint64(), 12))}
	gcDone := make(chan struct{})
	go func() { defer close(gcDone); gcr.run() }()

	// When to kill: at a random moment of the writes, once files wait to
	// be sealed, or just after a gc run began.
	switch mode := c.rng.IntN(3); mode {
	case 0:
		time.Sleep(100*time.Millisecond + time.Duration(c.rng.Int64N(int64(1400*time.Millisecond))))
	case 1:
		time.Sleep(100*time.Millisecond + time.Duration(c.rng.Int64N(int64(500*time.Millisecond))))
		waitSealBacklog(t, m, 2*time.Second)
	case 2:
		deadline := time.Now().Add(3 * time.Second)
		for gcr.runs.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Duration(c.rng.Int64N(int64(60 * time.Millisecond))))
	}
	if n, err := sealBacklog(m); err == nil && n > 0 {
		c.figures.killsSealing++
	}
	stop()
	killed.Store(true)
	killedAt := time.Now()
	m.Kill()
	c.figures.kills++
	waitOrFail(t, &wg, dir+": writers")
	if killedAt.Sub(c.cleaned) < campaignHoldWindow || killedAt.Sub(ck.madePending) < campaignHoldWindow {
		c.figures.killsPending++
	}
	<-gcDone
	if gcr.interrupted {
		c.figures.killsGC++
	}
	for _, w := range writers {
		if w.errBeforeKill != nil {
			t.Errorf("%s: writer failed while the daemon was still running: %v", w.dir, w.errBeforeKill)
		}
	}
	for _, a := range []*actor{&ul.actor, &ck.actor} {
		if a.errBeforeKill != nil {
			t.Errorf("%s: failed while the daemon was still running: %v", a.dir, a.errBeforeKill)
		}
	}
	if gcr.errBeforeKill != nil {
		t.Errorf("%s: gc failed while the daemon was still running: %v", dir, gcr.errBeforeKill)
	}

	// The store as the kill left it.
	ps, res := fsck(t, m.Store, r%8 == 0)
	requireOnlyLeftovers(t, dir+": after the kill", ps, res, problemStrayStaging, problemGarbageChunk, problemGarbageObject)

	m.Start()
	stop = guardStall(t, m, 2*time.Minute, dir+": verifying")
	defer stop()
	var hs []*history
	for _, w := range writers {
		hs = append(hs, w.done...)
	}
	verifyHistories(t, m, dir, dir+"/w", hs)
	checkExpectations(t, m, dir+"/ul", ul.expectations())
	checkExpectations(t, m, executor, ck.expectations())
	checkExpectations(t, m, gone.executor, gone.expectations())
	requireSurvivors(t, m, dir, c.survivors)
	c.checkHolds(killedAt)
	requireNlinkSettles(t, m, campaignSettle)

	// gc run again completes: nothing of the gone job is left.
	mustCLI(t, "gc", "--store", m.Store, "--grace", "0s")
	checkExpectations(t, m, gone.executor, nil)
	if t.Failed() {
		return
	}
	if c.rng.IntN(3) == 0 {
		c.restoreHeld(executor)
	}

	c.count(hs, ul, ck)
	c.figures.gcJobs++
	trees := []string{dir, executor}
	for _, d := range trees {
		for p, sum := range digestTree(t, m.Path(d)) {
			c.survivors[path.Join(d, p)] = sum
		}
	}
	c.kept = append(c.kept, trees)
	c.cleanup()
}

// cleanup removes what the oldest kept round left, so that a long
// campaign's store and checks stay the same size (which exercises unlink,
// rmdir, held deletes and the sweep too): its writers' directory, and its
// executor's tree in two steps, as a TaskManager's slot is freed (its
// local state goes, and is held) before its working directory goes (the
// live databases, at the next round's cleanup). Until then the held SSTs
// keep their names in the live database too.
func (c *campaign) cleanup() {
	for _, d := range c.leftover {
		c.remove(d)
	}
	c.leftover = nil
	if len(c.kept) <= campaignRoundsKept {
		return
	}
	dir, executor := c.kept[0][0], c.kept[0][1]
	c.kept = c.kept[1:]
	c.remove(dir)
	c.remove(path.Join(executor, "localState"))
	c.leftover = append(c.leftover, executor)
}

// remove removes d and forgets its survivors; what the attic model holds
// of it (its allocation trees) is to be held.
func (c *campaign) remove(d string) {
	t, m := c.t, c.m
	// What rm -rf removes: the directories as the mount lists them, the
	// files as the survivors record them.
	names := map[string]campaignName{}
	err := filepath.WalkDir(m.Path(d), func(p string, e fs.DirEntry, err error) error {
		if os.IsNotExist(err) && p == m.Path(d) {
			return filepath.SkipDir
		}
		if err != nil || !e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(m.Dir, p)
		names[filepath.ToSlash(rel)] = ""
		return err
	})
	require.NoError(t, err)
	for p, sum := range c.survivors {
		if strings.HasPrefix(p, d+"/") {
			names[p] = campaignName(sum)
			delete(c.survivors, p)
		}
	}
	require.NoError(t, os.RemoveAll(m.Path(d)))
	now := time.Now()
	// Deepest first, as rm -rf removes.
	for _, p := range slices.Backward(slices.Sorted(maps.Keys(names))) {
		if c.attic.makePending(p, names[p], span{}) {
			c.cleaned = now
		}
	}
	for _, hd := range c.attic.decide(func(p string) bool { return p != d && !strings.HasPrefix(p, d+"/") }) {
		a := &removedTree{path: hd.path, files: map[string]string{}, removed: now}
		for rel, n := range hd.names {
			if n != "" {
				a.files[rel] = string(n)
			}
		}
		c.removed[a.path] = a
	}
}

// campaignName is a name the cleanup removes, as the attic model has it: a
// file's, by its SHA-256 as the survivors record it, or a directory's ("").
// The campaign does not follow inodes: it checks the files and bytes
// `statefs held` counts against the held tree's view, not the model.
type campaignName string

func (n campaignName) fileOf() (any, int64) {
	if n == "" {
		return nil, 0
	}
	return n, 0
}

func (n campaignName) madePending(span) campaignName { return n }

// campaignHold is a held tree as `statefs held --json` lists it.
type campaignHold struct {
	heldTree
	At       time.Time `json:"at"`       // when it was held
	Dropping string    `json:"dropping"` // why, once its drop began
}

func (h campaignHold) age(now time.Time) time.Duration { return now.Sub(h.At) }

// checkHolds checks the held trees after a kill, waiting (at most
// campaignSettle) for the removals pending at the kill to be decided:
// .statefs/held shows what `statefs held` lists; every allocation tree the
// cleanup removed is held, whole, with every file as it was, until the
// TTL; nothing else is held; and no held tree outlives the TTL (beyond
// the holder's passes and the daemon's downtime), so held trees do not
// pile up.
func (c *campaign) checkHolds(killedAt time.Time) {
	t, m := c.t, c.m
	t.Helper()
	deadline := time.Now().Add(campaignSettle)
	var hs []campaignHold
	for {
		var waiting []string
		now := time.Now()
		hs, waiting = c.listHolds()
		for _, a := range c.removed {
			listed := false
			for _, h := range hs {
				listed = listed || h.Path == a.path
			}
			// A tree the TTL has not yet dropped must be listed once the
			// removal is decided (a tree of empty directories may not be).
			if !listed && a.hold.ID == "" && len(a.files) > 0 && now.Sub(a.removed) < campaignHoldTTL-time.Second {
				waiting = append(waiting, fmt.Sprintf("%s, removed %v ago, is not held", a.path, now.Sub(a.removed).Round(time.Millisecond)))
			}
		}
		if len(waiting) == 0 {
			break
		}
		if now.After(deadline) {
			t.Errorf("held trees after waiting %v: %s\n%s", campaignSettle, strings.Join(waiting, "; "), mustCLI(t, "held", "--store", m.Store))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}

	now := time.Now()
	listed := map[string]bool{}
	heldAtKill := false
	for _, h := range hs {
		listed[h.Path] = true
		heldAtKill = heldAtKill || h.At.Before(killedAt)
		a := c.removed[h.Path]
		switch {
		case a == nil:
			t.Errorf("held tree %s (%s) is nothing the campaign removed", h.ID, h.Path)
			continue
		case h.age(now) > campaignHoldTTL+campaignSettle:
			t.Errorf("held tree %s (%s) is %v old: the hold TTL is %v", h.ID, h.Path, h.age(now).Round(time.Millisecond), campaignHoldTTL)
		case a.hold.ID != "" && a.hold.ID != h.ID:
			t.Errorf("%s was held as %s, now as %s", h.Path, a.hold.ID, h.ID)
		}
		// (One first seen about to be dropped, after a slow round, is not
		// read: the drop would race the reading.)
		if a.hold.ID == "" && h.Dropping == "" && h.age(now) < campaignHoldTTL-2*time.Second {
			c.verifyHeld(h, a)
		}
		a.hold = h
	}
	if heldAtKill {
		c.figures.killsHeld++
	}
	for p, a := range c.removed {
		switch {
		case listed[p]:
		case a.hold.ID != "" && a.hold.age(now) < campaignHoldTTL:
			t.Errorf("held tree %s (%s) went after %v, before the hold TTL %v", a.hold.ID, p, a.hold.age(now).Round(time.Millisecond), campaignHoldTTL)
			delete(c.removed, p)
		case a.hold.ID != "" || now.Sub(a.removed) >= campaignHoldTTL:
			delete(c.removed, p) // dropped at the TTL
		}
	}
}

// listHolds lists the held trees, and what makes the listing not yet
// settled: .statefs/held does not show what `statefs held` lists (a drop
// may fall between the two).
func (c *campaign) listHolds() ([]campaignHold, []string) {
	t, m := c.t, c.m
	var hs []campaignHold
	require.NoError(t, json.Unmarshal([]byte(mustCLI(t, "held", "--store", m.Store, "--json")), &hs))
	shown, err := readDirNames(m.Path(".statefs/held"))
	if err != nil {
		return hs, []string{fmt.Sprintf("listing .statefs/held: %v", err)}
	}
	var ids []string
	for _, h := range hs {
		ids = append(ids, h.ID)
	}
	sort.Strings(ids)
	if a, b := strings.Join(ids, " "), strings.Join(shown, " "); a != b {
		return hs, []string{fmt.Sprintf(".statefs/held shows [%s], statefs held lists [%s]", b, a)}
	}
	return hs, nil
}

// verifyHeld checks that held tree h of removed tree a shows every file
// it had, byte for byte, and nothing else, and that `statefs held` counts
// each of its files once.
func (c *campaign) verifyHeld(h campaignHold, a *removedTree) {
	t := c.t
	t.Helper()
	view := c.m.Path(".statefs/held", h.ID)
	requireSameFiles(t, "held tree "+h.ID+" ("+a.path+")", a.files, digestTree(t, view))
	files, bytes := distinctFiles(t, view)
	if h.Files != files || h.Bytes != bytes {
		t.Errorf("statefs held counts %d files, %d bytes in %s; its view has %d files, %d bytes", h.Files, h.Bytes, h.ID, files, bytes)
	}
	c.figures.held++
}

// restoreHeld restores one of the held trees (if one will not reach its
// TTL meanwhile) into the round's executor, as a new allocation of the
// campaign's job: every file comes back with its content, as the same
// inode, with the link count it had while held (its names in the tree, and
// the live database's names of its SSTs until that goes too), and every
// link count is still the number of names.
func (c *campaign) restoreHeld(executor string) {
	t, m := c.t, c.m
	t.Helper()
	var young []*removedTree
	for _, a := range c.removed {
		if a.hold.ID != "" && a.hold.Dropping == "" && a.hold.age(time.Now()) < campaignHoldTTL/2 {
			young = append(young, a)
		}
	}
	if len(young) == 0 {
		return
	}
	sort.Slice(young, func(i, j int) bool { return young[i].path < young[j].path })
	a := young[c.rng.IntN(len(young))]
	view := m.Path(".statefs/held", a.hold.ID)
	before := statTree(t, view)
	dest := path.Join(executor, "localState", fmt.Sprintf("aid_%016x%016x", c.rng.Uint64(), c.rng.Uint64()))
	mustCLI(t, "restore", "--store", m.Store, a.hold.ID, m.Path(dest))
	delete(c.removed, a.path)

	what := "held tree " + a.hold.ID + " restored to " + dest
	requireSameFiles(t, what, a.files, digestTree(t, m.Path(dest)))
	for rel, st := range statTree(t, m.Path(dest)) {
		b, ok := before[rel]
		switch {
		case !ok:
		case st.Ino != b.Ino&^heldViewInoBits:
			t.Errorf("%s: %s is inode %d, held it was %d", what, rel, st.Ino, b.Ino&^heldViewInoBits)
		case st.Nlink != b.Nlink:
			t.Errorf("%s: %s has %d links, %d while held", what, rel, st.Nlink, b.Nlink)
		}
	}
	requireNlinkSettles(t, m, campaignSettle)
	names, err := readDirNames(m.Path(".statefs/held"))
	require.NoError(t, err)
	if slices.Contains(names, a.hold.ID) {
		t.Errorf("%s: .statefs/held still lists it", what)
	}
	c.figures.heldRestored++
}

// statTree lstats every file under dir, by relative path.
func statTree(t *testing.T, dir string) map[string]syscall.Stat_t {
	t.Helper()
	sts := map[string]syscall.Stat_t{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sts[filepath.ToSlash(rel)] = st
		return nil
	})
	if err != nil {
		t.Errorf("walking %s: %v", dir, err)
	}
	return sts
}

// distinctFiles counts the files under dir once each, however many names
// they have there, and their bytes.
func distinctFiles(t *testing.T, dir string) (files int, bytes int64) {
	t.Helper()
	seen := map[uint64]bool{}
	for _, st := range statTree(t, dir) {
		if !seen[st.Ino] {
			seen[st.Ino] = true
			files++
			bytes += st.Size
		}
	}
	return files, bytes
}

// collectJob ends the campaign: its job is marked gone and collected,
// which removes its live databases and checkpoints and empties its held
// trees, which the holder then drops; after a clean unmount fsck finds
// nothing.
func (c *campaign) collectJob() {
	t, m := c.t, c.m
	t.Helper()
	mustCLI(t, "job", "--store", m.Store, "gone", c.job)
	mustCLI(t, "gc", "--store", m.Store, "--grace", "0s")
	for _, trees := range c.kept {
		checkExpectations(t, m, trees[1], nil)
	}
	for _, d := range c.leftover {
		checkExpectations(t, m, d, nil)
	}
	deadline := time.Now().Add(campaignSettle)
	for {
		hs, unsettled := c.listHolds()
		if len(hs) == 0 && len(unsettled) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d trees still held %v after their job was collected: %+v %s", len(hs), campaignSettle, hs, unsettled)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mustCLI(t, "gc", "--store", m.Store, "--grace", "0s") // sweeps what the drops freed
	m.Unmount()
	if ps, res := fsck(t, m.Store, true); len(ps) > 0 || res.code != 0 {
		t.Errorf("fsck after the campaign's job was collected: exit %d, problems %+v\n%s", res.code, ps, res.stderr)
	}
}

// count adds what a passed round verified to the figures.
func (c *campaign) count(hs []*history, ul *unlinker, ck *checkpointer) {
	f := &c.figures
	for _, h := range hs {
		if h.durable >= 0 {
			f.ops += h.durable + 1
			f.bytes += int64(len(h.versions[h.durable]))
		}
		if h.linkDurable {
			f.ops++
		}
	}
	for _, u := range ul.files {
		if u.durable {
			f.ops++
			f.bytes += int64(len(u.data))
		}
		if u.unlinkDurable {
			f.ops++
		}
	}
	for _, d := range ck.files {
		if d.durable {
			f.ops++
			f.bytes += int64(len(d.data))
		}
		if d.removeDurable {
			f.ops++
		}
	}
	f.restores += ck.restores
	for _, cp := range ck.checkpoints {
		if cp.durable {
			f.ops++
			for _, b := range cp.files {
				f.bytes += int64(len(b))
			}
		}
		if cp.removeDurable {
			f.ops++
		}
	}
}

// goneJobTree is the local state of a job that the operator marked gone.
type goneJobTree struct {
	executor string // tm_<resource id>, relative to the mount
	files    map[string][]byte
}

// expectations: each file whole or collected.
func (g goneJobTree) expectations() map[string]expect {
	e := map[string]expect{}
	for p, b := range g.files {
		e[strings.TrimPrefix(p, g.executor+"/")] = expect{exact: [][]byte{b}}
	}
	return e
}

// goneJob writes, fsyncs and marks gone the local state of a new job under
// an executor of its own, for this round's gc: a live RocksDB and its
// checkpoint, which share an SST by a hard link, as after a native
// checkpoint.
func (c *campaign) goneJob(r int) goneJobTree {
	job := fmt.Sprintf("%016x%016x", c.rng.Uint64(), c.rng.Uint64())
	g := goneJobTree{executor: fmt.Sprintf("tm_camp%d", r), files: map[string][]byte{}}
	chk := fmt.Sprintf("%s/localState/aid_%s/jid_%s/vtx_%s_sti_0/chk_1", g.executor, holdAlloc, job, holdVertex)
	db := fmt.Sprintf("%s/tmp/job_%s_op_agg_uuid_5b1c2f3e-0a1b-4c2d-8e9f-0123456789ab/db", g.executor, job)
	seed := int64(c.rng.Uint64() >> 2)
	g.files[chk+"/_task_state_snapshot"] = []byte("snapshot of " + job)
	g.files[chk+"/db/000012.sst"] = pseudoRandom(300<<10+c.rng.IntN(1<<20), seed)
	g.files[chk+"/db/MANIFEST-000003"] = pseudoRandom(4<<10, seed+1)
	g.files[db+"/000013.sst"] = pseudoRandom(100<<10+c.rng.IntN(600<<10), seed+2)
	g.files[db+"/CURRENT"] = []byte("MANIFEST-000003\n")
	for p, b := range g.files {
		writeSyncedWithDir(c.t, c.m.Path(p), b)
	}
	shared := db + "/000012.sst"
	require.NoError(c.t, os.Link(c.m.Path(chk, "db/000012.sst"), c.m.Path(shared)))
	syncDir(c.t, c.m.Path(db))
	g.files[shared] = g.files[chk+"/db/000012.sst"]
	mustCLI(c.t, "job", "--store", c.m.Store, "gone", job)
	return g
}

// gcRunner runs gc through the daemon, again and again, until the kill.
type gcRunner struct {
	store  string
	killed *atomic.Bool
	rng    *rand.Rand
	runs   atomic.Int32 // runs begun

	interrupted   bool // a run failed because the daemon died under it
	errBeforeKill error
}

func (g *gcRunner) run() {
	time.Sleep(time.Duration(g.rng.Int64N(int64(400 * time.Millisecond))))
	for !g.killed.Load() {
		g.runs.Add(1)
		out, err := statefs("gc", "--store", g.store, "--grace", "0s")
		if err != nil {
			if g.killed.Load() {
				g.interrupted = true
			} else {
				g.errBeforeKill = fmt.Errorf("%v: %s", err, out)
			}
			return
		}
		time.Sleep(time.Duration(g.rng.Int64N(int64(300 * time.Millisecond))))
	}
}

// expect is what the journal allows one name to hold after a crash.
type expect struct {
	required  bool     // a confirmed change made it exist
	forbidden bool     // a confirmed change removed it
	exact     [][]byte // contents it may hold
	prefixOf  []byte   // or any prefix of this: a write not confirmed
	group     string   // names of one group are all there or all gone
}

// checkExpectations walks dir on the mount: every file there must be
// allowed by want (relative names), every required one must be there, and
// each group must be whole or absent.
func checkExpectations(t *testing.T, m *Mount, dir string, want map[string]expect) {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(m.Path(dir), func(p string, d fs.DirEntry, err error) error {
		if os.IsNotExist(err) && p == m.Path(dir) {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(m.Path(dir), p)
		e, ok := want[rel]
		data, rerr := os.ReadFile(p)
		switch {
		case !ok:
			t.Errorf("%s/%s exists, but nobody wrote it", dir, rel)
		case e.forbidden:
			t.Errorf("%s/%s exists, but its removal was confirmed", dir, rel)
		case rerr != nil:
			t.Errorf("%s/%s: %v", dir, rel, rerr)
		case !matches(data, e):
			t.Errorf("%s/%s holds %s, which the journal does not allow (%d allowed contents, prefix of %d bytes allowed: %v)",
				dir, rel, describe(data), len(e.exact), len(e.prefixOf), e.prefixOf != nil)
		}
		seen[rel] = true
		return nil
	})
	if err != nil {
		t.Errorf("walking %s: %v", dir, err)
	}
	groups := map[string][2]int{} // present, total
	for rel, e := range want {
		if e.required && !seen[rel] {
			t.Errorf("%s/%s is gone, but the journal confirmed it", dir, rel)
		}
		if e.group != "" {
			g := groups[e.group]
			if seen[rel] {
				g[0]++
			}
			g[1]++
			groups[e.group] = g
		}
	}
	for name, g := range groups {
		if g[0] != 0 && g[0] != g[1] {
			t.Errorf("%s: %s holds %d of its %d files: a rename showed half a directory", dir, name, g[0], g[1])
		}
	}
}

func matches(data []byte, e expect) bool {
	for _, b := range e.exact {
		if bytes.Equal(data, b) {
			return true
		}
	}
	return e.prefixOf != nil && isPrefix(data, e.prefixOf)
}

// actor is what the campaign's writers share: names resolved through a
// directory fd on the mount (so that after the kill they fail instead of
// writing into the bare mountpoint), and the error the daemon gave while
// still alive.
type actor struct {
	root   *os.Root
	dir    string
	rng    *rand.Rand
	killed *atomic.Bool
	seq    int

	errBeforeKill error
}

// failed records err unless the daemon is being killed; the actor stops.
func (a *actor) failed(err error) {
	if !a.killed.Load() {
		a.errBeforeKill = err
	}
}

// content is random bytes: mostly under the inline limit, often large
// enough to be sealed into one or more chunks.
func (a *actor) content() []byte {
	n := a.rng.IntN(24 << 10)
	if a.rng.IntN(3) == 0 {
		n = 40<<10 + a.rng.IntN(600<<10)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(a.rng.Uint32())
	}
	return b
}

// create makes a new file, writes it front to back and fsyncs it. begun
// is called first: a create the daemon committed may show even if its
// answer never came.
func (a *actor) create(name string, data []byte, begun func()) error {
	begun()
	f, err := a.root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := writeAndSync(f, data); err != nil {
		return err
	}
	return f.Close()
}

// syncDir fsyncs the directory dir (relative to the mount).
func (a *actor) syncDir(dir string) error { return fsyncOpened(a.root.Open(dir)) }

// unlinker creates files and unlinks earlier ones, each change followed
// by a directory fsync.
type unlinker struct {
	actor
	files []*unlinkedFile
}

type unlinkedFile struct {
	name          string // relative to the unlinker's dir
	data          []byte
	durable       bool // written, fsync'd, dir fsync'd
	unlinkIssued  bool
	unlinkDurable bool // unlink and the dir fsync returned
}

func (u *unlinker) run() {
	for {
		u.seq++
		f := &unlinkedFile{name: fmt.Sprintf("f%d", u.seq), data: u.content()}
		if err := u.create(path.Join(u.dir, f.name), f.data, func() { u.files = append(u.files, f) }); err != nil {
			u.failed(err)
			return
		}
		if err := u.syncDir(u.dir); err != nil {
			u.failed(err)
			return
		}
		f.durable = true
		if u.rng.IntN(2) == 0 {
			continue
		}
		var live []*unlinkedFile
		for _, g := range u.files {
			if g.durable && !g.unlinkIssued {
				live = append(live, g)
			}
		}
		v := live[u.rng.IntN(len(live))]
		v.unlinkIssued = true
		if err := u.root.Remove(path.Join(u.dir, v.name)); err != nil {
			u.failed(err)
			return
		}
		if err := u.syncDir(u.dir); err != nil {
			u.failed(err)
			return
		}
		v.unlinkDurable = true
	}
}

func (u *unlinker) expectations() map[string]expect {
	e := map[string]expect{}
	for _, f := range u.files {
		switch {
		case f.unlinkDurable:
			e[f.name] = expect{forbidden: true}
		case f.durable:
			e[f.name] = expect{required: !f.unlinkIssued, exact: [][]byte{f.data}}
		default:
			e[f.name] = expect{prefixOf: f.data}
		}
	}
	return e
}

// checkpointer does what Flink's RocksDB backend does in a TaskManager's
// working directory (its dir, tm_<resource id>): the live database is an
// instance directory tmp/job_<job>_op_<operator>_uuid_<uuid>/db/, whose
// SST files are written once and fsync'd and deleted after compactions.
// A native checkpoint hard-links the live SSTs into chk_<n>.tmp in the
// subtask's local state, writes MANIFEST and CURRENT there and fsyncs
// them, fsyncs the directory, renames it to chk_<n> and fsyncs its parent;
// checkpoints older than the last two are removed. Now and then the task
// is restored from local state: a new instance directory (a new uuid) gets
// the newest checkpoint's SSTs hard-linked back and its other files
// copied, and the old instance directory is removed, before or after. So
// an SST has names under the job's tmp/ tree and under its allocation's.
type checkpointer struct {
	actor
	job      string
	operator string // as Flink puts it in the instance directory's name
	subtask  string // localState/aid_<a>/jid_<job>/vtx_<v>_sti_<n>, relative to dir

	instance    string    // the live instance directory, relative to dir
	files       []*dbFile // every name made in an instance's db/
	checkpoints []*checkpointDir
	restores    int       // restores whose new instance was made durable
	madePending time.Time // when it last removed a checkpoint (held deletes pend that)
}

// dbFile is one name in an instance's db/: an SST the database wrote, or
// a checkpoint's file that a restore linked (an SST) or copied (MANIFEST,
// CURRENT) there.
type dbFile struct {
	name          string // tmp/job_..._uuid_<uuid>/db/<file>, relative to the executor's dir
	data          []byte
	linked        bool // made by link(2): whole or absent until durable
	durable       bool // written, fsync'd, the directory fsync'd
	removeIssued  bool
	removeDurable bool
}

type checkpointDir struct {
	n     int
	files map[string][]byte // begun in chk_<n>.tmp
	// written holds the files whose content was written and fsync'd (the
	// links are whole at once).
	written       map[string]bool
	renameIssued  bool
	durable       bool // the rename and the parent's fsync returned
	removeIssued  bool
	removeDurable bool
}

func (k *checkpointer) run() {
	if err := k.newInstance(); err != nil {
		k.failed(err)
		return
	}
	for {
		var err error
		switch op := k.rng.IntN(40); {
		case op < 20:
			err = k.writeSST()
		case op < 28:
			err = k.compact()
		case op < 37:
			err = k.checkpoint()
		default:
			err = k.restore()
		}
		if err != nil {
			k.failed(err)
			return
		}
	}
}

// javaUUID is a random id as java.util.UUID prints it.
func javaUUID(rng *rand.Rand) string {
	a, b := rng.Uint64(), rng.Uint64()
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", a>>32, a>>16&0xffff, a&0xffff, b>>48, b&(1<<48-1))
}

// newInstance makes a new instance directory with its db/ and makes it
// durable; it becomes the live one.
func (k *checkpointer) newInstance() error {
	inst := fmt.Sprintf("tmp/job_%s_op_%s_uuid_%s", k.job, k.operator, javaUUID(k.rng))
	for _, d := range []string{inst, inst + "/db"} {
		if err := k.root.Mkdir(path.Join(k.dir, d), 0o755); err != nil {
			return err
		}
	}
	for _, d := range []string{inst + "/db", inst, "tmp"} {
		if err := k.syncDir(path.Join(k.dir, d)); err != nil {
			return err
		}
	}
	k.instance = inst
	return nil
}

func (k *checkpointer) db() string { return k.instance + "/db" }

func (k *checkpointer) writeSST() error {
	k.seq++
	f := &dbFile{name: fmt.Sprintf("%s/%06d.sst", k.db(), k.seq), data: k.content()}
	if err := k.create(path.Join(k.dir, f.name), f.data, func() { k.files = append(k.files, f) }); err != nil {
		return err
	}
	if err := k.syncDir(path.Join(k.dir, k.db())); err != nil {
		return err
	}
	f.durable = true
	return nil
}

// live is the live instance's SSTs.
func (k *checkpointer) live() []*dbFile {
	var live []*dbFile
	for _, f := range k.files {
		if f.durable && !f.removeIssued && path.Dir(f.name) == k.db() && strings.HasSuffix(f.name, ".sst") {
			live = append(live, f)
		}
	}
	return live
}

// compact removes one live SST, as a compaction that replaced it does.
func (k *checkpointer) compact() error {
	live := k.live()
	if len(live) < 3 {
		return nil
	}
	f := live[k.rng.IntN(len(live))]
	f.removeIssued = true
	if err := k.root.Remove(path.Join(k.dir, f.name)); err != nil {
		return err
	}
	if err := k.syncDir(path.Join(k.dir, k.db())); err != nil {
		return err
	}
	f.removeDurable = true
	return nil
}

// checkpointPath is checkpoint n's directory (suffix ".tmp": while it is
// made) as the actor opens it.
func (k *checkpointer) checkpointPath(n int, suffix string) string {
	return path.Join(k.dir, k.subtask, fmt.Sprintf("chk_%d%s", n, suffix))
}

func (k *checkpointer) checkpoint() error {
	c := &checkpointDir{n: len(k.checkpoints) + 1, files: map[string][]byte{}, written: map[string]bool{}}
	k.checkpoints = append(k.checkpoints, c)
	tmp := k.checkpointPath(c.n, ".tmp")
	if err := k.root.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	for _, f := range k.live() {
		base := path.Base(f.name)
		c.files[base] = f.data
		if err := k.root.Link(path.Join(k.dir, f.name), path.Join(tmp, base)); err != nil {
			return err
		}
		c.written[base] = true
	}
	manifest := fmt.Sprintf("MANIFEST-%06d", c.n)
	for name, data := range map[string][]byte{manifest: k.content(), "CURRENT": []byte(manifest + "\n")} {
		if err := k.create(path.Join(tmp, name), data, func() { c.files[name] = data }); err != nil {
			return err
		}
		c.written[name] = true
	}
	if err := k.syncDir(tmp); err != nil {
		return err
	}
	c.renameIssued = true
	if err := k.root.Rename(tmp, k.checkpointPath(c.n, "")); err != nil {
		return err
	}
	if err := k.syncDir(path.Join(k.dir, k.subtask)); err != nil {
		return err
	}
	c.durable = true
	for _, old := range k.checkpoints {
		if old.n > c.n-2 || !old.durable || old.removeIssued {
			continue
		}
		old.removeIssued = true
		k.madePending = time.Now()
		err := k.root.RemoveAll(k.checkpointPath(old.n, ""))
		k.madePending = time.Now()
		if err != nil {
			return err
		}
		if err := k.syncDir(path.Join(k.dir, k.subtask)); err != nil {
			return err
		}
		old.removeDurable = true
	}
	return nil
}

// restore does what Flink does when the task restarts from local state:
// the newest checkpoint's SSTs are hard-linked into a new instance's db/
// and its other files copied there, and the old instance is removed
// (before the new one is made, or after).
func (k *checkpointer) restore() error {
	var from *checkpointDir
	for _, c := range k.checkpoints {
		if c.durable && !c.removeIssued {
			from = c
		}
	}
	if from == nil {
		return nil
	}
	old := k.instance
	removeFirst := k.rng.IntN(2) == 0
	if removeFirst {
		if err := k.removeInstance(old); err != nil {
			return err
		}
	}
	if err := k.newInstance(); err != nil {
		return err
	}
	names := make([]string, 0, len(from.files))
	for name := range from.files {
		names = append(names, name)
	}
	sort.Strings(names)
	var made []*dbFile
	for _, name := range names {
		f := &dbFile{name: path.Join(k.db(), name), data: from.files[name], linked: strings.HasSuffix(name, ".sst")}
		k.files = append(k.files, f)
		made = append(made, f)
		var err error
		if f.linked {
			err = k.root.Link(path.Join(k.checkpointPath(from.n, ""), name), path.Join(k.dir, f.name))
		} else {
			err = k.create(path.Join(k.dir, f.name), f.data, func() {})
		}
		if err != nil {
			return err
		}
	}
	if err := k.syncDir(path.Join(k.dir, k.db())); err != nil {
		return err
	}
	for _, f := range made {
		f.durable = true
	}
	k.restores++
	if !removeFirst {
		return k.removeInstance(old)
	}
	return nil
}

// removeInstance removes an instance directory, as Flink disposes of a
// backend, and makes the removal durable.
func (k *checkpointer) removeInstance(inst string) error {
	var gone []*dbFile
	for _, f := range k.files {
		if strings.HasPrefix(f.name, inst+"/") && !f.removeIssued {
			f.removeIssued = true
			gone = append(gone, f)
		}
	}
	if err := k.root.RemoveAll(path.Join(k.dir, inst)); err != nil {
		return err
	}
	if err := k.syncDir(path.Join(k.dir, "tmp")); err != nil {
		return err
	}
	for _, f := range gone {
		f.removeDurable = true
	}
	return nil
}

// expectations are relative to the executor's dir.
func (k *checkpointer) expectations() map[string]expect {
	e := map[string]expect{}
	for _, f := range k.files {
		switch {
		case f.removeDurable:
			e[f.name] = expect{forbidden: true}
		case f.durable:
			e[f.name] = expect{required: !f.removeIssued, exact: [][]byte{f.data}}
		case f.linked:
			e[f.name] = expect{exact: [][]byte{f.data}}
		default:
			e[f.name] = expect{prefixOf: f.data}
		}
	}
	for _, c := range k.checkpoints {
		tmp := path.Join(k.subtask, fmt.Sprintf("chk_%d.tmp", c.n))
		final := path.Join(k.subtask, fmt.Sprintf("chk_%d", c.n))
		names := make([]string, 0, len(c.files))
		for name := range c.files {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			data := c.files[name]
			switch {
			case c.removeDurable:
				e[path.Join(final, name)] = expect{forbidden: true}
				e[path.Join(tmp, name)] = expect{forbidden: true}
			case c.durable:
				// Whole, unless its removal began: then any of its files may
				// be gone already, and the rest are whole.
				e[path.Join(final, name)] = expect{required: !c.removeIssued, exact: [][]byte{data}}
				e[path.Join(tmp, name)] = expect{forbidden: true}
			case c.renameIssued:
				// The rename may or may not show; the directory is whole
				// under one of its names.
				e[path.Join(final, name)] = expect{exact: [][]byte{data}, group: final}
				e[path.Join(tmp, name)] = expect{exact: [][]byte{data}, group: tmp}
			case c.written[name]:
				e[path.Join(tmp, name)] = expect{exact: [][]byte{data}}
			default:
				e[path.Join(tmp, name)] = expect{prefixOf: data}
			}
		}
	}
	return e
}

// indexTables describes the index's table files: each is a memtable
// flush or a compaction's output, and badger numbers them in the order it
// makes them, so the newest's number counts the tables the whole campaign
// made (those compactions merged away included).
func indexTables(t *testing.T, store string) string {
	t.Helper()
	ts, err := filepath.Glob(filepath.Join(store, "index", "*.sst"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) == 0 {
		return "none"
	}
	sort.Strings(ts)
	return fmt.Sprintf("%d, the newest %s", len(ts), filepath.Base(ts[len(ts)-1]))
}
