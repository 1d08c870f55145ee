package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statefs/statefs/internal/crashpoint"
)

// The crash-point tests make the daemon die at each named point of its
// work (internal/crashpoint), not only where a random SIGKILL happens to
// land. Each case runs a workload that reaches its point on a daemon armed
// with STATEFS_CRASH_AT, sees the daemon die there, and then checks, as a
// crash must leave things (DESIGN invariants 1-3):
//
//   - `statefs fsck --verify` of the store as the crash left it finds no
//     inconsistency, only the leftovers the point predicts (a stray staging
//     file, chunks no manifest uses);
//   - after a mount without the crash point, every file that was made
//     durable reads back byte for byte, and the mount holds no file, and no
//     content, that nobody wrote;
//   - the interrupted operation either shows as done or as never begun, and
//     running it again (a seal, gc) completes;
//   - after a clean unmount fsck finds nothing at all.

// crashPointCases has one case per crash point; the name is the value of
// STATEFS_CRASH_AT.
var crashPointCases = []struct {
	point string
	run   func(c *crashCase)
}{
	{crashpoint.SealChunkStored + ":2", sealCrash(compressible, problemGarbageChunk)},
	{crashpoint.SealObjectHashed, sealCrash(pseudoRandom)},
	{crashpoint.SealObjectSynced, sealCrash(pseudoRandom)},
	{crashpoint.SealObjectLinked, sealCrash(pseudoRandom, problemGarbageObject)},
	{crashpoint.SealBeforeCommit, sealCrash(compressible, problemGarbageChunk)},
	{crashpoint.SealBeforeCommit, sealCrash(pseudoRandom, problemGarbageObject)},
	{crashpoint.SealCommitted, sealCrash(compressible, problemStrayStaging)},
	{crashpoint.SealCommitted, sealCrash(pseudoRandom, problemStrayStaging)},
	{crashpoint.UnsealBeforeCommit, unsealCrash},
	{crashpoint.HandleReleased, releaseCrash},
	{crashpoint.RenameBeforeCommit, renameCrash(false)},
	{crashpoint.RenameCommitted, renameCrash(true)},
	{crashpoint.ReapCommitted, reapCrash},
	{crashpoint.ReplyCommitted, replyCrash},
	{crashpoint.RecoverReaped, recoverCrash},
	{crashpoint.StoreClose, closeCrash},
	{crashpoint.SweepChunkRemoved + ":2", gcCrash},
	{crashpoint.SweepBeforeForget, gcCrash},
	{crashpoint.GCInodeRemoved + ":3", gcCrash},
	{crashpoint.GCBeforeJobDelete, gcCrash},
	{crashpoint.HoldHeld, holdCrash},
	{crashpoint.HoldPendingRemoved, pruneCrash},
	{crashpoint.HoldDropping, dropCrash},
}

func TestCrashPoints(t *testing.T) {
	for _, tc := range crashPointCases {
		t.Run(tc.point, func(t *testing.T) {
			t.Parallel()
			tc.run(&crashCase{t: t, point: tc.point})
		})
	}
}

// Every crash point the daemon has is tested.
func TestCrashPointsCovered(t *testing.T) {
	var tested []string
	for _, tc := range crashPointCases {
		name, _, _ := strings.Cut(tc.point, ":")
		tested = append(tested, name)
	}
	for _, p := range crashpoint.Points {
		if !slices.Contains(tested, p) {
			t.Errorf("crash point %s has no case in crashPointCases", p)
		}
	}
}

// crashCase is one run of a crash point: a daemon, armed or not.
type crashCase struct {
	t     *testing.T
	point string // STATEFS_CRASH_AT
	m     *Mount
}

// mount starts an unarmed daemon on a fresh store.
func (c *crashCase) mount(args ...string) *Mount {
	c.m = mountFS(c.t, withoutKeeper(args)...)
	return c.m
}

// withoutKeeper are args for a daemon of one process: a crash point kills
// the server, and these tests look at the store as the crash left it,
// which a keeper's next server would recover at once.
func withoutKeeper(args []string) []string {
	return append([]string{"--keeper=false"}, args...)
}

