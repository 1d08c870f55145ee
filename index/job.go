package index

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/statefs/statefs/owner"
)

// Job is what the index knows about one job: when its state was written,
// where, and the latest verdict about whether it still lives. Times are
// nanoseconds since the epoch, 0 for not set.
type Job struct {
	ID          string   `json:"id"`
	FirstWrite  int64    `json:"first_write"`
	LastWrite   int64    `json:"last_write"`
	Executors   []string `json:"executors,omitempty"`
	Allocations []string `json:"allocations,omitempty"`
	// Verdict is the latest combined verdict (package gc judges); Since is
	// when it began to hold without a break, CheckedAt when it was last
	// confirmed.
	Verdict   Verdict `json:"verdict"`
	Evidence  string  `json:"evidence,omitempty"`
	Oracle    string  `json:"oracle,omitempty"`
	Since     int64   `json:"since,omitempty"`
	CheckedAt int64   `json:"checked_at,omitempty"`
	// UnknownSince is when every oracle began to answer, without a break,
	// that it knows nothing of the job (gc.JobVerdict.NotFound); 0 while
	// any oracle knows it or fails to answer.
	UnknownSince int64 `json:"unknown_since,omitempty"`
	// Operator is what the operator said ("statefs job gone|live"):
	// VerdictGone, VerdictLive, or VerdictUnknown for nothing; OperatorAt
	// when.
	Operator   Verdict `json:"operator,omitempty"`
	OperatorAt int64   `json:"operator_at,omitempty"`
}

// Gone reports whether the latest verdict about j is that it is gone
// (package gc writes the verdicts).
func (j *Job) Gone() bool { return j.Verdict == VerdictGone }

// A job record is kept as JSON with its times in nanoseconds since the
// epoch (storedJob, the fields' own tags); Job's JSON, which statefs prints
// and the control socket carries, gives them as RFC 3339 times (jobJSON).
type storedJob Job

func encodeJob(j *Job) ([]byte, error) { return json.Marshal((*storedJob)(j)) }

