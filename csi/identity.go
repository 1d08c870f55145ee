package csi

import (
	"context"

	spec "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// GetPluginInfo names the plugin and its version.
func (p *Plugin) GetPluginInfo(context.Context, *spec.GetPluginInfoRequest) (*spec.GetPluginInfoResponse, error) {
	version := p.Version
	if version == "" {
		version = "dev"
	}
	return &spec.GetPluginInfoResponse{Name: DriverName, VendorVersion: version}, nil
}

// GetPluginCapabilities lists none: there is no controller service (static
// volumes and inline ephemeral volumes need none), and volumes have no
// topology beyond the node that serves them.
func (p *Plugin) GetPluginCapabilities(context.Context, *spec.GetPluginCapabilitiesRequest) (*spec.GetPluginCapabilitiesResponse, error) {
	return &spec.GetPluginCapabilitiesResponse{}, nil
}

// Probe reports ready only while the daemon's mount serves. A mount that
// does not is not ready rather than an error: the plugin itself is healthy,
// and restarting it would not bring the daemon back.
func (p *Plugin) Probe(context.Context, *spec.ProbeRequest) (*spec.ProbeResponse, error) {
	return &spec.ProbeResponse{Ready: wrapperspb.Bool(checkServing(p.Mount) == nil)}, nil
}
