package test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// With --hold-deletes, Flink freeing a slot (rm -rf of aid_<a>) is held and
// can be restored, the same inodes back, no data copied; a pruned
// checkpoint is never held.
func TestHeldDeleteIsRestorable(t *testing.T) {
	m := mountFS(t, holdArgs...)
	sub := subtaskDir(holdAlloc, jobLive)
	pruned := writeCheckpoint(t, m, sub, 1, 1)
	kept := writeCheckpoint(t, m, sub, 2, 2)
	waitAllSealed(t, m)
	inoBefore := lstatOf(t, m.Path(sub, "chk_2/db/000012.sst")).Ino

	// Flink subsumes checkpoint 1: its directory goes, file by file.
	require.NoError(t, os.RemoveAll(m.Path(sub, "chk_1")))
	time.Sleep(2 * time.Second)
	require.Empty(t, holds(t, m), "a pruned checkpoint was held")
	requireTree(t, m, pruned, false)

	// The slot is freed: the whole allocation goes.
	alloc := "tm_tm-1/localState/aid_" + holdAlloc
	require.NoError(t, os.RemoveAll(m.Path(alloc)))
	_, err := os.Stat(m.Path(alloc))
	require.True(t, os.IsNotExist(err), "rm -rf left %s: %v", alloc, err)
	requireTree(t, m, kept, false)

	hs := waitHolds(t, m, 1)
	require.Equal(t, alloc, hs[0].Path)
	require.Equal(t, []string{jobLive}, hs[0].Jobs)
	require.Equal(t, 3, hs[0].Files)

	// .statefs/held/<id> shows the held files, read-only.
	view := m.Path(".statefs/held", hs[0].ID)
	for p, b := range kept {
		requireContent(t, filepath.Join(view, strings.TrimPrefix(p, alloc+"/")), b)
	}
	for p := range pruned {
		_, err := os.Stat(filepath.Join(view, strings.TrimPrefix(p, alloc+"/")))
		require.True(t, os.IsNotExist(err), "pruned %s is in the held tree: %v", p, err)
	}
	heldFile := filepath.Join(view, "jid_"+jobLive, "vtx_"+holdVertex+"_sti_0", "chk_2/_task_state_snapshot")
	_, err = os.OpenFile(heldFile, os.O_WRONLY, 0)
	require.ErrorIs(t, err, syscall.EROFS)
	require.ErrorIs(t, os.Remove(heldFile), syscall.EROFS)

	// Restored through the daemon, to where it was, by its path in the view.
	out := mustCLI(t, "restore", "--store", m.Store, view, m.Path(alloc))
	require.Contains(t, out, "restored "+hs[0].ID)
	_, err = os.Stat(view)
	require.True(t, os.IsNotExist(err), "the restored hold's view is still served from the kernel's cache: %v", err)
	requireTree(t, m, kept, true)
	require.Equal(t, inoBefore, lstatOf(t, m.Path(sub, "chk_2/db/000012.sst")).Ino, "restore copied the file")
	require.Empty(t, holds(t, m))
	entries, err := os.ReadDir(m.Path(".statefs/held"))
	require.NoError(t, err)
	require.Empty(t, entries)

	// It stays restored across a restart, and the store is consistent.
	m.Restart()
	requireTree(t, m, kept, true)
	m.Unmount()
	mustCLI(t, "fsck", "--store", m.Store)
}

// Without --hold-deletes, and for a job confirmed gone, a removal is a
// removal.
func TestDeletesNotHeld(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		job  string
	}{
		{"hold off", []string{"--seal-delay", "0"}, jobLive},
		{"job gone", holdArgs, jobGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mountFS(t, tc.args...)
			writeCheckpoint(t, m, subtaskDir(holdAlloc, tc.job), 1, 3)
			waitAllSealed(t, m)
			if tc.job == jobGone {
				mustCLI(t, "job", "--store", m.Store, "gone", tc.job)
				mustCLI(t, "gc", "--store", m.Store, "--grace", "1h") // records the verdict, removes nothing
			}
			require.NoError(t, os.RemoveAll(m.Path("tm_tm-1/localState/aid_"+holdAlloc)))
			time.Sleep(2 * time.Second)
			require.Empty(t, holds(t, m))
			m.Unmount()
			mustCLI(t, "gc", "--store", m.Store, "--grace", "1h") // sweeps unreferenced chunks
			require.Zero(t, chunkBytes(t, m), "the removed files' chunks are still referenced")
			mustCLI(t, "fsck", "--store", m.Store)
		})
	}
}

