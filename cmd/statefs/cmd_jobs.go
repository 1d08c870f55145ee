package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/store"
)

func jobsCommand() *cli.Command {
	return &cli.Command{
		Name:  "jobs",
		Usage: "list the jobs whose state the store holds, with their verdicts",
		Flags: []cli.Flag{storeFlag(), bytesFlag(), jsonFlag(),
			&cli.BoolFlag{Name: "collected", Usage: "list instead the collector's latest removals (jobs and executors' trees): when, what and why"}},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return fmt.Errorf("%w: jobs takes no arguments", errUsage)
			}
			if c.Bool("collected") {
				return printCollected(c)
			}
			var jobs []*index.Job
			var du *store.DiskUsage // by job: what each job's state takes
			err := readStore(c,
				func(s *store.Store) (err error) {
					if jobs, err = s.Jobs(); err != nil {
						return err
					}
					du, err = s.DU(store.ByJob)
					return err
				},
				func(d *control.Client) (err error) {
					if jobs, err = d.Jobs(c.Context); err != nil {
						return err
					}
					du, err = d.DU(c.Context, store.ByJob)
					return err
				})
			if err != nil {
				return err
			}
			disk := map[string]int64{} // each job's share of the disk, as du counts it
			for _, g := range du.Groups {
				disk[g.Group] = g.PhysicalBytes
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				printed := []printedJob{} // an empty list, not null
				for _, j := range jobs {
					printed = append(printed, printedJob{Job: j, DiskBytes: disk[j.ID]})
				}
				return enc.Encode(printed)
			}
			z := sizesOf(c)
			w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "JOB\tVERDICT\tSINCE\tOPERATOR\tLAST WRITE\tEXECUTORS\tDISK\tEVIDENCE")
			for _, j := range jobs {
				// The operator's word shows from when it is said; the
				// verdict, which combines it with the oracles', from the
				// collector's next run.
				said := "-"
				if j.Operator != index.VerdictUnknown {
					said = j.Operator.String() + " at " + stamp(j.OperatorAt)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", j.ID, j.Verdict, stamp(j.Since), said, stamp(j.LastWrite), len(j.Executors), z.of(disk[j.ID]), j.Evidence)
			}
			return w.Flush()
		},
	}
}

// printCollected prints the collector's latest removals the store
// records, oldest first: a table, or with --json the records.
func printCollected(c *cli.Context) error {
	var cs []*index.Collection
	err := readStore(c,
		func(s *store.Store) (err error) { cs, err = control.Collections(s); return err },
		func(d *control.Client) (err error) { cs, err = d.Collections(c.Context); return err })
	if err != nil {
		return err
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if cs == nil {
			cs = []*index.Collection{}
		}
		return enc.Encode(cs)
	}
	z := sizesOf(c)
	w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "COLLECTED\tJOB\tEXECUTOR\tVERDICT\tNAMES\tFILES\tSIZE\tKEPT\tWHY\tEVIDENCE")
	for _, r := range cs {
		job, verdict, evidence := r.Job, r.Verdict.String(), r.Evidence
		if r.Executor != "" {
			job = "-" // the executor's verdict is about its TaskManager
		}
		executor := r.Executor
		if executor == "" {
			executor = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%s\t%s\n", stamp(r.At), job, executor, verdict, r.Names, r.Files, z.of(r.Bytes), r.Kept, r.Why, evidence)
	}
	return w.Flush()
}

func stamp(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339)
}

// printedJob is a job as statefs jobs --json prints it: its record, and
// its share of the disk as the table's DISK and du count it.
type printedJob struct {
	*index.Job
	DiskBytes int64
}

// MarshalJSON is the record's JSON with "disk_bytes" last: the record's
// own MarshalJSON, which the embedding would promote, knows no disk.
func (p printedJob) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(p.Job)
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[len(b)-1] != '}' {
		return nil, fmt.Errorf("job %s: its record's JSON is no object: %s", p.ID, b)
	}
	return fmt.Appendf(b[:len(b)-1], `,"disk_bytes":%d}`, p.DiskBytes), nil
}
