package test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/store"
)

// A RocksDB checkpoint hard-links the live db's SSTs into the checkpoint,
// and a restore from local state links them back into a new instance: one
// file has names under several owners. These tests state what that means
// for held deletes, for the collector and for its counting.

const (
	liveUUID     = "5b1c2f3e-0a1b-4c2d-8e9f-0123456789ab"
	restoredUUID = "9d8e7f6a-5b4c-4d3e-a2f1-0fedcba98765"
)

// liveDB is the db directory of job's RocksDB instance uuid under executor
// tm-1.
func liveDB(job, uuid string) string {
	return fmt.Sprintf("tm_tm-1/tmp/job_%s_op_Op_uuid_%s/db", job, uuid)
}

// gcJSON runs `statefs gc --grace 0s --json` with extra flags on m's store.
func gcJSON(t *testing.T, m *Mount, extra ...string) gc.Report {
	t.Helper()
	var r gc.Report
	cliJSON(t, &r, append([]string{"gc", "--store", m.Store, "--grace", "0s", "--json"}, extra...)...)
	return r
}

// orphans reads the orphans and their bytes from .statefs/stats.json.
func orphans(t *testing.T, m *Mount) [2]int64 {
	t.Helper()
	var s store.Stats
	require.NoError(t, json.Unmarshal(fileBytes(t, m.Path(".statefs", "stats.json")), &s))
	return [2]int64{int64(s.Orphans), s.OrphanBytes}
}

// With --hold-deletes, Flink freeing a slot (rm -rf of aid_<a>) of a job
// not known gone is held whole, even where the checkpoint's SSTs are also
// linked from the live db; a restore gives every name back, the same
// inode, with the link count it had before the removal.
func TestHeldDeleteKeepsLinksFromTheLiveDB(t *testing.T) {
	for _, tc := range []struct {
		name  string
		links map[string][]string // checkpoint → the live db's SSTs linked into it
		own   map[string][]byte   // files the checkpoints have of their own
	}{
		{
			name:  "one SST linked into a checkpoint",
			links: map[string][]string{"chk_1": {"000009.sst"}},
			own: map[string][]byte{
				"chk_1/000010.sst":           pseudoRandom(1<<20, 610),
				"chk_1/_task_state_snapshot": []byte("snapshot 1"),
			},
		},
		{
			name: "SSTs shared by two checkpoints",
			links: map[string][]string{
				"chk_1": {"000011.sst", "000012.sst", "000013.sst"},
				"chk_2": {"000012.sst", "000013.sst", "000014.sst"},
			},
			own: map[string][]byte{
				"chk_1/_task_state_snapshot": []byte("snapshot 1"),
				"chk_2/_task_state_snapshot": []byte("snapshot 2"),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mountFS(t, holdArgs...)
			alloc := "tm_tm-1/localState/aid_" + holdAlloc
			sub := subtaskDir(holdAlloc, jobLive)
			db := liveDB(jobLive, liveUUID)
			require.NoError(t, os.MkdirAll(m.Path(db), 0o755))

			// The live db writes its SSTs; each checkpoint links some of them.
			live := map[string][]byte{}       // live db path → content
			linkedFrom := map[string]string{} // checkpoint path → live db path
			held := map[string][]byte{}       // every file name under alloc → content
			for chk, ssts := range tc.links {
				require.NoError(t, os.MkdirAll(m.Path(sub, chk), 0o755))
				for _, sst := range ssts {
					src := db + "/" + sst
					if _, ok := live[src]; !ok {
						live[src] = pseudoRandom(1<<20, int64(len(live)+620))
						putFile(t, m.Path(src), live[src], 0o644)
					}
					dst := sub + "/" + chk + "/" + sst
					require.NoError(t, os.Link(m.Path(src), m.Path(dst)))
					linkedFrom[dst] = src
					held[dst] = live[src]
				}
			}
			var heldBytes int64 // each file once
			for rel, b := range tc.own {
				putFile(t, m.Path(sub, rel), b, 0o644)
				held[sub+"/"+rel] = b
				heldBytes += int64(len(b))
			}
			for _, b := range live {
				heldBytes += int64(len(b))
			}
			waitAllSealed(t, m)

			// Before the removal: what each name is and how many names it has.
			names := map[string]int{} // live db path → its names
			for _, src := range linkedFrom {
				names[src]++
			}
			ino := map[string]uint64{}
			wantNlink := map[string]uint64{}
			for p := range held {
				ino[p] = lstatOf(t, m.Path(p)).Ino
				wantNlink[p] = 1
				if src, ok := linkedFrom[p]; ok {
					require.Equal(t, lstatOf(t, m.Path(src)).Ino, ino[p], "%s is a link of %s", p, src)
					wantNlink[p] = uint64(1 + names[src])
				}
				require.Equal(t, wantNlink[p], uint64(lstatOf(t, m.Path(p)).Nlink), "links of %s before the removal", p)
			}

			// The slot is freed.
			require.NoError(t, os.RemoveAll(m.Path(alloc)))
			hs := waitHolds(t, m, 1)
			require.Equal(t, alloc, hs[0].Path)
			require.Equal(t, []string{jobLive}, hs[0].Jobs)
			require.Equal(t, len(tc.own)+len(live), hs[0].Files, "files in the held tree (each inode once): %+v\n%s", hs[0], m.Log())
			require.Equal(t, heldBytes, hs[0].Bytes, "bytes in the held tree (each inode once): %+v", hs[0])
			view := m.Path(".statefs/held", hs[0].ID)
			for p, b := range held {
				requireContent(t, filepath.Join(view, strings.TrimPrefix(p, alloc+"/")), b)
			}

			// Restored to where it was: every name back, the same file, its
			// links counted as before.
			mustCLI(t, "restore", "--store", m.Store, view, m.Path(alloc))
			require.Empty(t, holds(t, m))
			requireTree(t, m, held, true)
			requireTree(t, m, live, true)
			for p := range held {
				require.Equal(t, ino[p], lstatOf(t, m.Path(p)).Ino, "%s is not the file it was", p)
				require.Equal(t, wantNlink[p], uint64(lstatOf(t, m.Path(p)).Nlink), "links of %s after the restore", p)
			}
			for src, n := range names {
				require.Equal(t, uint64(1+n), uint64(lstatOf(t, m.Path(src)).Nlink), "links of %s after the restore", src)
			}
			m.Unmount()
			mustCLI(t, "fsck", "--store", m.Store)
		})
	}
}

