package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/moby/sys/mountinfo"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/statefs/statefs/control"
	"github.com/statefs/statefs/fs"
	"github.com/statefs/statefs/keeper"
	"github.com/statefs/statefs/metrics"
	"github.com/statefs/statefs/store"
)

func mountCommand() *cli.Command {
	return &cli.Command{
		Name:        "mount",
		Usage:       "serve the store at MOUNTPOINT in the foreground until SIGTERM, SIGINT or umount",
		Description: "The --store belongs on the persistent disk; mount creates it if it is missing (its parent must exist).",
		ArgsUsage:   "MOUNTPOINT",
		Flags: slices.Concat([]cli.Flag{
			storeFlag(),
			&cli.BoolFlag{Name: "allow-other", Usage: "let users other than the mounting one use the mount"},
			&cli.DurationFlag{Name: "seal-delay", Value: 2 * time.Second, Usage: "how long a closed file waits before it is sealed"},
			&cli.StringFlag{Name: "seal-as", Value: "auto", Usage: "how a seal keeps a file of more than 32 KiB: `auto` (chunks if a sample of it compresses, else the file itself as an object), chunks (deduplicated and compressed, every read through the daemon) or object (read by the kernel through passthrough)"},
			&cli.BoolFlag{Name: "passthrough", Value: true, Usage: "let the kernel read and write open files directly (FUSE passthrough)"},
			&cli.IntFlag{Name: "sealers", Value: 1, Usage: "files sealed at once"},
			&cli.BoolFlag{Name: "keeper", Value: true, Usage: "mount and hold the FUSE connection in this process, the keeper, and serve it from a child process that the keeper replaces at once when it dies, so that clients see a stall instead of errors (needs root); false: serve in this one process"},
			&cli.BoolFlag{Name: "debug", Usage: "log every FUSE request"},
			&cli.StringFlag{Name: "pprof", Usage: "serve Go's profiler (net/http/pprof) on `ADDR`, e.g. localhost:6060"},
			&cli.StringFlag{Name: "metrics-addr", Usage: "serve Prometheus metrics on /metrics and health probes on /healthz (liveness) and /readyz (readiness) at `ADDR`, e.g. :9810"},
			sizeFlag(&cli.StringFlag{Name: "read-ahead", Value: "4MiB", Usage: "how far the kernel reads ahead of a sequential reader (`SIZE`; 0: the kernel's default)"}),
			sizeFlag(&cli.StringFlag{Name: "read-cache", Value: "32MiB", Usage: "memory kept for reads of sealed content: the verification trees of the chunks read last (about 4 KiB per MiB of content) and the 16 KiB groups small reads needed (`SIZE`)"}),
			&cli.DurationFlag{Name: "cache-timeout", Value: fs.DefaultCacheTimeout, Usage: "how long the kernel may answer lookups and stats of the executor's tree from its caches; statefs tells it of every change it makes itself, so this bounds only changes made around the mount (0: ask every time)"},
			&cli.IntFlag{Name: "max-kernel-inodes", Value: fs.DefaultMaxKernelInodes, Usage: "past this many inodes the kernel knows, the daemon asks it to drop a tenth of them, at random among those not open, to bound the memory it keeps per inode, some 400 bytes (`N`; 0: no bound)"},
			sizeFlag(&cli.StringFlag{Name: "memory-limit", Value: "200MiB", Usage: "the heap `SIZE` the Go runtime collects garbage to stay under (a soft limit; 0: none; GOMEMLIMIT wins)"}),
			rulesFlag(),
			&cli.DurationFlag{Name: "gc-interval", Usage: "run the collector this often (0: never; statefs gc runs it on demand)"},
			&cli.DurationFlag{Name: "scrub-interval", Value: 24 * time.Hour, Usage: "read and verify the whole store this often in the background, quarantining damaged objects; a pass that takes longer is followed by the next at once (0: never; statefs scrub runs one on demand)"},
			sizeFlag(&cli.StringFlag{Name: "scrub-rate", Value: "32MiB", Usage: "read at most `SIZE` a second in the background scrub, e.g. 32MiB (0: as fast as the disk gives it)"}),
			&cli.BoolFlag{Name: "verify-reads", Usage: "serve reads of files sealed as objects through the daemon, each verified against the object's hash, instead of letting the kernel read them by passthrough"},
		}, collectorFlags(), []cli.Flag{
			&cli.BoolFlag{Name: "hold-deletes", Usage: "keep the allocation, job and subtask trees the executor removes while their job is not gone (see .statefs/held, statefs restore)"},
			&cli.DurationFlag{Name: "hold-ttl", Value: 24 * time.Hour, Usage: "how long a removed tree stays held at most (0: until its job is collected)"},
			&cli.Float64Flag{Name: "hold-min-free", Value: 10, Usage: "held trees go, oldest first, while the store's disk has less than this `PERCENT` free"},
			&cli.DurationFlag{Name: "hold-window", Value: 5 * time.Second, Usage: "how long removals must have stopped before the daemon decides what is held"},
		}),
		OnUsageError: usageError,
		Action:       runMount,
	}
}

