package main

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
)

// Go's flag package, which urfave/cli parses with, says little about two
// mistakes people make: a duration without a unit ("invalid value "5" for
// flag -seal-delay: parse error") and a global flag given after the command
// ("flag provided but not defined: -log-format"). Its messages are fixed
// (flag.FlagSet's failf); these match them.
var (
	invalidFlagValue = regexp.MustCompile(`^invalid value "((?:[^"\\]|\\.)*)" for flag -([^:]+): `)
	undefinedFlag    = regexp.MustCompile(`^flag provided but not defined: -(.+)$`)
)

// explainFlagError says what is wrong with c's command line and how to put
// it right where Go's flag package (err) does not, for every duration flag
// and every global flag of every command; any other err is returned as it
// is.
func explainFlagError(c *cli.Context, err error) error {
	if m := invalidFlagValue.FindStringSubmatch(err.Error()); m != nil {
		value, uerr := strconv.Unquote(`"` + m[1] + `"`)
		if _, isDuration := flagNamed(c.Command.Flags, m[2]).(*cli.DurationFlag); isDuration && uerr == nil {
			if _, nerr := strconv.ParseFloat(value, 64); nerr == nil {
				return fmt.Errorf("%w: --%s %q: a duration needs a unit, e.g. %ss", errUsage, m[2], value, value)
			}
			return fmt.Errorf("%w: --%s %q is not a duration such as 90s, 10m or 1h30m", errUsage, m[2], value)
		}
	}
	if m := undefinedFlag.FindStringSubmatch(err.Error()); m != nil && len(c.Lineage()) > 1 {
		f := flagNamed(c.App.Flags, m[1])
		if f != nil && f == cli.VersionFlag {
			return fmt.Errorf("%w: %s is a global flag, given before any command: statefs --%s", errUsage, dashed(m[1]), f.Names()[0])
		}
		if f != nil {
			return fmt.Errorf("%w: %s is a global flag, given before the command: statefs %s %s ...",
				errUsage, dashed(m[1]), strings.Join(globalFlagArgs(c.Lineage()[1].Args().Slice(), f), " "), c.Command.Name)
		}
	}
	return err
}

// dashed is the flag name as a command line gives it: -v, --log-format.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagNamed is the flag of flags one of whose names is name, or nil.
func flagNamed(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// globalFlagArgs are the arguments that gave the global flag f in args (the
// command and what follows it), its value included, as written: --log-format
// json, or --log-format=json. Without them, the flag's name and a
// placeholder for its value.
func globalFlagArgs(args []string, f cli.Flag) []string {
	takesValue := true
	if v, ok := f.(cli.DocGenerationFlag); ok {
		takesValue = v.TakesValue()
	}
	for i, a := range args {
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || !slices.Contains(f.Names(), name) {
			continue
		}
		if takesValue && !hasValue && i+1 < len(args) {
			return []string{a, args[i+1]}
		}
		return []string{a}
	}
	if takesValue {
		return []string{"--" + f.Names()[0], "VALUE"}
	}
	return []string{"--" + f.Names()[0]}
}