// Flink prunes checkpoints that share an SST with the live db: with
// deletes held, each pruned name waits in the pending area for the window
// and then goes, whatever its other names do meanwhile. The live SST ends
// with one link, its one name.
func TestPrunedCheckpointsSharingAnSSTGo(t *testing.T) {
	m := mountFS(t, holdArgs...)
	sub := subtaskDir(holdAlloc, jobLive)
	sst := liveDB(jobLive, liveUUID) + "/000001.sst"
	require.NoError(t, os.MkdirAll(m.Path(filepath.Dir(sst)), 0o755))
	putFile(t, m.Path(sst), pseudoRandom(64<<10, 1), 0o644)
	for _, chk := range []string{"chk_1", "chk_2"} {
		require.NoError(t, os.MkdirAll(m.Path(sub, chk), 0o755))
		require.NoError(t, os.Link(m.Path(sst), m.Path(sub, chk, "000001.sst")))
	}
	require.NoError(t, os.RemoveAll(m.Path(sub, "chk_1")))
	require.NoError(t, os.RemoveAll(m.Path(sub, "chk_2")))
	require.Eventually(t, func() bool { return lstatOf(t, m.Path(sst)).Nlink == 1 }, 10*time.Second, 50*time.Millisecond,
		"the live SST keeps %d links after both checkpoints naming it were pruned\n%s", lstatOf(t, m.Path(sst)).Nlink, m.Log())
	require.Empty(t, holds(t, m), "a pruned checkpoint was held")
	m.Restart()
	require.Equal(t, uint64(1), lstatOf(t, m.Path(sst)).Nlink)
	requireNlinkMatchesNames(t, m)
}

