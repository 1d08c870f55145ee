package csi

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	spec "github.com/container-storage-interface/spec/lib/go/csi"
)

// Volume context keys. The csi.storage.k8s.io ones are set by the kubelet:
// ephemeral for CSI inline volumes, pod.name when the CSIDriver object asks
// for podInfoOnMount.
const (
	VolumeNameKey = "volumeName"
	ephemeralKey  = "csi.storage.k8s.io/ephemeral"
	podNameKey    = "csi.storage.k8s.io/pod.name"
)

// MaxVolumeName bounds a volume name: a Kubernetes object name, such as a
// pod's, has at most 253 characters.
const MaxVolumeName = 253

// volumesDir is the directory under the mount root that holds the volumes.
const volumesDir = "volumes"

// volumeName says which tree a publish request means: the volume context's
// volumeName; else, for an inline ephemeral volume, the pod's name (so a
// StatefulSet pod that comes back as flink-taskmanager-3 gets its tree
// back, while the kubelet's volume id for it changes); else the CO's
// volume id (a static PersistentVolume's volumeHandle).
func volumeName(req *spec.NodePublishVolumeRequest) (string, error) {
	vc := req.GetVolumeContext()
	name, ok := vc[VolumeNameKey]
	switch {
	case ok:
	case vc[ephemeralKey] == "true":
		if name, ok = vc[podNameKey]; !ok {
			return "", fmt.Errorf("inline volume without %s and without %s (set podInfoOnMount: true on the CSIDriver)", VolumeNameKey, podNameKey)
		}
	default:
		name = req.GetVolumeId()
	}
	return name, checkVolumeName(name)
}

// checkVolumeName accepts a name that is one safe path component:
// 1 to MaxVolumeName characters from [A-Za-z0-9._-], not starting with '.'
// (so never "." or "..", and never a hidden temporary name of publish's),
// and without "..".
func checkVolumeName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("volume name is empty")
	case len(name) > MaxVolumeName:
		return fmt.Errorf("volume name has %d characters, more than %d", len(name), MaxVolumeName)
	case name[0] == '.' || strings.Contains(name, ".."):
		return fmt.Errorf("volume name %q starts with '.' or holds \"..\"", name)
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("volume name %q holds %q; only letters, digits, '.', '_' and '-' are allowed", name, c)
		}
	}
	return nil
}

// publicationOf checks a publish request and says what it asks for. Every
// error is the caller's: InvalidArgument.
func publicationOf(req *spec.NodePublishVolumeRequest) (*Publication, *uint32, error) {
	if req.GetVolumeId() == "" {
		return nil, nil, fmt.Errorf("volume_id is missing")
	}
	if !utf8.ValidString(req.GetVolumeId()) {
		return nil, nil, fmt.Errorf("volume_id %q is not valid UTF-8", req.GetVolumeId())
	}
	target, err := checkTarget(req.GetTargetPath(), "target_path")
	if err != nil {
		return nil, nil, err
	}
	capability := req.GetVolumeCapability()
	if capability == nil {
		return nil, nil, fmt.Errorf("volume_capability is missing")
	}
	mount := capability.GetMount()
	if mount == nil {
		return nil, nil, fmt.Errorf("volume_capability asks for a block device; a statefs volume is a directory (access type mount)")
	}
	readOnly := req.GetReadonly()
	switch mode := capability.GetAccessMode().GetMode(); mode {
	case spec.VolumeCapability_AccessMode_UNKNOWN:
		return nil, nil, fmt.Errorf("volume_capability.access_mode is missing")
	case spec.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, spec.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:
		readOnly = true
	}
	for _, flag := range mount.GetMountFlags() {
		switch flag {
		case "ro":
			readOnly = true
		case "rw":
		default:
			return nil, nil, fmt.Errorf("mount flag %q is not supported: a statefs volume is a bind mount (ro and rw are)", flag)
		}
	}
	var group *uint32
	if g := mount.GetVolumeMountGroup(); g != "" {
		gid, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return nil, nil, fmt.Errorf("volume_mount_group %q is not a numeric group id", g)
		}
		group = new(uint32(gid))
	}
	name, err := volumeName(req)
	if err != nil {
		return nil, nil, err
	}
	return &Publication{VolumeID: req.GetVolumeId(), Volume: name, Target: target, ReadOnly: readOnly}, group, nil
}

// checkTarget accepts an absolute path other than the root, in valid
// UTF-8 without NUL, and returns it clean.
func checkTarget(path, field string) (string, error) {
	switch {
	case path == "":
		return "", fmt.Errorf("%s is missing", field)
	case !filepath.IsAbs(path) || filepath.Clean(path) == "/":
		return "", fmt.Errorf("%s %q is not an absolute path below /", field, path)
	case !utf8.ValidString(path) || strings.ContainsRune(path, 0):
		// Neither would survive the publication record (JSON) or a
		// system call.
		return "", fmt.Errorf("%s %q is not valid UTF-8 without NUL", field, path)
	}
	return filepath.Clean(path), nil
}
