package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/moby/sys/mountinfo"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/fs"
	"github.com/statefs/statefs/metrics"
	"github.com/statefs/statefs/owner"
	"github.com/statefs/statefs/store"
)

func mountCommand() *cli.Command {
	return &cli.Command{
		Name:      "mount",
		Usage:     "serve the store at MOUNTPOINT in the foreground until SIGTERM, SIGINT or umount",
		ArgsUsage: "MOUNTPOINT",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "store", Usage: "the store `DIR` on the persistent disk (created if missing)", Required: true},
			&cli.BoolFlag{Name: "allow-other", Usage: "let users other than the mounting one use the mount"},
			&cli.DurationFlag{Name: "seal-delay", Value: 2 * time.Second, Usage: "how long a closed file waits before it is sealed into chunks"},
			&cli.BoolFlag{Name: "passthrough", Value: true, Usage: "let the kernel read and write open files directly (FUSE passthrough)"},
			&cli.IntFlag{Name: "sealers", Value: 1, Usage: "files sealed at once"},
			&cli.BoolFlag{Name: "debug", Usage: "log every FUSE request"},
			&cli.StringFlag{Name: "pprof", Usage: "serve Go's profiler (net/http/pprof) on `ADDR`, e.g. localhost:6060"},
			&cli.StringFlag{Name: "metrics-addr", Usage: "serve Prometheus metrics on /metrics and health probes on /healthz at `ADDR`, e.g. :9810"},
			&cli.StringFlag{Name: "read-ahead", Value: "4MiB", Usage: "how far the kernel reads ahead of a sequential reader (`SIZE`; 0: the kernel's default)"},
			&cli.StringFlag{Name: "read-cache", Value: "32MiB", Usage: "memory kept for reads of sealed content: the verification trees of the chunks read last (about 4 KiB per MiB of content) and the 16 KiB groups small reads needed (`SIZE`)"},
			&cli.StringFlag{Name: "memory-limit", Value: "200MiB", Usage: "the heap `SIZE` the Go runtime collects garbage to stay under (a soft limit; 0: none; GOMEMLIMIT wins)"},
			&cli.StringFlag{Name: "rules", Usage: "a rules `FILE` saying who owns which paths (default: Flink's layout)"},
			&cli.DurationFlag{Name: "gc-interval", Usage: "run the collector this often (0: never; statefs gc runs it on demand)"},
			&cli.DurationFlag{Name: "gc-grace", Value: 10 * time.Minute, Usage: "how long gone must hold before the periodic collector removes state"},
			&cli.StringSliceFlag{Name: "flink-url", Usage: "a Flink REST `URL` the periodic collector asks (repeat for several clusters)"},
			&cli.StringFlag{Name: "job-result-store", Usage: "Flink HA's job-result-store `DIR`, for the periodic collector"},
			&cli.BoolFlag{Name: "not-found-is-gone", Usage: "let a 404 from every Flink URL count as gone (after the grace period)"},
			&cli.BoolFlag{Name: "hold-deletes", Usage: "keep the allocation, job and subtask trees the executor removes while their job is not gone (see .statefs/held, statefs restore)"},
			&cli.DurationFlag{Name: "hold-ttl", Value: 24 * time.Hour, Usage: "how long a removed tree stays held at most (0: until its job is collected)"},
			&cli.Float64Flag{Name: "hold-min-free", Value: 10, Usage: "held trees go, oldest first, while the store's disk has less than this `PERCENT` free"},
			&cli.DurationFlag{Name: "hold-window", Value: 5 * time.Second, Usage: "how long removals must have stopped before the daemon decides what is held"},
		},
		OnUsageError: usageError,
		Action:       runMount,
	}
}

