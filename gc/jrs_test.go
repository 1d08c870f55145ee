package gc_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/internal/flinkid"
)

func TestJobResultStore(t *testing.T) {
	other := "0000000000000000000000000000000f"
	for _, tc := range []struct {
		name     string
		files    []string // created in the store directory
		dirs     []string // likewise
		want     index.Verdict
		evidence string // must appear; "<dir>" stands for the directory
	}{
		{"clean entry", []string{testJob + ".json"}, nil, index.VerdictGone, "jrs: <dir>/" + testJob + ".json"},
		{"dirty entry", []string{testJob + "_DIRTY.json"}, nil, index.VerdictGone, "jrs: <dir>/" + testJob + "_DIRTY.json"},
		{"both", []string{testJob + ".json", testJob + "_DIRTY.json"}, nil, index.VerdictGone, "jrs: <dir>/" + testJob},
		{"absent", nil, nil, index.VerdictUnknown, "jrs <dir>: no entry"},
		{"only another job", []string{other + ".json", other + "_DIRTY.json"}, nil, index.VerdictUnknown, "no entry"},
		{"near misses", []string{testJob, testJob + ".json.tmp", testJob + "_dirty.json", testJob + ".JSON", strings.ToUpper(testJob) + ".json"}, nil, index.VerdictUnknown, "no entry"},
		{"entry is a directory", nil, []string{testJob + ".json"}, index.VerdictUnknown, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(`{"result":{},"version":1}`), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range tc.dirs {
				if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			j := &gc.JobResultStore{Dir: dir}
			got := j.Judge(context.Background(), testJob)
			if got.Verdict != tc.want {
				t.Errorf("verdict %v, want %v (evidence %q)", got.Verdict, tc.want, got.Evidence)
			}
			if want := strings.ReplaceAll(tc.evidence, "<dir>", dir); !strings.Contains(got.Evidence, want) {
				t.Errorf("evidence %q, want it to contain %q", got.Evidence, want)
			}
			if got.Job != testJob || got.Oracle != "job-result-store" || got.At.IsZero() {
				t.Errorf("job %q oracle %q at %v", got.Job, got.Oracle, got.At)
			}
		})
	}
}

func TestJobResultStoreUnreadableDir(t *testing.T) {
	parent := t.TempDir()
	file := filepath.Join(parent, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A naive lookup in the current directory would find this.
	cwdEntry := testJob + ".json"
	if err := os.WriteFile(filepath.Join(parent, cwdEntry), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(parent)
	missing, belowFile := filepath.Join(parent, "missing"), filepath.Join(file, "jrs")
	for _, tc := range []struct{ name, dir, evidence string }{
		{"a file, not a directory", file, "jrs " + file + ": not a directory"},
		{"missing", missing, "jrs " + missing + ": unreadable: "},
		{"below a file", belowFile, "jrs " + belowFile + ": unreadable: "},
		{"not configured", "", "jrs: no directory configured"},
	} {
		got := (&gc.JobResultStore{Dir: tc.dir}).Judge(context.Background(), testJob)
		if got.Verdict != index.VerdictUnknown || !strings.HasPrefix(got.Evidence, tc.evidence) {
			t.Errorf("%s: %v %q, want unknown, %q", tc.name, got.Verdict, got.Evidence, tc.evidence)
		}
		// Not configured is silence; the others are failures.
		if (got.Failure != "") != (tc.dir != "") {
			t.Errorf("%s: failure %q", tc.name, got.Failure)
		}
	}
}

func TestJobResultStoreContext(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, testJob+".json"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := (&gc.JobResultStore{Dir: dir}).Judge(ctx, testJob)
	if got.Verdict != index.VerdictUnknown || !strings.Contains(got.Evidence, "canceled") {
		t.Errorf("%v %q, want unknown, canceled", got.Verdict, got.Evidence)
	}
}

// Every invalid id has a file planted where a naive path join would look, so
// an oracle that touched the file system with it would say gone.
func TestJobResultStoreRefusesInvalidJobID(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "jrs")
	for _, d := range []string{dir, filepath.Join(dir, "a")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{
		filepath.Join(parent, "x.json"),   // "../x"
		filepath.Join(dir, "a", "b.json"), // "a/b"
		filepath.Join(dir, "%2e%2e.json"),
		filepath.Join(dir, ".json"), // ""
		filepath.Join(parent, "jrs.json"),
		filepath.Join(dir, "A1B2C3D4E5F60718293A4B5C6D7E8F90.json"),
		filepath.Join(dir, "a1b2c3d4e5f60718293a4b5c6d7e8f9.json"),
		filepath.Join(dir, "a1b2c3d4e5f60718293a4b5c6d7e8f900.json"),
	} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	j := &gc.JobResultStore{Dir: dir}
	for _, id := range flinkid.InvalidJobIDs {
		got := j.Judge(context.Background(), id)
		if got.Verdict != index.VerdictUnknown || got.Evidence != "invalid job id" {
			t.Errorf("Judge(%q) = %v %q, want unknown \"invalid job id\"", id, got.Verdict, got.Evidence)
		}
	}
}
