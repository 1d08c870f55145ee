package metrics

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// SetBuildInfo adds statefs_build_info, 1 with the daemon's version (what
// `statefs --version` says) and the Go release it was built with as labels,
// so that a dashboard or an alert can tell which build each node runs. It
// is set once, at start-up; a nil *Metrics records nothing.
func (m *Metrics) SetBuildInfo(version string) {
	if m == nil {
		return
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "statefs_build_info",
		Help:        "Always 1; its labels say which statefs the daemon is (version) and the Go release it was built with (goversion).",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	info.Set(1)
	m.Registry.MustRegister(info)
}
