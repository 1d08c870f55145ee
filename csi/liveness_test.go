package csi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	spec "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/stretchr/testify/require"

	"github.com/statefs/statefs/csi"
)

// The plugin's liveness says whether the plugin answers on its socket, not
// whether the daemon's mount serves: a plugin on a mount that does not
// serve is live (and not ready), and one whose socket is gone is not live.
func TestLiveness(t *testing.T) {
	n := startPlugin(t) // its mount is a plain directory: no daemon serves it
	probe, err := n.Probe(context.Background(), &spec.ProbeRequest{})
	require.NoError(t, err)
	require.False(t, probe.GetReady().GetValue(), "ready with no daemon serving")

	live := csi.Liveness(n.Endpoint, time.Second)
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		live.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	code, body := get()
	require.Equal(t, http.StatusOK, code, "GET /healthz of a plugin that answers, its daemon down: %s", body)
	require.Equal(t, "ok\n", body)

	require.NoError(t, os.Remove(strings.TrimPrefix(n.Endpoint, "unix://")))
	code, body = get()
	require.Equal(t, http.StatusServiceUnavailable, code, "GET /healthz of a plugin whose socket is gone: %s", body)
	require.Contains(t, body, "the CSI plugin does not answer on "+n.Endpoint)
	require.Equal(t, 1, strings.Count(body, "\n"), "one line: %q", body)
}
