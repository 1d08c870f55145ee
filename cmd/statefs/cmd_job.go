package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/owner"
	"github.com/statefs/statefs/store"
)

// `statefs job` and `statefs executor` both take the operator's word,
// gone|live|withdraw ID, and differ only in what it is about: this file
// builds both from their subject.

// verdictSubject is what the operator gives a verdict about, as one
// command: R is the control request that carries the word.
type verdictSubject[R any] struct {
	name  string // the command's name, and the first word of what it prints
	usage string
	idArg string // the id's name in the usage: JOB-ID
	isID  func(string) bool
	notID string // what an id must be, said when one is refused
	// request carries the word about id: v, or with withdraw, nothing.
	request func(id string, v index.Verdict, withdraw bool) R
	// offline records the word in a store no daemon serves; daemon asks
	// the daemon serving it to.
	offline func(*store.Store, R) error
	daemon  func(*control.Client, context.Context, R) error
}

func jobCommand() *cli.Command {
	return verdictCommand(verdictSubject[control.VerdictRequest]{
		name:  "job",
		usage: "give the operator's verdict about a job: gone (its state may be collected) or live; or withdraw it",
		idArg: "JOB-ID",
		isID:  owner.IsFlinkID,
		notID: "a Flink job id (32 lowercase hex characters)",
		request: func(id string, v index.Verdict, withdraw bool) control.VerdictRequest {
			return control.VerdictRequest{Job: id, Verdict: v, Withdraw: withdraw}
		},
		offline: control.SetVerdict,
		daemon:  (*control.Client).SetVerdict,
	})
}

func executorCommand() *cli.Command {
	return verdictCommand(verdictSubject[control.ExecutorVerdictRequest]{
		name:  "executor",
		usage: "give the operator's verdict about an executor's TaskManager: gone (its tree may be collected) or live; or withdraw it",
		idArg: "RESOURCE-ID",
		isID:  owner.IsResourceID,
		notID: "a TaskManager resource id (1 to 255 of A-Z a-z 0-9 . _ -, not . or ..; the RID of tm_RID)",
		request: func(id string, v index.Verdict, withdraw bool) control.ExecutorVerdictRequest {
			return control.ExecutorVerdictRequest{Executor: id, Verdict: v, Withdraw: withdraw}
		},
		offline: control.SetExecutorVerdict,
		daemon:  (*control.Client).SetExecutorVerdict,
	})
}

// verdictCommand is the command that gives the operator's word about k's
// subject. Bad input is refused with a usage error before the store is
// opened.
func verdictCommand[R any](k verdictSubject[R]) *cli.Command {
	return &cli.Command{
		Name:         k.name,
		Usage:        k.usage,
		ArgsUsage:    "gone|live|withdraw " + k.idArg,
		Flags:        []cli.Flag{storeFlag()},
		OnUsageError: usageError,
		Action:       func(c *cli.Context) error { return k.run(c) },
	}
}

func (k verdictSubject[R]) run(c *cli.Context) error {
	if c.NArg() != 2 {
		return fmt.Errorf("%w: %s takes gone|live|withdraw and a %s (flags first: statefs %s --store DIR gone ID)", errUsage, k.name, k.idArg, k.name)
	}
	word, id := c.Args().Get(0), c.Args().Get(1)
	withdraw := word == "withdraw"
	said := index.VerdictUnknown
	if !withdraw {
		v, err := index.ParseVerdict(word)
		if err != nil || v == index.VerdictUnknown {
			return fmt.Errorf("%w: the verdict must be gone or live (or withdraw), not %q", errUsage, word)
		}
		said = v
	}
	if !k.isID(id) {
		return fmt.Errorf("%w: %q is not %s", errUsage, id, k.notID)
	}
	req := k.request(id, said, withdraw)
	err := onStore(c,
		func(s *store.Store) error { return k.offline(s, req) },
		func(d *control.Client) error { return k.daemon(d, c.Context, req) })
	if err != nil {
		return err
	}
	if withdraw {
		fmt.Fprintf(c.App.Writer, "%s %s: the operator's word is withdrawn\n", k.name, id)
	} else {
		fmt.Fprintf(c.App.Writer, "%s %s: operator says %s\n", k.name, id, said)
	}
	return nil
}
