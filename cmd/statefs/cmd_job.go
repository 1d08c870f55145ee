package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/owner"
	"github.com/statefs/statefs/store"
)

func jobCommand() *cli.Command {
	return &cli.Command{
		Name:         "job",
		Usage:        "give the operator's verdict about a job: gone (its state may be collected) or live; or withdraw it",
		ArgsUsage:    "gone|live|withdraw JOB-ID",
		Flags:        []cli.Flag{storeFlag()},
		OnUsageError: usageError,
		Action:       runJob,
	}
}

func runJob(c *cli.Context) error {
	if c.NArg() != 2 {
		return fmt.Errorf("%w: job takes gone|live|withdraw and a JOB-ID (flags first: statefs job --store DIR gone ID)", errUsage)
	}
	req := control.VerdictRequest{Job: c.Args().Get(1), Withdraw: c.Args().Get(0) == "withdraw"}
	if !req.Withdraw {
		said, err := index.ParseVerdict(c.Args().Get(0))
		if err != nil || said == index.VerdictUnknown {
			return fmt.Errorf("%w: the verdict must be gone or live (or withdraw), not %q", errUsage, c.Args().Get(0))
		}
		req.Verdict = said
	}
	if !owner.IsFlinkID(req.Job) {
		return fmt.Errorf("%w: %q is not a Flink job id (32 lowercase hex characters)", errUsage, req.Job)
	}
	err := onStore(c,
		func(s *store.Store) error { return control.SetVerdict(s, req) },
		func(d *control.Client) error { return d.SetVerdict(c.Context, req) })
	if err != nil {
		return err
	}
	if req.Withdraw {
		fmt.Fprintf(c.App.Writer, "job %s: the operator's word is withdrawn\n", req.Job)
	} else {
		fmt.Fprintf(c.App.Writer, "job %s: operator says %s\n", req.Job, req.Verdict)
	}
	return nil
}
