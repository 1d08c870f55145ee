package csi_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVolumeNames: which tree a publish request binds.
func TestVolumeNames(t *testing.T) {
	n := startPluginOnFUSE(t)
	require.NoError(t, os.Mkdir(filepath.Join(n.Dir, "targets"), 0o750))
	cases := []struct {
		name string
		id   string
		vc   map[string]string
		tree string
	}{
		{"volumeName", "pv-1", map[string]string{"volumeName": "flink-taskmanager-0"}, "flink-taskmanager-0"},
		{"static volume: its handle", "pv-2", nil, "pv-2"},
		{"inline volume: the pod's name", "csi-5f3a9", map[string]string{
			"csi.storage.k8s.io/ephemeral": "true", "csi.storage.k8s.io/pod.name": "flink-taskmanager-3",
		}, "flink-taskmanager-3"},
		{"inline volume: volumeName wins", "csi-77d01", map[string]string{
			"csi.storage.k8s.io/ephemeral": "true", "csi.storage.k8s.io/pod.name": "flink-taskmanager-4", "volumeName": "shared",
		}, "shared"},
		{"not inline: the pod's name does not count", "pv-3", map[string]string{
			"csi.storage.k8s.io/ephemeral": "false", "csi.storage.k8s.io/pod.name": "flink-taskmanager-5",
		}, "pv-3"},
		{"the longest name", "pv-4", map[string]string{"volumeName": strings.Repeat("a", 253)}, strings.Repeat("a", 253)},
		{"dots, dashes, underscores", "pv-5", map[string]string{"volumeName": "tm_A.b-9"}, "tm_A.b-9"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target := filepath.Join(n.Dir, "targets", string(rune('a'+i)))
			_, err := n.NodePublishVolume(context.Background(), publishRequest(c.id, target, c.vc))
			require.NoError(t, err)
			require.DirExists(t, filepath.Join(n.Backing, "volumes", c.tree))
			require.Equal(t, 1, mountsAt(t, target))
		})
	}
}
