package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/statefs/statefs/internal/testenv"
)

// fakeDaemonEnv makes the test binary play a keeper (which runs the test
// binary again as its server and waits) or a server (which touches
// fakeServerBytes and waits to be killed), for TestPeakRSSIsTheServers.
const fakeDaemonEnv = "STATEFS_BENCH_FAKE_DAEMON"

const fakeServerBytes = 128 << 20

func TestMain(m *testing.M) {
	switch os.Getenv(fakeDaemonEnv) {
	case "keeper":
		server := exec.Command(os.Args[0])
		server.Env = append(os.Environ(), fakeDaemonEnv+"=server")
		server.Stdout, server.Stderr = os.Stdout, os.Stderr
		server.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		server.Run()
		os.Exit(0)
	case "server":
		mem := make([]byte, fakeServerBytes)
		for i := range mem {
			mem[i] = 1
		}
		os.Stdout.WriteString("serving\n")
		time.Sleep(time.Hour)
		os.Exit(int(mem[0]) - 1)
	}
	os.Exit(m.Run())
}

// The daemon's peak RSS is its server's, the keeper's child, and the
// keeper's own is apart: a bench that read the process it started would
// report the keeper, which serves nothing.
func TestPeakRSSIsTheServers(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "daemon.log")
	t.Setenv(fakeDaemonEnv, "keeper")
	d, err := startDaemon(os.Args[0], nil, dir, log, func() bool { return logContains(log, "serving") })
	os.Unsetenv(fakeDaemonEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer d.kill()
	server, err := d.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	keeper, err := d.KeeperPeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	if server < fakeServerBytes || keeper >= fakeServerBytes {
		t.Errorf("PeakRSS %.0f MiB, KeeperPeakRSS %.0f MiB: want the server's, at least %d MiB, and the keeper's, less",
			mib(server), mib(keeper), fakeServerBytes>>20)
	}
}

// The takeovers kill statefs's server, not its keeper, under their two
// clients, and measure each kill: the keeper serves on after them and the
// clients see no error.
func TestTakeovers(t *testing.T) {
	testenv.RequireFUSE(t)
	repo, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig(repo, t.TempDir())
	cfg.Restart.Inodes = 2000
	b, err := newBench(cfg, cfg.Dir, repo, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	root, err := b.statefs.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer b.statefs.Close()
	if _, err := makeInodes(root, cfg.Restart.Inodes); err != nil {
		t.Fatal(err)
	}
	keeper := b.statefs.d.cmd.Process.Pid
	w := newWorkload(6, "Restart", 1)
	m := takeoverMetrics{firstAnswer: w.metric("first answer", "ms", false, nil),
		p99: w.metric("p99", "ms", false, nil), worst: w.metric("highest", "ms", false, nil)}
	const kills = 3
	if err := b.takeovers(w, kills, m); err != nil {
		t.Fatal(err)
	}
	if got := m.firstAnswer.Samples[statefs]; len(got) != kills || slices.Min(got) <= 0 {
		t.Errorf("times to the first answer: %v, want %d positive", got, kills)
	}
	for _, s := range [][]float64{m.p99.Samples[statefs], m.worst.Samples[statefs]} {
		if len(s) != 1 || s[0] <= 0 {
			t.Errorf("stalls %v, want one positive", s)
		}
	}
	if b.statefs.d.cmd.Process.Pid != keeper || !b.statefs.ready() {
		t.Errorf("the keeper (pid %d) does not serve after the takeovers", keeper)
	}
}

// The kills keep their spacing from the start, but one never follows the
// previous takeover's first answer by less than a third of the spacing: a
// server killed as soon as it serves counts towards the keeper's crash
// loop, which ends the mount.
func TestNextKill(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	third := takeoverSpacing / 3
	for _, tc := range []struct {
		name       string
		i          int
		lastAnswer time.Time
		want       time.Time
	}{
		{"first", 0, time.Time{}, start.Add(third)},
		{"on schedule", 2, start.Add(third + takeoverSpacing + 80*time.Millisecond), start.Add(third + 2*takeoverSpacing)},
		{"after a slow takeover", 2, start.Add(third + 2*takeoverSpacing - 10*time.Millisecond), start.Add(2*third + 2*takeoverSpacing - 10*time.Millisecond)},
	} {
		if got := nextKill(start, tc.i, tc.lastAnswer); !got.Equal(tc.want) {
			t.Errorf("%s: kill %d due %v after the start, want %v", tc.name, tc.i, got.Sub(start), tc.want.Sub(start))
		}
	}
}