// arm restarts the daemon cleanly with args and the crash point armed.
func (c *crashCase) arm(args ...string) {
	c.t.Helper()
	c.m.Unmount()
	c.m.Args, c.m.Env = withoutKeeper(args), []string{crashpoint.EnvVar + "=" + c.point}
	c.m.Start()
}

// banner is the line the daemon prints as it dies at the point.
func (c *crashCase) banner() string {
	name, nth, ok := strings.Cut(c.point, ":")
	if !ok {
		nth = "1"
	}
	return fmt.Sprintf("crashpoint: %s (hit %s): killing the daemon", name, nth)
}

// crashed waits for the armed daemon to die at the point, detaches its
// dead mount and checks the store as it was left: fsck finds no
// inconsistency, and each leftover kind named is there (which shows the
// crash came where the point says).
func (c *crashCase) crashed(leftovers ...string) {
	c.t.Helper()
	m := c.m
	select {
	case err := <-m.done:
		m.done <- err // for Kill, which detaches the mount
	case <-time.After(30 * time.Second):
		c.t.Fatalf("the daemon did not reach crash point %s within 30s\n%s", c.point, tail(m.Log(), 4000))
	}
	m.Kill()
	if !strings.Contains(m.Log(), c.banner()) {
		c.t.Fatalf("the daemon died, but not at crash point %s\n%s", c.point, tail(m.Log(), 4000))
	}
	c.fsckLeftovers(leftovers...)
}

// fsckLeftovers runs fsck --verify on the store no daemon serves: no
// inconsistency, and at least one problem of each leftover kind.
func (c *crashCase) fsckLeftovers(leftovers ...string) {
	c.t.Helper()
	ps, r := fsck(c.t, c.m.Store, true)
	requireOnlyLeftovers(c.t, "after the crash at "+c.point, ps, r, problemStrayStaging, problemGarbageChunk, problemGarbageObject)
	kinds := map[string]bool{}
	for _, p := range ps {
		kinds[p.Kind] = true
	}
	for _, k := range leftovers {
		if !kinds[k] {
			c.t.Errorf("after the crash at %s fsck reports no %s, so the crash was not where the point says: %v", c.point, k, ps)
		}
	}
}

// remount starts the daemon again, unarmed, with args.
func (c *crashCase) remount(args ...string) {
	c.t.Helper()
	c.m.Args, c.m.Env = withoutKeeper(args), nil
	c.m.Start()
}

// finish sweeps what the crash left (gc, which collects nothing that is
// not gone), unmounts cleanly, and expects fsck to find nothing at all.
func (c *crashCase) finish() {
	c.t.Helper()
	mustCLI(c.t, "gc", "--store", c.m.Store, "--grace", "1h")
	c.m.Unmount()
	if ps, r := fsck(c.t, c.m.Store, true); r.code != 0 || len(ps) != 0 {
		c.t.Errorf("after recovering from the crash at %s and a clean unmount, fsck: exit %d, problems %v\n%s", c.point, r.code, ps, r.stderr)
	}
}

// requireFiles checks every regular file of the mount (outside .statefs):
// each name in want is there with exactly its bytes, each in maybe is there
// with exactly its bytes or not at all, and there is no other file.
func requireFiles(t *testing.T, m *Mount, want, maybe map[string][]byte) {
	t.Helper()
	seen := map[string]bool{}
	err := walkFiles(m, func(p, rel string) error {
		b, ok := want[rel]
		if !ok {
			b, ok = maybe[rel]
		}
		if !ok {
			t.Errorf("%s exists, but nobody wrote it", rel)
			return nil
		}
		seen[rel] = true
		got, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
		} else if string(got) != string(b) {
			t.Errorf("%s holds %s, want %s", rel, describe(got), describe(b))
		}
		return nil
	})
	require.NoError(t, err)
	for rel := range want {
		if !seen[rel] {
			t.Errorf("%s is gone", rel)
		}
	}
}

