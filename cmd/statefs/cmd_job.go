package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/store"
)

func jobCommand() *cli.Command {
	return &cli.Command{
		Name:      "job",
		Usage:     "give the operator's verdict about a job: gone (its state may be collected) or live",
		ArgsUsage: "gone|live JOB-ID",
		Flags:     []cli.Flag{storeFlag()},
		Action:    runJob,
	}
}

func runJob(c *cli.Context) error {
	if c.NArg() != 2 {
		return fmt.Errorf("%w: job takes gone|live and a JOB-ID", errUsage)
	}
	said, err := gc.ParseVerdict(c.Args().Get(0))
	if err != nil || said == gc.Unknown {
		return fmt.Errorf("%w: the verdict must be gone or live, not %q", errUsage, c.Args().Get(0))
	}
	id := c.Args().Get(1)
	if !gc.ValidJobID(id) {
		return fmt.Errorf("%w: %q is not a Flink job id (32 lowercase hex characters)", errUsage, id)
	}
	s, err := openStore(c)
	if err != nil {
		return err
	}
	defer s.Close()
	err = s.Index.Update(func(tx *index.Tx) error {
		j, err := tx.Job(id)
		if err != nil {
			return fmt.Errorf("job %s: the store holds no state of it", id)
		}
		j.Operator, j.OperatorAt = said.String(), index.Now()
		return tx.PutJob(j)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "job %s: operator says %s\n", id, said)
	return nil
}

func storeFlag() cli.Flag {
	return &cli.StringFlag{Name: "store", Usage: "the store `DIR`", Required: true}
}

// openStore opens the --store of an offline command. A store that a daemon
// is serving is refused (store.ErrInUse).
func openStore(c *cli.Context) (*store.Store, error) {
	s, _, err := store.Open(c.String("store"))
	return s, err
}
