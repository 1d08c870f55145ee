package test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/statefs/statefs/store"
)

// A command tells a store it may not read from no store at all: as a user
// other than the owner of a 0700 store, `statefs du` says permission denied
// and the path; a missing directory and one without FORMAT each say so.
func TestCLIStoreErrorsSayWhy(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "store")
	s, _, err := store.Open(dir)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, os.Chmod(dir, 0o700))
	empty := mkdir(t, base, "empty")
	openUp(t, dir)    // the user reaches the store's directory, not into it
	openUp(t, binary) // and runs statefs
	stat, err := os.Stat(dir)
	require.NoError(t, err)
	owner := stat.Sys().(*syscall.Stat_t).Uid

	for _, c := range []struct {
		name  string
		uid   uint32 // 0: as the test
		store string
		want  string
	}{
		{"another user", 9999, dir, "statefs: cannot read store " + dir + ": permission denied on " + dir + "/FORMAT (" + dir + " is owned by uid " + strconv.FormatUint(uint64(owner), 10) + ", mode 0700)"},
		{"no such directory", 0, filepath.Join(base, "missing"), "statefs: " + base + "/missing is not a statefs store (no such directory)"},
		{"no FORMAT", 0, empty, "statefs: " + empty + " is not a statefs store (no FORMAT file)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(binary, "du", "--store", c.store)
			cmd.Dir = "/"
			if c.uid != 0 {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: c.uid, Gid: c.uid}}
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			require.Error(t, err, "statefs du printed %q", stdout.String())
			require.Equal(t, c.want+"\n", stderr.String())
		})
	}
}
