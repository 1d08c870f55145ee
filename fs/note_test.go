package fs

import (
	"testing"
	"time"
)

// White-box: a write is noted in its owner's records once per noteEvery
// per owner.
func TestNoteDue(t *testing.T) {
	f := &FS{noted: map[uint64]int64{}}
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, c := range []struct {
		owner uint64
		at    time.Duration
		want  bool
	}{
		{1, 0, true},
		{1, 500 * time.Millisecond, false},
		{2, 500 * time.Millisecond, true}, // another owner
		{1, 999 * time.Millisecond, false},
		{1, time.Second, true},
		{1, 1500 * time.Millisecond, false},
		{1, -time.Hour, true}, // the clock went back: noted
	} {
		if got := f.noteDue(c.owner, t0+int64(c.at)); got != c.want {
			t.Errorf("noteDue(owner %d, +%v) = %v, want %v", c.owner, c.at, got, c.want)
		}
	}
}