// decodeJob decodes a record as PutJob writes it, verdicts as their names.
// Records written before verdicts had a type hold them as bare strings, and
// every reader took anything but "live" and "gone" ("" above all) for
// unknown: such a record still decodes, its odd verdicts as
// VerdictUnknown, rather than failing every listing of the jobs.
func decodeJob(b []byte) (*Job, error) {
	var rec struct {
		storedJob
		Verdict  string `json:"verdict"`
		Operator string `json:"operator"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, err
	}
	j := Job(rec.storedJob)
	j.Verdict, j.Operator = storedVerdict(rec.Verdict), storedVerdict(rec.Operator)
	return &j, nil
}

// jobJSON is Job as statefs prints it: times in RFC 3339, those not set
// left out.
type jobJSON struct {
	storedJob
	FirstWrite time.Time `json:"first_write"`
	LastWrite  time.Time `json:"last_write"`
	Since      time.Time `json:"since,omitzero"`
	CheckedAt  time.Time `json:"checked_at,omitzero"`
	OperatorAt time.Time `json:"operator_at,omitzero"`

	UnknownSince time.Time `json:"unknown_since,omitzero"`
}

func (j Job) MarshalJSON() ([]byte, error) {
	return json.Marshal(jobJSON{
		storedJob:  storedJob(j),
		FirstWrite: clock(j.FirstWrite), LastWrite: clock(j.LastWrite),
		Since: clock(j.Since), CheckedAt: clock(j.CheckedAt), OperatorAt: clock(j.OperatorAt),
		UnknownSince: clock(j.UnknownSince),
	})
}

func (j *Job) UnmarshalJSON(b []byte) error {
	var v jobJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*j = Job(v.storedJob)
	j.FirstWrite, j.LastWrite = nanos(v.FirstWrite), nanos(v.LastWrite)
	j.Since, j.CheckedAt, j.OperatorAt = nanos(v.Since), nanos(v.CheckedAt), nanos(v.OperatorAt)
	j.UnknownSince = nanos(v.UnknownSince)
	return nil
}

// clock is the time of ns nanoseconds since the epoch, in UTC; the zero
// time for 0, which records use for "not set".
func clock(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// nanos is clock's inverse.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// storedVerdict reads a verdict's name from a job record; anything else is
// VerdictUnknown.
func storedVerdict(name string) Verdict {
	v, err := ParseVerdict(name)
	if err != nil {
		return VerdictUnknown
	}
	return v
}

// DeleteJob removes the record of job id.
func (tx *Tx) DeleteJob(id string) error {
	tx.db.notes.forget()
	return tx.del(jobKey(id))
}

// Job reads the record of job id; ErrNotFound if the index has none.
func (tx *Tx) Job(id string) (*Job, error) {
	b, err := tx.get(jobKey(id))
	if err != nil {
		return nil, err
	}
	return decodeJob(b)
}

// PutJob writes j.
func (tx *Tx) PutJob(j *Job) error {
	b, err := encodeJob(j)
	if err != nil {
		return err
	}
	return tx.set(jobKey(j.ID), b)
}

// Jobs lists every job record, ordered by id.
func (tx *Tx) Jobs() ([]*Job, error) {
	var jobs []*Job
	err := tx.scan(kindPrefix(prefixJob), true, func(_, v []byte) (bool, error) {
		j, err := decodeJob(v)
		if err != nil {
			return false, err
		}
		jobs = append(jobs, j)
		return true, nil
	})
	return jobs, err
}

// Executor is what the index knows about one executor's tree
// (tm_<resource-id>): when it was last written, which jobs it held, and
// the latest verdict about whether its TaskManager still lives, with the
// operator's word, as a Job has them. Times are nanoseconds since the
// epoch, 0 for not set. A record written before executors had verdicts
// reads as unknown, nothing said.
type Executor struct {
	ID        string   `json:"id"`
	LastWrite int64    `json:"last_write"`
	Jobs      []string `json:"jobs,omitempty"`
	// Verdict is the latest combined verdict about the executor's
	// TaskManager (package gc judges); Since is when it began to hold
	// without a break, CheckedAt when it was last confirmed.
	Verdict   Verdict `json:"verdict"`
	Evidence  string  `json:"evidence,omitempty"`
	Oracle    string  `json:"oracle,omitempty"`
	Since     int64   `json:"since,omitempty"`
	CheckedAt int64   `json:"checked_at,omitempty"`
	// Operator is what the operator said ("statefs executor gone|live"),
	// VerdictUnknown for nothing; OperatorAt when.
	Operator   Verdict `json:"operator,omitempty"`
	OperatorAt int64   `json:"operator_at,omitempty"`
	// ListedBy are the Flink REST URLs, as configured, that have listed
	// the executor's TaskManager as registered, the latest last, at most
	// MaxListedBy: only a Flink that knew a TaskManager can say it is gone
	// by no longer listing it (package gc).
	ListedBy []string `json:"listed_by,omitempty"`
}

// MaxListedBy bounds Executor.ListedBy. The URLs are the few given to the
// collector; a URL dropped past the bound can no longer say the executor
// is gone, which keeps its tree, never loses it.
const MaxListedBy = 8

// Listed adds the URLs urls to e.ListedBy, each moved to the end if it is
// there already, dropping the oldest past MaxListedBy.
func (e *Executor) Listed(urls ...string) {
	for _, u := range urls {
		e.ListedBy = append(slices.DeleteFunc(e.ListedBy, func(v string) bool { return v == u }), u)
	}
	if n := len(e.ListedBy) - MaxListedBy; n > 0 {
		e.ListedBy = slices.Delete(e.ListedBy, 0, n)
	}
}

// Gone reports whether the latest verdict about e is that its TaskManager
// is gone.
func (e *Executor) Gone() bool { return e.Verdict == VerdictGone }

// An executor record is kept as JSON with its times in nanoseconds, as a
// job's is (storedExecutor); Executor's JSON, which statefs prints and the
// control socket carries, gives them as RFC 3339 times (executorJSON).
type storedExecutor Executor

func encodeExecutor(e *Executor) ([]byte, error) { return json.Marshal((*storedExecutor)(e)) }

// decodeExecutor decodes a record as PutExecutor writes it; a verdict
// that is no verdict's name reads as VerdictUnknown, as in decodeJob.
func decodeExecutor(b []byte) (*Executor, error) {
	var rec struct {
		storedExecutor
		Verdict  string `json:"verdict"`
		Operator string `json:"operator"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, err
	}
	e := Executor(rec.storedExecutor)
	e.Verdict, e.Operator = storedVerdict(rec.Verdict), storedVerdict(rec.Operator)
	return &e, nil
}

