package owner_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statefs/statefs/owner"
)

// kafkaStreamsRules describe Kafka Streams' state.dir, mounted as the root:
// <application.id>/<subtopology>_<partition>/rocksdb/<store>/...
const kafkaStreamsRules = `
# Kafka Streams: the application id is the job, a task <subtopology>_<partition>
# is a subtask of vertex <subtopology>.
define appid   [A-Za-z0-9._-]+

job       (?P<job>${appid})
subtask   (?P<job>${appid})/(?P<vertex>0|[1-9][0-9]*)_(?P<subtask>0|[1-9][0-9]*)
`

func mustParse(tb testing.TB, rules string) *owner.Rules {
	tb.Helper()
	r, err := owner.ParseRules("test.rules", strings.NewReader(rules))
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func TestKafkaStreamsRules(t *testing.T) {
	rules := mustParse(t, kafkaStreamsRules)
	app := owner.Owner{Job: "wordcount", Level: owner.LevelJob}
	task := owner.Owner{Job: "wordcount", Vertex: "0", Subtask: "3", Level: owner.LevelSubtask}
	for _, tc := range []struct {
		path string
		want owner.Owner
	}{
		{"", owner.Owner{}},
		{"wordcount", app},
		{"wordcount/kafka-streams-process-metadata", app},
		{"wordcount/0_3", task},
		{"wordcount/0_3/.checkpoint", task},
		{"wordcount/0_3/rocksdb/counts-store/000012.sst", task},
		{"wordcount/0_3x/rocksdb", app},
		{"wordcount/03_3", app},
		{"wordcount/_3", app},
		{"word count/0_3", owner.Owner{}},
	} {
		if got := rules.Owner(tc.path); got != tc.want {
			t.Errorf("Owner(%q)\n got %+v\nwant %+v", tc.path, got, tc.want)
		}
	}
}

// TestRulesMerge pins down how the matching rules make one owner: the
// deepest level, each id from the deepest rule that captures it, ties to the
// earlier line; a rule whose level's ids are empty does not match.
func TestRulesMerge(t *testing.T) {
	for _, tc := range []struct {
		name, rules, path string
		want              owner.Owner
	}{
		{
			"ids from several levels",
			"executor host-(?P<executor>[a-z0-9]+)\ncheckpoint host-[a-z0-9]+/(?P<job>[a-z]+)/ckpt-(?P<checkpoint>[0-9]+)",
			"host-a1/app/ckpt-7/x",
			owner.Owner{Executor: "a1", Job: "app", Checkpoint: "7", Level: owner.LevelCheckpoint},
		},
		{
			"deeper rule's id wins",
			"job (?P<job>[a-z]+)\nsubtask [a-z]+/(?P<job>[a-z]+)-(?P<subtask>[0-9]+)",
			"outer/inner-1",
			owner.Owner{Job: "inner", Subtask: "1", Level: owner.LevelSubtask},
		},
		{
			"earlier line wins at equal level",
			"job (?P<job>a)[a-z]*\njob (?P<job>[a-z]+)",
			"abc",
			owner.Owner{Job: "a", Level: owner.LevelJob},
		},
		{
			"empty level capture does not match",
			"job (?P<job>[a-z]*)x",
			"x/y",
			owner.Owner{},
		},
		{
			"optional capture may stay empty",
			"subtask (?P<job>[a-z]+)/(?:v(?P<vertex>[0-9]+)-)?(?P<subtask>[0-9]+)",
			"app/7",
			owner.Owner{Job: "app", Subtask: "7", Level: owner.LevelSubtask},
		},
		{
			"whole components only",
			"job (?P<job>[a-z]+)",
			"app1/x",
			owner.Owner{},
		},
		{
			"pattern may start with ^ and span components",
			"job-in-allocation ^pool/(?P<allocation>[0-9]+)/(?P<job>[a-z]+)",
			"pool/12/app/state",
			owner.Owner{Allocation: "12", Job: "app", Level: owner.LevelJobInAllocation},
		},
		{
			"unnamed groups are fine",
			"allocation (slot|alloc)-(?P<allocation>[0-9]+)",
			"alloc-3",
			owner.Owner{Allocation: "3", Level: owner.LevelAllocation},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustParse(t, tc.rules).Owner(tc.path); got != tc.want {
				t.Errorf("Owner(%q)\n got %+v\nwant %+v", tc.path, got, tc.want)
			}
		})
	}
}

// TestFlinkRulesFile holds flink.rules to the built-in Flink layout on every
// Flink case (FuzzOwner does the same on whatever the fuzzer finds).
func TestFlinkRulesFile(t *testing.T) {
	byFile, err := owner.LoadRules("flink.rules")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range flinkCases {
		if got := byFile.Owner(tc.path); got != tc.want {
			t.Errorf("%s: flink.rules Owner(%q)\n got %+v\nwant %+v", tc.name, tc.path, got, tc.want)
		}
	}
}

