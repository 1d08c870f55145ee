package gc

import (
	"fmt"
	"time"
)

// Verdict is what is known about whether a job still lives. The zero value is
// Unknown, so a verdict nobody set keeps everything (DESIGN invariant 4).
type Verdict uint8

const (
	// Unknown keeps everything: no oracle could tell, or one was in doubt
	// (unreachable, timeout, malformed answer, SUSPENDED, an unconfirmed 404).
	Unknown Verdict = iota
	// Live means some oracle saw the job running (or about to run, or restarting).
	Live
	// Gone means some oracle confirmed the job globally terminal, with evidence.
	Gone
)

var verdictNames = [...]string{Unknown: "unknown", Live: "live", Gone: "gone"}

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
	return Unknown, fmt.Errorf("invalid verdict %q: want unknown, live or gone", s)
}

// MarshalText encodes v as its name, so JSON carries "gone", not 2. An
// out-of-range value is an error rather than a name nothing could parse back.
func (v Verdict) MarshalText() ([]byte, error) {
	if int(v) >= len(verdictNames) {
		return nil, fmt.Errorf("invalid verdict %d", uint8(v))
	}
	return []byte(verdictNames[v]), nil
}

// UnmarshalText decodes a name written by MarshalText.
func (v *Verdict) UnmarshalText(b []byte) error {
	p, err := ParseVerdict(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// JobVerdict is one oracle's answer about one job, with its evidence.
//
// At is taken before the oracle asked its question, so it is no later than the
// moment the answer describes: state last written before At was written before
// the verdict held (DESIGN invariant 4; job ids are reused).
type JobVerdict struct {
	Job      string    `json:"job"`
	Verdict  Verdict   `json:"verdict"`
	Evidence string    `json:"evidence"`
	Oracle   string    `json:"oracle"`
	At       time.Time `json:"at"`
}
