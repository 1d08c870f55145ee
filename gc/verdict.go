package gc

import (
	"time"

	"github.com/statefs/statefs/index"
)

// JobVerdict is one oracle's answer about one job, with its evidence.
//
// At is taken before the oracle asked its question, so it is no later than the
// moment the answer describes: state last written before At was written before
// the verdict held (DESIGN invariant 4; job ids are reused).
//
// Failure says why an oracle could not answer (unreachable, an error, a
// malformed answer), as distinct from an answer that decides nothing (a
// 404, SUSPENDED, the operator's silence). A combined verdict has one when
// it is Unknown and an oracle failed: no oracle could say, and the
// collector is not doing its work for that job.
//
// A plan's gone verdicts (Plan.Verdicts) say when gone began to hold
// without a break (Since) and when the grace period after it ends
// (CollectableAt): the first run from then on collects the job, so a job
// gone for less than the grace period shows why it stays.
//
// NotFound says that the oracle answered and knows nothing of the job,
// and would know it if it ran: every Flink URL answered 404. Silent says
// that it knows nothing of the job and could not know a job that runs: the
// JobResultStore (which records jobs that ended) has no file for it, the
// operator said nothing. A combined verdict is NotFound when some oracle
// is NotFound and every other one NotFound or Silent: the job is unknown
// to every oracle, which no failure, no SUSPENDED and no Live is, and no
// set of Silent oracles alone can tell.
type JobVerdict struct {
	Job           string        `json:"job"`
	Verdict       index.Verdict `json:"verdict"`
	Evidence      string        `json:"evidence"`
	Oracle        string        `json:"oracle"`
	At            time.Time     `json:"at"`
	Failure       string        `json:"failure,omitempty"`
	Since         time.Time     `json:"since,omitzero"`
	CollectableAt time.Time     `json:"collectable_at,omitzero"`
	NotFound      bool          `json:"not_found,omitempty"`
	Silent        bool          `json:"-"`
}

// ExecutorVerdict is one oracle's answer about one executor: whether the
// TaskManager with that resource id still runs. Its fields mean what a
// JobVerdict's do; Failure says why an oracle could not answer, and a
// combined verdict has one when it is Unknown and an oracle failed. A
// plan's gone verdicts (Plan.Executors) say since when and until when the
// grace period holds the tree, which goes then once every job it held is
// collected. ListedBy are the addresses (Flink REST URLs) that list the
// executor's TaskManager as registered in this answer; its record keeps
// them (index.Executor.ListedBy), so that they alone can later say it is
// gone.
type ExecutorVerdict struct {
	Executor      string        `json:"executor"`
	Verdict       index.Verdict `json:"verdict"`
	Evidence      string        `json:"evidence"`
	Oracle        string        `json:"oracle"`
	At            time.Time     `json:"at"`
	Failure       string        `json:"failure,omitempty"`
	Since         time.Time     `json:"since,omitzero"`
	CollectableAt time.Time     `json:"collectable_at,omitzero"`
	ListedBy      []string      `json:"listed_by,omitempty"`
}
