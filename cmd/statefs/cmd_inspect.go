package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/store"
)

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:         "inspect",
		Usage:        "show a file or directory of the store: inode, owner, its chunks or object and how they are shared",
		ArgsUsage:    "PATH (relative to the mount root; . is the root)",
		Flags:        []cli.Flag{storeFlag(), bytesFlag(), jsonFlag()},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("%w: inspect takes one PATH, relative to the mount root (flags first: statefs inspect --store DIR PATH)", errUsage)
			}
			// A daemon takes an absolute path inside its mount too (it
			// checks the path); a store no daemon serves knows no
			// mountpoint.
			path := c.Args().First()
			var in *store.Inspection
			err := readStore(c,
				func(s *store.Store) (err error) {
					if err := store.CheckPath(path); err != nil {
						if filepath.IsAbs(path) {
							return fmt.Errorf("%w (the store is not mounted)", err)
						}
						return err
					}
					in, err = s.Inspect(path)
					return err
				},
				func(d *control.Client) (err error) { in, err = d.Inspect(c.Context, path); return err })
			if err != nil {
				return err
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(in)
			}
			return printInspection(c.App.Writer, in, sizesOf(c))
		},
	}
}

func printInspection(w io.Writer, in *store.Inspection, z sizes) error {
	line := func(key, format string, a ...any) { fmt.Fprintf(w, "%-9s"+format+"\n", append([]any{key}, a...)...) }
	line("path", "%s", in.Path)
	line("inode", "%d", in.Ino)
	line("type", "%s", in.Type)
	line("mode", "%s %s", in.Mode, in.Permissions)
	line("size", "%s", z.of(int64(in.Size)))
	line("nlink", "%d", in.Nlink)
	line("uid:gid", "%d:%d", in.Uid, in.Gid)
	for _, t := range []struct {
		key string
		at  time.Time
	}{{"atime", in.Atime}, {"mtime", in.Mtime}, {"ctime", in.Ctime}, {"btime", in.Btime}} {
		line(t.key, "%s", timestamp(t.at))
	}
	line("owner", "%s", describeOwner(in.Owner))
	switch {
	case in.Entries != nil:
		line("entries", "%d", *in.Entries)
	case in.Type == "symlink":
		line("target", "%s", in.Target)
	}
	switch {
	case in.Object != nil:
		line("content", "sealed as an object")
		o := in.Object
		disk := z.of(o.DiskBytes) + " on disk"
		if o.Missing {
			disk = "missing from the disk"
		}
		line("object", "%s", o.Hash)
		line("refs", "%d (files that are this object)", o.Refs)
		line("disk", "%s", disk)
		if o.Quarantined {
			line("status", "quarantined since %s: %s (opens fail with EIO; statefs fsck --repair makes the file a hole)", timestamp(o.QuarantinedAt), o.QuarantinedWhy)
		} else {
			line("status", "not quarantined")
		}
		return nil
	}
	switch in.Content {
	case "sealed":
		line("content", "sealed as chunks, %d extents", len(in.Extents))
	case "staging":
		line("content", "staging (file %016x, not sealed yet)", in.Staging)
	case "inline":
		line("content", "inline (%s in the index)", z.of(int64(in.Size)))
	case "empty":
		line("content", "empty")
	}
	if in.Sharing == nil {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "OFFSET\tLENGTH\tDISK\tREFS\t  CHUNK")
	for _, e := range in.Extents {
		disk := z.of(e.DiskBytes)
		if e.Missing {
			disk = "missing"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t  %s\n", e.Off, z.of(int64(e.Len)), disk, e.Refs, e.Chunk)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	sh := in.Sharing
	line("unique", "%s in %d chunks, %s on disk (no other file uses them)", z.of(sh.UniqueBytes), sh.UniqueChunks, z.of(sh.UniqueDiskBytes))
	line("shared", "%s in %d chunks (other files use them too)", z.of(sh.SharedBytes), sh.SharedChunks)
	if sh.HoleBytes > 0 {
		line("holes", "%s", z.of(sh.HoleBytes))
	}
	return nil
}

func timestamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339Nano)
}

// describeOwner puts an owner on one line: its level and its ids.
func describeOwner(o store.InspectedOwner) string {
	var ids []string
	for _, id := range []struct{ name, v string }{
		{"executor", o.Executor}, {"allocation", o.Allocation}, {"job", o.Job},
		{"vertex", o.Vertex}, {"subtask", o.Subtask}, {"checkpoint", o.Checkpoint},
	} {
		if id.v != "" {
			ids = append(ids, id.name+" "+id.v)
		}
	}
	if len(ids) == 0 {
		return store.GroupUnowned
	}
	return o.Level + ": " + strings.Join(ids, ", ")
}