// A job's old checkpoint goes once the job is gone, but a name linked after
// the verdict (a restore from local state linking an old SST into a new
// instance) is state written after it: it survives, with its content. The
// report counts names removed, files whose last name went, and each such
// file's bytes once.
func TestGCKeepsALinkMadeAfterTheVerdict(t *testing.T) {
	m := mountFS(t, sealDelayZero...)
	alloc := "tm_tm-1/localState/aid_" + holdAlloc
	sub := subtaskDir(holdAlloc, jobGone)
	restored := pseudoRandom(1<<20, 700) // linked into the new instance later
	shared := pseudoRandom(1<<20, 701)   // one file, a name in each checkpoint
	old := map[string][]byte{
		sub + "/chk_1/000009.sst": restored,
		sub + "/chk_1/000010.sst": shared,
		sub + "/chk_2/000010.sst": shared,
	}
	for _, chk := range []string{"chk_1", "chk_2"} {
		require.NoError(t, os.MkdirAll(m.Path(sub, chk), 0o755))
	}
	putFile(t, m.Path(sub, "chk_1/000009.sst"), restored, 0o644)
	putFile(t, m.Path(sub, "chk_1/000010.sst"), shared, 0o644)
	require.NoError(t, os.Link(m.Path(sub, "chk_1/000010.sst"), m.Path(sub, "chk_2/000010.sst")))
	waitAllSealed(t, m)
	var before []string // every name of the allocation's tree, directories too
	require.NoError(t, filepath.WalkDir(m.Path(alloc), func(p string, _ fs.DirEntry, err error) error {
		before = append(before, p)
		return err
	}))

	mustCLI(t, "job", "--store", m.Store, "gone", jobGone)
	// The job id comes back and restores from local state.
	fresh := liveDB(jobGone, restoredUUID) + "/000009.sst"
	require.NoError(t, os.MkdirAll(filepath.Dir(m.Path(fresh)), 0o755))
	require.NoError(t, os.Link(m.Path(sub, "chk_1/000009.sst"), m.Path(fresh)))

	r := gcJSON(t, m)
	requireTree(t, m, old, false)
	requireContent(t, m.Path(fresh), restored)
	var removed int
	for _, p := range before {
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			removed++
		}
	}
	i := slices.IndexFunc(r.Collected, func(c gc.Candidate) bool { return c.Job.ID == jobGone && c.Executor == "" })
	require.GreaterOrEqual(t, i, 0, "gc did not collect %s: %+v", jobGone, r)
	got := r.Collected[i]
	require.Equal(t, removed, got.Names, "names removed (000010.sst twice, 000009.sst once, the directories): %+v", got)
	require.Equal(t, 1, got.Files, "files whose last name went (000010.sst): %+v", got)
	require.Equal(t, int64(len(shared)), got.Bytes, "bytes of 000010.sst, once: %+v", got)
	require.Positive(t, got.Kept, "the new instance was written after the verdict: %+v", got)

	// The content is in the store, not only in the kernel's cache.
	m.Restart()
	requireContent(t, m.Path(fresh), restored)
	require.Equal(t, uint64(1), uint64(lstatOf(t, m.Path(fresh)).Nlink))
	m.Unmount()
	mustCLI(t, "fsck", "--store", m.Store)
}

// A gc run frees, before it returns, the chunks of every file it removed
// that no open handle holds, even while the kernel still caches the inode,
// and the dry run before it foretells exactly that. A file removed while
// open is an orphan, reported and counted, until its last handle closes;
// then a later sweep frees it.
func TestGCFreesWhatItRemovedBeforeReturning(t *testing.T) {
	m := mountFS(t, append(sealDelayZero, "--seal-as", "chunks")...)
	for run := range 10 {
		job := fmt.Sprintf("%032x", 0xc0ffee00+run)
		files := writeCheckpoint(t, m, subtaskDir(holdAlloc, job), 1, int64(800+run))
		waitAllSealed(t, m)
		requireTree(t, m, files, true) // the kernel caches the inodes now
		mustCLI(t, "job", "--store", m.Store, "gone", job)
		dry := gcJSON(t, m, "--dry-run")
		real := gcJSON(t, m)
		requireTree(t, m, files, false)
		require.Positive(t, real.Swept.Chunks, "run %d freed no chunks: %+v", run, real)
		require.Positive(t, real.Swept.Bytes, "run %d freed no bytes: %+v", run, real)
		require.Equal(t, dry.Swept, real.Swept, "run %d: the dry run foretold %+v, the run freed %+v", run, dry.Swept, real.Swept)
	}

	const orphanJob = "0000000000000000000000000c0ffe99"
	sub := subtaskDir(holdAlloc, orphanJob)
	files := writeCheckpoint(t, m, sub, 1, 900)
	waitAllSealed(t, m)
	sst := sub + "/chk_1/db/000012.sst"
	f, err := os.Open(m.Path(sst))
	require.NoError(t, err)
	defer f.Close()
	mustCLI(t, "job", "--store", m.Store, "gone", orphanJob)
	r := gcJSON(t, m)
	requireTree(t, m, files, false)
	require.Equal(t, 1, r.Orphans.Files, "orphans in the report: %+v", r)
	require.Equal(t, int64(len(files[sst])), r.Orphans.Bytes, "orphan bytes in the report: %+v", r)
	got := make([]byte, len(files[sst]))
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err, "reading the open file after gc removed it")
	requireSameBytes(t, files[sst], got, sst+" after gc removed it")
	require.Equal(t, [2]int64{1, int64(len(files[sst]))}, orphans(t, m), "stats.json's orphans and their bytes while the file is open")

	require.NoError(t, f.Close())
	require.Eventually(t, func() bool { return orphans(t, m) == [2]int64{} },
		5*time.Second, 50*time.Millisecond, "stats.json still counts the orphan after its last close: %v", orphans(t, m))
	chunksBefore := chunkBytes(t, m)
	r = gcJSON(t, m)
	require.Positive(t, r.Swept.Chunks, "the closed orphan's chunks were not swept: %+v", r)
	require.GreaterOrEqual(t, chunksBefore-chunkBytes(t, m), int64(len(files[sst])), "the sweep freed less than the orphan's incompressible content: %+v", r)
	require.Zero(t, r.Orphans.Files, "no file is open now: %+v", r)
}
