package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// kernelInodes is the field "kernel_inodes" of .statefs/status.json: how
// many inodes the kernel holds a node of the daemon's for.
func kernelInodes(t *testing.T, m *Mount) int {
	t.Helper()
	raw, err := os.ReadFile(m.Path(".statefs", "status.json"))
	require.NoError(t, err)
	var status struct {
		KernelInodes *int `json:"kernel_inodes"`
	}
	require.NoError(t, json.Unmarshal(raw, &status), "%s", raw)
	require.NotNil(t, status.KernelInodes, "no field kernel_inodes in %s", raw)
	return *status.KernelInodes
}

// The kernel may hold the daemon to --max-kernel-inodes inodes: past the
// bound the daemon asks it to drop the names of files that are not open,
// the kernel forgets them, and they stay reachable by name, with their
// content; an open file stays usable throughout.
func TestKernelInodesStayBounded(t *testing.T) {
	const bound, files = 200, 2000
	m := mountFS(t, "--max-kernel-inodes", fmt.Sprint(bound))
	dir := m.Path("tree")
	require.NoError(t, os.Mkdir(dir, 0o755))
	open, err := os.Create(filepath.Join(dir, "open"))
	require.NoError(t, err)
	defer open.Close()
	_, err = open.Write([]byte("written before"))
	require.NoError(t, err)
	name := func(i int) string { return filepath.Join(dir, fmt.Sprintf("f%04d", i)) }
	for i := range files {
		putFile(t, name(i), []byte(fmt.Sprint(i)), 0o644)
	}
	for i := range files {
		_, err := os.Lstat(name(i))
		require.NoError(t, err)
	}
	var known int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if known = kernelInodes(t, m); known <= bound {
			break
		}
	}
	require.LessOrEqual(t, known, bound, "the kernel still holds the daemon to %d inodes, past the bound of %d", known, bound)

	for i := range files {
		got, err := os.ReadFile(name(i))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), string(got), "%s after its inode was dropped", name(i))
	}
	_, err = open.Write([]byte(" and after"))
	require.NoError(t, err)
	require.NoError(t, open.Close())
	requireContent(t, filepath.Join(dir, "open"), []byte("written before and after"))
}
