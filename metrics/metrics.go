// Package metrics is what the daemon tells its operators: Prometheus metrics
// of the FUSE operations it serves, of its seals, collector runs and scrubs
// and of its store, and the health that liveness and readiness probes ask
// for.
//
// Two costs are kept apart. The FUSE operations are counted and timed on
// every request, so that path only touches observers created up front (no
// allocation, no lock, no label lookup). Everything about the store (bytes,
// chunks, staging, jobs) is read when Prometheus scrapes, never on the
// write path.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/store"
)

// Metrics are the metrics of one mounted store, in a registry of their own.
// The methods that record something (FUSE, OnSeal, SetGCInterval,
// Collected, Scrubbing, Scrubbed) do nothing on a nil *Metrics, so a daemon without
// --metrics-addr passes nil and pays nothing.
type Metrics struct {
	Registry *prometheus.Registry

	ops          *prometheus.HistogramVec
	opLatency    [numOps]prometheus.Observer // ops' children, looked up once
	readBytes    prometheus.Counter
	writtenBytes prometheus.Counter
	sealDuration prometheus.Histogram
	seals        *prometheus.CounterVec // by representation
	sealedBytes  *prometheus.CounterVec // by representation
	gcRuns       *prometheus.CounterVec
	gcFreed      prometheus.Counter
	gcCollected  prometheus.Counter
	gcInterval   prometheus.Gauge // the periodic collector's interval, 0: none
	gcComplete   prometheus.Gauge // unix time the last run that ended without error ended

	scrubBytes       prometheus.Counter
	scrubRuns        *prometheus.CounterVec
	scrubComplete    prometheus.Gauge // unix time the last complete pass ended
	scrubDamaged     prometheus.Gauge // what the last complete pass found
	scrubQuarantined prometheus.Counter
	scrubProgress    prometheus.Gauge // share read of the pass under way

	serverRestarts prometheus.Counter // servers of the connection that died before this one
	serverResume   prometheus.Gauge   // how long the connection went unserved before this server
}

// representations are the values of the as label, every one reported from
// the start so that a rate over them never misses its first seal.
var representations = []store.Representation{store.AsInline, store.AsChunks, store.AsObject}

// New makes the metrics of the store s: s is read at every scrape (see
// storeCollector), the rest is recorded by the hooks.
func New(s *store.Store) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		ops: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "statefs_fuse_op_duration_seconds",
			Help: "How long the daemon took to answer FUSE requests, by operation; _count is the number of requests. " +
				"Reads and writes of files open through FUSE passthrough never reach the daemon and are not counted.",
			// 10µs to 2.6s: a cached getattr to a sealed read that waits for the disk.
			Buckets: prometheus.ExponentialBuckets(10e-6, 4, 10),
		}, []string{"op"}),
		readBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "statefs_fuse_read_bytes_total",
			Help: "Bytes the daemon answered FUSE reads with. Reads of files open through FUSE passthrough go from the kernel to the staging file or the object and are not counted.",
		}),
		writtenBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "statefs_fuse_written_bytes_total",
			Help: "Bytes written through the daemon. Writes to files open through FUSE passthrough go from the kernel to the staging file and are not counted.",
		}),
		sealDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "statefs_seal_duration_seconds",
			Help: "How long sealing a file took, from its staging content to the committed manifest; _count is the number of files sealed.",
			// 1ms to 65s: a small file inlined to a multi-GB SST file.
			Buckets: prometheus.ExponentialBuckets(1e-3, 4, 9),
		}),
		seals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statefs_seals_total",
			Help: "Files sealed, by how their content is kept: inline (in the index), chunks (content that compresses) or object (content that does not, kept whole without being written again).",
		}, []string{"as"}),
		sealedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statefs_sealed_bytes_total",
			Help: "Logical bytes of the files sealed, by how their content is kept: inline, chunks or object.",
		}, []string{"as"}),
		gcRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statefs_gc_runs_total",
			Help: "Collector runs in this daemon (periodic or asked for on the control socket; dry runs aside), by result: ok, failed (the run ended on an error), or unanswered (for some job or executor no oracle could answer: unreachable, an error, a malformed answer).",
		}, []string{"result"}),
		gcFreed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "statefs_gc_freed_bytes_total",
			Help: "Bytes of chunk files the collector's sweeps removed from the disk, and of objects its removals freed.",
		}),
		gcCollected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "statefs_gc_collected_total",
			Help: "Jobs and executor trees whose state the collector removed.",
		}),
		gcInterval: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "statefs_gc_interval_seconds",
			Help: "How often this daemon runs the collector (--gc-interval); 0 when it runs none of its own and only statefs gc runs it.",
		}),
		gcComplete: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "statefs_gc_last_complete_timestamp_seconds",
			Help: "Unix time at which this daemon's last collector run that ended without error ended, result ok or unanswered (0: none yet).",
		}),
		scrubBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "statefs_scrub_bytes_total",
			Help: "Bytes of chunks and objects the daemon's scrubs (periodic or asked for on the control socket) read and verified against their hashes.",
		}),
		scrubRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statefs_scrub_runs_total",
			Help: "Scrub passes of this daemon over the whole store, by result: ok (every chunk and object read, damaged or not) or failed (the pass ended on an error). Passes stopped by a shutdown or by the client that asked are not counted.",
		}, []string{"result"}),
		scrubComplete: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "statefs_scrub_last_complete_timestamp_seconds",
			Help: "Unix time at which this daemon's last complete scrub pass ended (0: none yet).",
		}),
		scrubDamaged: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "statefs_scrub_damaged",
			Help: "Damaged chunks and objects the last complete scrub pass of this daemon found (quarantined objects included).",
		}),
		scrubProgress: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "statefs_scrub_progress_ratio",
			Help: "Share of the store's chunks and objects the scrub pass under way has read, from 0 to 1; 0 while no pass runs.",
		}),
		scrubQuarantined: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "statefs_scrub_quarantined_total",
			Help: "Damaged objects this daemon's scrubs quarantined: opens of the files that are them fail with EIO.",
		}),
	}
	for op, name := range opNames {
		m.opLatency[op] = m.ops.WithLabelValues(name)
	}
	for _, as := range representations {
		m.seals.WithLabelValues(string(as))
		m.sealedBytes.WithLabelValues(string(as))
	}
	for _, result := range []string{"ok", "failed"} {
		m.gcRuns.WithLabelValues(result)
		m.scrubRuns.WithLabelValues(result)
	}
	m.gcRuns.WithLabelValues("unanswered")
	m.serverRestarts, m.serverResume = newServerMetrics()
	m.Registry.MustRegister(m.ops, m.readBytes, m.writtenBytes, m.sealDuration, m.seals, m.sealedBytes,
		m.gcRuns, m.gcFreed, m.gcCollected, m.gcInterval, m.gcComplete,
		m.scrubBytes, m.scrubRuns, m.scrubComplete, m.scrubDamaged, m.scrubQuarantined, m.scrubProgress,
		m.serverRestarts, m.serverResume,
		newStoreCollector(s, storeScanInterval, scanCostFactor),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in Prometheus's text format. A store that
// cannot be read fails only the store's metrics, not the whole scrape.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      errorLog{},
	})
}

