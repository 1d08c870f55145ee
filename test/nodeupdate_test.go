package test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An update of the node DaemonSet as the chart makes it (README, "Upgrading
// on Kubernetes"), played on this machine: the old pod's daemon runs with
// the chart's flags; the new pod's daemon, the same command line, starts
// beside it and takes the FUSE connection over through the store; the
// chart's liveness probe of the daemon, asked through the mount, passes in
// the old pod once it has handed over; its readiness probe passes while the
// old pod's store takes no new files, and fails once it has handed over
// (the controller deletes an old pod that is not ready, handed over or
// not, as soon as its new pod exists); SIGTERM to the old daemon, as the
// DaemonSet's deletion of the old pod sends it, exits 0 and leaves the mount
// served, a file held open for writing across it whole; and the probe fails
// once no mount is there. What only a cluster shows: the pods' mount
// namespaces, the mount's propagation to the host, and the controller's
// order.
func TestNodeDaemonUpdateHandsOver(t *testing.T) {
	flags := nodeDaemonFlags(t)
	// Each pod's daemon serves its probes on the same port of its own
	// network; here, on ports of their own.
	oldAddr := freeAddr(t)
	old := mountFS(t, append(slices.Clone(flags), "--metrics-addr", oldAddr)...)
	live := nodeLivenessProbe(t, old.Dir)
	require.NoError(t, live(), "the liveness probe of a daemon that serves")
	held, err := os.Create(old.Path("held"))
	require.NoError(t, err)
	defer held.Close()
	_, err = held.WriteString("before the update\n")
	require.NoError(t, err)
	require.NoError(t, held.Sync())

	// The old pod stays ready while its store takes no new files: were it
	// not, the controller would delete it before the hand-over, and its
	// keeper would unmount.
	ready := nodeReadinessProbe(t, oldAddr)
	require.NoError(t, ready(), "the readiness probe of a daemon that serves")
	if err := setImmutable(old.Store, true); err != nil {
		t.Fatalf("chattr +i %s: %v", old.Store, err)
	}
	notReady := ready()
	require.NoError(t, setImmutable(old.Store, false))
	require.NoError(t, notReady, "the readiness probe of a daemon whose store takes no new files")

	taker := &Mount{t: t, Store: old.Store, Dir: old.Dir, Args: append(slices.Clone(flags), "--metrics-addr", freeAddr(t))}
	taker.Start()
	t.Cleanup(func() {
		if taker.cmd != nil {
			taker.Unmount()
		}
	})
	waitLogLine(t, taker, 20*time.Second, "took the FUSE connection over from its keeper", fmt.Sprintf("from_pid=%d", old.cmd.Process.Pid))
	waitLogLine(t, old, 20*time.Second, "handed the FUSE connection over")
	// The old pod's daemon serves no /healthz of its own any more: a probe
	// of it would have the kubelet restart the pod, whose new daemon would
	// take the connection back. The chart's probe asks the mount.
	client := &http.Client{Timeout: 5 * time.Second}
	if resp, err := client.Get("http://" + oldAddr + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("the old daemon, which handed its connection over, still answers /healthz: %s", resp.Status)
	}
	require.NoError(t, live(), "the liveness probe of the old pod, whose daemon handed its connection over")
	require.Error(t, ready(), "the readiness probe of the old pod, whose daemon handed its connection over")

	require.NoError(t, old.terminate(20*time.Second), "the old daemon, which handed its connection over, after SIGTERM")
	require.True(t, isMounted(taker.Dir), "%s is not mounted once the old daemon exited", taker.Dir)
	require.NoError(t, live(), "the liveness probe once the old daemon exited")
	_, err = held.WriteString("after the update\n")
	require.NoError(t, err)
	require.NoError(t, held.Sync())
	require.NoError(t, held.Close())
	requireContent(t, taker.Path("held"), []byte("before the update\nafter the update\n"))

	taker.Unmount()
	require.Error(t, live(), "the liveness probe of a mountpoint with no mount")
}

// nodeReadinessProbe is the node DaemonSet's readiness probe of its daemon,
// as the plain manifest has it, asked of the daemon whose metrics are served
// at addr: a func that runs it within the probe's timeout and returns its
// failure.
func nodeReadinessProbe(t *testing.T, addr string) func() error {
	t.Helper()
	probe := nodeDaemon(t).ReadinessProbe
	require.True(t, probe != nil && probe.HTTPGet != nil, "%s: the daemon's readiness probe is not a GET: %+v", nodeDaemonManifest, probe)
	client := &http.Client{Timeout: time.Duration(probe.TimeoutSeconds) * time.Second}
	url := "http://" + addr + probe.HTTPGet.Path
	return func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			body, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("GET %s: %s %s", url, resp.Status, body)
		}
		return nil
	}
}

// nodeLivenessProbe is the node DaemonSet's liveness probe of its daemon, as
// the plain manifest has it, asked of mountpoint mnt instead of the node's:
// a func that runs it within the probe's timeout and returns its failure.
func nodeLivenessProbe(t *testing.T, mnt string) func() error {
	t.Helper()
	daemon := nodeDaemon(t)
	probe := daemon.LivenessProbe
	require.True(t, probe != nil && probe.Exec != nil, "%s: the daemon's liveness probe is not a command: %+v", nodeDaemonManifest, probe)
	cmd := slices.Clone(probe.Exec.Command)
	nodeMnt := daemon.Args[len(daemon.Args)-1]
	i := slices.Index(cmd, nodeMnt)
	require.GreaterOrEqual(t, i, 0, "%s: the liveness probe %q does not name the daemon's mountpoint %s", nodeDaemonManifest, cmd, nodeMnt)
	cmd[i] = mnt
	timeout := time.Duration(probe.TimeoutSeconds) * time.Second
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if out, err := exec.CommandContext(ctx, cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%q: %w %s", cmd, err, out)
		}
		return nil
	}
}
