package main

import (
	"fmt"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/statefs/statefs/csi"
)

func csiCommand() *cli.Command {
	return &cli.Command{
		Name:  "csi",
		Usage: "serve the CSI node plugin: hand each pod its own subtree volumes/<name>/ of the statefs mount",
		Description: "csi binds volumes/<name>/ of the mount that `statefs mount` serves (a separate process,\n" +
			"which must not die with the plugin) onto the kubelet's target paths. It keeps a record per\n" +
			"published target in <store>/csi/, and binds again the targets that went stale when the\n" +
			"daemon restarted, at start and every --rebind-interval, once the daemon's mount serves.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "endpoint", Value: "unix:///csi/csi.sock", Usage: "the CSI `ENDPOINT` to listen on (unix:///PATH)"},
			&cli.StringFlag{Name: "node-id", Usage: "this node's `NAME`, as Kubernetes knows it", Required: true},
			&cli.StringFlag{Name: "store", Usage: "the store `DIR` the daemon serves (the plugin keeps its records in DIR/csi)", Required: true},
			&cli.StringFlag{Name: "mount", Usage: "the `DIR` the daemon mounts the store on", Required: true},
			&cli.DurationFlag{Name: "rebind-interval", Value: 10 * time.Second, Usage: "how often to look for stale targets to bind again"},
		},
		OnUsageError: usageError,
		Action:       runCSI,
	}
}

func runCSI(c *cli.Context) error {
	if c.NArg() != 0 {
		return fmt.Errorf("%w: csi takes no arguments", errUsage)
	}
	if _, err := csi.SocketPath(c.String("endpoint")); err != nil {
		return fmt.Errorf("%w: --endpoint: %w", errUsage, err)
	}
	if c.String("node-id") == "" {
		return fmt.Errorf("%w: --node-id must not be empty", errUsage)
	}
	if c.Duration("rebind-interval") <= 0 {
		return fmt.Errorf("%w: --rebind-interval must be positive", errUsage)
	}
	for _, name := range []string{"store", "mount"} {
		if !filepath.IsAbs(c.String(name)) {
			return fmt.Errorf("%w: --%s %q must be an absolute path", errUsage, name, c.String(name))
		}
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	p := &csi.Plugin{
		NodeID:   c.String("node-id"),
		Version:  version,
		Mount:    filepath.Clean(c.String("mount")),
		StateDir: filepath.Join(c.String("store"), "csi"),
		Rebind:   c.Duration("rebind-interval"),
	}
	return p.Serve(ctx, c.String("endpoint"))
}
