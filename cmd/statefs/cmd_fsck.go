package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/store"
)

func fsckCommand() *cli.Command {
	return &cli.Command{
		Name:  "fsck",
		Usage: "check that an unmounted store is consistent",
		Description: "fsck reads the store as the last process left it, before the recovery a mount does,\n" +
			"and prints one line per problem and a summary. It exits 1 if a problem is an\n" +
			"inconsistency; chunks no file uses (gc sweeps them) and staging files a crash left\n" +
			"(the next mount removes them) are reported but are not.",
		Flags: []cli.Flag{
			storeFlag(),
			&cli.BoolFlag{Name: "verify", Usage: "read every chunk a file uses and check its hash"},
			&cli.BoolFlag{Name: "json", Usage: "print the problems as JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return fmt.Errorf("%w: fsck takes no arguments", errUsage)
			}
			s, err := store.OpenForCheck(c.String("store"))
			if errors.Is(err, store.ErrInUse) {
				return fmt.Errorf("%w; unmount it first: fsck checks only a store no daemon serves", err)
			}
			if err != nil {
				return err
			}
			defer s.Close()
			problems, err := s.Check(c.Bool("verify"))
			if err != nil {
				return err
			}
			inodes, err := s.Index.CountInodes()
			if err != nil {
				return err
			}
			chunks := 0
			if err := s.Chunks.Walk(func(cas.Hash, int64) error { chunks++; return nil }); err != nil {
				return err
			}
			errs := 0
			for _, p := range problems {
				if store.IsError(p) {
					errs++
				}
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				if err := enc.Encode(append([]index.Problem{}, problems...)); err != nil {
					return err
				}
			} else {
				for _, p := range problems {
					fmt.Fprintln(c.App.Writer, p)
				}
				fmt.Fprintf(c.App.Writer, "fsck: %d inodes, %d chunks, %d problems\n", inodes, chunks, len(problems))
			}
			if errs > 0 {
				return fmt.Errorf("store %s is inconsistent: %d of the %d problems are errors", s.Dir, errs, len(problems))
			}
			return nil
		},
	}
}
