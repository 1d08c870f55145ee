package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// .statefs shows the store by job and its use of the disk as JSON anyone
// can cat, and refuses every change with EROFS.
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

	var stats struct {
		LogicalBytes  int64   `json:"logical_bytes"`
		PhysicalBytes int64   `json:"physical_bytes"`
		SavedRatio    float64 `json:"saved_ratio"`
		Unsealed      int     `json:"unsealed"`
	}
	require.NoError(t, json.Unmarshal(fileBytes(t, m.Path(".statefs", "stats.json")), &stats))
	var logical int64
	for _, b := range files {
		logical += 2 * int64(len(b))
	}
	require.Equal(t, logical, stats.LogicalBytes)
	require.Greater(t, stats.SavedRatio, 1.9, "two copies of random data: %+v", stats)
	require.Zero(t, stats.Unsealed)

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
