package crashpoint

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
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

func TestParsePause(t *testing.T) {
	for _, tc := range []struct {
		spec string
		ok   bool
	}{
		{"handle-released:200ms", true},
		{"seal-committed:1s", true},
		{"handle-released", false},
		{"handle-released:0s", false},
		{"handle-released:-1s", false},
		{"handle-released:soon", false},
		{"no-such-point:1s", false},
	} {
		got, err := parsePause(tc.spec)
		if (err == nil) != tc.ok {
			t.Errorf("parsePause(%q) = %+v, %v; want ok=%v", tc.spec, got, err, tc.ok)
		}
	}
	got, err := parsePause("handle-released:250ms")
	if err != nil || got.point != HandleReleased || got.d != 250*time.Millisecond {
		t.Errorf("parsePause: %+v, %v", got, err)
	}
}

// Disabled, Hit is a nil check: nothing happens at any point.
func TestHitDisabled(t *testing.T) {
	if armed != nil || paused != nil {
		t.Skipf("%s or %s is set in the test's environment", EnvVar, PauseEnvVar)
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

// Paused, every hit of the point sleeps for the pause, and no other point
// does.
func TestHitPauses(t *testing.T) {
	if os.Getenv("CRASHPOINT_CHILD") == "1" {
		start := time.Now()
		Hit(SealCommitted)
		other := time.Since(start)
		start = time.Now()
		Hit(HandleReleased)
		Hit(HandleReleased)
		fmt.Printf("other %d paused %d\n", other.Milliseconds(), time.Since(start).Milliseconds())
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHitPauses$")
	cmd.Env = append(os.Environ(), "CRASHPOINT_CHILD=1", PauseEnvVar+"="+HandleReleased+":150ms")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var other, pausedMs int
	if _, err := fmt.Sscanf(string(out), "other %d paused %d", &other, &pausedMs); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	if other >= 150 || pausedMs < 300 {
		t.Errorf("another point took %d ms, two hits of the paused one %d ms; want < 150 and ≥ 300", other, pausedMs)
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