// OnSeal records one file sealed as x in took. It is fs.Options.OnSeal.
func (m *Metrics) OnSeal(x *store.PreparedSeal, took time.Duration) {
	if m == nil {
		return
	}
	m.sealDuration.Observe(took.Seconds())
	m.seals.WithLabelValues(string(x.As)).Inc()
	m.sealedBytes.WithLabelValues(string(x.As)).Add(float64(x.Manifest.Size))
}

// SetGCInterval records how often the daemon runs the collector (0:
// never). With statefs_gc_last_complete_timestamp_seconds it tells a
// collector that is on but has not completed a run for several intervals.
func (m *Metrics) SetGCInterval(d time.Duration) {
	if m == nil {
		return
	}
	m.gcInterval.Set(d.Seconds())
}

// Collected records one collector run that was not dry. It is
// control.Server.Collected. A run that ended without error is complete
// even if some job or executor went unanswered: it did all it could.
func (m *Metrics) Collected(r gc.Report, err error) {
	if m == nil {
		return
	}
	result := "ok"
	switch {
	case err != nil:
		result = "failed" // what it removed before it failed is in r all the same
	case len(r.Unanswered())+len(r.UnansweredExecutors()) > 0:
		result = "unanswered"
	}
	if err == nil {
		m.gcComplete.Set(float64(time.Now().UnixNano()) / 1e9)
	}
	m.gcRuns.WithLabelValues(result).Inc()
	m.gcFreed.Add(float64(r.Swept.Bytes))
	m.gcCollected.Add(float64(len(r.Collected)))
}

// Scrubbing records how far the scrub pass under way has come: done of
// total chunks and objects read. It is control.Server.Scrubbing.
func (m *Metrics) Scrubbing(done, total int) {
	if m == nil || total == 0 {
		return
	}
	m.scrubProgress.Set(float64(done) / float64(total))
}

// Scrubbed records one scrub pass of the daemon that ended with r and err.
// It is control.Server.Scrubbed. What a pass read and quarantined counts
// however it ended; a pass that ctx stopped (err is context.Canceled or
// DeadlineExceeded) is not a run, so that restarts do not look like
// failures.
func (m *Metrics) Scrubbed(r store.Scrubbed, err error) {
	if m == nil {
		return
	}
	m.scrubProgress.Set(0) // no pass runs now
	m.scrubBytes.Add(float64(r.Bytes))
	m.scrubQuarantined.Add(float64(len(r.Quarantined)))
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
	case err != nil:
		m.scrubRuns.WithLabelValues("failed").Inc()
	default:
		m.scrubRuns.WithLabelValues("ok").Inc()
		m.scrubComplete.Set(float64(time.Now().UnixNano()) / 1e9)
		m.scrubDamaged.Set(float64(len(r.Damaged)))
	}
}

// errorLog sends promhttp's complaints to the daemon's log.
type errorLog struct{}

func (errorLog) Println(v ...any) {
	slog.Warn("serving metrics", "err", fmt.Sprint(v...))
}

// NewServer makes the daemon's operations endpoint: m on /metrics, with
// h's statefs_store_writable added to m's registry; h's liveness on
// /healthz and its readiness on /readyz.
func NewServer(m *Metrics, h *Health) *http.Server {
	m.Registry.MustRegister(h)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.Handle("GET /healthz", h.Liveness())
	mux.Handle("GET /readyz", h.Readiness())
	return &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
}
