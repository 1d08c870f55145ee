package csi_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	spec "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
)

// publishRequest asks to publish volume id at target with the volume
// context vc, as a writable mount volume.
func publishRequest(id, target string, vc map[string]string) *spec.NodePublishVolumeRequest {
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

func TestPublishRejectsBadRequests(t *testing.T) {
	n := startPlugin(t)
	target := filepath.Join(n.Dir, "pod", "vol")
	good := func() *spec.NodePublishVolumeRequest {
		return publishRequest("vol-1", target, map[string]string{"volumeName": "tm-1"})
	}
	cases := map[string]func(r *spec.NodePublishVolumeRequest){
		"no volume id":    func(r *spec.NodePublishVolumeRequest) { r.VolumeId = "" },
		"no target":       func(r *spec.NodePublishVolumeRequest) { r.TargetPath = "" },
		"relative target": func(r *spec.NodePublishVolumeRequest) { r.TargetPath = "pod/vol" },
		"root target":     func(r *spec.NodePublishVolumeRequest) { r.TargetPath = "/" },
		"no capability":   func(r *spec.NodePublishVolumeRequest) { r.VolumeCapability = nil },
		"no access type":  func(r *spec.NodePublishVolumeRequest) { r.VolumeCapability.AccessType = nil },
		"no access mode":  func(r *spec.NodePublishVolumeRequest) { r.VolumeCapability.AccessMode = nil },
		"unknown mode": func(r *spec.NodePublishVolumeRequest) {
			r.VolumeCapability.AccessMode.Mode = spec.VolumeCapability_AccessMode_UNKNOWN
		},
		"mount flag":        func(r *spec.NodePublishVolumeRequest) { r.VolumeCapability.GetMount().MountFlags = []string{"noexec"} },
		"non-numeric group": func(r *spec.NodePublishVolumeRequest) { r.VolumeCapability.GetMount().VolumeMountGroup = "flink" },
		"negative group":    func(r *spec.NodePublishVolumeRequest) { r.VolumeCapability.GetMount().VolumeMountGroup = "-1" },
		"empty volume name": func(r *spec.NodePublishVolumeRequest) { r.VolumeContext["volumeName"] = "" },
		"name with slash":   func(r *spec.NodePublishVolumeRequest) { r.VolumeContext["volumeName"] = "a/b" },
		"name dot dot":      func(r *spec.NodePublishVolumeRequest) { r.VolumeContext["volumeName"] = ".." },
		"name with dot dot": func(r *spec.NodePublishVolumeRequest) { r.VolumeContext["volumeName"] = "a..b" },
		"name escapes":      func(r *spec.NodePublishVolumeRequest) { r.VolumeContext["volumeName"] = "../../etc" },
		"hidden name":       func(r *spec.NodePublishVolumeRequest) { r.VolumeContext["volumeName"] = ".tm-1" },
		"name with space":   func(r *spec.NodePublishVolumeRequest) { r.VolumeContext["volumeName"] = "tm 1" },
		"name with NUL":     func(r *spec.NodePublishVolumeRequest) { r.VolumeContext["volumeName"] = "tm\x001" },
		"non-ASCII name":    func(r *spec.NodePublishVolumeRequest) { r.VolumeContext["volumeName"] = "tm-ä" },
		"name too long":     func(r *spec.NodePublishVolumeRequest) { r.VolumeContext["volumeName"] = strings.Repeat("a", 254) },
		"bad static id":     func(r *spec.NodePublishVolumeRequest) { r.VolumeId, r.VolumeContext = "pv/1", nil },
		"inline without pod": func(r *spec.NodePublishVolumeRequest) {
			r.VolumeContext = map[string]string{"csi.storage.k8s.io/ephemeral": "true"}
		},
		"inline bad pod name": func(r *spec.NodePublishVolumeRequest) {
			r.VolumeContext = map[string]string{"csi.storage.k8s.io/ephemeral": "true", "csi.storage.k8s.io/pod.name": "a/.."}
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			req := good()
			spoil(req)
			_, err := n.NodePublishVolume(context.Background(), req)
			requireCode(t, codes.InvalidArgument, err)
			require.NoDirExists(t, filepath.Dir(target), "a refused request changes nothing")
			require.NoDirExists(t, n.State)
		})
	}
	// A block volume (no mount access type) is refused the same way.
	req := good()
	req.VolumeCapability.AccessType = &spec.VolumeCapability_Block{Block: &spec.VolumeCapability_BlockVolume{}}
	_, err := n.NodePublishVolume(context.Background(), req)
	requireCode(t, codes.InvalidArgument, err)
}

