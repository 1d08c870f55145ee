package gc

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/owner"
)

// JobResultStore reads the directory of Flink HA's file-system job result
// store (job-result-store.storage-path, reachable as a local path). Flink
// writes <id>_DIRTY.json when a job reaches a globally terminal state and
// renames it to <id>.json once the job's HA data is cleaned up (or deletes it,
// with job-result-store.delete-on-commit).
//
// Either file present (a regular file) is Gone, and the evidence names it.
// Neither present is Unknown: absence proves nothing (delete-on-commit, a job
// that never reached the store, a store on another cluster). A directory that
// is missing, not a directory, or unreadable is Unknown. Judge gives up with
// Unknown when ctx ends, even if the file system (say, a hung NFS mount) does not
// answer.
type JobResultStore struct{ Dir string }

var _ Oracle = (*JobResultStore)(nil)

// Name returns "job-result-store".
func (j *JobResultStore) Name() string { return "job-result-store" }

// Judge looks for job's entries in the store's directory.
func (j *JobResultStore) Judge(ctx context.Context, job string) JobVerdict {
	out := JobVerdict{Job: job, Verdict: index.VerdictUnknown, Oracle: j.Name(), At: time.Now()}
	if !owner.IsFlinkID(job) {
		out.Evidence = evidenceInvalidJobID
		return out
	}
	if j.Dir == "" {
		out.Evidence = "jrs: no directory configured"
		return out
	}
	if err := ctx.Err(); err != nil {
		out.Evidence = "jrs " + j.Dir + ": " + err.Error()
		out.Failure = out.Evidence
		return out
	}

	done := make(chan JobVerdict, 1) // buffered: a late lookup must not block forever
	go func() { done <- j.look(out) }()
	select {
	case v := <-done:
		return v
	case <-ctx.Done():
		out.Evidence = "jrs " + j.Dir + ": " + ctx.Err().Error()
		out.Failure = out.Evidence
		return out
	}
}

// look fills in out from the directory.
func (j *JobResultStore) look(out JobVerdict) JobVerdict {
	fi, err := os.Stat(j.Dir)
	switch {
	case err != nil:
		out.Evidence = "jrs " + j.Dir + ": unreadable: " + err.Error()
		out.Failure = out.Evidence
		return out
	case !fi.IsDir():
		out.Evidence = "jrs " + j.Dir + ": not a directory"
		out.Failure = out.Evidence
		return out
	}
	for _, name := range []string{out.Job + ".json", out.Job + "_DIRTY.json"} {
		path := filepath.Join(j.Dir, name)
		fi, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			out.Evidence = "jrs " + j.Dir + ": unreadable: " + err.Error()
			out.Failure = out.Evidence
			return out
		case !fi.Mode().IsRegular():
			out.Evidence = "jrs: " + path + ": not a regular file"
			out.Failure = out.Evidence
			return out
		}
		out.Verdict = index.VerdictGone
		out.Evidence = "jrs: " + path
		return out
	}
	out.Evidence = "jrs " + j.Dir + ": no entry for the job"
	out.Silent = true // a job that runs has none either
	return out
}
