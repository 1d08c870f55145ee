package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/store"
)

func scrubCommand() *cli.Command {
	return &cli.Command{
		Name:  "scrub",
		Usage: "read and verify every chunk and object of a store",
		Description: "scrub reads every chunk and object file in the store, used or not, and checks it against\n" +
			"its hash, and checks that every chunk and object a file uses is there. It prints each damaged\n" +
			"chunk or object and each file that uses one (paths and lost ranges), and exits 1 if it found\n" +
			"damage; `statefs fsck --repair` then makes the lost ranges holes. On a terminal it shows\n" +
			"its progress. On a store a daemon serves, the daemon scrubs it (what is written meanwhile is\n" +
			"left for the next scrub) and quarantines the damaged objects, so that opens of their files\n" +
			"fail; offline it changes nothing. --max-rate keeps it from taking the disk from the jobs.",
		Flags: []cli.Flag{
			storeFlag(),
			bytesFlag(),
			jsonFlag(),
			sizeFlag(&cli.StringFlag{Name: "max-rate", Value: "0", Usage: "read at most `SIZE` of chunks and objects a second, e.g. 100MiB (0: as fast as the disk gives them)"}),
		},
		OnUsageError: usageError,
		Action:       runScrub,
	}
}

// scrubOptions are scrub's flags.
type scrubOptions struct {
	Store   string
	MaxRate int64 // bytes a second; 0: no limit
	JSON    bool
}

func newScrubOptions(c *cli.Context) (scrubOptions, error) {
	rate, err := sizeOf(c, "max-rate", "100MiB")
	return scrubOptions{Store: c.String("store"), MaxRate: rate, JSON: c.Bool("json")}, err
}

func runScrub(c *cli.Context) error {
	if c.NArg() != 0 {
		return fmt.Errorf("%w: scrub takes no arguments", errUsage)
	}
	opts, err := newScrubOptions(c)
	if err != nil {
		return err
	}
	scrubbing := store.ScrubOptions{Rate: opts.MaxRate}
	bar := progress(c, opts.JSON, "scrubbing")
	if bar != nil {
		scrubbing.Progress = func(done, total int) {
			bar.ChangeMax(total)
			bar.Set(done)
		}
	}
	r, err := scrub(c, opts.Store, scrubbing)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return err
	}
	if opts.JSON {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(scrubJSON(r)); err != nil {
			return err
		}
	} else {
		printScrubbed(c.App.Writer, r, sizesOf(c))
	}
	if len(r.Damaged) > 0 {
		chunks, objects := damagedKinds(r)
		return fmt.Errorf("store %s has %d damaged chunks and %d damaged objects used by %d files; 'statefs fsck --repair' makes their lost ranges holes",
			opts.Store, chunks, objects, len(r.Files))
	}
	return nil
}

// printScrubbed prints r as lines: each damaged chunk or object, each file
// that uses one, each object this scrub quarantined, and a summary, with
// sizes as z prints them.
func printScrubbed(w io.Writer, r store.Scrubbed, z sizes) {
	for _, d := range r.Damaged {
		use := "used"
		if !d.Used {
			use = "unused"
		}
		fmt.Fprintf(w, "damaged %s %s (%s): %s\n", damagedKind(d), d.Hash, use, d.Why)
	}
	for _, f := range repairedFiles(store.Repaired{Files: r.Files}) {
		fmt.Fprintf(w, "damaged file %s (inode %d, %s): %s lost", describePaths(f.Paths), f.Inode, z.of(int64(f.Size)), z.of(int64(f.LostBytes)))
		if f.Object != "" {
			fmt.Fprintf(w, ", all of object %s\n", f.Object)
			continue
		}
		fmt.Fprint(w, " at")
		for _, h := range f.Holes {
			fmt.Fprintf(w, " %d+%d", h.Off, h.Len)
		}
		fmt.Fprintln(w)
	}
	for _, h := range r.Quarantined {
		fmt.Fprintf(w, "quarantined object %s: opens of its files fail with EIO\n", h)
	}
	chunks, objects := damagedKinds(r)
	fmt.Fprintf(w, "scrub: %d chunks, %d objects, %s verified, %d damaged chunks, %d damaged files, %d damaged objects, %d quarantined now\n",
		r.Chunks, r.Objects, z.of(r.Bytes), chunks, len(r.Files), objects, len(r.Quarantined))
}

// damagedKind says whether d is a chunk or an object.
func damagedKind(d store.DamagedChunk) string {
	switch d.Kind {
	case store.ProblemMissingObject, store.ProblemCorruptObject, store.ProblemQuarantined:
		return "object"
	}
	return "chunk"
}

// damagedKinds counts r's damaged chunks and damaged objects.
func damagedKinds(r store.Scrubbed) (chunks, objects int) {
	for _, d := range r.Damaged {
		if damagedKind(d) == "object" {
			objects++
		} else {
			chunks++
		}
	}
	return chunks, objects
}

// scrub scrubs the store in dir itself, or has the daemon that serves it
// do it.
func scrub(c *cli.Context, dir string, opts store.ScrubOptions) (store.Scrubbed, error) {
	s, err := store.OpenReadOnly(dir)
	if errors.Is(err, store.ErrInUse) {
		client, derr := control.Dial(dir)
		if derr != nil {
			return store.Scrubbed{}, fmt.Errorf("%w, and %w", err, derr)
		}
		return client.Scrub(c.Context, opts)
	}
	if err != nil {
		return store.Scrubbed{}, err
	}
	defer s.Close()
	return s.Scrub(c.Context, opts)
}

// scrubJSON is the report as JSON, hashes as hex. Damaged holds chunks and
// objects, told apart by their kind.
func scrubJSON(r store.Scrubbed) any {
	type chunk struct {
		Hash string `json:"hash"`
		Kind string `json:"kind"`
		Why  string `json:"why"`
		Used bool   `json:"used"`
	}
	damaged := []chunk{}
	for _, d := range r.Damaged {
		damaged = append(damaged, chunk{d.Hash.String(), d.Kind, d.Why, d.Used})
	}
	return struct {
		Chunks      int            `json:"chunks"`
		Objects     int            `json:"objects"`
		Bytes       int64          `json:"bytes"`
		Damaged     []chunk        `json:"damaged"`
		Files       []repairedFile `json:"files"`
		Quarantined []string       `json:"quarantined"` // objects this scrub quarantined
	}{r.Chunks, r.Objects, r.Bytes, damaged, repairedFiles(store.Repaired{Files: r.Files}), hashStrings(r.Quarantined)}
}