// executorJSON is Executor as statefs prints it: times in RFC 3339, those
// not set left out.
type executorJSON struct {
	storedExecutor
	LastWrite  time.Time `json:"last_write"`
	Since      time.Time `json:"since,omitzero"`
	CheckedAt  time.Time `json:"checked_at,omitzero"`
	OperatorAt time.Time `json:"operator_at,omitzero"`
}

func (e Executor) MarshalJSON() ([]byte, error) {
	return json.Marshal(executorJSON{
		storedExecutor: storedExecutor(e),
		LastWrite:      clock(e.LastWrite),
		Since:          clock(e.Since), CheckedAt: clock(e.CheckedAt), OperatorAt: clock(e.OperatorAt),
	})
}

func (e *Executor) UnmarshalJSON(b []byte) error {
	var v executorJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*e = Executor(v.storedExecutor)
	e.LastWrite = nanos(v.LastWrite)
	e.Since, e.CheckedAt, e.OperatorAt = nanos(v.Since), nanos(v.CheckedAt), nanos(v.OperatorAt)
	return nil
}

// Executor reads the record of executor id; ErrNotFound if none.
func (tx *Tx) Executor(id string) (*Executor, error) {
	b, err := tx.get(executorKey(id))
	if err != nil {
		return nil, err
	}
	return decodeExecutor(b)
}

// PutExecutor writes e.
func (tx *Tx) PutExecutor(e *Executor) error {
	b, err := encodeExecutor(e)
	if err != nil {
		return err
	}
	return tx.set(executorKey(e.ID), b)
}

// Executors lists every executor record, ordered by id.
func (tx *Tx) Executors() ([]*Executor, error) {
	var es []*Executor
	err := tx.scan(kindPrefix(prefixExecutor), true, func(_, v []byte) (bool, error) {
		e, err := decodeExecutor(v)
		if err != nil {
			return false, err
		}
		es = append(es, e)
		return true, nil
	})
	return es, err
}

// DeleteExecutor removes the record of executor id.
func (tx *Tx) DeleteExecutor(id string) error {
	tx.db.notes.forget()
	return tx.del(executorKey(id))
}

func (tx *Tx) noteExecutorWrite(o owner.Owner, now int64) error {
	e, err := tx.Executor(o.Executor)
	if err == ErrNotFound {
		e, err = &Executor{ID: o.Executor}, nil
	}
	if err != nil {
		return err
	}
	e.LastWrite = max(e.LastWrite, now)
	if o.Job != "" && !slices.Contains(e.Jobs, o.Job) {
		e.Jobs = append(e.Jobs, o.Job)
	}
	return tx.PutExecutor(e)
}

// NoteWrite records that state owned by o was written at now: the job's
// first and last write and the executors and allocations it was seen on,
// and the executor's last write and jobs.
func (tx *Tx) NoteWrite(o owner.Owner, now int64) error {
	if o.Executor != "" {
		if err := tx.noteExecutorWrite(o, now); err != nil {
			return err
		}
	}
	if o.Job == "" {
		return nil
	}
	j, err := tx.Job(o.Job)
	if err == ErrNotFound {
		j, err = &Job{ID: o.Job, FirstWrite: now, Verdict: VerdictUnknown}, nil
	}
	if err != nil {
		return err
	}
	j.LastWrite = max(j.LastWrite, now)
	if o.Executor != "" && !slices.Contains(j.Executors, o.Executor) {
		j.Executors = append(j.Executors, o.Executor)
	}
	if o.Allocation != "" && !slices.Contains(j.Allocations, o.Allocation) {
		j.Allocations = append(j.Allocations, o.Allocation)
	}
	return tx.PutJob(j)
}
