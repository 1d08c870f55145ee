package test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/internal/testenv"
)

// eventually scrapes until ok holds for the scrape, or fails after limit.
func eventually(t *testing.T, addr string, limit time.Duration, what string, ok func(scrape) bool) scrape {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		s := scrapeMetrics(t, addr)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fsImmutableFL is FS_IMMUTABLE_FL of linux/fs.h (golang.org/x/sys/unix
// does not name it).
const fsImmutableFL = 0x10

// setImmutable sets or clears the immutable flag of dir (chattr +i / -i):
// then even root cannot create or remove names in it, the one way to make
// a directory unwritable for root without remounting its filesystem.
func setImmutable(dir string, on bool) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return fmt.Errorf("FS_IOC_GETFLAGS: %w", err)
	}
	if on {
		flags |= fsImmutableFL
	} else {
		flags &^= fsImmutableFL
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags)); err != nil {
		return fmt.Errorf("FS_IOC_SETFLAGS: %w", err)
	}
	return nil
}

// The daemon's /metrics follows what happens on the mount. Liveness
// (/healthz) says 200 while the mount serves, even when the store takes no
// new files, since a restart cannot fix that and the mount still serves
// reads; readiness (/readyz) and statefs_store_writable say so instead.
func TestMetricsAndHealth(t *testing.T) {
	addr := freeAddr(t)
	// Without passthrough every write reaches the daemon, so its bytes are
	// counted; reads of a sealed file reach it either way.
	m := mountFS(t, "--metrics-addr", addr, "--passthrough=false", "--seal-delay", "100ms", "--seal-as", "chunks")
	for _, probe := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, addr, probe); code != http.StatusOK || body != "ok\n" {
			t.Fatalf("GET %s of a serving daemon = %d %q, want 200 ok", probe, code, body)
		}
	}
	before := scrapeMetrics(t, addr)

	const size = 1 << 20
	content := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range content {
		content[i] = byte(rng.IntN(256))
	}
	path := m.Path("state.sst")
	require.NoError(t, os.WriteFile(path, content, 0o644))
	eventually(t, addr, 30*time.Second, "the file was not sealed", func(s scrape) bool {
		return s.value("statefs_seal_duration_seconds", "") >= 1 && s.value("statefs_seal_backlog_files", "") == 0 &&
			s.value("statefs_logical_bytes", "") >= size
	})
	got, err := os.ReadFile(path) // the first open of sealed content: read through the daemon
	require.NoError(t, err)
	if !bytes.Equal(got, content) {
		t.Fatal("read back other bytes than written")
	}
	after := scrapeMetrics(t, addr)

	for _, c := range []struct {
		name, op string
		atLeast  float64
	}{
		{"statefs_fuse_op_duration_seconds", "create", 1},
		{"statefs_fuse_op_duration_seconds", "write", 1},
		{"statefs_fuse_op_duration_seconds", "read", 1},
		{"statefs_fuse_op_duration_seconds", "lookup", 1},
		{"statefs_fuse_written_bytes_total", "", size},
		{"statefs_fuse_read_bytes_total", "", size},
	} {
		if d := after.value(c.name, c.op) - before.value(c.name, c.op); d < c.atLeast {
			t.Errorf("%s{op=%q} grew by %v, want at least %v", c.name, c.op, d, c.atLeast)
		}
	}
	if n := after.value("statefs_chunks", ""); n < 1 {
		t.Errorf("statefs_chunks = %v after a 1 MiB file was sealed", n)
	}
	for _, name := range []string{"statefs_gc_runs_total", "statefs_jobs", "statefs_saved_ratio", "statefs_physical_bytes", "statefs_staging_bytes", "statefs_store_writable"} {
		if after[name] == nil {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if v := after.value("statefs_store_writable", ""); v != 1 {
		t.Errorf("statefs_store_writable = %v with a store that takes files, want 1", v)
	}

	// Make the store directory refuse new names, even to root.
	if err := setImmutable(m.Store, true); errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("the store's filesystem has no immutable flag (%v): /healthz of an unwritable store is not tested", err)
	} else if err != nil {
		t.Fatalf("chattr +i %s: %v", m.Store, err)
	}
	t.Cleanup(func() { setImmutable(m.Store, false) }) // runs before the unmount mountFS registered
	code, body := get(t, addr, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "not writable") || strings.Count(strings.TrimSpace(body), "\n") != 0 {
		t.Errorf("GET /readyz with an unwritable store = %d %q, want 503 and one line saying not writable", code, body)
	}
	if code, body := get(t, addr, "/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz with an unwritable store = %d %q, want 200: the mount serves, and a restart would make no disk writable", code, body)
	}
	if v := scrapeMetrics(t, addr).value("statefs_store_writable", ""); v != 0 {
		t.Errorf("statefs_store_writable = %v with an unwritable store, want 0", v)
	}
	dropCache(t, path)
	got, err = os.ReadFile(path)
	require.NoError(t, err, "reading through the mount while the store takes no new files")
	require.True(t, bytes.Equal(got, content), "read back other bytes than written while the store takes no new files")
	waitLogLine(t, m, 10*time.Second, "the store takes no new files")
	if err := setImmutable(m.Store, false); err != nil {
		t.Fatal(err)
	}
	for _, probe := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, addr, probe); code != http.StatusOK {
			t.Errorf("GET %s once the store is writable again = %d %q, want 200", probe, code, body)
		}
	}
	if _, err := os.Lstat(filepath.Join(m.Store, "healthz.probe")); err == nil {
		t.Error("the health probe left its file in the store")
	}
}

