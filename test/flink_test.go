package test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// The helpers that write state as Flink lays it out in a TaskManager's
// working directory (DESIGN, "Layout Flink writes").

// Job ids: jobGone is the one the tests have the operator mark gone.
const (
	jobGone = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	jobLive = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// The allocation and the vertex of the tests' local state.
const (
	holdAlloc  = "0123456789abcdef0123456789abcdef"
	holdVertex = "fedcba9876543210fedcba9876543210"
)

// subtaskDir is the local-state directory of subtask 0 of job under
// executor tm-1 in allocation alloc.
func subtaskDir(alloc, job string) string {
	return fmt.Sprintf("tm_tm-1/localState/aid_%s/jid_%s/vtx_%s_sti_0", alloc, job, holdVertex)
}

// flinkTree writes the local state of job under executor tm-1, as Flink
// lays it out, and returns the files written with their content.
func flinkTree(t *testing.T, m *Mount, job string, seed int64) map[string][]byte {
	t.Helper()
	return flinkTreeOn(t, m, "tm-1", job, seed)
}

// flinkTreeOn is flinkTree under the executor with resource id rid.
func flinkTreeOn(t *testing.T, m *Mount, rid, job string, seed int64) map[string][]byte {
	t.Helper()
	const (
		op   = "window_agg_3f2a"
		uuid = "5b1c2f3e-0a1b-4c2d-8e9f-0123456789ab"
	)
	chk := fmt.Sprintf("tm_%s/localState/aid_%s/jid_%s/vtx_%s_sti_0/chk_7", rid, holdAlloc, job, holdVertex)
	db := fmt.Sprintf("tm_%s/tmp/job_%s_op_%s_uuid_%s/db", rid, job, op, uuid)
	files := map[string][]byte{
		chk + "/_task_state_snapshot": []byte("snapshot of " + job),
		chk + "/rocks/000012.sst":     pseudoRandom(3<<20, seed),
		db + "/000013.sst":            pseudoRandom(2<<20, seed+1),
		db + "/CURRENT":               []byte("MANIFEST-000005\n"),
	}
	for p, b := range files {
		putFileWithDirs(t, m.Path(p), b)
	}
	return files
}

// writeCheckpoint writes checkpoint chk of a subtask directory and returns
// its files with their content.
func writeCheckpoint(t *testing.T, m *Mount, subtask string, chk int, seed int64) map[string][]byte {
	t.Helper()
	dir := fmt.Sprintf("%s/chk_%d", subtask, chk)
	files := map[string][]byte{
		dir + "/_task_state_snapshot": []byte(fmt.Sprintf("snapshot %d", chk)),
		dir + "/db/000012.sst":        pseudoRandom(1<<20, seed),
		dir + "/db/MANIFEST-000005":   pseudoRandom(4<<10, seed+1),
	}
	for p, b := range files {
		putFileWithDirs(t, m.Path(p), b)
	}
	return files
}

// Flink, RocksDB and ForSt unpack their JNI libraries into the working
// directory's tmp/ and load them from there: the mount runs what is
// written to it, from staging and once sealed.
func TestFlinkLibraryInTmpRuns(t *testing.T) {
	m := mountFS(t)
	bin, err := os.ReadFile("/bin/true")
	require.NoError(t, err)
	p := m.Path("tm_tm-1/tmp/rocksdb-lib-0123/true")
	putFileWithDirs(t, p, bin)
	require.NoError(t, os.Chmod(p, 0o755))
	out, err := exec.Command(p).CombinedOutput()
	require.NoError(t, err, "running a program written to the mount: %s", out)
	waitAllSealed(t, m)
	dropCache(t, p)
	out, err = exec.Command(p).CombinedOutput()
	require.NoError(t, err, "running it once sealed: %s", out)
}
