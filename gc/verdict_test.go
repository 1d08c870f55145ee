package gc_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/statefs/statefs/gc"
)

func TestVerdictStringParse(t *testing.T) {
	for _, tc := range []struct {
		v    gc.Verdict
		name string
	}{
		{gc.Unknown, "unknown"},
		{gc.Live, "live"},
		{gc.Gone, "gone"},
	} {
		if got := tc.v.String(); got != tc.name {
			t.Errorf("%d.String() = %q, want %q", tc.v, got, tc.name)
		}
		got, err := gc.ParseVerdict(tc.name)
		if err != nil || got != tc.v {
			t.Errorf("ParseVerdict(%q) = %v, %v; want %v, nil", tc.name, got, err, tc.v)
		}
	}
	if got := gc.Verdict(7).String(); got != "verdict(7)" {
		t.Errorf("Verdict(7).String() = %q", got)
	}
}

func TestVerdictZeroIsUnknown(t *testing.T) {
	var v gc.JobVerdict
	if v.Verdict != gc.Unknown {
		t.Fatalf("zero JobVerdict has verdict %v, want unknown", v.Verdict)
	}
}

func TestParseVerdictRefuses(t *testing.T) {
	for _, s := range []string{"", "Gone", "GONE", " gone", "gone\n", "dead", "2", "verdict(7)"} {
		v, err := gc.ParseVerdict(s)
		if err == nil {
			t.Errorf("ParseVerdict(%q) = %v, nil; want an error", s, v)
			continue
		}
		if v != gc.Unknown {
			t.Errorf("ParseVerdict(%q) returned %v with its error; want unknown", s, v)
		}
		if !strings.Contains(err.Error(), "unknown, live or gone") {
			t.Errorf("ParseVerdict(%q) error %q does not say what is accepted", s, err)
		}
	}
}

func TestJobVerdictJSON(t *testing.T) {
	in := gc.JobVerdict{
		Job:      "a1b2c3d4e5f60718293a4b5c6d7e8f90",
		Verdict:  gc.Gone,
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
	if b, err := json.Marshal(gc.JobVerdict{Verdict: gc.Verdict(7)}); err == nil {
		t.Errorf("Marshal of verdict 7 = %s, nil; want an error", b)
	}
}
