package gc

import (
	"context"
	"slices"
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
// NotFound when the oracles say that the job is unknown to every oracle
// (unknownToAll). An invalid
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

	answers := make([]answer, len(oracles))
	verdicts := make([]JobVerdict, len(oracles))
	var wg sync.WaitGroup
	for i, o := range oracles {
		wg.Go(func() {
			verdicts[i] = o.Judge(ctx, job)
			v := verdicts[i]
			answers[i] = answer{o.Name(), v.Verdict, v.Evidence, v.Failure}
		})
	}
	wg.Wait()
	out.Verdict, out.Oracle, out.Evidence, out.Failure = merge(answers)
	out.NotFound = out.Verdict == index.VerdictUnknown && unknownToAll(verdicts)
	return out
}

// unknownToAll reports whether answers say that the job is unknown to
// every oracle: each knows nothing of it (NotFound), or knows nothing and
// would know nothing of a job that runs (Silent), and one at least is
// NotFound. A Silent oracle's answer is no evidence that a job does not
// run: with only such oracles, a running job would look forgotten.
func unknownToAll(answers []JobVerdict) bool {
	found := false
	for _, a := range answers {
		switch {
		case a.NotFound:
			found = true
		case !a.Silent:
			return false
		}
	}
	return found
}

// ExecutorOracle gives a verdict about one executor, by its resource id:
// Live while its TaskManager runs, Gone once it is confirmed gone, with
// evidence, and Unknown in any doubt (DESIGN invariant 4). listedBy are
// the addresses that have answered the executor live before, as its
// record keeps them (index.Executor.ListedBy), and a verdict's ListedBy
// those that answer it live now. An Oracle that is not an ExecutorOracle
// knows nothing of executors (a JobResultStore records jobs only).
// JudgeExecutor must be safe to call concurrently.
type ExecutorOracle interface {
	Name() string
	JudgeExecutor(ctx context.Context, executor string, listedBy []string) ExecutorVerdict
}

// evidenceInvalidExecutorID is the evidence every oracle gives when it
// refuses an executor id: anything owner.IsResourceID does not accept.
const evidenceInvalidExecutorID = "invalid executor id"

// CombineExecutor asks every oracle about executor at once and merges
// their answers as Combine does: Live if any says Live (a TaskManager that
// runs keeps its tree whatever else is said), else Gone if any says Gone,
// else Unknown, with the failures of the oracles that could not answer;
// ListedBy joins every oracle's. An oracle that is no ExecutorOracle
// answers Unknown, and no failure. An invalid executor id is refused
// without asking, and no oracles at all is Unknown.
func CombineExecutor(ctx context.Context, executor string, listedBy []string, oracles ...Oracle) ExecutorVerdict {
	out := ExecutorVerdict{Executor: executor, Verdict: index.VerdictUnknown, At: time.Now()}
	if !owner.IsResourceID(executor) {
		out.Evidence = evidenceInvalidExecutorID
		return out
	}
	if len(oracles) == 0 {
		out.Evidence = "no oracle configured"
		return out
	}
	answers := make([]answer, len(oracles))
	listed := make([][]string, len(oracles))
	var wg sync.WaitGroup
	for i, o := range oracles {
		eo, ok := o.(ExecutorOracle)
		if !ok {
			answers[i] = answer{o.Name(), index.VerdictUnknown, o.Name() + ": knows nothing of executors", ""}
			continue
		}
		wg.Go(func() {
			v := eo.JudgeExecutor(ctx, executor, listedBy)
			answers[i], listed[i] = answer{o.Name(), v.Verdict, v.Evidence, v.Failure}, v.ListedBy
		})
	}
	wg.Wait()
	out.Verdict, out.Oracle, out.Evidence, out.Failure = merge(answers)
	out.ListedBy = slices.Concat(listed...)
	return out
}

// answer is one oracle's answer, about a job or an executor, as merge
// takes it.
type answer struct {
	oracle            string
	verdict           index.Verdict
	evidence, failure string
}

// merge combines answers: Live if any is Live, else Gone if any is Gone,
// else Unknown (a verdict out of range counts as none); the names of the
// oracles whose verdict that is; every answer's evidence, in order; and,
// for Unknown, the failures of the oracles that could not answer.
func merge(answers []answer) (verdict index.Verdict, oracle, evidence, failure string) {
	verdict = index.VerdictUnknown
	for _, a := range answers {
		if a.verdict == index.VerdictLive || (a.verdict == index.VerdictGone && verdict != index.VerdictLive) {
			verdict = a.verdict
		}
	}
	var names, evidences, failures []string
	for _, a := range answers {
		if a.verdict == verdict {
			names = append(names, a.oracle)
		}
		evidences = append(evidences, a.evidence)
		if a.failure != "" {
			failures = append(failures, a.oracle+": "+a.failure)
		}
	}
	if verdict == index.VerdictUnknown {
		failure = strings.Join(failures, "; ")
	}
	return verdict, strings.Join(names, ","), strings.Join(evidences, "; "), failure
}