func TestPublishWaitsForTheDaemon(t *testing.T) {
	n := startPlugin(t)
	target := filepath.Join(n.Dir, "vol")
	_, err := n.NodePublishVolume(context.Background(), publishRequest("vol-1", target, map[string]string{"volumeName": "tm-1"}))
	requireCode(t, codes.Unavailable, err)
	require.NoDirExists(t, target)
	require.NoDirExists(t, filepath.Join(n.Mount, "volumes"), "nothing is written below a mountpoint the daemon does not serve")
}

func TestUnpublishRequests(t *testing.T) {
	n := startPlugin(t)
	ctx := context.Background()
	_, err := n.NodeUnpublishVolume(ctx, &spec.NodeUnpublishVolumeRequest{TargetPath: filepath.Join(n.Dir, "vol")})
	requireCode(t, codes.InvalidArgument, err)
	_, err = n.NodeUnpublishVolume(ctx, &spec.NodeUnpublishVolumeRequest{VolumeId: "vol-1"})
	requireCode(t, codes.InvalidArgument, err)
	_, err = n.NodeUnpublishVolume(ctx, &spec.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: "vol"})
	requireCode(t, codes.InvalidArgument, err)

	// A target that is missing, or a directory with nothing mounted on
	// it, is unpublished already: each call succeeds, and the second one too.
	missing := filepath.Join(n.Dir, "missing")
	plain := filepath.Join(n.Dir, "plain")
	require.NoError(t, os.Mkdir(plain, 0o750))
	for _, target := range []string{missing, plain, plain} {
		_, err := n.NodeUnpublishVolume(ctx, &spec.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: target})
		require.NoError(t, err, target)
	}
	require.NoDirExists(t, plain, "the target directory goes")
}

func TestStatsRequests(t *testing.T) {
	n := startPlugin(t)
	ctx := context.Background()
	_, err := n.NodeGetVolumeStats(ctx, &spec.NodeGetVolumeStatsRequest{VolumePath: n.Dir})
	requireCode(t, codes.InvalidArgument, err)
	_, err = n.NodeGetVolumeStats(ctx, &spec.NodeGetVolumeStatsRequest{VolumeId: "vol-1"})
	requireCode(t, codes.InvalidArgument, err)
	// No volume is published at any of these: NotFound (csi-sanity:
	// "NodeGetVolumeStats should fail when volume is not found").
	for _, path := range []string{"rel", "some/path", "/", n.Dir, filepath.Join(n.Dir, "missing")} {
		_, err = n.NodeGetVolumeStats(ctx, &spec.NodeGetVolumeStatsRequest{VolumeId: "vol-1", VolumePath: path})
		requireCode(t, codes.NotFound, err)
	}
}

func TestPublishUnpublish(t *testing.T) {
	n := startPluginOnFUSE(t)
	ctx := context.Background()
	target := filepath.Join(n.Dir, "pods", "p1", "vol")
	require.NoError(t, os.MkdirAll(filepath.Dir(target), 0o750))
	req := publishRequest("vol-1", target, map[string]string{"volumeName": "tm-1"})

	_, err := n.NodePublishVolume(ctx, req)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(target, "state"), []byte("0123456789"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(target, "dir"), 0o755))
	b, err := os.ReadFile(filepath.Join(n.Backing, "volumes", "tm-1", "state"))
	require.NoError(t, err, "the volume is volumes/<volumeName> of the mount")
	require.Equal(t, "0123456789", string(b))

	_, err = n.NodePublishVolume(ctx, req)
	require.NoError(t, err, "publishing again is fine")
	require.Equal(t, 1, mountsAt(t, target), "and binds nothing more")

	ro := publishRequest("vol-1", target, map[string]string{"volumeName": "tm-1"})
	ro.Readonly = true
	_, err = n.NodePublishVolume(ctx, ro)
	requireCode(t, codes.AlreadyExists, err)
	_, err = n.NodePublishVolume(ctx, publishRequest("vol-2", target, map[string]string{"volumeName": "tm-2"}))
	requireCode(t, codes.AlreadyExists, err)

	stats, err := n.NodeGetVolumeStats(ctx, &spec.NodeGetVolumeStatsRequest{VolumeId: "vol-1", VolumePath: target})
	require.NoError(t, err)
	usage := map[spec.VolumeUsage_Unit]*spec.VolumeUsage{}
	for _, u := range stats.GetUsage() {
		usage[u.GetUnit()] = u
	}
	require.EqualValues(t, 10, usage[spec.VolumeUsage_BYTES].GetUsed())
	require.EqualValues(t, 3, usage[spec.VolumeUsage_INODES].GetUsed(), "the root, state and dir")
	require.Positive(t, usage[spec.VolumeUsage_BYTES].GetTotal())
	_, err = n.NodeGetVolumeStats(ctx, &spec.NodeGetVolumeStatsRequest{VolumeId: "vol-2", VolumePath: target})
	requireCode(t, codes.NotFound, err)

	unpublish := &spec.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: target}
	_, err = n.NodeUnpublishVolume(ctx, unpublish)
	require.NoError(t, err)
	require.Equal(t, 0, mountsAt(t, target))
	require.NoDirExists(t, target)
	require.FileExists(t, filepath.Join(n.Backing, "volumes", "tm-1", "state"), "the tree stays in the store")
	_, err = n.NodeUnpublishVolume(ctx, unpublish)
	require.NoError(t, err, "unpublishing again is fine")
	_, err = n.NodeGetVolumeStats(ctx, &spec.NodeGetVolumeStatsRequest{VolumeId: "vol-1", VolumePath: target})
	requireCode(t, codes.NotFound, err)

	_, err = n.NodePublishVolume(ctx, req)
	require.NoError(t, err)
	b, err = os.ReadFile(filepath.Join(target, "state"))
	require.NoError(t, err, "publishing again shows the data")
	require.Equal(t, "0123456789", string(b))
}

