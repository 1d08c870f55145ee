package main

import (
	"fmt"
	"net"
	"net/http"
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
			required(&cli.StringFlag{Name: "node-id", Usage: "this node's `NAME`, as Kubernetes knows it"}),
			storeFlag(),
			required(&cli.StringFlag{Name: "mount", Usage: "the `DIR` the daemon mounts the store on"}),
			&cli.DurationFlag{Name: "rebind-interval", Value: 10 * time.Second, Usage: "how often to look for stale targets to bind again"},
			&cli.StringFlag{Name: "health-addr", Usage: "serve the plugin's liveness probe on /healthz at `ADDR`, e.g. :9808: 200 while the plugin answers on its socket, whether or not the daemon's mount serves"},
		},
		OnUsageError: usageError,
		Action:       runCSI,
	}
}

// csiOptions are csi's flags.
type csiOptions struct {
	Endpoint       string
	NodeID         string
	Store          string // absolute
	Mount          string // absolute
	RebindInterval time.Duration
	HealthAddr     string // empty: no liveness endpoint
}

func newCSIOptions(c *cli.Context) (csiOptions, error) {
	o := csiOptions{
		Endpoint:       c.String("endpoint"),
		NodeID:         c.String("node-id"),
		Store:          c.String("store"),
		Mount:          c.String("mount"),
		RebindInterval: c.Duration("rebind-interval"),
		HealthAddr:     c.String("health-addr"),
	}
	if _, err := csi.SocketPath(o.Endpoint); err != nil {
		return o, fmt.Errorf("%w: --endpoint: %w", errUsage, err)
	}
	if o.NodeID == "" {
		return o, fmt.Errorf("%w: --node-id must not be empty", errUsage)
	}
	if o.RebindInterval <= 0 {
		return o, fmt.Errorf("%w: --rebind-interval must be positive", errUsage)
	}
	if o.HealthAddr != "" {
		if _, _, err := net.SplitHostPort(o.HealthAddr); err != nil {
			return o, fmt.Errorf("%w: --health-addr %q is not HOST:PORT or :PORT", errUsage, o.HealthAddr)
		}
	}
	for _, dir := range []struct{ flag, path string }{{"store", o.Store}, {"mount", o.Mount}} {
		if !filepath.IsAbs(dir.path) {
			return o, fmt.Errorf("%w: --%s %q must be an absolute path", errUsage, dir.flag, dir.path)
		}
	}
	return o, nil
}

func runCSI(c *cli.Context) error {
	if c.NArg() != 0 {
		return fmt.Errorf("%w: csi takes no arguments", errUsage)
	}
	opts, err := newCSIOptions(c)
	if err != nil {
		return err
	}
	if opts.HealthAddr != "" {
		ln, err := net.Listen("tcp", opts.HealthAddr)
		if err != nil {
			return fmt.Errorf("--health-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /healthz", csi.Liveness(opts.Endpoint, 3*time.Second))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	p := &csi.Plugin{
		NodeID:   opts.NodeID,
		Version:  version,
		Mount:    filepath.Clean(opts.Mount),
		StateDir: filepath.Join(opts.Store, "csi"),
		Rebind:   opts.RebindInterval,
	}
	return p.Serve(ctx, opts.Endpoint)
}