func runMount(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("%w: mount takes exactly one MOUNTPOINT, got %d arguments", errUsage, c.NArg())
	}
	for _, name := range []string{"seal-delay", "gc-interval", "gc-grace", "hold-ttl", "hold-window"} {
		if c.Duration(name) < 0 {
			return fmt.Errorf("%w: --%s must not be negative", errUsage, name)
		}
	}
	if p := c.Float64("hold-min-free"); p < 0 || p > 100 {
		return fmt.Errorf("%w: --hold-min-free is a percentage between 0 and 100, not %v", errUsage, p)
	}
	limit, err := humanize.ParseBytes(c.String("memory-limit"))
	if err != nil {
		return fmt.Errorf("%w: --memory-limit %q is not a size such as 200MiB", errUsage, c.String("memory-limit"))
	}
	readAhead, err := humanize.ParseBytes(c.String("read-ahead"))
	if err != nil {
		return fmt.Errorf("%w: --read-ahead %q is not a size such as 4MiB", errUsage, c.String("read-ahead"))
	}
	readCache, err := humanize.ParseBytes(c.String("read-cache"))
	if err != nil {
		return fmt.Errorf("%w: --read-cache %q is not a size such as 32MiB", errUsage, c.String("read-cache"))
	}
	mnt, err := filepath.Abs(c.Args().First())
	if err != nil {
		return err
	}
	if err := checkMountpoint(mnt); err != nil {
		return err
	}
	// Catch SIGTERM and SIGINT from here on: one that comes while mounting
	// unmounts as soon as the mount exists, instead of killing the process
	// and leaving a dead mount behind.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(signals)
	rules := owner.FlinkRules()
	if path := c.String("rules"); path != "" {
		if rules, err = owner.LoadRules(path); err != nil {
			return err
		}
	}
	// Without a limit the heap grows to twice what is live before a
	// collection, and badger's flushes and compactions make what is live
	// jump: 340-380 MiB peak RSS creating 30,000 files, 220 MiB with a limit
	// of 200 MiB, in the same time.
	if limit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(limit))
	}
	if addr := c.String("pprof"); addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("--pprof: %w", err)
		}
		go http.Serve(ln, nil) // net/http/pprof registers on the default mux
	}
	var metricsLn net.Listener // taken now, so a bad address changes nothing
	if addr := c.String("metrics-addr"); addr != "" {
		if metricsLn, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		defer metricsLn.Close()
	}
	s, pending, err := store.Open(c.String("store"))
	if err != nil {
		return err
	}
	defer s.Close()
	s.Chunks.SetReadCache(int64(readCache))
	var m *metrics.Metrics // nil records nothing
	if metricsLn != nil {
		m = metrics.New(s)
	}
	fsys, root := fs.New(s, fs.Options{
		SealDelay:   c.Duration("seal-delay"),
		Passthrough: c.Bool("passthrough"),
		Sealers:     c.Int("sealers"),
		Rules:       rules,
		Hold: fs.HoldOptions{
			Enabled: c.Bool("hold-deletes"),
			Window:  c.Duration("hold-window"),
			TTL:     c.Duration("hold-ttl"),
			MinFree: c.Float64("hold-min-free") / 100,
		},
		Sealed: m.Sealed,
	}, pending)
	server, served, err := mountFS(mnt, root, fs.MountOptions(c.Bool("allow-other"), c.Bool("debug")), m)
	if err != nil {
		fsys.Shutdown()
		return fmt.Errorf("mounting %s: %w", mnt, err)
	}
	if readAhead > 0 {
		if err := fs.SetReadAhead(mnt, readAhead); err != nil {
			slog.Warn("could not set the mount's read-ahead; the kernel's default stays", "err", err)
		}
	}
	ctl := &control.Server{Store: s, FS: fsys, Mountpoint: mnt, Collected: m.Collected}
	if err := ctl.Listen(); err != nil {
		server.Unmount()
		<-served
		fsys.Shutdown()
		return err
	}
	defer ctl.Close()
	if metricsLn != nil {
		srv := metrics.NewServer(m, &metrics.Health{Mountpoint: mnt, Store: s.Dir})
		go srv.Serve(metricsLn)
		defer srv.Close()
	}
	if every := c.Duration("gc-interval"); every > 0 {
		ctx, stop := context.WithCancel(c.Context)
		defer stop()
		go ctl.CollectEvery(ctx, every, control.GCRequest{
			Grace:          c.Duration("gc-grace"),
			FlinkURLs:      c.StringSlice("flink-url"),
			JobResultStore: c.String("job-result-store"),
			NotFoundIsGone: c.Bool("not-found-is-gone"),
		})
	}
	slog.Info("serving", "store", s.Dir, "mountpoint", mnt, "pending_seals", len(pending))

	select {
	case <-served: // unmounted from outside (umount)
	case sig := <-signals:
		slog.Info("unmounting", "signal", sig.String())
		stop(server, mnt, served)
	}
	fsys.Shutdown()
	slog.Info("unmounted", "mountpoint", mnt)
	return nil
}