// A --metrics-addr that cannot be listened on is refused before anything is
// touched.
func TestMetricsAddrRefused(t *testing.T) {
	testenv.RequireFUSE(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, addr := range []string{"not-an-address", busy.Addr().String()} {
		store, mnt := filepath.Join(t.TempDir(), "store"), t.TempDir()
		r := runCLI(t, 30*time.Second, "mount", "--store", store, "--metrics-addr", addr, mnt)
		requireOneLineError(t, r, "--metrics-addr")
		requireNotMounted(t, mnt)
		requireAbsent(t, store)
	}
}

// `statefs --log-format json mount` logs one JSON object a line, its
// durations in seconds as the commands' --json give them.
func TestLogFormatJSON(t *testing.T) {
	testenv.RequireFUSE(t)
	store, mnt := filepath.Join(t.TempDir(), "store"), t.TempDir()
	var p process
	p.launch(t, exec.Command(binary, "--log-format", "json", "mount", "--store", store, mnt))
	p.killAtEnd(t, mnt)
	p.awaitServing(t, "statefs mount", func() bool {
		return isMounted(mnt) && answers(filepath.Join(store, control.SocketName))
	})
	if err := p.terminate(30 * time.Second); err != nil {
		t.Fatalf("statefs mount %v\n%s", err, p.log)
	}
	requireNotMounted(t, mnt)

	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(p.log.String()), "\n") {
		var rec struct {
			Time  string `json:"time"`
			Level string `json:"level"`
			Msg   string `json:"msg"`
			// --scrub-interval, 24h unless told
			ScrubInterval any `json:"scrub_interval"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Time == "" || rec.Level == "" {
			t.Errorf("log line is not a JSON record with time and level: %q", line)
			continue
		}
		if rec.Msg == "serving" && rec.ScrubInterval != 86400.0 {
			t.Errorf("the serving line gives scrub_interval as %v, want 86400 (seconds): %s", rec.ScrubInterval, line)
		}
		msgs = append(msgs, rec.Msg)
	}
	if all := "," + strings.Join(msgs, ",") + ","; !strings.Contains(all, ",serving,") || !strings.Contains(all, ",unmounted,") {
		t.Errorf("logged %q, want serving and unmounted among them", msgs)
	}
}

// A --log-format other than text or json, given as the flag or in
// STATEFS_LOG_FORMAT, is one line of error and changes nothing.
func TestLogFormatRefused(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	r := runCLI(t, 30*time.Second, "--log-format", "yaml", "fsck", "--store", store)
	requireOneLineError(t, r, "--log-format", "yaml")
	requireAbsent(t, store)

	r = runCLIEnv(t, 30*time.Second, []string{"STATEFS_LOG_FORMAT=xml"}, "fsck", "--store", store)
	requireOneLineError(t, r, "--log-format", "xml")
	requireAbsent(t, store)
}
