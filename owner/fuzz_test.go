package owner_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/statefs/statefs/owner"
)

// FuzzRules parses arbitrary rules files and asks the accepted ones for
// the owner of an arbitrary path. ParseRules never panics, refuses with
// "NAME:LINE: reason", and cannot be made to build an unbounded pattern
// (defines that double at every line are refused once they pass the line
// bound); an accepted file's Owner gives only ids that are substrings of
// the path within one component, has every id its level needs, and no ids
// at LevelNone. The seed corpus is in testdata/fuzz/FuzzRules.
func FuzzRules(f *testing.F) {
	flinkFile, err := os.ReadFile("flink.rules")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(flinkFile), "tm_tm-1/localState/aid_0123456789abcdef0123456789abcdef/jid_0123456789abcdef0123456789abcdef/vtx_0123456789abcdef0123456789abcdef_sti_0/chk_5/x")
	f.Add(kafkaStreamsRules, "wordcount/0_3/rocksdb/counts-store/000012.sst")
	f.Add("job (?P<job>[a-z]+)\n", "app/x")
	f.Add("define a x\ndefine b ${a}${a}\ndefine c ${b}${b}\njob (?P<job>${c})\n", "xxxx")
	f.Add("executor (?P<executor>(?:[^/]|/)+)\n", "a/b")
	f.Add("job (?P<job>a*)\n", "")
	f.Fuzz(func(t *testing.T, rules, path string) {
		r, err := owner.ParseRules("f.rules", strings.NewReader(rules))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.rules:") {
				t.Fatalf("error %q does not name the file and line", err)
			}
			return
		}
		o := r.Owner(path)
		ids := fieldsOf(o)
		for name, id := range ids {
			if id == "" {
				continue
			}
			if o.Level == owner.LevelNone {
				t.Fatalf("Owner(%q) = %+v: unowned with %s", path, o, name)
			}
			if strings.Contains(id, "/") || !componentsContain(path, id) {
				t.Fatalf("Owner(%q).%s = %q is not within one component of the path", path, name, id)
			}
		}
		need := map[owner.Level][]string{
			owner.LevelExecutor: {"executor"}, owner.LevelJob: {"job"}, owner.LevelAllocation: {"allocation"},
			owner.LevelJobInAllocation: {"allocation", "job"}, owner.LevelSubtask: {"subtask"}, owner.LevelCheckpoint: {"checkpoint"},
		}
		for _, name := range need[o.Level] {
			if ids[name] == "" {
				t.Fatalf("Owner(%q) = %+v: level %v without %s", path, o, o.Level, name)
			}
		}
	})
}

// componentsContain reports whether id lies inside one '/'-separated
// component of path.
func componentsContain(path, id string) bool {
	for _, c := range strings.Split(path, "/") {
		if strings.Contains(c, id) {
			return true
		}
	}
	return false
}

// A chain of defines that doubles at every line is refused once it passes
// the bound, instead of expanding to gigabytes (FuzzRules' bounded
// allocation; 40 such lines took all of memory before the bound).
func TestRulesDefineBlowup(t *testing.T) {
	var b strings.Builder
	b.WriteString("define d0 [a-z]\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "define d%d ${d%d}${d%d}\n", i, i-1, i-1)
	}
	b.WriteString("job (?P<job>${d40})\n")
	_, err := owner.ParseRules("blowup.rules", strings.NewReader(b.String()))
	if err == nil || !strings.Contains(err.Error(), "expanded") {
		t.Fatalf("ParseRules = %v, want a refusal of the expanded length", err)
	}
}