// A held tree goes when its job is collected, when the hold TTL passes,
// and when the disk is under the free-space floor.
func TestHeldTreesGo(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		gc   bool
	}{
		{"job collected", nil, true},
		{"ttl", []string{"--hold-ttl", "3s"}, false},
		{"free-space floor", []string{"--hold-min-free", "100"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mountFS(t, append(holdArgs, tc.args...)...)
			writeCheckpoint(t, m, subtaskDir(holdAlloc, jobGone), 1, 4)
			waitAllSealed(t, m)
			require.NoError(t, os.RemoveAll(m.Path("tm_tm-1/localState/aid_"+holdAlloc)))
			if tc.name != "free-space floor" { // under a 100% floor nothing stays held
				waitHolds(t, m, 1)
			}
			if tc.gc {
				view := m.Path(".statefs/held", holds(t, m)[0].ID)
				_, err := os.Stat(view) // the kernel caches the entry
				require.NoError(t, err)
				mustCLI(t, "job", "--store", m.Store, "gone", jobGone)
				out := mustCLI(t, "gc", "--store", m.Store, "--grace", "0")
				require.Contains(t, out, "removed job "+jobGone)
				// The collection empties the tree; its TaskManager runs on,
				// so the allocation directory that held the job's state
				// is not the collector's: the holder drops the tree, empty.
				waitHolds(t, m, 0)
				_, err = os.Stat(view)
				require.True(t, os.IsNotExist(err), "the collected hold's view is still served from the kernel's cache: %v", err)
			}
			require.Eventually(t, func() bool { return strings.Contains(m.Log(), "dropped held state") },
				15*time.Second, 100*time.Millisecond, "no held tree dropped:\n%s", m.Log())
			waitHolds(t, m, 0)
			require.Eventually(t, func() bool {
				es, err := os.ReadDir(m.Path(".statefs/held"))
				return err == nil && len(es) == 0
			}, 5*time.Second, 100*time.Millisecond)
			m.Unmount()
			mustCLI(t, "gc", "--store", m.Store, "--grace", "1h") // sweeps the chunks
			mustCLI(t, "fsck", "--store", m.Store)
			require.Zero(t, chunkBytes(t, m), "chunks of the dropped tree are left")
		})
	}
}

// Removals pending a decision when the daemon is killed are decided after
// the restart; a held tree is restored offline, with bad requests refused.
func TestHoldAcrossRestartAndOfflineRestore(t *testing.T) {
	m := mountFS(t, append(holdArgs, "--hold-window", "3s")...)
	sub := subtaskDir(holdAlloc, jobLive)
	files := writeCheckpoint(t, m, sub, 9, 5)
	waitAllSealed(t, m)
	require.NoError(t, os.RemoveAll(m.Path("tm_tm-1/localState/aid_"+holdAlloc)))
	m.Kill() // within the window: nothing decided yet
	m.Start()
	hs := waitHolds(t, m, 1)
	m.Unmount()

	const newAlloc = "11111111111111111111111111111111"
	dest := "tm_tm-1/localState/aid_" + newAlloc
	for _, bad := range []struct{ hold, dest, want string }{
		{hs[0].ID, "tm_tm-1/nowhere/x", "not found"},
		{hs[0].ID, "../escape", "invalid"},
		{hs[0].ID, "/abs/path", "relative to the mount root"},
		{hs[0].ID, "tm_tm-1", "already exists"},
		{"20200101T000000Z-aid_x", dest, "not found"},
	} {
		out, err := statefs("restore", "--store", m.Store, bad.hold, bad.dest)
		require.Error(t, err, "restore %s %s: %s", bad.hold, bad.dest, out)
		require.Contains(t, out, bad.want)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(out), "\n")+1, "not one line: %q", out)
	}
	require.Len(t, holds(t, m), 1)

	mustCLI(t, "restore", "--store", m.Store, hs[0].ID, dest)
	mustCLI(t, "fsck", "--store", m.Store)
	m.Start()
	for p, b := range files {
		requireContent(t, m.Path(strings.Replace(p, "aid_"+holdAlloc, "aid_"+newAlloc, 1)), b)
	}
	// The restored tree belongs to its new allocation.
	out := mustCLI(t, "du", "--store", m.Store, "--by", "allocation")
	require.Contains(t, out, newAlloc)
	require.NotContains(t, out, holdAlloc)
}