// mountOptions are mount's flags, read and checked before anything is
// touched.
type mountOptions struct {
	Store        string
	FS           fs.Options // all but Sealed, which the metrics set
	AllowOther   bool
	CacheTimeout time.Duration // how long the kernel caches names and attributes
	Debug        bool
	ReadAhead    int64 // 0: the kernel's default
	ReadCache    int64
	MemoryLimit  int64         // 0: none
	Pprof        string        // "": no profiler
	MetricsAddr  string        // "": no metrics
	GCInterval   time.Duration // 0: no periodic collector
	GC           control.GCRequest
	// ScrubInterval is how often the background scrub starts a pass (0:
	// never); ScrubRate the bytes a second it reads at most (0: no limit).
	ScrubInterval time.Duration
	ScrubRate     int64
	SealAs        store.Representation // "": each seal chooses
}

func newMountOptions(c *cli.Context) (o mountOptions, err error) {
	o = mountOptions{
		Store:       c.String("store"),
		AllowOther:  c.Bool("allow-other"),
		Debug:       c.Bool("debug"),
		Pprof:       c.String("pprof"),
		MetricsAddr: c.String("metrics-addr"),
	}
	o.FS.Passthrough = c.Bool("passthrough")
	o.FS.VerifyReads = c.Bool("verify-reads")
	o.FS.Sealers = c.Int("sealers")
	switch as := c.String("seal-as"); as {
	case "auto":
	case string(store.AsChunks), string(store.AsObject):
		o.SealAs = store.Representation(as)
	default:
		return o, fmt.Errorf("%w: --seal-as is auto, chunks or object, not %q", errUsage, as)
	}
	if o.FS.MaxKernelInodes = c.Int("max-kernel-inodes"); o.FS.MaxKernelInodes < 0 {
		return o, fmt.Errorf("%w: --max-kernel-inodes is a count of inodes, 0 or more, not %d", errUsage, o.FS.MaxKernelInodes)
	}
	o.FS.Hold.Enabled = c.Bool("hold-deletes")
	if o.FS.SealDelay, err = nonNegative(c, "seal-delay"); err != nil {
		return o, err
	}
	if o.CacheTimeout, err = nonNegative(c, "cache-timeout"); err != nil {
		return o, err
	}
	if o.GCInterval, err = nonNegative(c, "gc-interval"); err != nil {
		return o, err
	}
	if o.ScrubInterval, err = nonNegative(c, "scrub-interval"); err != nil {
		return o, err
	}
	if o.ScrubRate, err = sizeOf(c, "scrub-rate", "32MiB"); err != nil {
		return o, err
	}
	if o.FS.Hold.TTL, err = nonNegative(c, "hold-ttl"); err != nil {
		return o, err
	}
	if o.FS.Hold.Window, err = nonNegative(c, "hold-window"); err != nil {
		return o, err
	}
	if o.GC, err = collectorRequest(c); err != nil {
		return o, err
	}
	p := c.Float64("hold-min-free")
	if p < 0 || p > 100 {
		return o, fmt.Errorf("%w: --hold-min-free is a percentage between 0 and 100, not %v", errUsage, p)
	}
	o.FS.Hold.MinFree = p / 100
	if o.MemoryLimit, err = sizeOf(c, "memory-limit", "200MiB"); err != nil {
		return o, err
	}
	if o.ReadAhead, err = sizeOf(c, "read-ahead", "4MiB"); err != nil {
		return o, err
	}
	if o.ReadCache, err = sizeOf(c, "read-cache", "32MiB"); err != nil {
		return o, err
	}
	o.FS.Rules, err = rulesOf(c)
	return o, err
}

