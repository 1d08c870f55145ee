package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	spec "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodeGetInfo names the node.
func (p *Plugin) NodeGetInfo(context.Context, *spec.NodeGetInfoRequest) (*spec.NodeGetInfoResponse, error) {
	return &spec.NodeGetInfoResponse{NodeId: p.NodeID}, nil
}

// NodeGetCapabilities lists volume stats and mount groups
// (the pod's fsGroup becomes a new volume's group). There is no staging: a
// volume is a bind of a directory.
func (p *Plugin) NodeGetCapabilities(context.Context, *spec.NodeGetCapabilitiesRequest) (*spec.NodeGetCapabilitiesResponse, error) {
	var caps []*spec.NodeServiceCapability
	for _, c := range []spec.NodeServiceCapability_RPC_Type{
		spec.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		spec.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP,
	} {
		caps = append(caps, &spec.NodeServiceCapability{
			Type: &spec.NodeServiceCapability_Rpc{Rpc: &spec.NodeServiceCapability_RPC{Type: c}},
		})
	}
	return &spec.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// NodePublishVolume binds the volume's tree onto the target, creating the
// tree and the target directory if needed. Publishing again what is
// published succeeds and changes nothing; a stale bind of it (the daemon
// restarted) is bound again.
func (p *Plugin) NodePublishVolume(ctx context.Context, req *spec.NodePublishVolumeRequest) (*spec.NodePublishVolumeResponse, error) {
	pub, group, err := publicationOf(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := checkServing(p.Mount); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	root := p.volumeRoot(pub.Volume)
	old, err := p.records().get(pub.Target)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	state, err := stateOf(pub.Target, root)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if state != unmounted && old != nil && *old != *pub {
		return nil, status.Errorf(codes.AlreadyExists, "%s already has volume %s (%s, read-only %v) published", pub.Target, old.VolumeID, old.Volume, old.ReadOnly)
	}
	switch state {
	case bound:
		if old == nil { // the record was lost; the bind is this volume's
			if err := p.records().put(pub); err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
		}
		return &spec.NodePublishVolumeResponse{}, nil
	case foreign:
		return nil, status.Errorf(codes.AlreadyExists, "%s already has another mount", pub.Target)
	case stale:
		if err := detachStale(pub.Target); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	if err := p.createVolume(pub.Volume, group); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := p.records().put(pub); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := os.Mkdir(pub.Target, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, status.Errorf(codes.Internal, "creating target: %v", err)
	}
	if err := bind(root, pub.Target, pub.ReadOnly); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &spec.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts the target and removes the directory
// publishing created. The volume's tree stays in the store. A target that
// is missing or not mounted is already unpublished.
func (p *Plugin) NodeUnpublishVolume(ctx context.Context, req *spec.NodeUnpublishVolumeRequest) (*spec.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	}
	target, err := checkTarget(req.GetTargetPath(), "target_path")
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := unmountAll(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := removeTarget(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := p.records().remove(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &spec.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats counts the volume's tree: the logical bytes of its
// files and its inodes, walked through the target (the tree has no other
// index by path), with the store disk's capacity from statfs. A path where
// the volume is not published, a relative one included, is NotFound; a
// stale target is Unavailable until it is bound again.
func (p *Plugin) NodeGetVolumeStats(ctx context.Context, req *spec.NodeGetVolumeStatsRequest) (*spec.NodeGetVolumeStatsResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is missing")
	}
	path := req.GetVolumePath()
	switch {
	case path == "":
		return nil, status.Error(codes.InvalidArgument, "volume_path is missing")
	case !filepath.IsAbs(path):
		// No volume is published at a relative path, so none is found
		// there: NotFound, as csi-sanity expects, not InvalidArgument.
		return nil, status.Errorf(codes.NotFound, "volume %s is not published at %s: not an absolute path", req.GetVolumeId(), path)
	}
	path = filepath.Clean(path)
	pub, err := p.records().get(path)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if pub == nil || pub.VolumeID != req.GetVolumeId() {
		return nil, status.Errorf(codes.NotFound, "volume %s is not published at %s", req.GetVolumeId(), path)
	}
	switch state, err := stateOf(path, p.volumeRoot(pub.Volume)); {
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	case state == stale:
		return nil, status.Errorf(codes.Unavailable, "volume %s at %s is stale: the statefs daemon restarted; it is bound again once the daemon serves", pub.Volume, path)
	case state != bound:
		return nil, status.Errorf(codes.NotFound, "volume %s is not mounted at %s", req.GetVolumeId(), path)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(path, &sfs); err != nil {
		return nil, status.Errorf(codes.Internal, "statfs %s: %v", path, err)
	}
	var bytes, inodes int64
	err = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while walking
		}
		if err != nil {
			return err
		}
		inodes++
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				bytes += info.Size()
			}
		}
		return nil
	})
	if ctx.Err() != nil {
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "counting volume %s: %v", pub.Volume, err)
	}
	bsize := int64(sfs.Bsize)
	return &spec.NodeGetVolumeStatsResponse{
		Usage: []*spec.VolumeUsage{
			{Unit: spec.VolumeUsage_BYTES, Used: bytes, Total: int64(sfs.Blocks) * bsize, Available: int64(sfs.Bavail) * bsize},
			{Unit: spec.VolumeUsage_INODES, Used: inodes, Total: int64(sfs.Files), Available: int64(sfs.Ffree)},
		},
	}, nil
}

// volumeRoot is where volume name's tree is in the daemon's mount.
func (p *Plugin) volumeRoot(name string) string {
	return filepath.Join(p.Mount, volumesDir, name)
}

func (p *Plugin) records() publications {
	return publications{dir: p.StateDir}
}

// createVolume creates volume name's tree unless it exists. With a group
// (the pod's fsGroup), the new tree's root is of that group, group-writable
// and set-group-ID, so a TaskManager that does not run as root can write
// it. The root is made under a hidden name and renamed into place, so a
// tree is never seen with the wrong owner, even after a crash.
func (p *Plugin) createVolume(name string, group *uint32) error {
	root := p.volumeRoot(name)
	if _, err := os.Stat(root); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(root), err)
	}
	tmp := filepath.Join(filepath.Dir(root), "."+name) // no volume name starts with '.'
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("creating volume %s: %w", name, err)
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return fmt.Errorf("creating volume %s: %w", name, err)
	}
	if group != nil {
		if err := os.Chown(tmp, -1, int(*group)); err != nil {
			return fmt.Errorf("creating volume %s: %w", name, err)
		}
		if err := os.Chmod(tmp, os.ModeSetgid|0o775); err != nil {
			return fmt.Errorf("creating volume %s: %w", name, err)
		}
	}
	if err := os.Rename(tmp, root); err != nil {
		return fmt.Errorf("creating volume %s: %w", name, err)
	}
	return nil
}
