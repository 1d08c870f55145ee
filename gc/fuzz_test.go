package gc_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/owner"
)

// FuzzJobResultStore gives the JobResultStore oracle an arbitrary job id
// and a store directory holding one file of an arbitrary name (and, beside
// the directory, the entries a job id with '/' or ".." would reach). It
// says gone exactly when the id is a Flink job id and the file is
// <id>.json or <id>_DIRTY.json in the directory itself, and never looks
// outside the directory. The seed corpus is in testdata/fuzz/FuzzJobResultStore.
func FuzzJobResultStore(f *testing.F) {
	for _, name := range []string{testJob + ".json", testJob + "_DIRTY.json", testJob, testJob + ".JSON", strings.ToUpper(testJob) + ".json"} {
		f.Add(testJob, name)
	}
	f.Add("../outside/"+testJob[:21], "x")             // 32 bytes, reaching the sibling directory
	f.Add("../outside/"+testJob[:21], testJob+".json") // ditto, with an entry for the real id
	f.Add(strings.ToUpper(testJob), strings.ToUpper(testJob)+".json")
	f.Add("", ".json")
	f.Add(testJob+".json", testJob+".json.json")

	root := f.TempDir()
	outside := filepath.Join(root, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		f.Fatal(err)
	}
	// What a job id escaping the directory would find.
	for _, name := range []string{testJob[:21] + ".json", testJob[:21] + "_DIRTY.json"} {
		if err := os.WriteFile(filepath.Join(outside, name), nil, 0o644); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, job, name string) {
		dir, err := os.MkdirTemp(root, "jrs-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		created := name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00") &&
			os.WriteFile(filepath.Join(dir, name), nil, 0o644) == nil
		got := (&gc.JobResultStore{Dir: dir}).Judge(context.Background(), job)
		want := index.VerdictUnknown
		if owner.IsFlinkID(job) && created && (name == job+".json" || name == job+"_DIRTY.json") {
			want = index.VerdictGone
		}
		if got.Verdict != want {
			t.Fatalf("Judge(%q) with file %q = %v (%s), want %v", job, name, got.Verdict, got.Evidence, want)
		}
		if got.Job != job || len(got.Evidence) > len(dir)+len(job)+128 {
			t.Fatalf("Judge(%q) = %+v", job, got)
		}
	})
}
