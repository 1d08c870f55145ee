package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/store"
)

func gcCommand() *cli.Command {
	return &cli.Command{
		Name:  "gc",
		Usage: "remove the state of jobs, and the trees of executors, confirmed gone, then chunks nothing refers to",
		Flags: slices.Concat([]cli.Flag{storeFlag()}, collectorFlags(), []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "print the collector's plan (what it would remove and why, and what that frees), change nothing"},
			bytesFlag(),
			jsonFlag(),
		}),
		OnUsageError: usageError,
		Action:       runGC,
	}
}

// collectorFlags configure the collector, with the same names, meanings
// and defaults on `statefs gc` (one run) and `statefs mount` (a run every
// --gc-interval). --gc-grace was --grace on gc; that spelling still works.
func collectorFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "gc-grace", Aliases: []string{"grace"}, Value: 10 * time.Minute, Usage: "how long gone must hold before the collector removes state"},
		&cli.StringSliceFlag{Name: "flink-url", Usage: "a Flink REST `URL` the collector asks about jobs (repeat for several clusters)"},
		&cli.StringFlag{Name: "job-result-store", Usage: "Flink HA's job-result-store `DIR`, if reachable here"},
		&cli.BoolFlag{Name: "not-found-is-gone", Usage: "let a 404 from every Flink URL count as gone (after the grace period)"},
		&cli.DurationFlag{Name: "collect-unknown-after", Usage: "also collect a job that every oracle has answered it knows nothing of, and nothing has written, for this long (0: never, the default)"},
	}
}

// collectorRequest reads collectorFlags into the request for a collector
// run; the caller sets DryRun.
func collectorRequest(c *cli.Context) (control.GCRequest, error) {
	grace, err := nonNegative(c, "gc-grace")
	if err != nil {
		return control.GCRequest{}, err
	}
	unknownAfter, err := nonNegative(c, "collect-unknown-after")
	if err != nil {
		return control.GCRequest{}, err
	}
	req := control.GCRequest{
		Grace:               grace,
		FlinkURLs:           c.StringSlice("flink-url"),
		JobResultStore:      c.String("job-result-store"),
		NotFoundIsGone:      c.Bool("not-found-is-gone"),
		CollectUnknownAfter: unknownAfter,
	}
	if err := req.Check(); err != nil {
		return req, fmt.Errorf("%w: --flink-url: %w", errUsage, err)
	}
	return req, nil
}

// gcOptions are gc's flags; the store is --store (onStore).
type gcOptions struct {
	Request control.GCRequest
	JSON    bool
}

func newGCOptions(c *cli.Context) (gcOptions, error) {
	req, err := collectorRequest(c)
	if err != nil {
		return gcOptions{}, err
	}
	req.DryRun = c.Bool("dry-run")
	return gcOptions{Request: req, JSON: c.Bool("json")}, nil
}

