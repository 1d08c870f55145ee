package gc_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
)

func TestVerdictZeroIsUnknown(t *testing.T) {
	var v gc.JobVerdict
	if v.Verdict != index.VerdictUnknown {
		t.Fatalf("zero JobVerdict has verdict %v, want unknown", v.Verdict)
	}
}

func TestJobVerdictJSON(t *testing.T) {
	in := gc.JobVerdict{
		Job:      "a1b2c3d4e5f60718293a4b5c6d7e8f90",
		Verdict:  index.VerdictGone,
		Evidence: "flink http://jm:8081: state FINISHED",
		Oracle:   "flink-rest",
		At:       time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"verdict":"gone"`, `"job":"a1b2c3d4e5f60718293a4b5c6d7e8f90"`, `"oracle":"flink-rest"`, `"evidence":`, `"at":"2025-03-01T12:00:00Z"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("marshalled %s, missing %s", b, want)
		}
	}
	var out gc.JobVerdict
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Verdict != in.Verdict || out.Job != in.Job || out.Evidence != in.Evidence || out.Oracle != in.Oracle || !out.At.Equal(in.At) {
		t.Errorf("round trip: got %+v, want %+v", out, in)
	}
}

func TestJobVerdictJSONRefuses(t *testing.T) {
	for _, body := range []string{`{"verdict":"maybe"}`, `{"verdict":2}`, `{"verdict":"GONE"}`, `{"verdict":"unknown "}`} {
		var v gc.JobVerdict
		if err := json.Unmarshal([]byte(body), &v); err == nil {
			t.Errorf("Unmarshal(%s) = %+v, nil; want an error", body, v)
		}
	}
	if b, err := json.Marshal(gc.JobVerdict{Verdict: index.Verdict(7)}); err == nil {
		t.Errorf("Marshal of verdict 7 = %s, nil; want an error", b)
	}
}
