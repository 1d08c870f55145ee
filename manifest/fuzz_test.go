package manifest_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/statefs/statefs/manifest"
)

// FuzzUnmarshal checks that Unmarshal never panics, rejects what it does not
// accept with ErrCorrupt, and that whatever it accepts is exactly what
// Marshal writes for the result: there is one encoding per manifest, so an
// index value that decodes is never silently rewritten to something else.
// The seed corpus is in testdata/fuzz/FuzzUnmarshal.
func FuzzUnmarshal(f *testing.F) {
	for _, m := range []*manifest.Manifest{
		{},
		{Size: 3, Inline: []byte("abc")},
		{Size: 100, Extents: []manifest.Extent{{Off: 10, Len: 20, Hash: h1}, {Off: 30, Len: 5, Hash: h2}}},
	} {
		f.Add(m.Marshal())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := manifest.Unmarshal(b)
		if err != nil {
			if !errors.Is(err, manifest.ErrCorrupt) {
				t.Fatalf("Unmarshal failed with %v, which does not wrap ErrCorrupt", err)
			}
			return
		}
		if again := m.Marshal(); !bytes.Equal(again, b) {
			t.Fatalf("Unmarshal(%x) = %+v, which marshals to %x", b, m, again)
		}
		for i, e := range m.Extents {
			if e.Len == 0 || e.End() < e.Off || e.End() > m.Size || (i > 0 && e.Off < m.Extents[i-1].End()) {
				t.Fatalf("accepted extent %d %+v of %+v", i, e, m)
			}
		}
	})
}

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
		r, err := manifest.ParseRules("f.rules", strings.NewReader(rules))
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
			if o.Level == manifest.LevelNone {
				t.Fatalf("Owner(%q) = %+v: unowned with %s", path, o, name)
			}
			if strings.Contains(id, "/") || !componentsContain(path, id) {
				t.Fatalf("Owner(%q).%s = %q is not within one component of the path", path, name, id)
			}
		}
		need := map[manifest.Level][]string{
			manifest.LevelExecutor: {"executor"}, manifest.LevelJob: {"job"}, manifest.LevelAllocation: {"allocation"},
			manifest.LevelJobInAllocation: {"allocation", "job"}, manifest.LevelSubtask: {"subtask"}, manifest.LevelCheckpoint: {"checkpoint"},
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
	_, err := manifest.ParseRules("blowup.rules", strings.NewReader(b.String()))
	if err == nil || !strings.Contains(err.Error(), "expanded") {
		t.Fatalf("ParseRules = %v, want a refusal of the expanded length", err)
	}
}
