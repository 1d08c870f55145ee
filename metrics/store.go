package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/statefs/statefs/index"
	"github.com/statefs/statefs/store"
)

// storeScanInterval is how long one scan of the store answers scrapes at
// the least. store.Stats reads every inode and every chunk file's size,
// which takes seconds on a store of a million chunks: a scan answers for
// scanCostFactor times as long as it took, so that scrapes every few
// seconds never keep more than a twentieth of a core busy. Two Prometheus
// servers scraping the same daemon (an HA pair) share one scan.
const (
	storeScanInterval = 5 * time.Second
	scanCostFactor    = 20
)

// storeCollector reports the store's state, read when Prometheus scrapes:
// the same numbers as .statefs/stats.json (store.Stats) and the jobs by
// verdict, from a scan that answers for a while; and the disk's size, free
// space, reserve and fullness, read afresh at every scrape (a statfs and
// two lstats). Nothing on the write path feeds it.
type storeCollector struct {
	store    *store.Store
	interval time.Duration
	factor   time.Duration // a scan answers for factor times as long as it took

	mu      sync.Mutex // one scan at a time
	scanned time.Time
	took    time.Duration // how long the last scan took
	last    storeScan
}

// storeScan is what one scan found.
type storeScan struct {
	stats   store.Stats
	jobs    [index.VerdictGone + 1]int // by verdict
	unknown [len(unknownAges)]int      // jobs unknown to every oracle, by age
	err     error
}

// unknownAges are the buckets of statefs_jobs_unknown: a job unknown to
// every oracle (index.Job.UnknownSince) for at least from and less than the
// next bucket's from. Fixed, so that an alert names the buckets past a day
// and a dashboard stacks them.
var unknownAges = [...]struct {
	label string
	from  time.Duration
}{
	{"under_1h", 0},
	{"1h_to_1d", time.Hour},
	{"1d_to_7d", 24 * time.Hour},
	{"over_7d", 7 * 24 * time.Hour},
}

// unknownAge is the bucket of a job unknown to every oracle for d.
func unknownAge(d time.Duration) int {
	i := 0
	for i+1 < len(unknownAges) && d >= unknownAges[i+1].from {
		i++
	}
	return i
}

var (
	descStagingBytes = prometheus.NewDesc("statefs_staging_bytes",
		"Bytes in staging files: files open for writing, and closed files not sealed yet.", nil, nil)
	descStagingFiles = prometheus.NewDesc("statefs_staging_files",
		"Staging files: files open for writing, and closed files not sealed yet.", nil, nil)
	descSealBacklog = prometheus.NewDesc("statefs_seal_backlog_files",
		"The seal backlog: files whose content waits in staging, those still open for writing included.", nil, nil)
	descFiles = prometheus.NewDesc("statefs_files",
		"Regular files in the store.", nil, nil)
	descOrphans = prometheus.NewDesc("statefs_orphans",
		"Files with no name left whose content is not freed yet: still open (removed by the collector or unlinked while open), or not yet forgotten by the kernel.", nil, nil)
	descOrphanBytes = prometheus.NewDesc("statefs_orphan_bytes",
		"Logical bytes of the orphans, as of their last seal: freed when they close.", nil, nil)
	descLogical = prometheus.NewDesc("statefs_logical_bytes",
		"Bytes the files hold as their readers see them (sealed and staging).", nil, nil)
	descPhysical = prometheus.NewDesc("statefs_physical_bytes",
		"Bytes the files take on the disk: chunk files, object files and staging files (the index aside).", nil, nil)
	descSavedRatio = prometheus.NewDesc("statefs_saved_ratio",
		"Logical bytes over physical bytes: what deduplication and compression save together (0 while the store is empty).", nil, nil)
	descChunks = prometheus.NewDesc("statefs_chunks",
		"Chunk files in the store.", nil, nil)
	descChunkBytes = prometheus.NewDesc("statefs_chunk_bytes",
		"Bytes of chunk files on the disk, after compression.", nil, nil)
	descObjects = prometheus.NewDesc("statefs_objects",
		"Object files in the store: the whole content of files sealed as objects (content that does not compress), one per distinct content.", nil, nil)
	descObjectBytes = prometheus.NewDesc("statefs_object_bytes",
		"Bytes of object files on the disk.", nil, nil)
	descQuarantined = prometheus.NewDesc("statefs_quarantined_objects",
		"Objects a scrub found damaged and quarantined: opens of the files that are them fail with EIO until fsck --repair makes those files holes or a seal of the same bytes replaces the object.", nil, nil)
	descScanAge = prometheus.NewDesc("statefs_store_scan_age_seconds",
		"Age of the scan of the store the other store gauges come from (a scan answers for 20 times as long as it took, 5 s at the least).", nil, nil)
	descDiskFull = prometheus.NewDesc("statefs_disk_full",
		"1 while the store's disk is full: the mount refuses new content with ENOSPC until twice the reserve is free.", nil, nil)
	descDiskSize = prometheus.NewDesc("statefs_disk_size_bytes",
		"Size of the filesystem that holds the store.", nil, nil)
	descDiskFree = prometheus.NewDesc("statefs_disk_free_bytes",
		"Bytes of the store's filesystem that writers can still take (statfs's available blocks, as df on the mount shows them); the reserve is not among them.", nil, nil)
	descDiskReserve = prometheus.NewDesc("statefs_disk_reserve_bytes",
		"Bytes the store's reserve files hold for the index now: the whole reserve (an eighth of the disk, 128 MiB at most) while the disk has room, half of it once the free space fell below half the reserve, 0 once the disk is full.", nil, nil)
	descJobs = prometheus.NewDesc("statefs_jobs",
		"Jobs the store holds state of, by their latest verdict: live, unknown or gone.", []string{"verdict"}, nil)
	descJobsUnknown = prometheus.NewDesc("statefs_jobs_unknown",
		"Jobs that every oracle answers it knows nothing of (a 404 from every Flink URL, no file in the JobResultStore, no word from the operator), by how long they have been so without a break: under_1h, 1h_to_1d, 1d_to_7d, over_7d. Their state is kept unless the operator says they are gone or sets --collect-unknown-after.", []string{"age"}, nil)
)

