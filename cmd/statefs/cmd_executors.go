package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/store"
)

func executorsCommand() *cli.Command {
	return &cli.Command{
		Name:         "executors",
		Usage:        "list the executors (TaskManagers) whose trees the store holds, with their verdicts",
		Flags:        []cli.Flag{storeFlag(), jsonFlag()},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return fmt.Errorf("%w: executors takes no arguments", errUsage)
			}
			var executors []*index.Executor
			err := readStore(c,
				func(s *store.Store) (err error) { executors, err = s.Executors(); return err },
				func(d *control.Client) (err error) { executors, err = d.Executors(c.Context); return err })
			if err != nil {
				return err
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				if executors == nil {
					executors = []*index.Executor{} // an empty list, not null
				}
				return enc.Encode(executors)
			}
			w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tVERDICT\tSINCE\tOPERATOR\tLAST WRITE\tJOBS\tEVIDENCE")
			for _, e := range executors {
				said := "-"
				if e.Operator != index.VerdictUnknown {
					said = e.Operator.String() + " at " + stamp(e.OperatorAt)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.ID, e.Verdict, stamp(e.Since), said, stamp(e.LastWrite), len(e.Jobs), e.Evidence)
			}
			return w.Flush()
		},
	}
}
