// Command statefs is the one binary of statefs: the FUSE daemon and the
// tools that work on its store.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/keeper"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if err := newApp().Run(os.Args); err != nil {
		// A keeper's first server that failed said why in its own line.
		var failed *keeper.ServerFailed
		if errors.As(err, &failed) && failed.State.Exited() {
			os.Exit(failed.State.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "statefs:", oneLine(err))
		os.Exit(1)
	}
}

// newApp is the command line, built afresh on each call (urfave/cli keeps
// what it parsed in the flags); the tests run it in-process.
func newApp() *cli.App {
	app := &cli.App{
		Name:    "statefs",
		Usage:   "a persistent, deduplicating local-state filesystem for stream processors",
		Version: version,
		Commands: []*cli.Command{
			mountCommand(),
			gcCommand(),
			jobCommand(),
			jobsCommand(),
			executorCommand(),
			executorsCommand(),
			fsckCommand(),
			scrubCommand(),
			inspectCommand(),
			duCommand(),
			heldCommand(),
			restoreCommand(),
			csiCommand(),
		},
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: []string{"STATEFS_LOG_FORMAT"},
				Usage: "write logs to stderr in `FORMAT`: text, or json (one JSON object a line)"},
		},
		Before:       func(c *cli.Context) error { return setLogger(c.String("log-format")) },
		OnUsageError: usageError,
		ErrWriter:    os.Stderr,
		// Errors are printed once, by main, as one line.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	for _, cmd := range app.Commands {
		cmd.Before = requireFlags
		cmd.OnUsageError = usageError
	}
	return app
}

// usageError turns urfave/cli's complaint about flags into one plain line
// instead of the help page, saying how to put it right where it can
// (explainFlagError). newApp sets it on every command.
func usageError(c *cli.Context, err error, isSubcommand bool) error {
	return fmt.Errorf("%w (see 'statefs %s --help')", explainFlagError(c, err), c.Command.Name)
}

// oneLine keeps an error message on one line.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// errUsage marks a mistake in the command line.
var errUsage = errors.New("usage")