// sealCrash: a file of content made by content (compressible: sealed as
// chunks; pseudoRandom: as an object) is sealed while the daemon dies at
// the point; the file, and one sealed before, read back whole, and the
// seal, done again after the mount, completes. leftovers are what the
// crash leaves: chunks or an object no manifest uses yet, or the staging
// file of a committed seal.
func sealCrash(content func(n int, seed int64) []byte, leftovers ...string) func(c *crashCase) {
	return func(c *crashCase) {
		t := c.t
		m := c.mount(sealDelayZero...)
		files := map[string][]byte{"d/old": content(2<<20, 1)}
		writeSyncedWithDir(t, m.Path("d/old"), files["d/old"])
		waitAllSealed(t, m)
		c.arm(sealDelayZero...)
		files["d/big"] = content(6<<20, 2) // at least two chunks of at most 4 MiB
		writeSyncedWithDir(t, m.Path("d/big"), files["d/big"])
		c.crashed(leftovers...)
		c.remount(sealDelayZero...)
		requireFiles(t, m, files, nil)
		waitAllSealed(t, m)
		requireFiles(t, m, files, nil)
		c.finish()
	}
}

// unsealCrash: a sealed file opened for writing is copied back into
// staging; the daemon dies before the index refers to the copy, which the
// next mount removes.
func unsealCrash(c *crashCase) {
	t := c.t
	m := c.mount(sealDelayZero...)
	files := map[string][]byte{"d/sealed": pseudoRandom(1<<20, 3)}
	writeSyncedWithDir(t, m.Path("d/sealed"), files["d/sealed"])
	waitAllSealed(t, m)
	c.arm("--seal-delay", "1h")
	if f, err := os.OpenFile(m.Path("d/sealed"), os.O_WRONLY, 0); err == nil {
		f.Close()
	}
	c.crashed(problemStrayStaging)
	c.remount(sealDelayZero...)
	requireFiles(t, m, files, nil)
	c.finish()
}

// releaseCrash: a file is written, fsync'd and closed; the daemon dies as
// it releases the handle, its seal scheduled but not begun. The file reads
// back after the restart, which seals it.
func releaseCrash(c *crashCase) {
	t := c.t
	m := c.mount()
	files := map[string][]byte{"d/log": pseudoRandom(300<<10, 6)}
	require.NoError(t, os.MkdirAll(m.Path("d"), 0o755))
	c.arm(sealDelayZero...)
	writeSyncedWithDir(t, m.Path("d/log"), files["d/log"])
	c.crashed()
	c.remount(sealDelayZero...)
	requireFiles(t, m, files, nil)
	waitAllSealed(t, m)
	c.finish()
}

// renameCrash: a file from outside any job is renamed over a sealed file
// in a job's local state (the rename also gives it the job as owner); the
// daemon dies before or after the commit. The name shows the old file or
// the new one, never a mixture, and the replaced file's chunks are swept.
func renameCrash(committed bool) func(c *crashCase) {
	return func(c *crashCase) {
		t := c.t
		m := c.mount(sealDelayZero...)
		src, dst := "incoming/new", fsckSti+"/chk_1/data"
		a, b := pseudoRandom(600<<10, 4), pseudoRandom(700<<10, 5)
		writeSyncedWithDir(t, m.Path(src), a)
		writeSyncedWithDir(t, m.Path(dst), b)
		waitAllSealed(t, m)
		c.arm(sealDelayZero...)
		os.Rename(m.Path(src), m.Path(dst)) // fails if the daemon dies before it answers
		c.crashed()
		c.remount(sealDelayZero...)
		if committed {
			requireFiles(t, m, map[string][]byte{dst: a}, nil)
		} else {
			requireFiles(t, m, map[string][]byte{src: a, dst: b}, nil)
		}
		requireNlinkMatchesNames(t, m)
		c.finish()
	}
}

// reapCrash: an unlinked file in staging loses its inode when the kernel
// forgets it; the daemon dies before its staging file goes, which the next
// mount removes.
func reapCrash(c *crashCase) {
	t := c.t
	m := c.mount("--seal-delay", "1h")
	files := map[string][]byte{"d/keep": pseudoRandom(100<<10, 6)}
	writeSyncedWithDir(t, m.Path("d/keep"), files["d/keep"])
	writeSyncedWithDir(t, m.Path("d/victim"), pseudoRandom(100<<10, 7))
	c.arm("--seal-delay", "1h")
	os.Remove(m.Path("d/victim"))
	c.crashed(problemStrayStaging)
	c.remount("--seal-delay", "1h")
	requireFiles(t, m, files, nil)
	c.finish()
}

