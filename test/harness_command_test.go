package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The helpers that run the statefs command: on a store a daemon serves it
// goes through the daemon's control socket, on any other it opens the store
// itself.

// statefs runs the CLI with args and returns its combined output and error.
func statefs(args ...string) (string, error) {
	out, err := exec.Command(binary, args...).CombinedOutput()
	return string(out), err
}

// mustCLI runs the CLI with args, fails the test unless it succeeds, and
// returns its combined output.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := statefs(args...)
	require.NoError(t, err, "statefs %s: %s", strings.Join(args, " "), out)
	return out
}

// cliResult is what one run of the statefs binary left behind.
type cliResult struct {
	stdout, stderr string
	code           int  // exit code; -1 when killed by a signal
	timedOut       bool // the command had to be killed after the timeout
}

// runCLI runs the statefs binary with args and separate stdout and stderr.
// A command that is still running after timeout is killed: for a bad `mount`
// that means it served where it should have refused.
func runCLI(t *testing.T, timeout time.Duration, args ...string) cliResult {
	t.Helper()
	return runCLIEnv(t, timeout, nil, args...)
}

// runCLIEnv is runCLI with env (KEY=value) added to the environment.
func runCLIEnv(t *testing.T, timeout time.Duration, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := cliResult{stdout: stdout.String(), stderr: stderr.String(), timedOut: ctx.Err() != nil}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		t.Fatalf("running statefs %q: %v", args, err)
	}
	return r
}

// cliJSON runs the CLI with args, fails the test unless it exits 0 within
// 30 s, and decodes what it printed into v.
func cliJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	r := runCLI(t, 30*time.Second, args...)
	require.Zero(t, r.code, "statefs %s: %s", strings.Join(args, " "), r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), v), "statefs %s printed:\n%s", strings.Join(args, " "), r.stdout)
}

// requireOneLineError checks the contract for bad input (DESIGN invariant 7):
// a non-zero exit, exactly one non-empty line on stderr that names the
// problem (contains every needle), and no panic.
func requireOneLineError(t *testing.T, r cliResult, needles ...string) {
	t.Helper()
	all := r.stdout + r.stderr
	if r.timedOut {
		t.Errorf("statefs still ran after the timeout and was killed; want a fast refusal\nstderr:\n%s", r.stderr)
		return
	}
	if r.code == 0 {
		t.Errorf("exit code 0, want non-zero\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	if strings.Contains(all, "goroutine ") || strings.Contains(all, "panic:") {
		t.Errorf("output holds a panic trace:\n%s", all)
	}
	var lines []string
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Errorf("stderr has %d non-empty lines, want exactly one error line:\n%s", len(lines), r.stderr)
	}
	for _, n := range needles {
		if !strings.Contains(strings.ToLower(r.stderr), strings.ToLower(n)) {
			t.Errorf("stderr does not name %q:\n%s", n, r.stderr)
		}
	}
}

// fsckProblem is one line of `statefs fsck --json`.
type fsckProblem struct {
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// The kinds of fsck problems a crash leaves, which the next mount or gc
// removes.
const (
	problemGarbageChunk  = "garbage-chunk"
	problemGarbageObject = "garbage-object"
	problemStrayStaging  = "stray-staging"
)

// fsck runs `statefs fsck --json` (and --verify) on store and returns the
// problems and the exit code.
func fsck(t *testing.T, store string, verify bool) ([]fsckProblem, cliResult) {
	t.Helper()
	args := []string{"fsck", "--store", store, "--json"}
	if verify {
		args = append(args, "--verify")
	}
	r := runCLI(t, time.Minute, args...)
	var ps []fsckProblem
	if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil {
		t.Fatalf("statefs fsck --json printed no JSON list (%v), exit %d:\n%s\nstderr:\n%s", err, r.code, r.stdout, r.stderr)
	}
	return ps, r
}

// requireOnlyLeftovers fails the test, without stopping it, unless fsck
// (problems ps, result r), run when, exited 0 and found no problem but of
// the kinds allowed.
func requireOnlyLeftovers(t testing.TB, when string, ps []fsckProblem, r cliResult, allowed ...string) {
	t.Helper()
	for _, p := range ps {
		if !slices.Contains(allowed, p.Kind) {
			t.Errorf("%s fsck found %s: %s", when, p.Kind, p.Detail)
		}
	}
	if r.code != 0 {
		t.Errorf("%s fsck exited %d\n%s", when, r.code, r.stderr)
	}
}

// heldTree is a held tree as `statefs held --json` lists it.
type heldTree struct {
	ID    string   `json:"id"`
	Path  string   `json:"path"`
	Jobs  []string `json:"jobs"`
	Files int      `json:"files"`
	Bytes int64    `json:"bytes"`
}

// holds lists the trees m's store holds.
func holds(t *testing.T, m *Mount) []heldTree {
	t.Helper()
	var hs []heldTree
	require.NoError(t, json.Unmarshal([]byte(mustCLI(t, "held", "--store", m.Store, "--json")), &hs))
	return hs
}

// waitHolds waits until the store holds n trees.
func waitHolds(t *testing.T, m *Mount, n int) []heldTree {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		hs := holds(t, m)
		if len(hs) == n {
			return hs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store holds %d trees, want %d: %+v\n%s", len(hs), n, hs, m.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