func runMount(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("%w: mount takes exactly one MOUNTPOINT, got %d arguments", errUsage, c.NArg())
	}
	opts, err := newMountOptions(c)
	if err != nil {
		return err
	}
	mnt, err := filepath.Abs(c.Args().First())
	if err != nil {
		return err
	}
	session, err := keeper.Inherited()
	if err != nil {
		return err
	}
	if session == nil { // the process the user ran: its keeper owns the mountpoint
		if c.Bool("keeper") {
			return runKeeper(c.Context, mnt, opts)
		}
		if err := checkMountpoint(mnt); err != nil {
			return err
		}
	}
	return serve(c, mnt, opts, session)
}

// handlesFile names the keeper's memfd that holds the kernel's file
// handles for every server (fs.NewConnection); unansweredFile the one that
// holds the requests a server has read and not answered, on a kernel that
// cannot send them again (fs.Connection.RecordUnanswered).
const (
	handlesFile    = "handles"
	unansweredFile = "unanswered"
)

// keeperSocket is the keeper's socket in the store directory, on which a
// new `statefs mount` of the store takes its connection over.
const keeperSocket = "keeper.sock"

// runKeeper mounts mnt, or takes over the connection of the keeper that
// serves it from the same store, and serves it with servers that are this
// binary, run again with the same arguments, one after another (package
// keeper).
func runKeeper(ctx context.Context, mnt string, opts mountOptions) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	store, err := filepath.Abs(opts.Store)
	if err != nil {
		return err
	}
	err = keeper.Run(ctx, keeper.Config{
		Mountpoint: mnt,
		Options:    &fs.MountOptions(opts.AllowOther, opts.CacheTimeout, opts.Debug).MountOptions,
		Files:      []string{handlesFile, unansweredFile},
		Socket:     filepath.Join(store, keeperSocket),
		Layout:     fmt.Sprint(fs.ConnectionLayout),
		Vacant:     func() error { return checkMountpoint(mnt) },
		Server: func() *exec.Cmd {
			cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
			return cmd
		},
	})
	if errors.Is(err, keeper.ErrNotRoot) {
		return fmt.Errorf("%w: run statefs mount as root, or pass --keeper=false to serve in one process", err)
	}
	return err
}

