package crashpoint

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// White-box: parse is what init applies to STATEFS_CRASH_AT.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		point string
		nth   int64
		bad   bool
	}{
		{spec: "seal-committed", point: SealCommitted, nth: 1},
		{spec: "gc-inode-removed:3", point: GCInodeRemoved, nth: 3},
		{spec: "no-such-point", bad: true},
		{spec: "seal-committed:0", bad: true},
		{spec: "seal-committed:x", bad: true},
		{spec: "seal-committed:", bad: true},
		{spec: "", bad: true},
	} {
		got, err := parse(tc.spec)
		if tc.bad {
			if err == nil {
				t.Errorf("parse(%q) = %+v, want an error", tc.spec, got)
			}
			continue
		}
		if err != nil || got.point != tc.point || got.nth != tc.nth {
			t.Errorf("parse(%q) = %+v, %v; want point %s, hit %d", tc.spec, got, err, tc.point, tc.nth)
		}
	}
}

// Disabled, Hit is a nil check: nothing happens at any point.
func TestHitDisabled(t *testing.T) {
	if armed != nil {
		t.Skipf("%s is set in the test's environment", EnvVar)
	}
	for _, p := range Points {
		Hit(p)
	}
}

// Armed, the process dies by SIGKILL at the n-th hit of its point and not
// before, after one line on stderr.
func TestHitKills(t *testing.T) {
	if os.Getenv("CRASHPOINT_CHILD") == "1" {
		Hit(SealCommitted) // another point: ignored
		Hit(GCInodeRemoved)
		os.Stdout.WriteString("survived the first hit\n")
		Hit(GCInodeRemoved)
		os.Stdout.WriteString("survived the second hit\n")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHitKills$")
	cmd.Env = append(os.Environ(), "CRASHPOINT_CHILD=1", EnvVar+"="+GCInodeRemoved+":2")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != -1 || !strings.Contains(ee.String(), "killed") {
		t.Fatalf("child ended with %v, want killed by SIGKILL:\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "survived the first hit") || strings.Contains(s, "survived the second hit") ||
		!strings.Contains(s, "crashpoint: gc-inode-removed (hit 2): killing the daemon") {
		t.Fatalf("child output:\n%s", s)
	}
}

// An unknown point stops the process at start.
func TestUnknownPointRefused(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), EnvVar+"=seal-comitted")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "names no crash point") {
		t.Fatalf("child ended with %v, want exit 2 and a message:\n%s", err, out)
	}
}
