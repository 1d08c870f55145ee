package main

import (
	"fmt"
	"log/slog"
	"os"
)

// setLogger makes slog's default logger write to stderr in format: text
// (key=value pairs, for people) or json (one object a line, for log
// collectors such as the ones on Kubernetes nodes).
func setLogger(format string) error {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(os.Stderr, opts)
	case "json":
		opts.ReplaceAttr = durationsInSeconds
		h = slog.NewJSONHandler(os.Stderr, opts)
	default:
		return fmt.Errorf("%w: --log-format %q is not text or json", errUsage, format)
	}
	slog.SetDefault(slog.New(h))
	return nil
}

// durationsInSeconds writes a duration as a number of seconds, as the
// commands' --json do ("took": 1.5). slog's JSON handler would write
// nanoseconds, which a reader of a log cannot tell from seconds by looking;
// the text handler's 1.5s carries its unit and stays.
func durationsInSeconds(groups []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.Float64Value(a.Value.Duration().Seconds())
	}
	return a
}
