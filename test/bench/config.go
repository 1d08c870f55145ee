package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// config is one run's choices: where it works, what it writes, and the size
// of every workload. The defaults finish in about 25 minutes on 2 cores.
type config struct {
	Dir       string // work dir: targets, sources, binaries, daemon logs
	JSON      string // where the results go as JSON
	Markdown  string // where the tables go (they are also printed)
	Reps      int    // repetitions of each workload unless it has its own
	Workloads []int  // which of 1-9 to run
	// Targets are the targets the workloads' repetitions run, by their
	// names in --targets (targetFlags); nil runs every one.
	Targets     map[string]bool
	StatefsArgs []string

	CopyIn    copyInSize
	RocksDB   rocksDBSize
	Metadata  metadataSize
	Restart   restartSize
	Collector collectorSize
	Sealed    sealedSize
	Life      lifeSize
}

// copyInSize sizes workloads 1 and 4: Checkpoints checkpoints of SSTs files
// each, consecutive ones sharing all but one SST (90% with 10).
type copyInSize struct {
	Checkpoints int
	SSTs        int
	SSTMiB      int
	Reps        int
}

// rocksDBSize sizes workloads 2 and 3.
type rocksDBSize struct {
	Keys          int // fillrandom and overwrite write this many keys, fsync'd
	NoSyncKeys    int // fillrandom without fsync writes this many
	ValueSize     int
	Reads         int // readrandom reads this many
	SeqPasses     int // readseq reads the whole database this many times
	Checkpoints   int // ldb checkpoints in workload 3
	WritesBetween int // overwrites before each checkpoint
	Reps          int
}

// metadataSize sizes workload 5.
type metadataSize struct {
	Files int
	Dirs  int
	Reps  int
}

// restartSize sizes workload 6.
type restartSize struct {
	Inodes int
	Reps   int
}

// collectorSize sizes workload 7: Files files of FileMiB each, half of
// them owned by a job that is gone, and a copy-in of CopyCheckpoints
// checkpoints of workload 1's source running while the collector does.
type collectorSize struct {
	Files           int
	FileMiB         int
	CopyCheckpoints int
	Reps            int
	// Chunks and ChunksPerFile size the store of the run at the target's size.
	Chunks        int
	ChunksPerFile int
}

// sealedSize sizes workload 8.
type sealedSize struct {
	Keys      int // fillrandom writes this many keys, without a WAL
	ValueSize int
	Reads     int // each readrandom reads this many
	Reps      int
}

// lifeSize sizes workload 9: a database of Keys keys, then Rounds rounds of
// WritesPerRound overwrites and a checkpoint each.
type lifeSize struct {
	Keys           int // fillrandom, then overwrite, write this many keys before the first round
	WritesPerRound int // overwrites in each round
	ValueSize      int
	Rounds         int
	Reps           int
}

// lastWorkload is the highest workload number.
const lastWorkload = 9

func defaultConfig(repo string) config {
	dir := filepath.Join(repo, "var", "bench")
	// The heaviest workloads repeat less, so that the default run stays
	// around 25 minutes on 2 cores: 1, 2 and 7 twice, 5 (50,000 files on
	// each target, about 100 s a repetition), 8 (about 100 s) and 9 (at most
	// about 3 minutes a target) once. Workload 6 runs at its targets' size,
	// 1,000,000 inodes: creating them through statefs takes about 4 minutes.
	return config{
		Dir:       dir,
		JSON:      filepath.Join(dir, "result.json"),
		Markdown:  filepath.Join(dir, "result.md"),
		Reps:      3,
		Workloads: []int{1, 2, 3, 4, 5, 6, 7, 8, 9},
		CopyIn:    copyInSize{Checkpoints: 10, SSTs: 10, SSTMiB: 64, Reps: 2},
		RocksDB:   rocksDBSize{Keys: 30000, NoSyncKeys: 100000, ValueSize: 400, Reads: 100000, SeqPasses: 10, Checkpoints: 10, WritesBetween: 2000, Reps: 2},
		Metadata:  metadataSize{Files: 50000, Dirs: 100, Reps: 1},
		Restart:   restartSize{Inodes: 1_000_000},
		Collector: collectorSize{Files: 500, FileMiB: 4, CopyCheckpoints: 2, Reps: 2, Chunks: 1_000_000, ChunksPerFile: 1000},
		// 2,400,000 keys of 400 bytes leave about 400 MB of SSTs.
		Sealed: sealedSize{Keys: 2_400_000, ValueSize: 400, Reads: 60000, Reps: 1},
		Life:   lifeSize{Keys: 100_000, WritesPerRound: 5000, ValueSize: 400, Rounds: 200, Reps: 1},
	}
}