// replyCrash: a link commits with its reply record and the daemon dies
// before it answers. No keeper sends the request again, so the link fails
// with the connection; the next mount, a new connection, shows it made,
// and fsck finds the record no problem.
func replyCrash(c *crashCase) {
	t := c.t
	m := c.mount("--seal-delay", "1h")
	files := map[string][]byte{"d/a": pseudoRandom(100<<10, 10)}
	writeSyncedWithDir(t, m.Path("d/a"), files["d/a"])
	c.arm("--seal-delay", "1h")
	os.Link(m.Path("d/a"), m.Path("d/b")) // fails: the daemon dies before it answers
	files["d/b"] = files["d/a"]
	c.crashed()
	c.remount("--seal-delay", "1h")
	requireFiles(t, m, files, nil)
	requireNlinkMatchesNames(t, m)
	c.finish()
}

// recoverCrash: a file unlinked while open is orphaned by a kill; the mount
// after it dies while recovering, between reaping the orphan and removing
// its staging file; the mount after that recovers again.
func recoverCrash(c *crashCase) {
	t := c.t
	m := c.mount("--seal-delay", "1h")
	files := map[string][]byte{"d/keep": pseudoRandom(100<<10, 8)}
	writeSyncedWithDir(t, m.Path("d/keep"), files["d/keep"])
	f, err := os.Create(m.Path("d/orphan"))
	require.NoError(t, err)
	require.NoError(t, writeAndSync(f, pseudoRandom(64<<10, 9)))
	require.NoError(t, os.Remove(m.Path("d/orphan")))
	m.Kill()
	f.Close()

	// The armed daemon dies in store.Open, before it mounts.
	m.Args, m.Env = withoutKeeper([]string{"--seal-delay", "1h"}), []string{crashpoint.EnvVar + "=" + c.point}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, m.mountArgs()...)
	cmd.Env = append(os.Environ(), m.Env...)
	out, err := cmd.CombinedOutput()
	if isMounted(m.Dir) {
		syscall.Unmount(m.Dir, syscall.MNT_DETACH)
	}
	if err == nil || !strings.Contains(string(out), c.banner()) {
		t.Fatalf("statefs mount ended with %v, not at crash point %s:\n%s", err, c.point, out)
	}
	c.fsckLeftovers(problemStrayStaging)
	c.remount("--seal-delay", "1h")
	requireFiles(t, m, files, nil)
	c.finish()
}

// closeCrash: the daemon dies in a clean shutdown, after the unmount and
// before the index is closed; everything written is there.
func closeCrash(c *crashCase) {
	t := c.t
	m := c.mount(sealDelayZero...)
	files := map[string][]byte{"d/sealed": pseudoRandom(1<<20, 10)}
	writeSyncedWithDir(t, m.Path("d/sealed"), files["d/sealed"])
	waitAllSealed(t, m)
	c.arm("--seal-delay", "1h")
	files["d/staged"] = pseudoRandom(200<<10, 11)
	writeSyncedWithDir(t, m.Path("d/staged"), files["d/staged"])
	require.NoError(t, os.Rename(m.Path("d/sealed"), m.Path("d/renamed")))
	files["d/renamed"] = files["d/sealed"]
	delete(files, "d/sealed")
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGTERM))
	c.crashed()
	c.remount(sealDelayZero...)
	requireFiles(t, m, files, nil)
	c.finish()
}

// chunkedSealZero seals at once and keeps every file as chunks, for the
// points of a sweep of chunks.
var chunkedSealZero = []string{"--seal-delay", "0", "--seal-as", "chunks"}

