package test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"
)

// What every --json output of statefs keeps to, so that scripts and
// dashboards read them one way: keys in lower case, times as RFC 3339
// strings (never nanoseconds since the epoch), durations as numbers of
// seconds, and empty lists as [] (no null anywhere).
var (
	printedKey  = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	printedTime = regexp.MustCompile(`^(at|since|first_write|last_write|[a-z]*time|[a-z_]+_at|[a-z_]+_since)$`)
	printedSecs = []string{"took", "grace", "interval"}
)

// nanosecondsSince2001 is how large a count of nanoseconds since the epoch
// is for any time after 2001: no count or size a test prints comes near.
const nanosecondsSince2001 = 1e18

// printedJSONProblems lists how out, the output of statefs cmd --json,
// breaks those rules.
func printedJSONProblems(cmd, out string) []string {
	var doc any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return []string{fmt.Sprintf("%s: not JSON: %v", cmd, err)}
	}
	var problems []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case nil:
			problems = append(problems, fmt.Sprintf("%s: %s is null", cmd, path))
		case map[string]any:
			for k, e := range v {
				at := path + "." + k
				if !printedKey.MatchString(k) {
					problems = append(problems, fmt.Sprintf("%s: key %s is not lower case", cmd, at))
				}
				switch {
				case printedTime.MatchString(k):
					s, ok := e.(string)
					if _, err := time.Parse(time.RFC3339Nano, s); !ok || err != nil {
						problems = append(problems, fmt.Sprintf("%s: %s is %v, not an RFC 3339 time", cmd, at, e))
					}
					continue
				case slices.Contains(printedSecs, k):
					if _, ok := e.(float64); !ok {
						problems = append(problems, fmt.Sprintf("%s: %s is %v, not a number of seconds", cmd, at, e))
					}
				}
				walk(at, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		case float64:
			if v >= nanosecondsSince2001 || v <= -nanosecondsSince2001 {
				problems = append(problems, fmt.Sprintf("%s: %s is %.0f, which looks like nanoseconds since the epoch", cmd, path, v))
			}
		}
	}
	walk("$", doc)
	return problems
}

// The rules hold the outputs to something: each of these breaks one.
func TestPrintedJSONRulesFindBreaks(t *testing.T) {
	for _, out := range []string{
		`{"Chunks": 1}`,
		`{"held": null}`,
		`{"at": 1764676800000000000}`,
		`{"job": {"since": "yesterday"}}`,
		`{"took": "1.5s"}`,
		`[{"first_write": 1764676800000000000}]`,
		`{"x": 1764676800000000000}`,
		`not json`,
	} {
		if len(printedJSONProblems("test", out)) == 0 {
			t.Errorf("%s: no problem found", out)
		}
	}
	if p := printedJSONProblems("test", `{"at": "2026-12-02T14:00:00.5Z", "took": 1.5, "held": [], "bytes": 5}`); len(p) != 0 {
		t.Errorf("a good output: %v", p)
	}
}
