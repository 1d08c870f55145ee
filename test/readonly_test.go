package test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The commands that only read a store (jobs, jobs --collected, executors,
// du, inspect, held, fsck without --repair, scrub) change none of its files
// when no daemon serves it: no recovery, no free-space reserve, no index writes; what they print
// as JSON keeps to one style (printedJSONProblems). That holds
// after a clean unmount, and after a kill, whose state they read as the
// kill left it.
func TestReadOnlyCommandsChangeNothing(t *testing.T) {
	const storeFacts = factSize | factTime | factContent
	m := mountFS(t, holdArgs...)
	sub := subtaskDir(holdAlloc, jobLive)
	writeCheckpoint(t, m, sub, 1, 1)
	tree := flinkTree(t, m, jobGone, 2)
	var sst string // in the live database: the checkpoint's allocation goes below
	for p := range tree {
		if strings.Contains(p, "/tmp/") && strings.HasSuffix(p, ".sst") {
			sst = p
		}
	}
	require.NotEmpty(t, sst)
	require.NoError(t, os.RemoveAll(m.Path("tm_tm-1/localState/aid_"+holdAlloc)))
	waitHolds(t, m, 1)

	commands := [][]string{
		{"jobs"}, {"jobs", "--json"}, {"jobs", "--collected"}, {"jobs", "--collected", "--json"},
		{"executors"}, {"executors", "--json"}, {"du"}, {"du", "--by", "allocation", "--json"},
		{"inspect", sst}, {"inspect", "--json", filepath.Dir(sst)},
		{"held"}, {"held", "--json"},
		{"fsck"}, {"fsck", "--verify", "--json"}, {"scrub"}, {"scrub", "--json"},
		{"gc", "--dry-run", "--gc-grace", "0s"}, {"gc", "--dry-run", "--gc-grace", "0s", "--json"},
	}
	for _, end := range []string{"unmount", "kill"} {
		if end == "unmount" {
			m.Unmount()
			// A gone job: gc's dry run plans to collect it.
			r := runCLI(t, time.Minute, "job", "--store", m.Store, "gone", jobGone)
			require.Equal(t, 0, r.code, "statefs job gone:\n%s%s", r.stdout, r.stderr)
			r = runCLI(t, time.Minute, "executor", "--store", m.Store, "gone", "tm-1")
			require.Equal(t, 0, r.code, "statefs executor gone:\n%s%s", r.stdout, r.stderr)
		} else {
			m.Start()
			putFile(t, m.Path("tm_tm-1/after-restart"), []byte("written before the kill"), 0o644)
			m.Kill()
		}
		before := describeTree(t, m.Store, storeFacts)
		for _, args := range commands {
			all := append([]string{args[0], "--store", m.Store}, args[1:]...)
			r := runCLI(t, time.Minute, all...)
			require.Equal(t, 0, r.code, "after %s, statefs %s failed:\n%s%s", end, strings.Join(all, " "), r.stdout, r.stderr)
			if slices.Contains(args, "--json") {
				require.Empty(t, printedJSONProblems(strings.Join(args, " "), r.stdout), "%s", r.stdout)
			}
			require.Equal(t, before, describeTree(t, m.Store, storeFacts), "after %s, statefs %s changed the store's files", end, strings.Join(args, " "))
		}
		if end == "kill" {
			// What the kill left is read as it was, its index's log
			// replayed: the file made just before it is there.
			r := runCLI(t, time.Minute, "inspect", "--store", m.Store, "tm_tm-1/after-restart")
			require.Equal(t, 0, r.code, "inspect of the file made before the kill:\n%s%s", r.stdout, r.stderr)
		}
	}
}
