package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/owner"
	"github.com/statefs/statefs/store"
)

func executorCommand() *cli.Command {
	return &cli.Command{
		Name:         "executor",
		Usage:        "give the operator's verdict about an executor's TaskManager: gone (its tree may be collected) or live; or withdraw it",
		ArgsUsage:    "gone|live|withdraw RESOURCE-ID",
		Flags:        []cli.Flag{storeFlag()},
		OnUsageError: usageError,
		Action:       runExecutor,
	}
}

func runExecutor(c *cli.Context) error {
	if c.NArg() != 2 {
		return fmt.Errorf("%w: executor takes gone|live|withdraw and a RESOURCE-ID (flags first: statefs executor --store DIR gone ID)", errUsage)
	}
	req := control.ExecutorVerdictRequest{Executor: c.Args().Get(1), Withdraw: c.Args().Get(0) == "withdraw"}
	if !req.Withdraw {
		said, err := index.ParseVerdict(c.Args().Get(0))
		if err != nil || said == index.VerdictUnknown {
			return fmt.Errorf("%w: the verdict must be gone or live (or withdraw), not %q", errUsage, c.Args().Get(0))
		}
		req.Verdict = said
	}
	if !owner.IsResourceID(req.Executor) {
		return fmt.Errorf("%w: %q is not a TaskManager resource id (1 to 255 of A-Z a-z 0-9 . _ -, not . or ..; the RID of tm_RID)", errUsage, req.Executor)
	}
	err := onStore(c,
		func(s *store.Store) error { return control.SetExecutorVerdict(s, req) },
		func(d *control.Client) error { return d.SetExecutorVerdict(c.Context, req) })
	if err != nil {
		return err
	}
	if req.Withdraw {
		fmt.Fprintf(c.App.Writer, "executor %s: the operator's word is withdrawn\n", req.Executor)
	} else {
		fmt.Fprintf(c.App.Writer, "executor %s: operator says %s\n", req.Executor, req.Verdict)
	}
	return nil
}