func TestPublishReadOnly(t *testing.T) {
	n := startPluginOnFUSE(t)
	ctx := context.Background()
	require.NoError(t, os.MkdirAll(filepath.Join(n.Backing, "volumes", "tm-1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(n.Backing, "volumes", "tm-1", "state"), []byte("x"), 0o644))

	readOnly := map[string]func(r *spec.NodePublishVolumeRequest){
		"readonly": func(r *spec.NodePublishVolumeRequest) { r.Readonly = true },
		"reader mode": func(r *spec.NodePublishVolumeRequest) {
			r.VolumeCapability.AccessMode.Mode = spec.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY
		},
		"ro flag": func(r *spec.NodePublishVolumeRequest) { r.VolumeCapability.GetMount().MountFlags = []string{"ro"} },
	}
	for name, how := range readOnly {
		t.Run(name, func(t *testing.T) {
			target := filepath.Join(n.Dir, name)
			req := publishRequest("vol-1", target, map[string]string{"volumeName": "tm-1"})
			how(req)
			_, err := n.NodePublishVolume(ctx, req)
			require.NoError(t, err)
			b, err := os.ReadFile(filepath.Join(target, "state"))
			require.NoError(t, err)
			require.Equal(t, "x", string(b))
			err = os.WriteFile(filepath.Join(target, "new"), nil, 0o644)
			require.True(t, errors.Is(err, syscall.EROFS), "%v", err)
			_, err = n.NodeUnpublishVolume(ctx, &spec.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: target})
			require.NoError(t, err)
		})
	}
}

func TestPublishMountGroup(t *testing.T) {
	n := startPluginOnFUSE(t)
	ctx := context.Background()
	req := publishRequest("vol-1", filepath.Join(n.Dir, "vol"), map[string]string{"volumeName": "tm-1"})
	req.VolumeCapability.GetMount().VolumeMountGroup = "9999"
	_, err := n.NodePublishVolume(ctx, req)
	require.NoError(t, err)
	st, err := os.Stat(filepath.Join(n.Backing, "volumes", "tm-1"))
	require.NoError(t, err)
	require.Equal(t, os.ModeDir|os.ModeSetgid|0o775, st.Mode(), "a new tree is the group's to write")
	require.EqualValues(t, 9999, st.Sys().(*syscall.Stat_t).Gid)
	entries, err := os.ReadDir(filepath.Join(n.Backing, "volumes"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary name is left")

	// An existing tree keeps its owner and mode: it holds the pod's state.
	require.NoError(t, os.MkdirAll(filepath.Join(n.Backing, "volumes", "tm-2"), 0o700))
	req = publishRequest("vol-2", filepath.Join(n.Dir, "vol2"), map[string]string{"volumeName": "tm-2"})
	req.VolumeCapability.GetMount().VolumeMountGroup = "9999"
	_, err = n.NodePublishVolume(ctx, req)
	require.NoError(t, err)
	st, err = os.Stat(filepath.Join(n.Backing, "volumes", "tm-2"))
	require.NoError(t, err)
	require.Equal(t, os.ModeDir|0o700, st.Mode())
	require.EqualValues(t, 0, st.Sys().(*syscall.Stat_t).Gid)
}

// mountsAt counts the mounts at path.
func mountsAt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	var n int
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			n++
		}
	}
	return n
}
