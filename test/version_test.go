package test

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A running daemon says which statefs it is, the version `statefs
// --version` prints, in the log line that says it serves, in
// .statefs/status.json, and as the labels of statefs_build_info.
func TestDaemonSaysItsVersion(t *testing.T) {
	printed := strings.Fields(mustCLI(t, "--version")) // statefs version V
	require.Len(t, printed, 3, "statefs --version printed %q", printed)
	version := printed[2]

	addr := freeAddr(t)
	m := mountFS(t, "--metrics-addr", addr)
	waitLogLine(t, m, 10*time.Second, "msg=serving", "version="+version+" ")

	var status struct {
		Version string `json:"version"`
	}
	require.NoError(t, json.Unmarshal(fileBytes(t, m.Path(".statefs", "status.json")), &status))
	require.Equal(t, version, status.Version, ".statefs/status.json's version")

	info := scrapeMetrics(t, addr)["statefs_build_info"]
	require.NotNil(t, info, "/metrics has no statefs_build_info")
	require.Len(t, info.GetMetric(), 1)
	labels := map[string]string{}
	for _, l := range info.GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	require.Equal(t, map[string]string{"version": version, "goversion": runtime.Version()}, labels)
	require.Equal(t, 1.0, info.GetMetric()[0].GetGauge().GetValue())
}
