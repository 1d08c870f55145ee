// Package testenv says whether this machine can run the tests that mount
// statefs for real: each check skips the test with the reason, or fails it
// when STATEFS_REQUIRE_FUSE=1 (set by CI) says a skip would hide a failure.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// RequireFUSE needs /dev/fuse and root (DirectMount needs CAP_SYS_ADMIN).
func RequireFUSE(t testing.TB) {
	t.Helper()
	switch {
	case !exists("/dev/fuse"):
		unavailable(t, "FUSE unavailable: no /dev/fuse")
	case os.Geteuid() != 0:
		unavailable(t, "FUSE unavailable: not root (DirectMount needs CAP_SYS_ADMIN)")
	}
}

// RequireRocksDBTools needs db_bench and ldb (Debian's rocksdb-tools, which
// `make test` installs).
func RequireRocksDBTools(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"db_bench", "ldb"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable(t, tool+" not found (install the Debian package rocksdb-tools, or run `make test`)")
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func unavailable(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("STATEFS_REQUIRE_FUSE") == "1" {
		t.Fatalf("required (STATEFS_REQUIRE_FUSE=1) but unavailable: %s", reason)
	}
	t.Skip(reason)
}

// ChildOf finds a live child of parent in /proc: the server of a statefs
// mount whose keeper is parent. It reads status, not stat: stat waits for
// a process's memory map, which a process stuck on a mount holds.
func ChildOf(parent int) (int, bool) {
	entries, _ := os.ReadDir("/proc")
	ppid := fmt.Sprintf("PPid:\t%d\n", parent)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err == nil && strings.Contains(string(status), ppid) && !strings.Contains(string(status), "State:\tZ") {
			return pid, true
		}
	}
	return 0, false
}