func TestParseRulesErrors(t *testing.T) {
	for _, tc := range []struct {
		name, rules string
		want        string // the whole error, or its start up to "..."
	}{
		{"empty file", "", "test.rules:1: no rules"},
		{"only comments", "# nothing\n\n   # here\n", "test.rules:3: no rules"},
		{"only definitions", "define id [0-9]+\n", "test.rules:1: no rules"},
		{"unknown level", "# c\nowner (?P<job>x)", `test.rules:2: unknown level "owner" (want executor, job, allocation, job-in-allocation, subtask, checkpoint or define)`},
		{"level none", "none x", `test.rules:1: unknown level "none" ...`},
		{"level case", "Job (?P<job>x)", `test.rules:1: unknown level "Job" ...`},
		{"no pattern", "job (?P<job>x)\n\nexecutor   ", "test.rules:3: executor: no pattern"},
		{"bad regexp", "job (?P<job>[a-z]+", "test.rules:1: error parsing regexp: missing closing ): ..."},
		{"bad repeat", "job (?P<job>a{2000})", "test.rules:1: error parsing regexp: invalid repeat count: ..."},
		{"unknown capture", "job (?P<job>x)/(?P<jobid>y)", `test.rules:1: unknown capture "jobid" (want executor, allocation, job, vertex, subtask or checkpoint)`},
		{"duplicate capture", "job (?P<job>x)/(?P<job>y)", "test.rules:1: capture job appears twice"},
		{"no capture for level", "job (?P<executor>x)", "test.rules:1: a job rule needs a (?P<job>...) capture"},
		{"no capture at all", "checkpoint chk_[0-9]+", "test.rules:1: a checkpoint rule needs a (?P<checkpoint>...) capture"},
		{"job-in-allocation without allocation", "job-in-allocation (?P<job>x)", "test.rules:1: a job-in-allocation rule needs a (?P<allocation>...) capture"},
		{"duplicate", "job (?P<job>x)\n# again\njob   (?P<job>x)", "test.rules:3: same pattern as line 1"},
		{"duplicate at another level", "job (?P<job>x)(?P<subtask>y)\nsubtask (?P<job>x)(?P<subtask>y)", "test.rules:2: same pattern as line 1"},
		{"duplicate through define", "define j (?P<job>x)\njob (?P<job>x)\njob ${j}", "test.rules:3: same pattern as line 2"},
		{"capture can match slash", "job (?P<job>.+)", "test.rules:1: capture job can match '/': an id must lie within one path component"},
		{"capture negated class", "job (?P<job>[^.]+)", "test.rules:1: capture job can match '/': ..."},
		{"capture literal slash", "job (?P<job>a/b)", "test.rules:1: capture job can match '/': ..."},
		{"capture (?s).", "job (?s)(?P<job>x.)", "test.rules:1: capture job can match '/': ..."},
		{"trailing slash", "job ^(?P<job>[^/]+)/", "test.rules:1: pattern ends in '/': a rule matches whole components, the boundary is implied"},
		{"undefined", "job (?P<job>${app})", "test.rules:1: ${app} is not defined"},
		{"unterminated reference", "job (?P<job>${app)", "test.rules:1: ${ without }"},
		{"redefined", "define a x\ndefine a y", "test.rules:2: define: a is already defined"},
		{"bad define name", "define 1a x", `test.rules:1: define: bad name "1a"`},
		{"define without pattern", "define a", "test.rules:1: define a: no pattern"},
		{"define bad regexp", "define a (x", "test.rules:1: define a: error parsing regexp: missing closing ): ..."},
		{"define undefined", "define a ${b}", "test.rules:1: ${b} is not defined"},
		{"line too long", "job (?P<job>x)\n\njob " + strings.Repeat("x", 70<<10), "test.rules:3: bufio.Scanner: token too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := owner.ParseRules("test.rules", strings.NewReader(tc.rules))
			if err == nil {
				t.Fatalf("ParseRules accepted it: %+v", r)
			}
			if prefix, ok := strings.CutSuffix(tc.want, "..."); ok {
				if !strings.HasPrefix(err.Error(), prefix) {
					t.Fatalf("error %q, want it to start with %q", err, prefix)
				}
			} else if err.Error() != tc.want {
				t.Fatalf("error %q, want %q", err, tc.want)
			}
		})
	}
}

func TestLoadRules(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "kafka.rules")
	if err := os.WriteFile(good, []byte(kafkaStreamsRules), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := owner.LoadRules(good)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Owner("app/1_2/rocksdb"); got.Level != owner.LevelSubtask || got.Job != "app" {
		t.Errorf("Owner = %+v", got)
	}

	bad := filepath.Join(dir, "bad.rules")
	if err := os.WriteFile(bad, []byte("job (?P<job>x)\nexecutor (?P<host>x)\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.LoadRules(bad); err == nil || !strings.HasPrefix(err.Error(), bad+":2: unknown capture") {
		t.Errorf("LoadRules(bad) = %v, want %s:2: unknown capture ...", err, bad)
	}

	if _, err := owner.LoadRules(filepath.Join(dir, "missing.rules")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadRules(missing) = %v, want fs.ErrNotExist", err)
	}
}
