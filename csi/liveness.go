package csi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	spec "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Liveness answers the plugin's liveness probe (GET /healthz): 200 while
// the plugin answers a CSI call (GetPluginInfo) on endpoint within
// timeout, 503 with the reason otherwise. A plugin whose socket is gone or
// whose server no longer answers is one a restart fixes. Whether the
// daemon's mount serves is not asked: Probe says that as readiness, and
// restarting the plugin would not bring the daemon back. (The CSI
// livenessprobe sidecar fails on a plugin that answers Probe not ready, so
// it would restart the plugin whenever the daemon is down.)
func Liveness(endpoint string, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		if err := pluginAnswers(ctx, endpoint); err != nil {
			http.Error(w, fmt.Sprintf("the CSI plugin does not answer on %s: %v", endpoint, err), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
}

// pluginAnswers calls GetPluginInfo on endpoint over a connection of its
// own, as the kubelet would reach the plugin.
func pluginAnswers(ctx context.Context, endpoint string) error {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	info, err := spec.NewIdentityClient(conn).GetPluginInfo(ctx, &spec.GetPluginInfoRequest{})
	if err != nil {
		return err
	}
	if info.GetName() != DriverName {
		return fmt.Errorf("the plugin there is %q, not %s", info.GetName(), DriverName)
	}
	return nil
}
