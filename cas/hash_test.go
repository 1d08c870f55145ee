package cas_test

import (
	"strings"
	"testing"

	"github.com/statefs/statefs/cas"
)

func TestHashStringRoundTrip(t *testing.T) {
	h := cas.Sum([]byte("hello"))
	s := h.String()
	if len(s) != 64 || strings.ToLower(s) != s {
		t.Fatalf("String() = %q, want 64 lowercase hex digits", s)
	}
	got, err := cas.ParseHash(s)
	if err != nil {
		t.Fatalf("ParseHash(%q): %v", s, err)
	}
	if got != h {
		t.Fatalf("ParseHash(String()) = %s, want %s", got, h)
	}
	if cas.Sum([]byte("hellp")) == h {
		t.Fatal("different data gave the same hash")
	}
}

func TestParseHashRejectsBadInput(t *testing.T) {
	good := cas.Sum(nil).String()
	for name, s := range map[string]string{
		"empty":     "",
		"short":     good[:63],
		"long":      good + "0",
		"uppercase": strings.ToUpper(good[:2]) + good[2:],
		"non-hex":   "g" + good[1:],
		"space":     " " + good[1:],
		"slash":     "../" + good[3:],
	} {
		t.Run(name, func(t *testing.T) {
			if h, err := cas.ParseHash(s); err == nil {
				t.Fatalf("ParseHash(%q) = %s, want an error", s, h)
			} else if !strings.Contains(err.Error(), "bad hash") {
				t.Fatalf("ParseHash(%q) error %q does not say what is wrong", s, err)
			}
		})
	}
}
