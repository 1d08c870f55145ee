// Package csi is statefs's CSI node plugin: it hands each pod its own subtree
// of the node's one statefs mount, so a Flink TaskManager that comes back
// under the same name finds its local state again.
//
// # Volumes
//
// A volume is the directory volumes/<name>/ under the daemon's mountpoint.
// NodePublishVolume creates it if needed and bind-mounts it onto the
// kubelet's target path; NodeUnpublishVolume unmounts it and leaves the tree
// in the store. The name comes from the volume context (see volumeName), so
// it is stable across pod restarts, unlike the CO's volume id of an inline
// volume. There is no controller service: static PersistentVolumes and CSI
// ephemeral inline volumes need none.
//
// # Processes and stale targets
//
// The FUSE daemon (statefs mount) is a process of its own, so restarting the
// plugin leaves every bind working: binds are kernel objects, not the
// plugin's. Restarting the daemon is different: its FUSE connection dies with
// it, and every bind of its mount keeps pointing at the dead connection (any
// access gives ENOTCONN) even after a new daemon mounts the store again. So
// the plugin keeps one small record per published target in its state
// directory (in the store, so it survives a plugin restart; see
// publications) and, on start and periodically, binds every stale target
// again once the daemon's mount answers (see RebindStale). The records are
// all the state there is; the kernel's mount table says the rest.
package csi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"runtime/debug"
	"sync"
	"time"

	spec "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DriverName is the plugin's name, as the CSIDriver object and the
// PersistentVolumes that use it spell it.
const DriverName = "statefs.csi.statefs.io"

// Plugin serves the CSI identity and node services for one node. Its fields
// are set before Serve and not changed after. All of its methods are safe
// for concurrent use: those that change a target hold one lock, since each
// looks at the target and then changes it.
type Plugin struct {
	spec.UnimplementedIdentityServer
	spec.UnimplementedNodeServer

	NodeID   string        // the node's name, as the CO knows it
	Version  string        // the binary's version, for GetPluginInfo
	Mount    string        // the daemon's mountpoint; volumes live under Mount/volumes
	StateDir string        // where the publication records are kept (in the store)
	Rebind   time.Duration // how often RebindStale runs while serving (0: only at start)

	mu   sync.Mutex // held by the calls that change targets
	down string     // why the mount was not serving at the last rebind (rebind goroutine only), to log changes once
}

var (
	_ = (spec.IdentityServer)((*Plugin)(nil))
	_ = (spec.NodeServer)((*Plugin)(nil))
)

// SocketPath returns the path of the unix socket a CSI endpoint such as
// unix:///csi/csi.sock names. Only unix endpoints are supported: the CO
// reaches node plugins through a socket on the node.
func SocketPath(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "unix" || u.Host != "" || u.Path == "" || u.Path[0] != '/' {
		return "", fmt.Errorf("endpoint %q is not unix:///ABSOLUTE/PATH", endpoint)
	}
	return u.Path, nil
}

// Serve listens on endpoint and serves until ctx is done. A socket left
// behind by an earlier run is replaced. Stale targets are bound again at
// start and every Rebind.
func (p *Plugin) Serve(ctx context.Context, endpoint string) error {
	path, err := SocketPath(endpoint)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the old socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(serveCall))
	spec.RegisterIdentityServer(srv, p)
	spec.RegisterNodeServer(srv, p)

	done := make(chan struct{})
	defer close(done)
	go func() {
		p.rebindStale()
		var tick <-chan time.Time
		if p.Rebind > 0 {
			t := time.NewTicker(p.Rebind)
			defer t.Stop()
			tick = t.C
		}
		for {
			select {
			case <-ctx.Done():
				stopped := make(chan struct{})
				go func() { srv.GracefulStop(); close(stopped) }()
				select {
				case <-stopped:
				case <-time.After(5 * time.Second):
					srv.Stop() // a call hangs, e.g. on a FUSE mount that does not answer
				}
				return
			case <-done:
				return
			case <-tick:
				p.rebindStale()
			}
		}
	}()
	slog.Info("serving CSI", "driver", DriverName, "endpoint", endpoint, "node", p.NodeID, "mount", p.Mount)
	return srv.Serve(ln)
}

// rebindStale runs RebindStale and logs what it did, and when the daemon's
// mount stops or starts serving.
func (p *Plugin) rebindStale() {
	n, err := p.RebindStale()
	var down *notServingError
	switch {
	case errors.As(err, &down):
		if p.down != err.Error() {
			slog.Warn("the statefs mount is not serving; stale targets wait for it", "err", err)
		}
		p.down = err.Error()
		return
	case err != nil:
		slog.Error("binding stale targets again", "err", err)
	case n > 0:
		slog.Info("bound stale targets again", "count", n)
	}
	if p.down != "" {
		slog.Info("the statefs mount serves again", "mount", p.Mount)
		p.down = ""
	}
}

// serveCall logs failed calls and turns a panic into an Internal error,
// so that no request brings the plugin down.
func serveCall(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			slog.Error("panic in CSI call", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
			resp, err = nil, status.Errorf(codes.Internal, "%s: internal error", info.FullMethod)
		}
		if err != nil {
			slog.Warn("CSI call failed", "method", info.FullMethod, "took", time.Since(start), "err", err)
		} else {
			slog.Debug("CSI call", "method", info.FullMethod, "took", time.Since(start))
		}
	}()
	return handler(ctx, req)
}
