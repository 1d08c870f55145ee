package metrics

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// ProbeName is the file Health creates and removes in the store directory
// to learn that the store takes new files.
const ProbeName = "healthz.probe"

// Health answers the daemon's probes, each 200 or 503 with a one-line
// reason, and is the collector of statefs_store_writable. The two probes
// part along what a restart can fix:
//
//   - Liveness (GET /healthz) fails only when the daemon cannot serve: its
//     mount does not answer. Restarting the daemon fixes that, and costs
//     every process on the mount its open files.
//   - Readiness (GET /readyz) fails also while the store directory takes
//     no new file (a disk the kernel remounted read-only, chattr +i). A
//     restart cannot fix that, and the mount still serves reads and
//     writes to files already open, so it is reported (readiness, the
//     gauge, the log), never a reason to restart.
//
// A full disk fails neither: a restart would free nothing, and
// statefs_disk_full says so.
type Health struct {
	Mountpoint string // absolute
	Store      string // the store directory

	mu         sync.Mutex // one probe file at a time; guards unwritable
	unwritable string     // why the last probe of the store failed, "" if it did not
}

var _ prometheus.Collector = (*Health)(nil)

// Live reports why the daemon cannot serve, or nil. It asks the mount for
// statfs, which the kernel sends to the daemon every time (a stat may be
// answered from the kernel's cache), so a daemon whose FUSE connection
// died or hangs fails it; a probe's timeout catches the hang.
func (h *Health) Live() error {
	var st unix.Statfs_t
	if err := unix.Statfs(h.Mountpoint, &st); err != nil {
		return fmt.Errorf("mount %s does not serve: %w", h.Mountpoint, err)
	}
	if st.Type != unix.FUSE_SUPER_MAGIC {
		return fmt.Errorf("%s is not a FUSE mount", h.Mountpoint)
	}
	if _, err := os.Stat(h.Mountpoint); err != nil {
		return fmt.Errorf("mount %s does not serve: %w", h.Mountpoint, err)
	}
	return nil
}

// Ready reports why the daemon does not serve fully, or nil: Live's
// reason, or Writable's.
func (h *Health) Ready() error {
	if err := h.Live(); err != nil {
		return err
	}
	return h.Writable()
}

// Writable reports why the store directory takes no new file, or nil. It
// creates and removes a file there: a disk the kernel remounted read-only
// after an error fails that. The log says when the answer changes.
func (h *Health) Writable() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	err := h.probeStore()
	reason := errString(err)
	switch {
	case reason == h.unwritable:
	case reason != "":
		slog.Warn("the store takes no new files: new files fail, reads and open files are served; a restart cannot fix this", "err", reason)
	default:
		slog.Info("the store takes new files again")
	}
	h.unwritable = reason
	return err
}

func (h *Health) probeStore() error {
	probe := filepath.Join(h.Store, ProbeName)
	f, err := os.OpenFile(probe, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("store %s is not writable: %w", h.Store, unwrapPath(err))
	}
	f.Close()
	if err := os.Remove(probe); err != nil {
		return fmt.Errorf("store %s is not writable: %w", h.Store, unwrapPath(err))
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Liveness answers GET /healthz from Live.
func (h *Health) Liveness() http.Handler { return probeHandler(h.Live) }

// Readiness answers GET /readyz from Ready.
func (h *Health) Readiness() http.Handler { return probeHandler(h.Ready) }

func probeHandler(check func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := check(); err != nil {
			http.Error(w, strings.ReplaceAll(err.Error(), "\n", "; "), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
}

var storeWritableDesc = prometheus.NewDesc("statefs_store_writable",
	"1 while the store directory takes new files, 0 while it takes none (a disk remounted read-only): new files fail, reads are served. Probed at each scrape.",
	nil, nil)

// Describe is prometheus.Collector's.
func (h *Health) Describe(ch chan<- *prometheus.Desc) { ch <- storeWritableDesc }

// Collect probes the store, as Writable does.
func (h *Health) Collect(ch chan<- prometheus.Metric) {
	v := 1.0
	if h.Writable() != nil {
		v = 0
	}
	ch <- prometheus.MustNewConstMetric(storeWritableDesc, prometheus.GaugeValue, v)
}

// unwrapPath drops the path an *os.PathError repeats, keeping the reason.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
