package index_test

import (
	"strings"
	"testing"

	"github.com/statefs/statefs/index"
)

func TestVerdictStringParse(t *testing.T) {
	for _, tc := range []struct {
		v    index.Verdict
		name string
	}{
		{index.VerdictUnknown, "unknown"},
		{index.VerdictLive, "live"},
		{index.VerdictGone, "gone"},
	} {
		if got := tc.v.String(); got != tc.name {
			t.Errorf("%d.String() = %q, want %q", tc.v, got, tc.name)
		}
		got, err := index.ParseVerdict(tc.name)
		if err != nil || got != tc.v {
			t.Errorf("ParseVerdict(%q) = %v, %v; want %v, nil", tc.name, got, err, tc.v)
		}
	}
	if got := index.Verdict(7).String(); got != "verdict(7)" {
		t.Errorf("Verdict(7).String() = %q", got)
	}
}

func TestParseVerdictRefuses(t *testing.T) {
	for _, s := range []string{"", "Gone", "GONE", " gone", "gone\n", "dead", "2", "verdict(7)"} {
		v, err := index.ParseVerdict(s)
		if err == nil {
			t.Errorf("ParseVerdict(%q) = %v, nil; want an error", s, v)
			continue
		}
		if v != index.VerdictUnknown {
			t.Errorf("ParseVerdict(%q) returned %v with its error; want unknown", s, v)
		}
		if !strings.Contains(err.Error(), "unknown, live or gone") {
			t.Errorf("ParseVerdict(%q) error %q does not say what is accepted", s, err)
		}
	}
}