func runGC(c *cli.Context) error {
	if c.NArg() != 0 {
		return fmt.Errorf("%w: gc takes no arguments", errUsage)
	}
	opts, err := newGCOptions(c)
	if err != nil {
		return err
	}
	req := opts.Request
	var report gc.Report
	// A dry run only reads: offline it opens the store read-only.
	on := onStore
	if req.DryRun {
		on = readStore
	}
	err = on(c,
		func(s *store.Store) (err error) {
			col := &gc.Collector{Store: s, Oracles: req.Oracles(), Grace: req.Grace, CollectUnknownAfter: req.CollectUnknownAfter}
			plan, err := col.Plan(c.Context)
			if err != nil || req.DryRun {
				if err == nil {
					report = plan.Report()
				}
				return err
			}
			if bar := progress(c, opts.JSON, "removing"); bar != nil {
				col.Removed = func() { bar.Add(1) }
				defer bar.Finish()
			}
			report, err = col.Execute(c.Context, plan)
			return err
		},
		func(d *control.Client) (err error) { report, err = d.GC(c.Context, req); return err })
	if err != nil {
		return err
	}
	if opts.JSON {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
		return unanswered(report)
	}
	verb := "removed"
	if req.DryRun {
		verb = "would remove"
	}
	collected, collectedExecutors := map[string]bool{}, map[string]bool{}
	for _, cand := range report.Collected {
		if cand.Executor == "" {
			collected[cand.Job.ID] = true
		} else {
			collectedExecutors[cand.Executor] = true
		}
	}
	for _, v := range report.Verdicts {
		fmt.Fprintf(c.App.Writer, "job %s: %s (%s)", v.Job, v.Verdict, v.Evidence)
		// A gone job that stays is within its grace period: say until when.
		if !v.CollectableAt.IsZero() && !collected[v.Job] {
			fmt.Fprint(c.App.Writer, withinGrace(v.Since, v.CollectableAt, req.Grace))
		}
		fmt.Fprintln(c.App.Writer)
	}
	for _, v := range report.Executors {
		fmt.Fprintf(c.App.Writer, "executor %s: %s (%s)", v.Executor, v.Verdict, v.Evidence)
		if !v.CollectableAt.IsZero() && !collectedExecutors[v.Executor] {
			fmt.Fprint(c.App.Writer, withinGrace(v.Since, v.CollectableAt, req.Grace)+" once every job it held is collected")
		}
		fmt.Fprintln(c.App.Writer)
	}
	z := sizesOf(c)
	for _, cand := range report.Collected {
		removed := fmt.Sprintf("%d names, %d files, %s", cand.Names, cand.Files, z.of(cand.Bytes))
		if e := cand.ExecutorRecord; e != nil {
			v := e.Evidence
			if cand.ExecutorVerdict != nil {
				v = cand.ExecutorVerdict.Evidence
			}
			fmt.Fprintf(c.App.Writer, "%s executor %s: %s (verdict gone since %s: %s; every job it held is collected, nothing written within the grace period); kept %d written after it\n",
				verb, cand.Executor, removed, stamp(e.Since), v, cand.Kept)
			continue
		}
		if cand.Verdict.Verdict != index.VerdictGone {
			fmt.Fprintf(c.App.Writer, "%s job %s: %s (%s: %s); kept %d written since\n",
				verb, cand.Job.ID, removed, cand.Why, cand.Verdict.Evidence, cand.Kept)
			continue
		}
		fmt.Fprintf(c.App.Writer, "%s job %s: %s (verdict %s since %s: %s); kept %d written after it\n",
			verb, cand.Job.ID, removed, cand.Verdict.Verdict, stamp(cand.Job.Since), cand.Verdict.Evidence, cand.Kept)
	}
	for _, u := range report.Unknown {
		fmt.Fprintf(c.App.ErrWriter, "job %s: every oracle answers it knows nothing of it since %s, last written %s; its state is kept (statefs job gone %s, or --collect-unknown-after)\n",
			u.Job, u.Since.Format(time.RFC3339), u.LastWrite.Format(time.RFC3339), u.Job)
	}
	fmt.Fprintf(c.App.Writer, "%s %d chunks and %d objects, %s, in %s\n", verb, report.Swept.Chunks, report.Swept.Objects, z.of(report.Swept.Bytes), report.Took.Duration().Round(time.Millisecond))
	if o := report.Orphans; o.Files > 0 {
		fmt.Fprintf(c.App.Writer, "%d removed files are still open: %s are freed when they close\n", o.Files, z.of(o.Bytes))
	}
	for _, v := range report.Unanswered() {
		fmt.Fprintf(c.App.ErrWriter, "job %s: no oracle could answer (%s); its state is kept\n", v.Job, v.Failure)
	}
	for _, v := range report.UnansweredExecutors() {
		fmt.Fprintf(c.App.ErrWriter, "executor %s: no oracle could answer (%s); its tree is kept\n", v.Executor, v.Failure)
	}
	return unanswered(report)
}

// withinGrace says, after a gone verdict, why what it is about stays: gone
// since since, it is within the grace period, which ends at collectableAt.
func withinGrace(since, collectableAt time.Time, grace time.Duration) string {
	return fmt.Sprintf("; gone since %s, collectable after %s (--gc-grace %s)",
		since.Format(time.RFC3339), collectableAt.Format(time.RFC3339), grace)
}

// unanswered fails a run in which no oracle could answer about some job
// or executor: it did not do its work for them, and an operator's script
// must see it.
func unanswered(r gc.Report) error {
	jobs, executors := len(r.Unanswered()), len(r.UnansweredExecutors())
	switch {
	case jobs > 0 && executors > 0:
		return fmt.Errorf("no oracle could answer about %d of %d jobs and %d of %d executors; check --flink-url and --job-result-store", jobs, len(r.Verdicts), executors, len(r.Executors))
	case jobs > 0:
		return fmt.Errorf("no oracle could answer about %d of %d jobs; check --flink-url and --job-result-store", jobs, len(r.Verdicts))
	case executors > 0:
		return fmt.Errorf("no oracle could answer about %d of %d executors; check --flink-url", executors, len(r.Executors))
	}
	return nil
}

// progress is a bar counting what a command does, shown only when its
// output is a terminal and not JSON.
func progress(c *cli.Context, json bool, what string) *progressbar.ProgressBar {
	f, ok := c.App.ErrWriter.(*os.File)
	if json || !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return progressbar.NewOptions(-1, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
}