// serve serves the store on mnt until SIGTERM or SIGINT, or the mount's
// end: on a connection this process mounts (session nil), or on the one
// its keeper holds.
func serve(c *cli.Context, mnt string, opts mountOptions, session *keeper.Session) error {
	// Catch SIGTERM and SIGINT from here on: one that comes while mounting
	// unmounts as soon as the mount exists, instead of killing the process
	// and leaving a dead mount behind. A server under a keeper leaves
	// SIGINT to the keeper, and SIGTERM makes it leave the connection to
	// the next server.
	signals := make(chan os.Signal, 1)
	if session != nil {
		signal.Ignore(syscall.SIGINT)
		signal.Notify(signals, syscall.SIGTERM)
	} else {
		signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	}
	defer signal.Stop(signals)
	// Without a limit the heap grows to twice what is live before a
	// collection, and badger's flushes and compactions make what is live
	// jump: a soft limit keeps the daemon's peak RSS near it, at no cost in
	// time (make bench reports the peak of every workload).
	if opts.MemoryLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(opts.MemoryLimit)
	}
	if opts.Pprof != "" {
		ln, err := net.Listen("tcp", opts.Pprof)
		if err != nil {
			return fmt.Errorf("--pprof: %w", err)
		}
		// Where the daemon waits matters as much as where it computes:
		// sample contended locks and blocking (about one event in 100,
		// and one blocking per 10 µs spent) for /debug/pprof/mutex and
		// /debug/pprof/block.
		runtime.SetMutexProfileFraction(100)
		runtime.SetBlockProfileRate(10_000)
		go http.Serve(ln, nil) // net/http/pprof registers on the default mux
	}
	var metricsLn net.Listener // taken now, so a bad address changes nothing
	if opts.MetricsAddr != "" {
		var err error
		if metricsLn, err = net.Listen("tcp", opts.MetricsAddr); err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		defer metricsLn.Close()
	}
	var conn *fs.Connection // under a keeper: the kernel's file handles, which every server shares
	var inUse []uint64
	if session != nil {
		var err error
		if conn, err = fs.NewConnection(session.File(handlesFile), session.Generation()); err != nil {
			return err
		}
		inUse = conn.InUse()
		if !keeper.KernelResends() {
			if err := recordUnanswered(conn, session); err != nil {
				return err
			}
		}
	}
	s, unsealed, err := store.OpenKeeping(opts.Store, inUse)
	if err != nil {
		return err
	}
	defer s.Close()
	s.SetReadCache(opts.ReadCache)
	s.SetSealAs(opts.SealAs)
	var m *metrics.Metrics // nil records nothing
	if metricsLn != nil {
		m = metrics.New(s)
	}
	m.SetGCInterval(opts.GCInterval)
	m.SetBuildInfo(version)
	fsOpts := opts.FS
	fsOpts.OnSeal = m.OnSeal
	fsOpts.Version = version
	if conn != nil {
		fsOpts.ConnectedAt = conn.Since()
	}
	fsys, root := fs.New(s, fsOpts, unsealed)
	mountOpts := fs.MountOptions(opts.AllowOther, opts.CacheTimeout, opts.Debug)
	server, served, resumed, err := serveFUSE(mnt, conn.Recording(m.FUSE(fs.NodeFS(root, mountOpts, conn))), &mountOpts.MountOptions, session, conn)
	if err != nil {
		fsys.Shutdown()
		return fmt.Errorf("mounting %s: %w", mnt, err)
	}
	if opts.ReadAhead > 0 {
		if err := fs.SetReadAhead(mnt, uint64(opts.ReadAhead)); err != nil {
			slog.Warn("could not set the mount's read-ahead; the kernel's default stays", "err", err)
		}
	}
	ctl := &control.Server{Store: s, FS: fsys, Mountpoint: mnt, Collected: m.Collected, Scrubbed: m.Scrubbed, Scrubbing: m.Scrubbing}
	if err := ctl.Listen(); err != nil {
		if session == nil {
			server.Unmount()
			<-served
		}
		fsys.Shutdown()
		return err
	}
	defer ctl.Close()
	if metricsLn != nil {
		srv := metrics.NewServer(m, &metrics.Health{Mountpoint: mnt, Store: s.Dir})
		go srv.Serve(metricsLn)
		defer srv.Close()
	}
	if opts.GCInterval > 0 {
		ctx, stop := context.WithCancel(c.Context)
		defer stop()
		go ctl.CollectEvery(ctx, opts.GCInterval, opts.GC)
		slog.Info("collector on", "interval", opts.GCInterval, "grace", opts.GC.Grace, "flink_urls", opts.GC.FlinkURLs,
			"job_result_store", opts.GC.JobResultStore, "not_found_is_gone", opts.GC.NotFoundIsGone,
			"collect_unknown_after", opts.GC.CollectUnknownAfter)
		if len(opts.GC.Oracles()) == 0 {
			slog.Warn("collector on with no oracle: only jobs the operator says are gone (statefs job gone) are collected")
		}
	} else {
		slog.Info("collector off: statefs gc runs it on demand (--gc-interval runs it in the daemon)")
	}
	if opts.ScrubInterval > 0 {
		ctx, stop := context.WithCancel(c.Context)
		defer stop()
		go ctl.ScrubEvery(ctx, opts.ScrubInterval, opts.ScrubRate)
	}
	if session != nil {
		if err := session.Serving(server); err != nil {
			return err
		}
		if session.Resuming() {
			downFor := time.Since(session.DownSince())
			m.SetServer(session.Restarts(), downFor)
			slog.Info("resumed the FUSE connection", "generation", session.Generation(), "restarts", session.Restarts(),
				"down_for", downFor, "resend", string(session.Resent()), "reopened", resumed.Reopened, "lost", resumed.Lost, "failed", resumed.Failed)
		}
	}
	slog.Info("serving", "version", version, "store", s.Dir, "mountpoint", mnt, "pending_seals", len(unsealed),
		"scrub_interval", opts.ScrubInterval, "scrub_rate", opts.ScrubRate, "verify_reads", opts.FS.VerifyReads, "seal_as", cmp.Or(string(opts.SealAs), "auto"))

	select {
	case <-served: // unmounted from outside (umount), or by the keeper
	case sig := <-signals:
		if session != nil {
			restartOnRequest(fsys, ctl)
		}
		slog.Info("unmounting", "signal", sig.String())
		var st unix.Stat_t
		if err := unix.Stat(mnt, &st); err != nil {
			st.Dev = 0
		}
		keeper.Stop(mnt, st.Dev, server.Unmount, served)
	}
	fsys.Shutdown()
	slog.Info("unmounted", "mountpoint", mnt)
	return nil
}

