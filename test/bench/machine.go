package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Machine is what the numbers were measured on.
type Machine struct {
	Date        time.Time `json:"date"`
	Cores       int       `json:"cores"`
	CPU         string    `json:"cpu"`
	Kernel      string    `json:"kernel"`
	MemoryGiB   float64   `json:"memory_gib"`
	Dir         string    `json:"dir"`
	Device      string    `json:"device"`
	Filesystem  string    `json:"filesystem"`
	DiskFreeGiB float64   `json:"disk_free_gib"`
	DiskSizeGiB float64   `json:"disk_size_gib"`
	GoVersion   string    `json:"go_version"`
	GoFUSE      string    `json:"go_fuse"`
	RocksDB     string    `json:"rocksdb"`
}

// describeMachine reads the machine's facts; one it cannot read is left
// empty rather than failing the run.
func describeMachine(repo, dir string) Machine {
	m := Machine{
		Date:      time.Now().UTC(),
		Cores:     runtime.NumCPU(),
		CPU:       cpuModel(),
		Kernel:    firstLine("/proc/sys/kernel/osrelease"),
		MemoryGiB: float64(memTotalKiB()) / (1 << 20),
		Dir:       dir,
		GoVersion: runtime.Version(),
		GoFUSE:    commandLine(repo, "go", "list", "-m", "github.com/hanwen/go-fuse/v2"),
		RocksDB:   commandLine(repo, "db_bench", "--version"),
	}
	m.Device, m.Filesystem = mountOf(dir)
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) == nil {
		m.DiskFreeGiB = float64(st.Bavail) * float64(st.Bsize) / (1 << 30)
		m.DiskSizeGiB = float64(st.Blocks) * float64(st.Bsize) / (1 << 30)
	}
	return m
}

func cpuModel() string {
	for _, line := range lines("/proc/cpuinfo") {
		if name, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
		}
	}
	return ""
}

func memTotalKiB() int64 {
	for _, line := range lines("/proc/meminfo") {
		var kib int64
		if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kib); err == nil {
			return kib
		}
	}
	return 0
}

// mountOf is the device and filesystem type of the mount holding dir: the
// longest mountpoint that prefixes it.
func mountOf(dir string) (device, fstype string) {
	best := -1
	for _, line := range lines("/proc/self/mountinfo") {
		mnt, dev, typ, ok := parseMountinfo(line)
		if !ok || !within(dir, mnt) || len(mnt) <= best {
			continue
		}
		best, device, fstype = len(mnt), dev, typ
	}
	return device, fstype
}

// parseMountinfo splits a /proc/self/mountinfo line into its mountpoint,
// source device and filesystem type.
func parseMountinfo(line string) (mnt, device, fstype string, ok bool) {
	fields := strings.Fields(line)
	for i, f := range fields {
		if f == "-" && i+2 < len(fields) && len(fields) > 4 {
			return fields[4], fields[i+2], fields[i+1], true
		}
	}
	return "", "", "", false
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

func commandLine(dir, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

func firstLine(path string) string {
	if l := lines(path); len(l) > 0 {
		return strings.TrimSpace(l[0])
	}
	return ""
}

func lines(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		out = append(out, s.Text())
	}
	return out
}

// caches drops the kernel's page, dentry and inode caches between phases,
// so that a phase reads from the disk (or the daemon) rather than from what
// the previous phase left in memory. It needs root; when a drop fails it
// remembers why, and every table after says so.
type caches struct {
	failed string // why the first drop that failed did, "" if none did
}

func (c *caches) Drop() {
	syscall.Sync()
	err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0)
	if err != nil && c.failed == "" {
		c.failed = err.Error()
	}
}

// State says, for a table, whether its phases started from cold caches.
func (c *caches) State() string {
	if c.failed == "" {
		return "caches dropped between phases (sync; echo 3 > /proc/sys/vm/drop_caches)"
	}
	return "caches NOT dropped (" + c.failed + "): phases may read what earlier ones cached"
}
