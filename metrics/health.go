package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// ProbeName is the file Health creates and removes in the store directory
// to learn that the store takes new files.
const ProbeName = "healthz.probe"

// Health answers liveness and readiness probes (GET /healthz): 200 while
// the daemon's mount serves and its store directory takes new files, 503
// with a one-line reason otherwise.
type Health struct {
	Mountpoint string // absolute
	Store      string // the store directory

	mu sync.Mutex // one probe file at a time
}

// Check reports why the daemon is not healthy, or nil. It asks the mount
// for statfs, which the kernel sends to the daemon every time (a stat may
// be answered from the kernel's cache), so a daemon whose FUSE connection
// died or hangs fails it; a probe's timeout catches the hang. Then it
// creates and removes a file in the store directory: a disk the kernel
// remounted read-only after an error fails that.
func (h *Health) Check() error {
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
	h.mu.Lock()
	defer h.mu.Unlock()
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

// ServeHTTP answers a probe.
func (h *Health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.Check(); err != nil {
		http.Error(w, strings.ReplaceAll(err.Error(), "\n", "; "), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// unwrapPath drops the path an *os.PathError repeats, keeping the reason.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
