// Command bench measures statefs side by side with the bare disk and with a
// bare FUSE loopback on the same disk: nine workloads modelled on
// Flink running RocksDB, each repeated with the targets taking turns,
// printed as one table per workload with its targets, and written
// as JSON. BENCHMARKS.md at the repository root holds the latest tables.
//
//	go run ./test/bench [--dir DIR] [--reps N] [--workloads 1,2,...] [size flags]
//
// It needs root (it mounts, and drops the page cache between phases),
// /dev/fuse, and RocksDB's db_bench and ldb (Debian: rocksdb-tools).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	repo, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	cfg, err := parseFlags(repo, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	report, runErr := run(cfg, repo, os.Stderr)
	if report == nil {
		fmt.Fprintln(os.Stderr, "bench:", runErr)
		os.Exit(1)
	}
	md := markdown(report)
	os.Stdout.Write(md)
	if err := publish(cfg, report, md); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "bench:", runErr)
		os.Exit(1)
	}
}

func markdown(r *Report) []byte {
	var md bytes.Buffer
	writeMarkdown(&md, r)
	return md.Bytes()
}

// publish writes the tables and the JSON to their files.
func publish(cfg config, r *Report, md []byte) error {
	if err := os.MkdirAll(filepath.Dir(cfg.Markdown), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cfg.Markdown, md, 0o644); err != nil {
		return err
	}
	return writeJSON(cfg.JSON, r)
}

// repoRoot is the directory of the go.mod the harness runs in.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the statefs module")
	}
	return filepath.Dir(mod), nil
}
