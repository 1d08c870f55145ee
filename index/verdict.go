package index

import "fmt"

// Verdict is what is known about whether a job still lives: the collector's
// combined verdict (package gc judges) and the operator's word, both kept in
// the job's record. The zero value is VerdictUnknown, so a verdict nobody set
// keeps everything (DESIGN invariant 4).
type Verdict uint8

const (
	// VerdictUnknown keeps everything: no oracle could tell, or one was in
	// doubt (unreachable, timeout, malformed answer, SUSPENDED, an
	// unconfirmed 404). As the operator's word: nothing said.
	VerdictUnknown Verdict = iota
	// VerdictLive means some oracle saw the job running (or about to run, or
	// restarting).
	VerdictLive
	// VerdictGone means some oracle confirmed the job globally terminal, with
	// evidence.
	VerdictGone
)

// verdictNames are the verdicts' names: what String prints, and what job
// records and the control socket's JSON carry.
var verdictNames = [...]string{VerdictUnknown: "unknown", VerdictLive: "live", VerdictGone: "gone"}

// String returns "unknown", "live" or "gone"; an out-of-range value prints as
// "verdict(N)".
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// ParseVerdict is the inverse of String: it accepts exactly "unknown", "live"
// or "gone".
func ParseVerdict(s string) (Verdict, error) {
	for v, name := range verdictNames {
		if s == name {
			return Verdict(v), nil
		}
	}
	return VerdictUnknown, fmt.Errorf("invalid verdict %q: want unknown, live or gone", s)
}

// MarshalText encodes v as its name, so JSON carries "gone", not 2. An
// out-of-range value is an error rather than a name nothing could parse back.
func (v Verdict) MarshalText() ([]byte, error) {
	if int(v) >= len(verdictNames) {
		return nil, fmt.Errorf("invalid verdict %d", uint8(v))
	}
	return []byte(verdictNames[v]), nil
}

// UnmarshalText decodes a name written by MarshalText, and nothing else.
// (A job record is more lenient: see Job.UnmarshalJSON.)
func (v *Verdict) UnmarshalText(b []byte) error {
	p, err := ParseVerdict(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}
