package gc

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/owner"
)

// Oracle gives a verdict about one job. It never returns Gone without evidence,
// and any doubt (error, timeout, malformed answer) is Unknown (DESIGN invariant 4).
// Judge must be safe to call concurrently.
type Oracle interface {
	Name() string
	Judge(ctx context.Context, job string) JobVerdict
}

// evidenceInvalidJobID is the evidence every oracle gives when it refuses a
// job id: anything owner.IsFlinkID does not accept, so that no id can build a
// URL path or a file name outside its directory.
const evidenceInvalidJobID = "invalid job id"

// Combine asks every oracle at once and merges their answers: Live if any says
// Live (job ids are reused, so a live run wins over an old result); else Gone if
// any says Gone; else Unknown. Evidence joins every oracle's evidence in the
// order given; Oracle names the oracles whose verdict is the merged one. At is
// taken before any oracle is asked. An Unknown verdict keeps the failures
// of the oracles that could not answer (JobVerdict.Failure), and is
// NotFound when every oracle answered that it knows nothing of the job. An invalid
// job id is refused without asking, and no oracles at all is Unknown.
func Combine(ctx context.Context, job string, oracles ...Oracle) JobVerdict {
	out := JobVerdict{Job: job, Verdict: index.VerdictUnknown, At: time.Now()}
	if !owner.IsFlinkID(job) {
		out.Evidence = evidenceInvalidJobID
		return out
	}
	if len(oracles) == 0 {
		out.Evidence = "no oracle configured"
		return out
	}

	answers := make([]JobVerdict, len(oracles))
	var wg sync.WaitGroup
	for i, o := range oracles {
		wg.Go(func() { answers[i] = o.Judge(ctx, job) })
	}
	wg.Wait()

	for _, a := range answers {
		if a.Verdict == index.VerdictLive || (a.Verdict == index.VerdictGone && out.Verdict != index.VerdictLive) {
			out.Verdict = a.Verdict
		}
	}
	var names, evidence, failures []string
	out.NotFound = out.Verdict == index.VerdictUnknown
	for i, a := range answers {
		out.NotFound = out.NotFound && a.NotFound
		if a.Verdict == out.Verdict {
			names = append(names, oracles[i].Name())
		}
		evidence = append(evidence, a.Evidence)
		if a.Failure != "" {
			failures = append(failures, oracles[i].Name()+": "+a.Failure)
		}
	}
	out.Oracle = strings.Join(names, ",")
	out.Evidence = strings.Join(evidence, "; ")
	if out.Verdict == index.VerdictUnknown {
		out.Failure = strings.Join(failures, "; ")
	}
	return out
}
