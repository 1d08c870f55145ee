package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/statefs/statefs/gc"
	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/store"
)

// storeScanInterval is how long one scan of the store answers scrapes.
// store.Stats reads every chunk file's size, which takes a while on a big
// store; two Prometheus servers scraping the same daemon (an HA pair) then
// share one scan instead of doubling the work.
const storeScanInterval = 5 * time.Second

// storeCollector reports the store's state, read when Prometheus scrapes:
// the same numbers as .statefs/stats.json (store.Stats) and the jobs by
// verdict. Nothing on the write path feeds it.
type storeCollector struct {
	store    *store.Store
	interval time.Duration

	mu      sync.Mutex // one scan at a time
	scanned time.Time
	last    storeScan
}

// storeScan is what one scan found.
type storeScan struct {
	stats store.Stats
	jobs  [gc.Gone + 1]int // by gc.Verdict
	err   error
}

var (
	descStagingBytes = prometheus.NewDesc("statefs_staging_bytes",
		"Bytes in staging files: files open for writing, and closed files not sealed yet.", nil, nil)
	descStagingFiles = prometheus.NewDesc("statefs_staging_files",
		"Staging files: files open for writing, and closed files not sealed yet.", nil, nil)
	descUnsealed = prometheus.NewDesc("statefs_unsealed_files",
		"The seal backlog: files whose content waits in staging, those still open for writing included.", nil, nil)
	descFiles = prometheus.NewDesc("statefs_files",
		"Regular files in the store.", nil, nil)
	descLogical = prometheus.NewDesc("statefs_logical_bytes",
		"Bytes the files hold as their readers see them (sealed and staging).", nil, nil)
	descPhysical = prometheus.NewDesc("statefs_physical_bytes",
		"Bytes the files take on the disk: chunk files and staging files (the index aside).", nil, nil)
	descSavedRatio = prometheus.NewDesc("statefs_saved_ratio",
		"Logical bytes over physical bytes: what deduplication and compression save together (0 while the store is empty).", nil, nil)
	descChunks = prometheus.NewDesc("statefs_chunks",
		"Chunk files in the store.", nil, nil)
	descChunkBytes = prometheus.NewDesc("statefs_chunk_bytes",
		"Bytes of chunk files on the disk, after compression.", nil, nil)
	descJobs = prometheus.NewDesc("statefs_jobs",
		"Jobs the store holds state of, by their latest verdict: live, unknown or gone.", []string{"verdict"}, nil)
)

func newStoreCollector(s *store.Store, interval time.Duration) *storeCollector {
	return &storeCollector{store: s, interval: interval}
}

var _ prometheus.Collector = (*storeCollector)(nil)

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStagingBytes, descStagingFiles, descUnsealed, descFiles,
		descLogical, descPhysical, descSavedRatio, descChunks, descChunkBytes, descJobs} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	scan := c.scan()
	if scan.err != nil {
		ch <- prometheus.NewInvalidMetric(descFiles, scan.err)
		return
	}
	st := scan.stats
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descStagingBytes, float64(st.StagingBytes))
	gauge(descStagingFiles, float64(st.StagingFiles))
	gauge(descUnsealed, float64(st.Unsealed))
	gauge(descFiles, float64(st.Files))
	gauge(descLogical, float64(st.LogicalBytes))
	gauge(descPhysical, float64(st.PhysicalBytes))
	gauge(descSavedRatio, st.SavedRatio)
	gauge(descChunks, float64(st.ChunkFiles))
	gauge(descChunkBytes, float64(st.ChunkBytes))
	for v, n := range scan.jobs {
		gauge(descJobs, float64(n), gc.Verdict(v).String())
	}
}

// scan reads the store, or returns the last scan if it is younger than
// the interval.
func (c *storeCollector) scan() storeScan {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.scanned.IsZero() && time.Since(c.scanned) < c.interval {
		return c.last
	}
	var scan storeScan
	scan.stats, scan.err = c.store.Stats()
	if scan.err == nil {
		scan.err = c.store.Index.View(func(tx *index.Tx) error {
			jobs, err := tx.Jobs()
			for _, j := range jobs {
				v, _ := gc.ParseVerdict(j.Verdict) // a verdict nobody set is Unknown
				scan.jobs[v]++
			}
			return err
		})
	}
	c.scanned, c.last = time.Now(), scan
	return scan
}
