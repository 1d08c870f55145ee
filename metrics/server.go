package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func newServerMetrics() (prometheus.Counter, prometheus.Gauge) {
	return prometheus.NewCounter(prometheus.CounterOpts{
			Name: "statefs_server_restarts_total",
			Help: "Servers of the mount's FUSE connection that died (crashed, were killed or restarted on request) and were replaced by the keeper, which holds the connection; the keeper counts them, and each server starts its counter there.",
		}), prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "statefs_server_resume_seconds",
			Help: "How long the FUSE connection went unserved before this server resumed it: from the previous server's death to this one serving (0 for the connection's first server).",
		})
}

// SetServer records what the daemon's keeper says about this server: how
// many servers of the connection died before it, and how long the
// connection went unserved before it resumed it. Set once, when the server
// serves; a nil *Metrics records nothing.
func (m *Metrics) SetServer(restarts uint64, resume time.Duration) {
	if m == nil {
		return
	}
	m.serverRestarts.Add(float64(restarts))
	m.serverResume.Set(resume.Seconds())
}
