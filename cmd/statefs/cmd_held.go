package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/store"
)

func heldCommand() *cli.Command {
	return &cli.Command{
		Name:         "held",
		Usage:        "list the trees the executor removed that statefs holds (mount --hold-deletes)",
		Flags:        []cli.Flag{storeFlag(), bytesFlag(), jsonFlag()},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return fmt.Errorf("%w: held takes no arguments", errUsage)
			}
			var holds []*index.Hold
			err := readStore(c,
				func(s *store.Store) (err error) { holds, err = control.Holds(s); return err },
				func(d *control.Client) (err error) { holds, err = d.Holds(c.Context); return err })
			if err != nil {
				return err
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				if holds == nil {
					holds = []*index.Hold{} // an empty list, not null
				}
				return enc.Encode(holds)
			}
			w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "HOLD\tHELD AT\tFILES\tBYTES\tJOBS\tPATH")
			for _, h := range holds {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", h.ID, stamp(h.At), h.Files, sizesOf(c).of(h.Bytes), strings.Join(h.Jobs, ","), h.Path)
			}
			return w.Flush()
		},
	}
}

func restoreCommand() *cli.Command {
	return &cli.Command{
		Name:  "restore",
		Usage: "put a held tree back into the executor's tree at DEST (only metadata moves)",
		ArgsUsage: "HOLD DEST\n\n   HOLD is a hold id (statefs held) or its path, MOUNT/.statefs/held/<id>.\n" +
			"   DEST must not exist and its parent must: a path relative to the mount root, or, while mounted, an absolute path in the mount.",
		Description: "Without a daemon serving the store, restore finds owners by --rules, which must be the\n" +
			"rules the mount uses; a daemon uses its own.",
		Flags:        []cli.Flag{storeFlag(), rulesFlag()},
		OnUsageError: usageError,
		Action:       runRestore,
	}
}

func runRestore(c *cli.Context) error {
	if c.NArg() != 2 {
		return fmt.Errorf("%w: restore takes HOLD and DEST (flags first: statefs restore --store DIR HOLD DEST)", errUsage)
	}
	req := control.RestoreRequest{Hold: holdID(c.Args().Get(0)), Dest: c.Args().Get(1)}
	if req.Hold == "" || req.Dest == "" {
		return fmt.Errorf("%w: HOLD and DEST must not be empty", errUsage)
	}
	rules, err := rulesOf(c)
	if err != nil {
		return err
	}
	err = onStore(c,
		func(s *store.Store) error { return control.Restore(s, rules, req) },
		func(d *control.Client) error { return d.Restore(c.Context, req) })
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "restored %s to %s\n", req.Hold, req.Dest)
	return nil
}

// holdID takes a hold id, or a path whose last part is one.
func holdID(arg string) string {
	return filepath.Base(filepath.Clean(arg))
}