func newStoreCollector(s *store.Store, interval time.Duration, factor int) *storeCollector {
	return &storeCollector{store: s, interval: interval, factor: time.Duration(factor)}
}

var _ prometheus.Collector = (*storeCollector)(nil)

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStagingBytes, descStagingFiles, descSealBacklog, descFiles,
		descOrphans, descOrphanBytes, descLogical, descPhysical, descSavedRatio, descChunks, descChunkBytes,
		descObjects, descObjectBytes, descQuarantined, descJobs, descJobsUnknown, descScanAge,
		descDiskFull, descDiskSize, descDiskFree, descDiskReserve} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	full := 0.0
	if c.store.Full() {
		full = 1
	}
	ch <- prometheus.MustNewConstMetric(descDiskFull, prometheus.GaugeValue, full)
	if st, err := c.store.Statfs(); err != nil {
		ch <- prometheus.NewInvalidMetric(descDiskFree, err)
	} else {
		ch <- prometheus.MustNewConstMetric(descDiskSize, prometheus.GaugeValue, float64(st.Blocks)*float64(st.Bsize))
		ch <- prometheus.MustNewConstMetric(descDiskFree, prometheus.GaugeValue, float64(st.Bavail)*float64(st.Bsize))
	}
	ch <- prometheus.MustNewConstMetric(descDiskReserve, prometheus.GaugeValue, float64(c.store.Reserved()))
	scan, scanned := c.scan()
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
	gauge(descSealBacklog, float64(st.SealBacklog))
	gauge(descFiles, float64(st.Files))
	gauge(descOrphans, float64(st.Orphans))
	gauge(descOrphanBytes, float64(st.OrphanBytes))
	gauge(descLogical, float64(st.LogicalBytes))
	gauge(descPhysical, float64(st.PhysicalBytes))
	gauge(descSavedRatio, st.SavedRatio)
	gauge(descChunks, float64(st.ChunkFiles))
	gauge(descChunkBytes, float64(st.ChunkBytes))
	gauge(descObjects, float64(st.ObjectFiles))
	gauge(descObjectBytes, float64(st.ObjectBytes))
	gauge(descQuarantined, float64(st.Quarantined))
	gauge(descScanAge, time.Since(scanned).Seconds())
	for v, n := range scan.jobs {
		gauge(descJobs, float64(n), index.Verdict(v).String())
	}
	for i, n := range scan.unknown {
		gauge(descJobsUnknown, float64(n), unknownAges[i].label)
	}
}

// scan reads the store, or returns the last scan if it is younger than
// the interval.
func (c *storeCollector) scan() (storeScan, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.scanned.IsZero() && time.Since(c.scanned) < max(c.interval, c.factor*c.took) {
		return c.last, c.scanned
	}
	start := time.Now()
	var scan storeScan
	scan.stats, scan.err = c.store.Stats()
	if scan.err == nil {
		var jobs []*index.Job
		jobs, scan.err = c.store.Jobs()
		for _, j := range jobs {
			scan.jobs[j.Verdict]++ // a record decodes to one of the three
			if j.UnknownSince != 0 {
				scan.unknown[unknownAge(start.Sub(time.Unix(0, j.UnknownSince)))]++
			}
		}
	}
	c.scanned, c.took, c.last = time.Now(), time.Since(start), scan
	return scan, c.scanned
}
