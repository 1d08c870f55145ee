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
			"inconsistency; chunks and objects no file uses (gc sweeps them) and staging files a\n" +
			"crash left (the next mount removes them) are reported but are not. A file that uses\n" +
			"a missing or corrupt chunk, or is a missing, corrupt or quarantined object, is\n" +
			"reported as a damaged file, with its paths and lost ranges.\n\n" +
			"fsck changes nothing unless --repair is given. --repair reads every chunk and object\n" +
			"(as --verify), and in each damaged file turns the lost ranges into holes: the file\n" +
			"keeps its names, size and mode and reads as zeros there, as e2fsck leaves a file\n" +
			"whose blocks it cleared. It lists every file and range it changed, removes the damaged\n" +
			"chunk and object files, and then checks the store again. It repairs nothing else.\n\n" +
			"--json prints the problems as a JSON array; with --repair, an object with repaired,\n" +
			"removed_chunks, removed_objects and problems.",
		Flags: []cli.Flag{
			storeFlag(),
			&cli.BoolFlag{Name: "verify", Usage: "read every chunk and object a file uses and check its hash"},
			&cli.BoolFlag{Name: "repair", Usage: "make the lost ranges of damaged files holes, listing them (implies --verify)"},
			bytesFlag(),
			jsonFlag(),
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 0 {
				return fmt.Errorf("%w: fsck takes no arguments", errUsage)
			}
			opts := newFsckOptions(c)
			open := store.OpenReadOnly
			if opts.Repair {
				open = store.OpenForRepair
			}
			s, err := open(opts.Store)
			if errors.Is(err, store.ErrInUse) {
				return fmt.Errorf("%w; unmount it first: fsck checks only a store no daemon serves", err)
			}
			if err != nil {
				return err
			}
			defer s.Close()
			var repaired *store.Repaired
			if opts.Repair {
				r, err := s.Repair()
				if err != nil {
					return fmt.Errorf("repairing: %w", err)
				}
				repaired = &r
			}
			problems, err := s.Check(opts.Verify)
			if err != nil {
				return err
			}
			inodes, err := s.Index.CountInodes()
			if err != nil {
				return err
			}
			chunks := 0
			if err := s.WalkChunks(func(cas.Hash, int64) error { chunks++; return nil }); err != nil {
				return err
			}
			errs := 0
			for _, p := range problems {
				if store.IsError(p) {
					errs++
				}
			}
			if opts.JSON {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				var v any = append([]index.Problem{}, problems...)
				if repaired != nil {
					v = struct {
						Repaired       []repairedFile  `json:"repaired"`
						Removed        []string        `json:"removed_chunks"`
						RemovedObjects []string        `json:"removed_objects"`
						Problems       []index.Problem `json:"problems"`
					}{repairedFiles(*repaired), hashStrings(repaired.RemovedChunks), hashStrings(repaired.RemovedObjects), append([]index.Problem{}, problems...)}
				}
				if err := enc.Encode(v); err != nil {
					return err
				}
			} else {
				if repaired != nil {
					printRepaired(c, *repaired)
				}
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

// fsckOptions are fsck's flags.
type fsckOptions struct {
	Store  string
	Verify bool // --verify, or --repair, which implies it
	Repair bool
	JSON   bool
}

func newFsckOptions(c *cli.Context) fsckOptions {
	return fsckOptions{
		Store:  c.String("store"),
		Verify: c.Bool("verify") || c.Bool("repair"),
		Repair: c.Bool("repair"),
		JSON:   c.Bool("json"),
	}
}

// repairedFile is one file fsck --repair changed, as JSON.
type repairedFile struct {
	Inode     uint64       `json:"inode"`
	Paths     []string     `json:"paths"`
	Size      uint64       `json:"size"`
	LostBytes uint64       `json:"lost_bytes"`
	Holes     []lostExtent `json:"holes"`
	// Object is the file's damaged object, all of its bytes, when it was
	// sealed as one (Holes is empty then).
	Object string `json:"object,omitempty"`
}

type lostExtent struct {
	Off   uint64 `json:"offset"`
	Len   uint32 `json:"length"`
	Chunk string `json:"chunk"`
}

func repairedFiles(r store.Repaired) []repairedFile {
	files := []repairedFile{}
	for _, d := range r.Files {
		f := repairedFile{Inode: d.Ino, Paths: append([]string{}, d.Paths...), Size: d.Size, LostBytes: d.LostBytes()}
		for _, e := range d.Lost {
			f.Holes = append(f.Holes, lostExtent{e.Off, e.Len, e.Hash.String()})
		}
		if d.Object != nil {
			f.Object = d.Object.String()
		}
		files = append(files, f)
	}
	return files
}

func printRepaired(c *cli.Context, r store.Repaired) {
	z := sizesOf(c)
	for _, f := range repairedFiles(r) {
		fmt.Fprintf(c.App.Writer, "repaired: %s (inode %d, %s): %s lost, now holes at",
			describePaths(f.Paths), f.Inode, z.of(int64(f.Size)), z.of(int64(f.LostBytes)))
		if f.Object != "" {
			fmt.Fprintf(c.App.Writer, " 0+%d (all of object %s)\n", f.Size, f.Object)
			continue
		}
		for _, h := range f.Holes {
			fmt.Fprintf(c.App.Writer, " %d+%d", h.Off, h.Len)
		}
		fmt.Fprintln(c.App.Writer)
	}
	for _, h := range r.RemovedChunks {
		fmt.Fprintf(c.App.Writer, "removed damaged chunk %s\n", h)
	}
	for _, h := range r.RemovedObjects {
		fmt.Fprintf(c.App.Writer, "removed damaged object %s\n", h)
	}
	fmt.Fprintf(c.App.Writer, "repair: %d files repaired, %d damaged chunks removed, %d damaged objects removed\n",
		len(r.Files), len(r.RemovedChunks), len(r.RemovedObjects))
}

// describePaths names a file by its paths; an unlinked open file has none.
func describePaths(paths []string) string {
	if len(paths) == 0 {
		return "(no name)"
	}
	s := paths[0]
	for _, p := range paths[1:] {
		s += ", " + p
	}
	return s
}

func hashStrings(hs []cas.Hash) []string {
	out := []string{}
	for _, h := range hs {
		out = append(out, h.String())
	}
	return out
}