// mountFS is gofs.Mount with the kernel's requests counted and timed by m
// (nil: not). served is closed once the server has stopped serving and its
// unmount callbacks, which read the index, have returned: only then may
// the store close (server.Wait returns before those callbacks).
func mountFS(mnt string, root gofs.InodeEmbedder, opts *gofs.Options, m *metrics.Metrics) (server *fuse.Server, served <-chan struct{}, err error) {
	server, err = fuse.NewServer(m.FUSE(fs.NodeFS(root, opts)), mnt, &opts.MountOptions)
	if err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		server.Serve()
		close(done)
	}()
	if err := server.WaitMount(); err != nil {
		return nil, nil, err
	}
	return server, done, nil
}

// stopGrace is how long a mount that is still in use (open files, binds of
// it) is served after SIGTERM.
const stopGrace = 5 * time.Second

// stop unmounts mnt and returns once server no longer serves it (served is
// closed), or after stopGrace: a busy mount (open files) is detached, and
// binds of the mount (CSI volumes) keep it served after the unmount, which
// would keep the daemon alive for ever. Then the connection is ended; the
// binds go stale (ENOTCONN) until the next daemon mounts and the CSI plugin
// binds them again.
func stop(server *fuse.Server, mnt string, served <-chan struct{}) {
	var st unix.Stat_t
	statErr := unix.Stat(mnt, &st)
	unmounted := make(chan error, 1)
	go func() { unmounted <- server.Unmount() }()
	grace := time.After(stopGrace)
	for {
		select {
		case <-served:
			return
		case err := <-unmounted:
			unmounted = nil
			if err != nil {
				slog.Warn("the mount is busy; detaching it", "err", err)
				if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
					slog.Error("detaching the mount failed", "err", err)
				}
			}
			continue
		case <-grace:
		}
		break
	}
	slog.Warn("the mount is still in use (open files or binds of it); ending its connection", "after", stopGrace)
	if statErr == nil {
		// fusectl names a connection's directory by its device number.
		abort := fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", st.Dev)
		if err := os.WriteFile(abort, []byte("1"), 0); err != nil {
			slog.Warn("could not end the FUSE connection; the daemon's exit ends it", "err", err)
		}
	}
	select {
	case <-served:
	case <-time.After(time.Second):
	}
}

// checkMountpoint refuses a mountpoint that is missing, not a directory,
// or not empty, before anything is touched. A dead statefs mount there (its
// daemon was killed) is detached first, as a restarted daemon finds it.
func checkMountpoint(mnt string) error {
	// statfs, not stat: the kernel may answer a stat of the dead mount's
	// root from its attribute cache for a second after its daemon died.
	var sfs unix.Statfs_t
	if err := unix.Statfs(mnt, &sfs); errors.Is(err, syscall.ENOTCONN) && isFUSEMount(mnt) {
		slog.Warn("detaching the dead mount a previous daemon left", "mountpoint", mnt)
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("mountpoint %s: detaching the dead mount there: %w", mnt, err)
		}
	}
	st, err := os.Stat(mnt)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("mountpoint %s does not exist", mnt)
	}
	if err != nil {
		return fmt.Errorf("mountpoint: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("mountpoint %s is not a directory", mnt)
	}
	f, err := os.Open(mnt)
	if err != nil {
		return fmt.Errorf("mountpoint: %w", err)
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("mountpoint %s is not empty", mnt)
	}
	return nil
}

// isFUSEMount reports whether mnt is the mountpoint of a FUSE filesystem,
// by the mount table (a dead one cannot be asked).
func isFUSEMount(mnt string) bool {
	mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(mnt))
	return err == nil && len(mounts) > 0 && strings.HasPrefix(mounts[len(mounts)-1].FSType, "fuse")
}
