package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statefs/statefs/internal/testenv"
)

// requireFile fails unless path is a regular file holding exactly want.
func requireFile(t *testing.T, path string, want string) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if !fi.Mode().IsRegular() {
		t.Errorf("%s is %v, want the regular file it was", path, fi.Mode())
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
	} else if string(got) != want {
		t.Errorf("%s holds %q, want it unchanged: %q", path, got, want)
	}
}

// requireDirNames fails unless path is a directory with exactly the names want.
func requireDirNames(t *testing.T, path string, want ...string) {
	t.Helper()
	got, err := readDirNames(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("%s holds %q, want %q", path, got, want)
	}
}

const cliTimeout = 10 * time.Second

func TestCLIMountRefusesBadInput(t *testing.T) {
	testenv.RequireFUSE(t)
	tests := []struct {
		name string
		// setup prepares base and returns the arguments to `statefs` and
		// the words the error line must contain, and checks what must
		// not have changed once the command failed.
		setup func(t *testing.T, base string) (args, needles []string, check func(t *testing.T))
	}{
		{"missing store flag", func(t *testing.T, base string) ([]string, []string, func(*testing.T)) {
			mnt := mkdir(t, base, "mnt")
			return []string{"mount", mnt}, []string{"store"}, func(t *testing.T) {
				requireNotMounted(t, mnt)
				requireDirNames(t, mnt)
				requireDirNames(t, base, "mnt")
			}
		}},
		{"memory limit not a size", func(t *testing.T, base string) ([]string, []string, func(*testing.T)) {
			mnt := mkdir(t, base, "mnt")
			store := filepath.Join(base, "store")
			return []string{"mount", "--store", store, "--memory-limit", "lots", mnt}, []string{"--memory-limit", "lots"}, func(t *testing.T) {
				requireNotMounted(t, mnt)
				requireAbsent(t, store)
				requireDirNames(t, mnt)
			}
		}},
		{"store parent missing", func(t *testing.T, base string) ([]string, []string, func(*testing.T)) {
			mnt := mkdir(t, base, "mnt")
			parent := filepath.Join(base, "no-such-dir")
			store := filepath.Join(parent, "store")
			return []string{"mount", "--store", store, mnt}, []string{parent}, func(t *testing.T) {
				requireNotMounted(t, mnt)
				requireAbsent(t, parent)
				requireDirNames(t, mnt)
			}
		}},
		{"store is a regular file", func(t *testing.T, base string) ([]string, []string, func(*testing.T)) {
			mnt := mkdir(t, base, "mnt")
			store := writeFile(t, base, "store", "not a store\n")
			return []string{"mount", "--store", store, mnt}, []string{store}, func(t *testing.T) {
				requireNotMounted(t, mnt)
				requireFile(t, store, "not a store\n")
				requireDirNames(t, mnt)
			}
		}},
		{"mountpoint missing", func(t *testing.T, base string) ([]string, []string, func(*testing.T)) {
			store := filepath.Join(base, "store")
			mnt := filepath.Join(base, "mnt")
			return []string{"mount", "--store", store, mnt}, []string{mnt}, func(t *testing.T) {
				requireNotMounted(t, mnt)
				requireAbsent(t, mnt)
				requireAbsent(t, store)
			}
		}},
		{"mountpoint is a regular file", func(t *testing.T, base string) ([]string, []string, func(*testing.T)) {
			store := filepath.Join(base, "store")
			mnt := writeFile(t, base, "mnt", "a file\n")
			return []string{"mount", "--store", store, mnt}, []string{mnt}, func(t *testing.T) {
				requireNotMounted(t, mnt)
				requireFile(t, mnt, "a file\n")
				requireAbsent(t, store)
			}
		}},
		{"mountpoint not empty", func(t *testing.T, base string) ([]string, []string, func(*testing.T)) {
			store := filepath.Join(base, "store")
			mnt := mkdir(t, base, "mnt")
			writeFile(t, mnt, "precious", "keep me\n")
			return []string{"mount", "--store", store, mnt}, []string{mnt}, func(t *testing.T) {
				requireNotMounted(t, mnt)
				requireDirNames(t, mnt, "precious")
				requireFile(t, filepath.Join(mnt, "precious"), "keep me\n")
				requireAbsent(t, store)
			}
		}},
		{"unknown flag", func(t *testing.T, base string) ([]string, []string, func(*testing.T)) {
			store := filepath.Join(base, "store")
			mnt := mkdir(t, base, "mnt")
			return []string{"mount", "--no-such-flag", "--store", store, mnt}, []string{"no-such-flag"}, func(t *testing.T) {
				requireNotMounted(t, mnt)
				requireDirNames(t, mnt)
				requireAbsent(t, store)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, needles, check := tt.setup(t, t.TempDir())
			r := runCLI(t, cliTimeout, args...)
			requireOneLineError(t, r, needles...)
			check(t)
		})
	}
}

func TestCLIMountRefusesStoreInUse(t *testing.T) {
	m := mountFS(t)
	if err := os.WriteFile(m.Path("before"), []byte("first mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := mkdir(t, t.TempDir(), "mnt2")
	start := time.Now()
	r := runCLI(t, cliTimeout, "mount", "--store", m.Store, other)
	requireOneLineError(t, r, "in use")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("second mount took %v to refuse; want it to fail fast", d)
	}
	requireNotMounted(t, other)
	requireDirNames(t, other)

	// The first daemon must not have noticed.
	if !isMounted(m.Dir) {
		t.Fatalf("first mount gone after the refused second mount\n%s", m.Log())
	}
	if err := os.WriteFile(m.Path("after"), []byte("still serving\n"), 0o644); err != nil {
		t.Fatalf("first mount no longer writable: %v\n%s", err, m.Log())
	}
	requireFile(t, m.Path("before"), "first mount\n")
	requireFile(t, m.Path("after"), "still serving\n")
	m.Restart()
	requireFile(t, m.Path("before"), "first mount\n")
	requireFile(t, m.Path("after"), "still serving\n")
}

func TestCLIMountRefusesIncompatibleFormat(t *testing.T) {
	m := mountFS(t)
	if err := os.WriteFile(m.Path("data"), []byte("written by format 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Unmount()

	format := filepath.Join(m.Store, "FORMAT")
	old, err := os.ReadFile(format)
	if err != nil {
		t.Fatalf("the store has no format marker: %v", err)
	}
	if !strings.HasPrefix(string(old), "statefs-store ") {
		t.Fatalf("%s holds %q, want a line like \"statefs-store 1\"", format, old)
	}
	const future = "statefs-store 999\n"
	if err := os.WriteFile(format, []byte(future), 0o644); err != nil {
		t.Fatal(err)
	}
	// What a write to the store would change.
	const written = factFileSize | factFileTime
	before := describeTree(t, m.Store, written)

	r := runCLI(t, cliTimeout, "mount", "--store", m.Store, m.Dir)
	requireOneLineError(t, r, "999")
	requireNotMounted(t, m.Dir)
	requireDirNames(t, m.Dir)
	if after := describeTree(t, m.Store, written); after != before {
		t.Errorf("refused mount changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// Put the marker back: the store is intact and mounts again.
	if err := os.WriteFile(format, old, 0o644); err != nil {
		t.Fatal(err)
	}
	m.Start()
	requireFile(t, m.Path("data"), "written by format 1\n")
}

func TestCLIHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"mount", "--help"}} {
		r := runCLI(t, cliTimeout, args...)
		out := r.stdout + r.stderr
		if r.code != 0 || r.timedOut {
			t.Errorf("statefs %q: exit %d (timed out %v), want 0\n%s", args, r.code, r.timedOut, out)
		}
		if !strings.Contains(out, "mount") {
			t.Errorf("statefs %q does not mention mount:\n%s", args, out)
		}
		if args[0] == "mount" && !strings.Contains(out, "--store") {
			t.Errorf("statefs mount --help does not document --store:\n%s", out)
		}
	}
}

func TestCLIMountExitsZeroOnSIGTERM(t *testing.T) {
	m := mountFS(t)
	if err := os.WriteFile(m.Path("f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Unmount sends SIGTERM and fails the test unless the daemon exits 0
	// within 30s and leaves no mount behind.
	m.Unmount()
	if isMounted(m.Dir) {
		t.Fatalf("%s still mounted after SIGTERM", m.Dir)
	}
}

func TestCLIMountExitsZeroOnExternalUmount(t *testing.T) {
	testenv.RequireFUSE(t)
	base := t.TempDir()
	store, mnt := filepath.Join(base, "store"), mkdir(t, base, "mnt")
	var p process
	p.launch(t, exec.Command(binary, "mount", "--store", store, mnt))
	p.killAtEnd(t, mnt)
	p.awaitServing(t, "statefs mount", func() bool { return isMounted(mnt) })
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount %s: %v\n%s", mnt, err, out)
	}
	select {
	case err := <-p.done:
		p.cmd = nil
		if err != nil {
			t.Errorf("statefs mount exited with %v after umount, want 0\n%s", err, p.log)
		}
	case <-time.After(15 * time.Second):
		t.Errorf("statefs mount still running 15s after umount\n%s", p.log)
	}
	if isMounted(mnt) {
		t.Errorf("%s still mounted", mnt)
	}
	if strings.Contains(p.log.String(), "goroutine ") {
		t.Errorf("daemon output holds a panic trace:\n%s", p.log)
	}
}

// mkdir makes dir/name and returns its path.
func mkdir(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeFile writes content to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
