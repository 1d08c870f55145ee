package test

import (
	"context"
	"flag"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	spec "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
)

// TestCSISanity runs the CSI sanity suite (csi-test's pkg/sanity) against
// `statefs csi` on a real mount, over its unix socket, as the kubelet
// would call it.
//
// Skipped, with the reason:
//   - every "[Controller Server]" spec (volumes, snapshots, expansion,
//     modification, health): the controller service is optional in the spec,
//     and statefs has none (README, "Per node (CSI)", "Supported"); those
//     specs would only test staticVolumes below;
//   - by the suite itself, what the plugin does not advertise: staging,
//     node expansion, volume and storage health, single-node-multi-writer,
//     the group controller, and the node lifecycle specs ("should work",
//     "should be idempotent"), which it runs only for a plugin with a
//     controller service. TestCSIVolumesSurviveRestarts and the csi package's
//     tests cover publishing the same volume again.
func TestCSISanity(t *testing.T) {
	if flag := ginkgoRefused(); flag != "" {
		t.Skipf("Ginkgo runs under go test only without %s", flag)
	}
	m := mountFS(t)
	targets := t.TempDir()
	t.Cleanup(func() { detachAllUnder(t, targets) })
	p := startCSI(t, m)

	controller := serveStaticVolumes(t, p)
	config := sanity.NewTestConfig()
	config.Address = p.endpoint
	config.ControllerAddress = controller
	config.TargetPath = filepath.Join(targets, "target")
	config.StagingPath = filepath.Join(targets, "staging")

	sc := sanity.GinkgoTest(&config)
	defer sc.Finalize()
	gomega.RegisterFailHandler(ginkgo.Fail)
	suite, reporter := ginkgo.GinkgoConfiguration()
	suite.SkipStrings = append(suite.SkipStrings, `\[Controller Server\]`)
	suite.Timeout = 3 * time.Minute
	reporter.NoColor = true // go test's output is a log, not a terminal
	ginkgo.RunSpecs(t, "statefs CSI sanity", suite, reporter)
	// Ginkgo keeps catching SIGINT and SIGTERM after its suite ends, so
	// the test binary would no longer stop on them.
	signal.Reset(os.Interrupt, syscall.SIGTERM)
}

// ginkgoRefused names the go test flag given, if any, for which Ginkgo
// would exit the whole test binary rather than run the suite: a -count
// other than 1 (it runs one suite per process), or -parallel.
func ginkgoRefused() string {
	var refused string
	flag.Visit(func(f *flag.Flag) {
		switch {
		case f.Name == "test.count" && f.Value.String() != "1":
			refused = "-count=" + f.Value.String()
		case f.Name == "test.parallel":
			refused = "-parallel"
		}
	})
	return refused
}

// staticVolumes stands in for the cluster admin who writes a static
// PersistentVolume: the suite's node specs get their volumes from a
// controller's CreateVolume, which statefs does not have. A volume's handle
// is its name and its attributes name its tree (volumeName), as in a static
// PersistentVolume; NodePublishVolume creates the tree. Deleting one leaves
// its tree: that is the admin's call too. Identity calls go to the plugin,
// which the suite asks on this connection as well.
type staticVolumes struct {
	spec.UnimplementedControllerServer
	spec.UnimplementedIdentityServer
	plugin spec.IdentityClient
}

// serveStaticVolumes serves a staticVolumes for plugin on a unix socket
// until the test ends, and returns its endpoint.
func serveStaticVolumes(t *testing.T, plugin *csiPlugin) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi-pv-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "controller.sock")
	ln, err := net.Listen("unix", socket)
	require.NoError(t, err)
	srv := grpc.NewServer()
	s := &staticVolumes{plugin: plugin.IdentityClient}
	spec.RegisterControllerServer(srv, s)
	spec.RegisterIdentityServer(srv, s)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return "unix://" + socket
}

func (s *staticVolumes) CreateVolume(_ context.Context, req *spec.CreateVolumeRequest) (*spec.CreateVolumeResponse, error) {
	return &spec.CreateVolumeResponse{Volume: &spec.Volume{
		VolumeId:      req.GetName(),
		VolumeContext: map[string]string{"volumeName": req.GetName()},
	}}, nil
}

func (s *staticVolumes) DeleteVolume(context.Context, *spec.DeleteVolumeRequest) (*spec.DeleteVolumeResponse, error) {
	return &spec.DeleteVolumeResponse{}, nil
}

func (s *staticVolumes) GetPluginInfo(ctx context.Context, req *spec.GetPluginInfoRequest) (*spec.GetPluginInfoResponse, error) {
	return s.plugin.GetPluginInfo(ctx, req)
}

func (s *staticVolumes) GetPluginCapabilities(ctx context.Context, req *spec.GetPluginCapabilitiesRequest) (*spec.GetPluginCapabilitiesResponse, error) {
	return s.plugin.GetPluginCapabilities(ctx, req)
}

func (s *staticVolumes) Probe(ctx context.Context, req *spec.ProbeRequest) (*spec.ProbeResponse, error) {
	return s.plugin.Probe(ctx, req)
}
