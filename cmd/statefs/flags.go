package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/owner"
)

// The flags several commands take, defined once so that a flag has one name
// and one meaning everywhere (--store is storeFlag, the collector's are
// collectorFlags), and the readers of flag values whose errors must name the
// flag (DESIGN invariant 7: bad input gets one clear line).

func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print JSON"}
}

// required marks f as a flag its command cannot run without. The command's
// Before (requireFlags, set by newApp) refuses its absence in one line:
// urfave/cli's own check of a required flag prints the whole help first.
func required(f *cli.StringFlag) *cli.StringFlag {
	f.Usage += " (required)"
	requiredFlags.Store(f.Name, true)
	return f
}

var requiredFlags sync.Map // flag name -> true

// requireFlags refuses a command line without one of the command's
// required flags.
func requireFlags(c *cli.Context) error {
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if _, ok := requiredFlags.Load(name); ok && c.String(name) == "" {
			return fmt.Errorf("%w: --%s is required", errUsage, name)
		}
	}
	return nil
}

// bytesFlag is --bytes, for the commands that print sizes.
func bytesFlag() cli.Flag {
	return &cli.BoolFlag{Name: "bytes", Usage: "print sizes as exact byte counts (--json always does)"}
}

// sizes prints byte counts as --bytes says: exactly, or as people read
// them (IEC units with one decimal, 5.4 MiB), one style in every command.
type sizes struct{ exact bool }

func sizesOf(c *cli.Context) sizes { return sizes{exact: c.Bool("bytes")} }

func (z sizes) of(n int64) string {
	if z.exact {
		return strconv.FormatInt(n, 10)
	}
	return humanize.IBytes(uint64(max(n, 0)))
}

func rulesFlag() cli.Flag {
	return &cli.StringFlag{Name: "rules", Usage: "a rules `FILE` saying who owns which paths (default: Flink's layout)"}
}

// rulesOf loads the --rules file, or gives Flink's layout without one.
func rulesOf(c *cli.Context) (*owner.Rules, error) {
	path := c.String("rules")
	if path == "" {
		return owner.FlinkRules(), nil
	}
	rules, err := owner.LoadRules(path)
	if err != nil {
		return nil, fmt.Errorf("--rules: %w", err)
	}
	return rules, nil
}

// sizeFlag is f, a flag whose value is a SIZE that sizeOf reads, with its
// usage saying that a SIZE takes a unit.
func sizeFlag(f *cli.StringFlag) *cli.StringFlag {
	f.Usage += "; a SIZE takes a unit, as in 64KiB, 32MiB or 1GB (a bare number only as 0)"
	return f
}

// sizeOf reads the size flag name, such as 32MiB; example is one the error
// line offers. A bare number other than 0 is refused: every size statefs
// takes is KiB at the least, so --max-rate 100 is surely not meant as 100
// bytes a second, and 0 (none, or no limit) needs no unit.
func sizeOf(c *cli.Context, name, example string) (int64, error) {
	given := c.String(name)
	v, err := humanize.ParseBytes(given)
	if err != nil || v > math.MaxInt64 {
		return 0, fmt.Errorf("%w: --%s %q is not a size such as %s", errUsage, name, given, example)
	}
	if n, err := strconv.ParseFloat(strings.TrimSpace(given), 64); err == nil && n != 0 {
		return 0, fmt.Errorf("%w: --%s %q: a size needs a unit, e.g. %sMiB (%sB if bytes are meant)", errUsage, name, given, strings.TrimSpace(given), strings.TrimSpace(given))
	}
	return int64(v), nil
}

// nonNegative reads the duration flag name, which must not be negative.
func nonNegative(c *cli.Context, name string) (time.Duration, error) {
	d := c.Duration(name)
	if d < 0 {
		return 0, fmt.Errorf("%w: --%s must not be negative", errUsage, name)
	}
	return d, nil
}