// gcCrash: gc, run through the daemon, collects a job the operator marked
// gone and sweeps its chunks; the daemon dies at the point. After the
// mount, the live job's files are whole, each of the gone job's files is
// whole or gone, and gc run again removes the rest.
func gcCrash(c *crashCase) {
	t := c.t
	m := c.mount(chunkedSealZero...)
	gone := flinkTree(t, m, jobGone, 60)
	live := flinkTree(t, m, jobLive, 70)
	waitAllSealed(t, m)
	mustCLI(t, "job", "--store", m.Store, "gone", jobGone)
	c.arm(chunkedSealZero...)
	if r := runCLI(t, time.Minute, "gc", "--store", m.Store, "--grace", "0s"); r.code == 0 {
		t.Fatalf("gc completed, so the daemon never reached %s:\n%s", c.point, r.stdout)
	}
	c.crashed()
	c.remount(chunkedSealZero...)
	requireFiles(t, m, live, gone)
	name, _, _ := strings.Cut(c.point, ":")
	switch name {
	case crashpoint.SweepChunkRemoved, crashpoint.SweepBeforeForget, crashpoint.GCBeforeJobDelete:
		requireFiles(t, m, live, nil) // the job's state went before the point
	}
	if name == crashpoint.GCBeforeJobDelete {
		require.Contains(t, mustCLI(t, "jobs", "--store", m.Store), jobGone, "the job's record went before its deletion")
	}
	mustCLI(t, "gc", "--store", m.Store, "--grace", "0s")
	requireFiles(t, m, live, nil)
	require.NotContains(t, mustCLI(t, "jobs", "--store", m.Store), jobGone, "gc run again left the gone job's record")
	c.finish()
}

// holdCrash: with deletes held, Flink frees a slot and the daemon dies
// right after it decided to hold the allocation's tree; the hold is there
// after the mount and restores every file.
func holdCrash(c *crashCase) {
	t := c.t
	m := c.mount(holdArgs...)
	files := writeCheckpoint(t, m, subtaskDir(holdAlloc, jobLive), 1, 12)
	waitAllSealed(t, m)
	c.arm(holdArgs...)
	alloc := "tm_tm-1/localState/aid_" + holdAlloc
	require.NoError(t, os.RemoveAll(m.Path(alloc)))
	c.crashed()
	c.remount(holdArgs...)
	requireFiles(t, m, nil, nil)
	hs := waitHolds(t, m, 1)
	require.Equal(t, alloc, hs[0].Path)
	mustCLI(t, "restore", "--store", m.Store, hs[0].ID, alloc)
	requireFiles(t, m, files, nil)
	c.finish()
}

// pruneCrash: with deletes held, Flink prunes a checkpoint and the daemon
// dies after removing the first of its made pending files for good; after the
// mount the decision goes on and the pruned files' content is freed.
func pruneCrash(c *crashCase) {
	t := c.t
	m := c.mount(holdArgs...)
	sub := subtaskDir(holdAlloc, jobLive)
	writeCheckpoint(t, m, sub, 1, 13)
	kept := writeCheckpoint(t, m, sub, 2, 14)
	waitAllSealed(t, m)
	c.arm(holdArgs...)
	require.NoError(t, os.RemoveAll(m.Path(sub, "chk_1")))
	c.crashed()
	c.remount(holdArgs...)
	requireFiles(t, m, kept, nil)
	before := contentBytes(t, m)
	require.Eventually(t, func() bool {
		mustCLI(t, "gc", "--store", m.Store, "--grace", "1h")
		return contentBytes(t, m) <= before-1<<20
	}, 20*time.Second, 200*time.Millisecond, "the pruned checkpoint's 1 MiB of chunks and objects was never freed")
	require.Empty(t, holds(t, m))
	requireFiles(t, m, kept, nil)
	c.finish()
}

// dropCrash: a held tree's TTL passes and the daemon dies as it begins to
// drop it; after the mount the drop goes on to the end.
func dropCrash(c *crashCase) {
	t := c.t
	args := append(slices.Clone(holdArgs), "--hold-ttl", "1s")
	m := c.mount(args...)
	writeCheckpoint(t, m, subtaskDir(holdAlloc, jobLive), 1, 15)
	waitAllSealed(t, m)
	c.arm(args...)
	require.NoError(t, os.RemoveAll(m.Path("tm_tm-1/localState/aid_"+holdAlloc)))
	c.crashed()
	c.remount(args...)
	waitHolds(t, m, 0)
	waitLogLine(t, m, 20*time.Second, "dropped held state")
	requireFiles(t, m, nil, nil)
	c.finish()
	require.Zero(t, chunkBytes(t, m), "chunks of the dropped tree are left")
}
