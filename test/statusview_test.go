package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// .statefs shows the store by job and its use of the disk as JSON anyone
// can cat, in the style of the commands' --json, and refuses every change
// with EROFS.
func TestStatusView(t *testing.T) {
	m := mountFS(t, "--seal-delay", "0")
	files := flinkTree(t, m, jobGone, 400)
	for p, b := range files { // a second copy: deduplicated
		putFile(t, m.Path(filepath.Base(p)+".copy"), b, 0o644)
	}
	waitAllSealed(t, m)

	names, err := os.ReadDir(m.Path(".statefs", "jobs"))
	require.NoError(t, err)
	require.Len(t, names, 1)
	require.Equal(t, jobGone, names[0].Name())
	var job map[string]any
	require.NoError(t, json.Unmarshal(fileBytes(t, m.Path(".statefs", "jobs", jobGone, "status.json")), &job))
	require.Equal(t, jobGone, job["id"])
	require.Equal(t, "unknown", job["verdict"])
	require.Equal(t, []any{"tm-1"}, job["executors"])
	// The views print JSON as the commands' --json do.
	for _, view := range [][]string{{"status.json"}, {"stats.json"}, {"jobs.json"}, {"inventory.json"}, {"collected.json"}, {"jobs", jobGone, "status.json"}} {
		p := filepath.Join(view...)
		require.Empty(t, printedJSONProblems(".statefs/"+p, string(fileBytes(t, m.Path(append([]string{".statefs"}, view...)...)))))
	}

	var stats struct {
		LogicalBytes  int64   `json:"logical_bytes"`
		PhysicalBytes int64   `json:"physical_bytes"`
		SavedRatio    float64 `json:"saved_ratio"`
		SealBacklog   int     `json:"seal_backlog"`
	}
	require.NoError(t, json.Unmarshal(fileBytes(t, m.Path(".statefs", "stats.json")), &stats))
	var logical int64
	for _, b := range files {
		logical += 2 * int64(len(b))
	}
	require.Equal(t, logical, stats.LogicalBytes)
	require.Greater(t, stats.SavedRatio, 1.9, "two copies of random data: %+v", stats)
	require.Zero(t, stats.SealBacklog)

	for name, err := range map[string]error{
		"mkdir":        os.Mkdir(m.Path(".statefs", "x"), 0o755),
		"create":       os.WriteFile(m.Path(".statefs", "jobs", jobGone, "x"), nil, 0o644),
		"unlink":       os.Remove(m.Path(".statefs", "stats.json")),
		"rmdir":        os.Remove(m.Path(".statefs", "jobs", jobGone)),
		"rename":       os.Rename(m.Path(".statefs", "status.json"), m.Path(".statefs", "s.json")),
		"chmod":        os.Chmod(m.Path(".statefs", "status.json"), 0o666),
		"setxattr":     unix.Setxattr(m.Path(".statefs", "status.json"), "user.x", []byte("y"), 0),
		"write":        os.WriteFile(m.Path(".statefs", "status.json"), []byte("{}"), 0o644),
		"remove root":  os.RemoveAll(m.Path(".statefs")),
		"mkdir at top": os.Mkdir(m.Path(".statefs"), 0o755),
	} {
		require.Error(t, err, name)
		if name != "mkdir at top" {
			requireSysErr(t, err, syscall.EROFS, syscall.EPERM)
		}
	}
	_, err = os.Stat(m.Path(".statefs", "stats.json"))
	require.NoError(t, err, ".statefs is intact")
}