// restartOnRequest ends a server under a keeper on SIGTERM without
// unmounting: the keeper starts the next server on the connection. The
// seals under way finish and the control socket closes; the store stays
// open until the process exits, since go-fuse answers requests until
// then, and the next server opens it as after a crash (DESIGN invariants
// 1 and 2): what the kernel sent this one and it did not answer, the
// kernel sends the next.
func restartOnRequest(fsys *fs.FS, ctl *control.Server) {
	slog.Info("leaving the FUSE connection to the next server (SIGTERM to the server; the keeper starts the next)")
	fsys.Shutdown()
	ctl.Close()
	os.Exit(0)
}

// serveFUSE serves raw on mnt, which go-fuse mounts (session nil), or on
// the connection session inherited from its keeper, whose file handles
// conn holds: a server that resumes the connection opens again those of
// earlier servers before it serves (resumed). served is closed once the
// server has stopped serving and its unmount callbacks, which read the
// index, have returned: only then may the store close (server.Wait returns
// before those callbacks).
func serveFUSE(mnt string, raw fuse.RawFileSystem, opts *fuse.MountOptions, session *keeper.Session, conn *fs.Connection) (server *fuse.Server, served <-chan struct{}, resumed fs.Resumed, err error) {
	if session != nil {
		server, err = session.NewServer(raw, opts)
	} else {
		server, err = fuse.NewServer(raw, mnt, opts)
	}
	if err != nil {
		return nil, nil, resumed, err
	}
	if session != nil && session.Resuming() {
		resumed = conn.Resume()
	}
	if session != nil && session.Resend() == keeper.ResendRefused {
		resumed.Failed = failUnanswered(session, conn)
	} else {
		conn.ClearUnanswered()
	}
	done := make(chan struct{})
	go func() {
		server.Serve()
		close(done)
	}()
	if resumed.Failed > 0 {
		go func() {
			nodes, names := conn.InvalidateUnanswered(server)
			slog.Info("dropped the kernel's caches of what the requests answered with EIO were on", "nodes", nodes, "names", names)
		}()
	}
	if session == nil {
		if err := server.WaitMount(); err != nil {
			return nil, nil, resumed, err
		}
	}
	return server, done, resumed, nil
}

// recordUnanswered makes conn record the requests its server reads until
// it answers them, on a kernel that cannot send them again to the next
// server after a crash (keeper.KernelResends), so that the next one
// answers them with an error instead of leaving their callers waiting.
func recordUnanswered(conn *fs.Connection, session *keeper.Session) error {
	f := session.File(unansweredFile)
	if f == nil {
		slog.Warn("the keeper holds no table of unanswered requests: requests in flight when this server dies will wait until the mount ends")
		return nil
	}
	return conn.RecordUnanswered(f)
}

// failUnanswered answers with EIO the requests the servers before this one
// read and left unanswered, which a kernel that refused to send them again
// waits for, and returns how many it still waited for; the handles that
// releases among them released are released first. EIO says that what
// became of the request is unknown, which is the truth: the dead server
// may have applied it (a write, an append, a rename) before it died. An
// error that invites a blind retry (EINTR, EAGAIN) could apply an append
// twice without the caller knowing.
func failUnanswered(session *keeper.Session, conn *fs.Connection) int {
	if !conn.RecordsUnanswered() {
		slog.Warn("requests in flight when the previous server died are lost: their callers wait until the mount ends")
		return 0
	}
	failed, released := conn.FailUnanswered(func(ids []uint64) int { return session.Fail(ids, syscall.EIO) })
	if failed > 0 {
		slog.Warn("answered with EIO the requests the previous server read and did not answer", "requests", failed, "handles_released", released)
	}
	return failed
}

// checkMountpoint refuses a mountpoint that is missing, not a directory,
// not empty, or a live mount, before anything is touched (a live mount
// that a keeper of the same store serves is taken over before this is
// asked: keeper.Config.Vacant). A dead statefs mount there (its
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
	if isFUSEMount(mnt) {
		return fmt.Errorf("mountpoint %s is already a FUSE mount that answers, and no keeper of this store serves it (umount it first)", mnt)
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