// parseFlags reads the command line over the defaults. A workload's own
// reps flag left at 0 means --reps.
func parseFlags(repo string, args []string) (config, error) {
	c := defaultConfig(repo)
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&c.Dir, "dir", c.Dir, "work `dir` on the disk under test (targets, sources, logs)")
	jsonPath := fs.String("json", "", "write the results as JSON to `file` (default DIR/result.json)")
	mdPath := fs.String("markdown", "", "write the tables to `file` (default DIR/result.md)")
	fs.IntVar(&c.Reps, "reps", c.Reps, "repetitions per workload (median reported)")
	only := fs.String("workloads", "1,2,3,4,5,6,7,8,9", "comma-separated workloads to run (1 and 4 run together, as do 2 and 3)")
	statefsArgs := fs.String("statefs-args", "", "extra flags for statefs mount, space-separated (e.g. --passthrough=false)")
	targets := fs.String("targets", "native,loopback,statefs,nokeeper", "comma-separated targets the workloads' repetitions run (statefs always; nokeeper is statefs --keeper=false, in workloads 2, 3, 5 and 8)")

	fs.IntVar(&c.CopyIn.Checkpoints, "copyin-checkpoints", c.CopyIn.Checkpoints, "workload 1: checkpoints copied in")
	fs.IntVar(&c.CopyIn.SSTs, "copyin-ssts", c.CopyIn.SSTs, "workload 1: SST files per checkpoint (all but one shared with the previous checkpoint)")
	fs.IntVar(&c.CopyIn.SSTMiB, "copyin-sst-mib", c.CopyIn.SSTMiB, "workload 1: size of an SST file in MiB")
	fs.IntVar(&c.CopyIn.Reps, "copyin-reps", c.CopyIn.Reps, "workloads 1 and 4: repetitions (0: --reps)")

	fs.IntVar(&c.RocksDB.Keys, "rocksdb-keys", c.RocksDB.Keys, "workload 2: keys written by fillrandom and by overwrite, each with an fsync'd WAL")
	fs.IntVar(&c.RocksDB.NoSyncKeys, "rocksdb-nosync-keys", c.RocksDB.NoSyncKeys, "workload 2: keys written by fillrandom without fsync, on a second database")
	fs.IntVar(&c.RocksDB.ValueSize, "rocksdb-value-size", c.RocksDB.ValueSize, "workload 2: value size in bytes")
	fs.IntVar(&c.RocksDB.Reads, "rocksdb-reads", c.RocksDB.Reads, "workload 2: reads by readrandom")
	fs.IntVar(&c.RocksDB.SeqPasses, "rocksdb-seq-passes", c.RocksDB.SeqPasses, "workload 2: passes of readseq over the whole database")
	fs.IntVar(&c.RocksDB.Checkpoints, "rocksdb-checkpoints", c.RocksDB.Checkpoints, "workload 3: ldb checkpoints taken")
	fs.IntVar(&c.RocksDB.WritesBetween, "rocksdb-writes-between", c.RocksDB.WritesBetween, "workload 3: overwrites before each checkpoint")
	fs.IntVar(&c.RocksDB.Reps, "rocksdb-reps", c.RocksDB.Reps, "workloads 2 and 3: repetitions (0: --reps)")

	fs.IntVar(&c.Metadata.Files, "meta-files", c.Metadata.Files, "workload 5: files created, stat'ed and unlinked")
	fs.IntVar(&c.Metadata.Dirs, "meta-dirs", c.Metadata.Dirs, "workload 5: directories they are spread over")
	fs.IntVar(&c.Metadata.Reps, "meta-reps", c.Metadata.Reps, "workload 5: repetitions (0: --reps)")

	fs.IntVar(&c.Restart.Inodes, "restart-inodes", c.Restart.Inodes, "workload 6: inodes in the store when it restarts and its server is killed (the targets are set at this default)")
	fs.IntVar(&c.Restart.Reps, "restart-reps", c.Restart.Reps, "workload 6: restarts (0: --reps)")

	fs.IntVar(&c.Collector.Files, "gc-files", c.Collector.Files, "workload 7: files written, half of them by a job that is gone")
	fs.IntVar(&c.Collector.FileMiB, "gc-file-mib", c.Collector.FileMiB, "workload 7: size of each in MiB (chunks average 1 MiB)")
	fs.IntVar(&c.Collector.CopyCheckpoints, "gc-copy-checkpoints", c.Collector.CopyCheckpoints, "workload 7: checkpoints of workload 1 copied in while the collector runs")
	fs.IntVar(&c.Collector.Chunks, "gc-chunks", c.Collector.Chunks, "workload 7: chunks in the store gc runs over offline (the target is set at 1,000,000)")
	fs.IntVar(&c.Collector.ChunksPerFile, "gc-chunks-per-file", c.Collector.ChunksPerFile, "workload 7: chunks of each file of that store")
	fs.IntVar(&c.Collector.Reps, "gc-reps", c.Collector.Reps, "workload 7: repetitions (0: --reps)")

	fs.IntVar(&c.Sealed.Keys, "sealed-keys", c.Sealed.Keys, "workload 8: keys written by fillrandom (the default makes about 400 MB of SSTs)")
	fs.IntVar(&c.Sealed.ValueSize, "sealed-value-size", c.Sealed.ValueSize, "workload 8: value size in bytes")
	fs.IntVar(&c.Sealed.Reads, "sealed-reads", c.Sealed.Reads, "workload 8: reads by each readrandom (cold, and after the restore)")
	fs.IntVar(&c.Sealed.Reps, "sealed-reps", c.Sealed.Reps, "workload 8: repetitions (0: --reps)")

	fs.IntVar(&c.Life.Keys, "life-keys", c.Life.Keys, "workload 9: keys written by fillrandom and again by overwrite before the first round")
	fs.IntVar(&c.Life.WritesPerRound, "life-writes", c.Life.WritesPerRound, "workload 9: keys overwritten in each round")
	fs.IntVar(&c.Life.ValueSize, "life-value-size", c.Life.ValueSize, "workload 9: value size in bytes")
	fs.IntVar(&c.Life.Rounds, "life-rounds", c.Life.Rounds, "workload 9: rounds of overwrite, checkpoint and prune (e.g. 400 for a longer life)")
	fs.IntVar(&c.Life.Reps, "life-reps", c.Life.Reps, "workload 9: repetitions (0: --reps)")

	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() != 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	c.JSON, c.Markdown = orDefault(*jsonPath, filepath.Join(c.Dir, "result.json")), orDefault(*mdPath, filepath.Join(c.Dir, "result.md"))
	c.StatefsArgs = strings.Fields(*statefsArgs)
	var err error
	if c.Workloads, err = parseWorkloads(*only); err != nil {
		return c, err
	}
	if c.Targets, err = parseTargets(*targets); err != nil {
		return c, err
	}
	return c, c.check()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// targetFlags names each target in --targets.
