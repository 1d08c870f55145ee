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
		h = slog.NewJSONHandler(os.Stderr, opts)
	default:
		return fmt.Errorf("%w: --log-format %q is not text or json", errUsage, format)
	}
	slog.SetDefault(slog.New(h))
	return nil
}
