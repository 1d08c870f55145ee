package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/store"
)

func duCommand() *cli.Command {
	return &cli.Command{
		Name:  "du",
		Usage: "sum the store's files and bytes by the job, executor or allocation that owns them",
		Description: "du walks the namespace once. Logical bytes are the files' sizes; physical bytes are\n" +
			"their share of the disk: each chunk's and object's size divided among the files that use\n" +
			"it, plus unsealed files' staging files, so that the shares add up to what the store holds.",
		Flags: []cli.Flag{
			storeFlag(),
			&cli.StringFlag{Name: "by", Value: string(store.ByJob), Usage: "group by `job`, executor or allocation"},
			bytesFlag(),
			jsonFlag(),
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return fmt.Errorf("%w: du takes no arguments", errUsage)
			}
			opts, err := newDUOptions(c)
			if err != nil {
				return err
			}
			var du *store.DiskUsage
			err = readStore(c,
				func(s *store.Store) (err error) { du, err = s.DU(opts.By); return err },
				func(d *control.Client) (err error) { du, err = d.DU(c.Context, opts.By); return err })
			if err != nil {
				return err
			}
			if opts.JSON {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(du)
			}
			// As du does: the numbers right-aligned, the name last.
			z := sizesOf(c)
			w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(w, "FILES\tLOGICAL\tPHYSICAL\t  %s\n", strings.ToUpper(string(du.By)))
			for _, g := range append(du.Groups, du.Total) {
				fmt.Fprintf(w, "%d\t%s\t%s\t  %s\n", g.Files, z.of(g.LogicalBytes), z.of(g.PhysicalBytes), g.Group)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if du.UnreferencedChunks > 0 {
				fmt.Fprintf(c.App.Writer, "unreferenced: %d chunks, %s on disk that no file uses (gc sweeps them)\n",
					du.UnreferencedChunks, z.of(du.UnreferencedBytes))
			}
			if du.UnreferencedObjects > 0 {
				fmt.Fprintf(c.App.Writer, "unreferenced: %d objects, %s on disk that only files removed while open are (freed when they close)\n",
					du.UnreferencedObjects, z.of(du.UnreferencedObjectBytes))
			}
			if du.MissingChunks > 0 || du.MissingObjects > 0 {
				fmt.Fprintf(c.App.Writer, "missing: %d chunks and %d objects that files use are not on disk (see statefs fsck)\n",
					du.MissingChunks, du.MissingObjects)
			}
			return nil
		},
	}
}

// duOptions are du's flags; the store is --store (readStore).
type duOptions struct {
	By   store.Grouping
	JSON bool
}

func newDUOptions(c *cli.Context) (duOptions, error) {
	by, err := store.ParseGrouping(c.String("by"))
	if err != nil {
		return duOptions{}, fmt.Errorf("%w: --by: %w", errUsage, err)
	}
	return duOptions{By: by, JSON: c.Bool("json")}, nil
}