var targetFlags = map[string]string{"native": native, "loopback": loopback, "statefs": statefs, "nokeeper": noKeeper}

// parseTargets reads --targets: statefs, which every table is about, must
// be among them.
func parseTargets(list string) (map[string]bool, error) {
	targets := map[string]bool{}
	for _, f := range strings.Split(list, ",") {
		name, ok := targetFlags[strings.TrimSpace(f)]
		if !ok {
			return nil, fmt.Errorf("--targets: %q is not a target (native, loopback, statefs, nokeeper)", f)
		}
		targets[name] = true
	}
	if !targets[statefs] {
		return nil, fmt.Errorf("--targets: %q leaves out statefs, which every table compares", list)
	}
	return targets, nil
}

func parseWorkloads(list string) ([]int, error) {
	var ids []int
	for _, f := range strings.Split(list, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || id < 1 || id > lastWorkload {
			return nil, fmt.Errorf("--workloads: %q is not a workload (1-%d)", f, lastWorkload)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// check refuses sizes that would make a workload measure nothing.
func (c config) check() error {
	positive := map[string]int{
		"--reps": c.Reps, "--copyin-checkpoints": c.CopyIn.Checkpoints, "--copyin-ssts": c.CopyIn.SSTs,
		"--copyin-sst-mib": c.CopyIn.SSTMiB, "--rocksdb-keys": c.RocksDB.Keys, "--rocksdb-nosync-keys": c.RocksDB.NoSyncKeys, "--rocksdb-value-size": c.RocksDB.ValueSize,
		"--rocksdb-reads": c.RocksDB.Reads, "--rocksdb-checkpoints": c.RocksDB.Checkpoints,
		"--rocksdb-writes-between": c.RocksDB.WritesBetween, "--meta-files": c.Metadata.Files, "--meta-dirs": c.Metadata.Dirs,
		"--restart-inodes": c.Restart.Inodes, "--gc-file-mib": c.Collector.FileMiB, "--gc-copy-checkpoints": c.Collector.CopyCheckpoints,
		"--gc-chunks-per-file": c.Collector.ChunksPerFile, "--sealed-keys": c.Sealed.Keys, "--sealed-value-size": c.Sealed.ValueSize,
		"--sealed-reads": c.Sealed.Reads, "--life-keys": c.Life.Keys, "--life-writes": c.Life.WritesPerRound,
		"--life-value-size": c.Life.ValueSize, "--life-rounds": c.Life.Rounds,
	}
	for name, v := range positive {
		if v <= 0 {
			return fmt.Errorf("%s must be positive, got %d", name, v)
		}
	}
	if c.Collector.Chunks < 2*c.Collector.ChunksPerFile {
		return fmt.Errorf("--gc-chunks must be at least twice --gc-chunks-per-file (a file for each job), got %d", c.Collector.Chunks)
	}
	if c.Collector.Files < 2 {
		return fmt.Errorf("--gc-files must be at least 2 (half of them become garbage), got %d", c.Collector.Files)
	}
	for name, v := range map[string]int{"--copyin-reps": c.CopyIn.Reps, "--rocksdb-reps": c.RocksDB.Reps,
		"--meta-reps": c.Metadata.Reps, "--restart-reps": c.Restart.Reps, "--gc-reps": c.Collector.Reps,
		"--sealed-reps": c.Sealed.Reps, "--life-reps": c.Life.Reps} {
		if v < 0 {
			return fmt.Errorf("%s must not be negative, got %d", name, v)
		}
	}
	return nil
}

// reps is a workload's own repetition count, or --reps.
func (c config) reps(own int) int {
	if own > 0 {
		return own
	}
	return c.Reps
}

// runsTarget reports whether the repetitions run the target named name.
func (c config) runsTarget(name string) bool { return c.Targets == nil || c.Targets[name] }

// runs reports whether any of the workloads ids was asked for.
func (c config) runs(ids ...int) bool {
	for _, w := range c.Workloads {
		for _, id := range ids {
			if w == id {
				return true
			}
		}
	}
	return false
}