// .statefs/inventory.json lists, per job and subtask, the checkpoints held
// locally, their bytes, and whether Flink finished writing them.
func TestInventoryView(t *testing.T) {
	m := mountFS(t)
	files := flinkTree(t, m, jobGone, 500)
	var snapshot, sst string
	for p := range files {
		switch filepath.Base(p) {
		case "_task_state_snapshot":
			snapshot = p
		case "000012.sst":
			if filepath.Base(filepath.Dir(p)) == "rocks" {
				sst = p
			}
		}
	}
	require.NotEmpty(t, snapshot)
	require.NotEmpty(t, sst)
	// chk_8 is being written: it shares the SST by a hard link, and has no
	// _task_state_snapshot yet.
	chk8 := filepath.Join(filepath.Dir(filepath.Dir(snapshot)), "chk_8")
	require.NoError(t, os.MkdirAll(m.Path(chk8, "rocks"), 0o755))
	require.NoError(t, os.Link(m.Path(sst), m.Path(chk8, "rocks", "000012.sst")))

	var inv []struct {
		Job      string `json:"job"`
		Subtasks []struct {
			Executor    string `json:"executor"`
			Vertex      string `json:"vertex"`
			Subtask     string `json:"subtask"`
			Checkpoints []struct {
				Checkpoint string `json:"checkpoint"`
				Files      int    `json:"files"`
				Bytes      int64  `json:"bytes"`
				Complete   bool   `json:"complete"`
			} `json:"checkpoints"`
		} `json:"subtasks"`
	}
	raw := fileBytes(t, m.Path(".statefs", "inventory.json"))
	require.NoError(t, json.Unmarshal(raw, &inv), "%s", raw)
	require.Len(t, inv, 1, "%s", raw)
	require.Equal(t, jobGone, inv[0].Job)
	require.Len(t, inv[0].Subtasks, 1, "%s", raw)
	st := inv[0].Subtasks[0]
	require.Equal(t, "tm-1", st.Executor)
	require.Equal(t, "0", st.Subtask)
	require.Len(t, st.Checkpoints, 2, "%s", raw)
	c7, c8 := st.Checkpoints[0], st.Checkpoints[1]
	require.Equal(t, "7", c7.Checkpoint)
	require.Equal(t, 2, c7.Files)
	require.Equal(t, int64(len(files[snapshot])+len(files[sst])), c7.Bytes)
	require.True(t, c7.Complete)
	require.Equal(t, "8", c8.Checkpoint)
	require.Equal(t, 1, c8.Files)
	require.Equal(t, int64(len(files[sst])), c8.Bytes)
	require.False(t, c8.Complete)

	// .statefs/jobs/<job>/ arranges the same checkpoints allocation →
	// subtask → checkpoint, reaching the very files of the executor's tree.
	parts := strings.Split(sst, "/") // tm_tm-1/localState/aid_A/jid_J/vtx_V_sti_0/chk_7/rocks/000012.sst
	view := m.Path(".statefs", "jobs", jobGone, parts[2], parts[4])
	names, err := os.ReadDir(view)
	require.NoError(t, err)
	require.Len(t, names, 2)
	require.Equal(t, "chk_7", names[0].Name())
	require.Equal(t, "chk_8", names[1].Name())
	viaView := lstatOf(t, filepath.Join(view, "chk_8", "rocks", "000012.sst"))
	require.Equal(t, lstatOf(t, m.Path(sst)).Ino, viaView.Ino, "the view shows the same inode, not a copy")
	requireContent(t, filepath.Join(view, "chk_7", "_task_state_snapshot"), files[snapshot])
}

// The views' files have times that mean something: a job's status.json the
// time its record last changed, the others now; none the epoch.
func TestViewTimes(t *testing.T) {
	start := time.Now().Truncate(time.Second)
	m := mountFS(t)
	flinkTree(t, m, jobGone, 150)
	waitAllSealed(t, m)
	for _, view := range [][]string{{"jobs", jobGone, "status.json"}, {"status.json"}, {"jobs.json"}} {
		fi, err := os.Stat(m.Path(append([]string{".statefs"}, view...)...))
		require.NoError(t, err)
		if mtime := fi.ModTime(); mtime.Before(start) || mtime.After(time.Now()) {
			t.Errorf(".statefs/%s has mtime %v, want between the test's start %v and now", filepath.Join(view...), mtime, start)
		}
	}
	var job struct {
		LastWrite time.Time `json:"last_write"`
	}
	require.NoError(t, json.Unmarshal(fileBytes(t, m.Path(".statefs", "jobs", jobGone, "status.json")), &job))
	fi, err := os.Stat(m.Path(".statefs", "jobs", jobGone, "status.json"))
	require.NoError(t, err)
	require.WithinDuration(t, job.LastWrite, fi.ModTime(), 0, "a job's status.json's mtime, want its record's last change (its last write here)")
}
