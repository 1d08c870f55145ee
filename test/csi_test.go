package test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	spec "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/moby/sys/mountinfo"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// csiPlugin is one running `statefs csi` serving the volumes of a Mount.
type csiPlugin struct {
	t        testing.TB
	endpoint string
	args     []string
	process
	spec.IdentityClient
	spec.NodeClient
}

// startCSI runs `statefs csi` on m, with a socket in a fresh temp dir and
// extra arguments, and connects to it once it serves. It is stopped when
// the test ends.
func startCSI(t testing.TB, m *Mount, extra ...string) *csiPlugin {
	t.Helper()
	// A unix socket path has at most 107 bytes; t.TempDir's may be longer.
	sockDir, err := os.MkdirTemp("", "csi-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	p := &csiPlugin{t: t, endpoint: "unix://" + filepath.Join(sockDir, "csi.sock")}
	p.args = []string{"csi", "--endpoint", p.endpoint, "--node-id", "node-1",
		"--store", m.Store, "--mount", m.Dir, "--rebind-interval", "100ms"}
	p.args = append(p.args, extra...)
	p.Start()
	t.Cleanup(p.Stop)
	return p
}

// Start runs the plugin and waits until its socket accepts connections.
func (p *csiPlugin) Start() {
	p.t.Helper()
	p.launch(p.t, exec.Command(binary, p.args...))
	socket := strings.TrimPrefix(p.endpoint, "unix://")
	p.awaitServing(p.t, "statefs csi", func() bool { return answers(socket) })
	conn, err := grpc.NewClient(p.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(p.t, err)
	p.t.Cleanup(func() { conn.Close() })
	p.IdentityClient, p.NodeClient = spec.NewIdentityClient(conn), spec.NewNodeClient(conn)
}

// Stop sends SIGTERM and checks that the plugin exits 0.
func (p *csiPlugin) Stop() {
	p.t.Helper()
	if p.cmd == nil {
		return
	}
	if err := p.terminate(15 * time.Second); err != nil {
		p.t.Errorf("statefs csi %v\n%s", err, p.log)
	}
}

func mountRequest(id, target string, vc map[string]string) *spec.NodePublishVolumeRequest {
	return &spec.NodePublishVolumeRequest{
		VolumeId:   id,
		TargetPath: target,
		VolumeCapability: &spec.VolumeCapability{
			AccessType: &spec.VolumeCapability_Mount{Mount: &spec.VolumeCapability_MountVolume{}},
			AccessMode: &spec.VolumeCapability_AccessMode{Mode: spec.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
		VolumeContext: vc,
	}
}

// TestCSIVolumesSurviveRestarts drives the real plugin over gRPC on a real
// mount through the sequence the design promises to survive: two pods'
// volumes published, the plugin restarted (the binds keep working), the
// daemon killed and started again (the binds go stale, and the plugin binds
// them again with the data intact), then unpublished and published again.
func TestCSIVolumesSurviveRestarts(t *testing.T) {
	m := mountFS(t)
	pods := t.TempDir()
	// Cleanups run last-registered first: the plugin stops, the binds go,
	// then the daemon unmounts.
	t.Cleanup(func() { detachAllUnder(t, pods) })
	p := startCSI(t, m)
	ctx := context.Background()

	probe, err := p.Probe(ctx, &spec.ProbeRequest{})
	require.NoError(t, err)
	require.True(t, probe.GetReady().GetValue(), "the daemon serves")

	a, b := filepath.Join(pods, "a", "vol"), filepath.Join(pods, "b", "vol")
	require.NoError(t, os.Mkdir(filepath.Dir(a), 0o750))
	require.NoError(t, os.Mkdir(filepath.Dir(b), 0o750))
	pubA := mountRequest("pv-a", a, map[string]string{"volumeName": "tm-a"})
	pubB := mountRequest("csi-0f3e", b, map[string]string{
		"csi.storage.k8s.io/ephemeral": "true", "csi.storage.k8s.io/pod.name": "flink-taskmanager-1",
	})
	for _, req := range []*spec.NodePublishVolumeRequest{pubA, pubB} {
		_, err := p.NodePublishVolume(ctx, req)
		require.NoError(t, err, req.GetVolumeId())
	}

	stateA, stateB := pseudoRandom(300<<10, 1), pseudoRandom(5000, 2)
	writeSynced(t, filepath.Join(a, "tm_a", "state"), stateA)
	writeSynced(t, filepath.Join(b, "tm_b", "state"), stateB)
	requireContent(t, m.Path("volumes", "tm-a", "tm_a", "state"), stateA)
	requireContent(t, m.Path("volumes", "flink-taskmanager-1", "tm_b", "state"), stateB)
	requireVolumeHolds(t, a, "tm_a")
	requireVolumeHolds(t, b, "tm_b")

	// The plugin restarts: the binds are the kernel's, not its own, and
	// work while it is down.
	p.Stop()
	requireContent(t, filepath.Join(a, "tm_a", "state"), stateA)
	writeSynced(t, filepath.Join(b, "tm_b", "while-the-plugin-was-down"), []byte("b"))
	p.Start()
	_, err = p.NodePublishVolume(ctx, pubA)
	require.NoError(t, err, "publishing again after a restart")
	require.Equal(t, 1, mountCount(t, a))
	requireContent(t, filepath.Join(b, "tm_b", "state"), stateB)

	// The daemon dies: every bind of its mount goes stale.
	m.Kill()
	for _, file := range []string{filepath.Join(a, "tm_a", "state"), filepath.Join(b, "tm_b", "state")} {
		_, err := os.ReadFile(file)
		require.True(t, errors.Is(err, syscall.ENOTCONN), "stale %s: %v", file, err)
	}
	probe, err = p.Probe(ctx, &spec.ProbeRequest{})
	require.NoError(t, err)
	require.False(t, probe.GetReady().GetValue(), "no daemon, not ready")
	_, err = p.NodeGetVolumeStats(ctx, &spec.NodeGetVolumeStatsRequest{VolumeId: "pv-a", VolumePath: a})
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)

	// A stale target unpublishes like a live one.
	unpublishB := &spec.NodeUnpublishVolumeRequest{VolumeId: pubB.GetVolumeId(), TargetPath: b}
	_, err = p.NodeUnpublishVolume(ctx, unpublishB)
	require.NoError(t, err)
	require.Equal(t, 0, mountCount(t, b))
	require.NoDirExists(t, b)

	// The daemon comes back, and the plugin binds the stale target again;
	// the unpublished one it leaves alone. Between taking the stale bind
	// away and binding again, the target is a plain directory: statfs
	// works there too, so the wait is for the bind.
	m.Start()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var st unix.Statfs_t
		err := unix.Statfs(a, &st)
		if err == nil && mountCount(t, a) == 1 {
			break
		}
		require.True(t, err == nil || errors.Is(err, syscall.ENOTCONN), "%v", err)
		if time.Now().After(deadline) {
			t.Fatalf("%s still stale 20s after the daemon came back\n%s", a, p.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, 1, mountCount(t, a), "the stale bind is gone, one live bind is there")
	require.NoDirExists(t, b)
	_, err = p.NodePublishVolume(ctx, pubB)
	require.NoError(t, err)
	requireContent(t, filepath.Join(a, "tm_a", "state"), stateA)
	requireContent(t, filepath.Join(b, "tm_b", "state"), stateB)
	requireContent(t, filepath.Join(b, "tm_b", "while-the-plugin-was-down"), []byte("b"))
	requireVolumeHolds(t, a, "tm_a")
	requireVolumeHolds(t, b, "tm_b")
	writeSynced(t, filepath.Join(a, "tm_a", "after"), []byte("written after the restart"))
	requireContent(t, m.Path("volumes", "tm-a", "tm_a", "after"), []byte("written after the restart"))

	stats, err := p.NodeGetVolumeStats(ctx, &spec.NodeGetVolumeStatsRequest{VolumeId: "pv-a", VolumePath: a})
	require.NoError(t, err)
	for _, u := range stats.GetUsage() {
		switch u.GetUnit() {
		case spec.VolumeUsage_BYTES:
			require.EqualValues(t, len(stateA)+len("written after the restart"), u.GetUsed())
		case spec.VolumeUsage_INODES:
			require.EqualValues(t, 4, u.GetUsed(), "the root, tm_a, state, after")
		}
	}

	// Unpublished, the tree stays; published again, it shows the data.
	for _, req := range []*spec.NodePublishVolumeRequest{pubA, pubB, pubA} {
		_, err := p.NodeUnpublishVolume(ctx, &spec.NodeUnpublishVolumeRequest{VolumeId: req.GetVolumeId(), TargetPath: req.GetTargetPath()})
		require.NoError(t, err)
		require.Equal(t, 0, mountCount(t, req.GetTargetPath()))
		require.NoDirExists(t, req.GetTargetPath())
	}
	requireContent(t, m.Path("volumes", "tm-a", "tm_a", "state"), stateA)
	_, err = p.NodePublishVolume(ctx, pubA)
	require.NoError(t, err)
	requireContent(t, filepath.Join(a, "tm_a", "after"), []byte("written after the restart"))
	_, err = p.NodeUnpublishVolume(ctx, &spec.NodeUnpublishVolumeRequest{VolumeId: "pv-a", TargetPath: a})
	require.NoError(t, err)
}

// TestCSIVolumesAreIsolated: two volumes of one mount never see each
// other's files, by name or by content, and `..` from a target does not
// reach the other: a bind of volumes/<name> has no parent inside the mount,
// so the kernel walks up from its root to the directory it is mounted on.
func TestCSIVolumesAreIsolated(t *testing.T) {
	m := mountFS(t)
	pods := t.TempDir()
	t.Cleanup(func() { detachAllUnder(t, pods) })
	p := startCSI(t, m)
	ctx := context.Background()

	a, b := filepath.Join(pods, "a", "vol"), filepath.Join(pods, "b", "vol")
	pubA := mountRequest("pv-a", a, map[string]string{"volumeName": "tm-a"})
	pubB := mountRequest("pv-b", b, map[string]string{"volumeName": "tm-b"})
	for _, req := range []*spec.NodePublishVolumeRequest{pubA, pubB} {
		require.NoError(t, os.Mkdir(filepath.Dir(req.GetTargetPath()), 0o750))
		_, err := p.NodePublishVolume(ctx, req)
		require.NoError(t, err, req.GetVolumeId())
	}

	// The same path in both volumes, two files.
	writeSynced(t, filepath.Join(a, "tm_1", "state"), []byte("a's state"))
	writeSynced(t, filepath.Join(b, "tm_1", "state"), []byte("b's state"))
	writeSynced(t, filepath.Join(a, "only-a"), []byte("a"))
	requireContent(t, filepath.Join(a, "tm_1", "state"), []byte("a's state"))
	requireContent(t, filepath.Join(b, "tm_1", "state"), []byte("b's state"))
	requireContent(t, m.Path("volumes", "tm-a", "tm_1", "state"), []byte("a's state"))
	requireContent(t, m.Path("volumes", "tm-b", "tm_1", "state"), []byte("b's state"))
	requireVolumeHolds(t, a, "tm_1", "only-a")
	requireVolumeHolds(t, b, "tm_1")

	var mnt unix.Stat_t
	require.NoError(t, unix.Stat(m.Dir, &mnt))
	for _, target := range []string{a, b} {
		// Resolved by the kernel from a descriptor of the target's root,
		// not cleaned lexically as filepath.Join would.
		root, err := unix.Open(target, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		defer unix.Close(root)
		var up, parent unix.Stat_t
		require.NoError(t, unix.Fstatat(root, "..", &up, 0))
		require.NoError(t, unix.Stat(filepath.Dir(target), &parent))
		require.Equal(t, [2]uint64{parent.Dev, parent.Ino}, [2]uint64{up.Dev, up.Ino}, "%s/.. is the directory it is mounted on", target)
		require.NotEqual(t, mnt.Dev, up.Dev, "%s/.. is outside the statefs mount", target)
		for _, rel := range []string{"../tm-a", "../tm-b", "tm_1/../../tm-b", "../../tm-b", "../volumes/tm-b", "../../volumes/tm-b"} {
			fd, err := unix.Openat(root, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			require.ErrorIs(t, err, syscall.ENOENT, "%s/%s", target, rel)
		}
	}
	// A relative symbolic link resolves from where the volume is bound, too.
	require.NoError(t, os.Symlink("../tm-b/tm_1/state", filepath.Join(a, "link")))
	_, err := os.ReadFile(filepath.Join(a, "link"))
	require.ErrorIs(t, err, syscall.ENOENT)

	// Unpublishing one leaves the other as it was.
	_, err = p.NodeUnpublishVolume(ctx, &spec.NodeUnpublishVolumeRequest{VolumeId: "pv-a", TargetPath: a})
	require.NoError(t, err)
	requireContent(t, filepath.Join(b, "tm_1", "state"), []byte("b's state"))
	requireVolumeHolds(t, b, "tm_1")
	_, err = p.NodeUnpublishVolume(ctx, &spec.NodeUnpublishVolumeRequest{VolumeId: "pv-b", TargetPath: b})
	require.NoError(t, err)
}

// requireVolumeHolds stops the test unless the volume bound at dir holds
// exactly names, in any order: its own volume's files, none of another's.
func requireVolumeHolds(t testing.TB, dir string, names ...string) {
	t.Helper()
	got, err := readDirNames(dir)
	require.NoError(t, err)
	require.ElementsMatch(t, names, got, "%s holds only its own volume's files", dir)
}

// The plugin's liveness endpoint (--health-addr) answers 200 while the
// plugin answers on its socket, also while the daemon is down (Probe says
// not ready then: restarting the plugin would not bring the daemon back),
// and 503 once its socket is gone.
func TestCSIPluginLiveness(t *testing.T) {
	m := mountFS(t)
	addr := freeAddr(t)
	p := startCSI(t, m, "--health-addr", addr)
	ctx := context.Background()
	code, body := get(t, addr, "/healthz")
	require.Equal(t, http.StatusOK, code, "GET /healthz of a serving plugin: %s", body)

	m.Kill()
	probe, err := p.Probe(ctx, &spec.ProbeRequest{})
	require.NoError(t, err)
	require.False(t, probe.GetReady().GetValue(), "ready with its daemon killed")
	code, body = get(t, addr, "/healthz")
	require.Equal(t, http.StatusOK, code, "GET /healthz of a plugin whose daemon is down: %s", body)
	m.Start()

	require.NoError(t, os.Remove(strings.TrimPrefix(p.endpoint, "unix://")))
	code, body = get(t, addr, "/healthz")
	require.Equal(t, http.StatusServiceUnavailable, code, "GET /healthz of a plugin whose socket is gone: %s", body)
	require.Contains(t, body, "does not answer")
}

// flinkUser is the user and group Flink's image runs Flink as.
const flinkUser = 9999

// A TaskManager that does not run as root (Flink's image runs it as 9999)
// writes and reads its volume, on a daemon started with the flags the node
// DaemonSet gives it: without --allow-other, FUSE refuses every user but
// the one that mounted, whatever the modes say. The volume's bind keeps the
// mount's nosuid and nodev.
func TestCSIVolumeServesANonRootTaskManager(t *testing.T) {
	m := mountFS(t, nodeDaemonFlags(t)...)
	pods := t.TempDir()
	t.Cleanup(func() { detachAllUnder(t, pods) })
	p := startCSI(t, m)

	// The kubelet passes the pod's fsGroup (fsGroupPolicy File), as the
	// CSI example's pod sets it.
	target := filepath.Join(pods, "tm-0", "vol")
	require.NoError(t, os.Mkdir(filepath.Dir(target), 0o750))
	req := mountRequest("csi-9f1c", target, map[string]string{
		"csi.storage.k8s.io/ephemeral": "true", "csi.storage.k8s.io/pod.name": "flink-taskmanager-0",
	})
	req.VolumeCapability.GetMount().VolumeMountGroup = strconv.Itoa(flinkUser)
	_, err := p.NodePublishVolume(context.Background(), req)
	require.NoError(t, err)
	openUp(t, target)
	// The bind keeps the FUSE mount's nosuid and nodev: a setuid file or a
	// device node in a volume gives its pod nothing.
	mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(target))
	require.NoError(t, err)
	require.Len(t, mounts, 1, "the mounts on %s", target)
	for _, opt := range []string{"nosuid", "nodev"} {
		require.Contains(t, strings.Split(mounts[0].Options, ","), opt, "the options of the bind on %s", target)
	}

	tm := exec.Command("sh", "-c", `set -e
mkdir -p "$1/tm_flink-taskmanager-0/blobStorage"
echo state > "$1/tm_flink-taskmanager-0/blobStorage/blob"
cat "$1/tm_flink-taskmanager-0/blobStorage/blob"
ls "$1"`, "sh", target)
	tm.Dir = "/"
	tm.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: flinkUser, Gid: flinkUser}}
	out, err := tm.CombinedOutput()
	require.NoError(t, err, "the TaskManager as uid %d on a daemon run as `statefs mount %s`: %s",
		flinkUser, strings.Join(m.Args, " "), out)
	require.Equal(t, "state\ntm_flink-taskmanager-0\n", string(out))
	requireContent(t, m.Path("volumes", "flink-taskmanager-0", "tm_flink-taskmanager-0", "blobStorage", "blob"), []byte("state\n"))
	_, err = p.NodeUnpublishVolume(context.Background(), &spec.NodeUnpublishVolumeRequest{VolumeId: "csi-9f1c", TargetPath: target})
	require.NoError(t, err)
}

// nodeDaemonManifest is the plain manifest of the node DaemonSet, the
// chart's rendering, held to it in deploy/.
const nodeDaemonManifest = "../deploy/kubernetes/daemonset.yaml"

// nodeDaemon is the node DaemonSet's daemon container, as the plain
// manifest has it.
func nodeDaemon(t *testing.T) corev1.Container {
	t.Helper()
	b, err := os.ReadFile(nodeDaemonManifest)
	require.NoError(t, err)
	var ds appsv1.DaemonSet
	require.NoError(t, yaml.UnmarshalStrict(b, &ds), nodeDaemonManifest)
	i := slices.IndexFunc(ds.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "statefs" })
	require.GreaterOrEqual(t, i, 0, "%s has no container statefs", nodeDaemonManifest)
	return ds.Spec.Template.Spec.Containers[i]
}

// nodeDaemonFlags are the flags of statefs mount in the node DaemonSet's
// daemon container, as the plain manifest has them (the chart's rendering,
// held to it in deploy/), less the store, the metrics address and the
// mountpoint, which are the node's and which the test gives.
func nodeDaemonFlags(t *testing.T) []string {
	t.Helper()
	args := nodeDaemon(t).Args
	cmd := slices.Index(args, "mount")
	require.True(t, cmd >= 0 && len(args) > cmd+1, "%s: the daemon runs statefs %q, not statefs mount", nodeDaemonManifest, args)
	var flags []string
	for _, a := range args[cmd+1 : len(args)-1] {
		name, value, _ := strings.Cut(a, "=")
		require.True(t, strings.HasPrefix(name, "--"), "%s: daemon argument %q is not a --flag or --flag=value", nodeDaemonManifest, a)
		switch {
		case name == "--store" || name == "--metrics-addr":
			continue
		case strings.HasPrefix(value, "/"):
			t.Fatalf("%s: daemon flag %s names a path of the node: the test must give it one of its own", nodeDaemonManifest, a)
		}
		flags = append(flags, a)
	}
	return flags
}
