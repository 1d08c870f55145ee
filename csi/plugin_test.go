package csi_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	spec "github.com/container-storage-interface/spec/lib/go/csi"
	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/statefs/statefs/csi"
	"github.com/statefs/statefs/internal/testenv"
)

// node is a plugin served over gRPC on a unix socket, with the directories
// it works on, all in one temp dir.
type node struct {
	spec.IdentityClient
	spec.NodeClient
	Dir      string // the test's directory: everything below is the test's
	Endpoint string // the plugin's socket, unix:///PATH
	Mount    string // the plugin's --mount
	Backing  string // with a loopback mount, the directory it serves; else empty
	State    string // the plugin's state directory
}

// startPlugin serves a plugin on a plain directory as its mount: enough for
// what is decided before the mount is looked at, and for a mount that does
// not serve.
func startPlugin(t *testing.T) *node {
	t.Helper()
	n := &node{Dir: t.TempDir()}
	n.Mount = filepath.Join(n.Dir, "mnt")
	require.NoError(t, os.Mkdir(n.Mount, 0o755))
	n.serve(t)
	return n
}

// startPluginOnFUSE serves a plugin on a real FUSE mount: go-fuse's
// loopback of a temp dir, served by this process. Every mount below the
// test's directory is detached when the test ends, binds first, so the
// FUSE server can stop even when the test failed half-way.
func startPluginOnFUSE(t *testing.T) *node {
	t.Helper()
	testenv.RequireFUSE(t)
	n := &node{Dir: t.TempDir()}
	n.Mount, n.Backing = filepath.Join(n.Dir, "mnt"), filepath.Join(n.Dir, "backing")
	require.NoError(t, os.Mkdir(n.Mount, 0o755))
	require.NoError(t, os.Mkdir(n.Backing, 0o755))
	root, err := gofs.NewLoopbackRoot(n.Backing)
	require.NoError(t, err)
	server, err := gofs.Mount(n.Mount, root, &gofs.Options{MountOptions: fuse.MountOptions{
		DirectMount: true, FsName: "loopback", Name: "loopback",
	}})
	require.NoError(t, err)
	t.Cleanup(func() {
		detachBinds(t, n.Dir, n.Mount)
		if err := server.Unmount(); err != nil {
			t.Errorf("unmounting the loopback: %v", err)
		}
	})
	n.serve(t)
	return n
}

// serve starts the plugin and connects to it; both stop when the test ends.
func (n *node) serve(t *testing.T) {
	t.Helper()
	n.State = filepath.Join(n.Dir, "store", "csi")
	// A unix socket path has at most 107 bytes; t.TempDir's may be longer.
	sockDir, err := os.MkdirTemp("", "csi-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	endpoint := "unix://" + filepath.Join(sockDir, "csi.sock")
	n.Endpoint = endpoint

	p := &csi.Plugin{NodeID: "node-1", Version: "v-test", Mount: n.Mount, StateDir: n.State}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx, endpoint) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	// Connect once the socket accepts connections: gRPC retries a failed
	// connection only after a backoff of a second.
	require.Eventually(t, func() bool {
		c, err := net.Dial("unix", filepath.Join(sockDir, "csi.sock"))
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 5*time.Millisecond)
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	n.IdentityClient, n.NodeClient = spec.NewIdentityClient(conn), spec.NewNodeClient(conn)
}

// detachBinds detaches every mount below dir except keep, deepest first.
func detachBinds(t *testing.T, dir, keep string) {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		t.Error(err)
		return
	}
	slices.SortFunc(mounts, func(a, b *mountinfo.Info) int { return len(b.Mountpoint) - len(a.Mountpoint) })
	for _, m := range mounts {
		if m.Mountpoint != keep {
			unix.Unmount(m.Mountpoint, unix.MNT_DETACH)
		}
	}
}

// requireCode fails unless err is a gRPC status with code.
func requireCode(t *testing.T, code codes.Code, err error) {
	t.Helper()
	require.Error(t, err)
	st, ok := status.FromError(err)
	require.True(t, ok, "not a gRPC status: %v", err)
	require.Equal(t, code, st.Code(), "%v", err)
	require.NotContains(t, st.Message(), "\n", "one-line errors")
}

func TestIdentity(t *testing.T) {
	n := startPlugin(t)
	ctx := context.Background()

	info, err := n.GetPluginInfo(ctx, &spec.GetPluginInfoRequest{})
	require.NoError(t, err)
	require.Equal(t, csi.DriverName, info.GetName())
	require.Equal(t, "v-test", info.GetVendorVersion())

	caps, err := n.GetPluginCapabilities(ctx, &spec.GetPluginCapabilitiesRequest{})
	require.NoError(t, err)
	require.Empty(t, caps.GetCapabilities(), "no controller service, no topology")

	probe, err := n.Probe(ctx, &spec.ProbeRequest{})
	require.NoError(t, err)
	require.False(t, probe.GetReady().GetValue(), "a plain directory is no daemon's mount")
}

func TestProbeReadyOnFUSEMount(t *testing.T) {
	n := startPluginOnFUSE(t)
	probe, err := n.Probe(context.Background(), &spec.ProbeRequest{})
	require.NoError(t, err)
	require.True(t, probe.GetReady().GetValue())
}

func TestNodeInfoAndCapabilities(t *testing.T) {
	n := startPlugin(t)
	ctx := context.Background()

	info, err := n.NodeGetInfo(ctx, &spec.NodeGetInfoRequest{})
	require.NoError(t, err)
	require.Equal(t, "node-1", info.GetNodeId())

	caps, err := n.NodeGetCapabilities(ctx, &spec.NodeGetCapabilitiesRequest{})
	require.NoError(t, err)
	var got []string
	for _, c := range caps.GetCapabilities() {
		got = append(got, c.GetRpc().GetType().String())
	}
	require.ElementsMatch(t, []string{"GET_VOLUME_STATS", "VOLUME_MOUNT_GROUP"}, got)

	// What is not advertised is not implemented either.
	_, err = n.NodeStageVolume(ctx, &spec.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: filepath.Join(n.Dir, "staging")})
	requireCode(t, codes.Unimplemented, err)
	_, err = n.NodeUnstageVolume(ctx, &spec.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: filepath.Join(n.Dir, "staging")})
	requireCode(t, codes.Unimplemented, err)
	_, err = n.NodeExpandVolume(ctx, &spec.NodeExpandVolumeRequest{VolumeId: "vol-1", VolumePath: filepath.Join(n.Dir, "vol")})
	requireCode(t, codes.Unimplemented, err)
}

func TestSocketPath(t *testing.T) {
	path, err := csi.SocketPath("unix:///csi/csi.sock")
	require.NoError(t, err)
	require.Equal(t, "/csi/csi.sock", path)
	for _, bad := range []string{"", "/csi/csi.sock", "tcp://127.0.0.1:10000", "unix://csi/csi.sock", "unix:csi.sock", "unix://"} {
		_, err := csi.SocketPath(bad)
		require.Error(t, err, bad)
		require.False(t, strings.Contains(err.Error(), "\n"))
	}
}
