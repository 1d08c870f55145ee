package test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/statefs/statefs/internal/testenv"
)

// killLoadDuration is how long TestServerKilledUnderLoad kills the server;
// STATEFS_KILL_LOAD_DURATION changes it.
func killLoadDuration(t *testing.T) time.Duration {
	d := time.Minute
	if s := os.Getenv("STATEFS_KILL_LOAD_DURATION"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("STATEFS_KILL_LOAD_DURATION=%q: %v", s, err)
		}
	}
	return d
}

// TestServerKilledUnderLoad SIGKILLs the process that serves the mount every
// 0.5 to 2 s under four loads at once, and no client notices: a live RocksDB
// with a checkpoint by links each round, a file exerciser checked against a
// model of the file, a writer that appends and fsyncs a file it keeps open,
// and loops of create, stat, rename, link, unlink and readdir. Every call of
// every client succeeds, every fsync'd byte is there, the databases verify
// their checksums, and the store is clean (fsck --verify at the end).
func TestServerKilledUnderLoad(t *testing.T) {
	// Its minute of load leaves a core idle: the long tests that share
	// nothing with others run beside it.
	t.Parallel()
	testenv.RequireRocksDBTools(t)
	m := mountFS(t)
	rng := rand.New(rand.NewPCG(crashSeed(t), 0))
	duration := killLoadDuration(t)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	load := func(name string, run func(ctx context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				stop()
			}
		}()
	}
	var appended appendLog
	load("rocksdb", func(ctx context.Context) error { return rocksRounds(ctx, m.Path("rocks")) })
	load("exerciser", func(ctx context.Context) error { return exercise(ctx, m.Path("fsx.dat"), rng.Uint64()) })
	load("appender", func(ctx context.Context) error { return appended.run(ctx, m.Path("append.log")) })
	load("names", func(ctx context.Context) error { return nameLoop(ctx, m.Path("names")) })

	kills := 0
	for start := time.Now(); time.Since(start) < duration && ctx.Err() == nil; kills++ {
		time.Sleep(500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond))))
		if err := syscall.Kill(m.ServerPID(), syscall.SIGKILL); err != nil {
			t.Fatalf("killing the server: %v", err)
		}
		// Each kill is of a server that serves: on a loaded machine the next
		// one may take longer than a pause to resume.
		for deadline := time.Now().Add(time.Minute); strings.Count(m.Log(), "resumed the FUSE connection") <= kills; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no takeover logged within a minute of kill %d:\n%s", kills+1, tail(m.Log(), 20000))
			}
		}
	}
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("after %d kills: %v", kills, err)
	}
	if t.Failed() {
		t.Fatalf("daemon log:\n%s", tail(m.Log(), 20000))
	}
	t.Logf("%d kills in %v", kills, duration)

	got, err := os.ReadFile(m.Path("append.log"))
	if err != nil {
		t.Fatal(err)
	}
	if want := appended.content(); !bytes.Equal(got, want) {
		t.Errorf("append.log: %d bytes, want the %d fsync'd ones exactly", len(got), len(want))
	}
	for _, db := range rocksDatabases(t, m.Path("rocks")) {
		rocksTool(t, m, time.Minute, "ldb", "--db="+db, "checkconsistency")
		rocksTool(t, m, time.Minute, "db_bench", "--benchmarks=verifychecksum", "--use_existing_db=1", "--db="+db)
	}
	if n := strings.Count(m.Log(), "resumed the FUSE connection"); n != kills {
		t.Errorf("%d takeovers logged, want one per kill (%d)", n, kills)
	}
}

// rocksRounds runs a live RocksDB as Flink does (no WAL) in dir, one round
// after another until ctx ends: fill (then overwrite) and read, then a
// native checkpoint,
// keeping the newest three checkpoints.
func rocksRounds(ctx context.Context, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	db := filepath.Join(dir, "db")
	for round := 0; ctx.Err() == nil; round++ {
		fill := "--benchmarks=fillrandom,readrandom"
		if round > 0 {
			fill = "--benchmarks=overwrite,readrandom"
		}
		out, err := exec.Command("db_bench", fill, "--db="+db,
			"--use_existing_db="+strconv.FormatBool(round > 0), "--num=20000", "--reads=20000", "--value_size=100",
			"--write_buffer_size=262144", "--target_file_size_base=262144", "--disable_wal=true",
			"--seed="+strconv.Itoa(round+1), "--threads=1").CombinedOutput()
		if err != nil {
			return fmt.Errorf("round %d: db_bench: %w\n%s", round, err, tail(string(out), 2000))
		}
		ckpt := filepath.Join(dir, fmt.Sprintf("chk_%d", round))
		if out, err := exec.Command("ldb", "--db="+db, "checkpoint", "--checkpoint_dir="+ckpt).CombinedOutput(); err != nil {
			return fmt.Errorf("round %d: ldb checkpoint: %w\n%s", round, err, out)
		}
		if err := os.RemoveAll(filepath.Join(dir, fmt.Sprintf("chk_%d", round-3))); err != nil {
			return fmt.Errorf("round %d: pruning a checkpoint: %w", round, err)
		}
	}
	return nil
}

// rocksDatabases lists the live database and the checkpoints rocksRounds
// left in dir.
func rocksDatabases(t *testing.T, dir string) []string {
	t.Helper()
	ckpts, err := filepath.Glob(filepath.Join(dir, "chk_*"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(dir, "db")}, ckpts...)
}

// exercise writes, truncates, reads, fsyncs and reopens one file at random
// until ctx ends, checking every read against a model of its content.
func exercise(ctx context.Context, path string, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 1))
	const maxSize = 1 << 20
	var model []byte
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() { f.Close() }()
	for op := 0; ctx.Err() == nil; op++ {
		switch k := rng.IntN(100); {
		case k < 45:
			off := rng.IntN(maxSize)
			data := make([]byte, 1+rng.IntN(64<<10))
			for i := range data {
				data[i] = byte(op + i)
			}
			if _, err := f.WriteAt(data, int64(off)); err != nil {
				return fmt.Errorf("op %d: write at %d: %w", op, off, err)
			}
			if end := off + len(data); end > len(model) {
				model = append(model, make([]byte, end-len(model))...)
			}
			copy(model[off:], data)
		case k < 55:
			size := rng.IntN(maxSize)
			if err := f.Truncate(int64(size)); err != nil {
				return fmt.Errorf("op %d: truncate to %d: %w", op, size, err)
			}
			if size < len(model) {
				model = model[:size]
			} else {
				model = append(model, make([]byte, size-len(model))...)
			}
		case k < 85:
			if len(model) == 0 {
				continue
			}
			off := rng.IntN(len(model))
			buf := make([]byte, min(1+rng.IntN(128<<10), len(model)-off))
			if _, err := f.ReadAt(buf, int64(off)); err != nil {
				return fmt.Errorf("op %d: read at %d: %w", op, off, err)
			}
			if !bytes.Equal(buf, model[off:off+len(buf)]) {
				return fmt.Errorf("op %d: read %d bytes at %d: not what was written", op, len(buf), off)
			}
		case k < 95:
			if err := f.Sync(); err != nil {
				return fmt.Errorf("op %d: fsync: %w", op, err)
			}
		default:
			if err := f.Close(); err != nil {
				return fmt.Errorf("op %d: close: %w", op, err)
			}
			if f, err = os.OpenFile(path, os.O_RDWR, 0); err != nil {
				return fmt.Errorf("op %d: reopen: %w", op, err)
			}
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, model) {
		return fmt.Errorf("the file holds %d bytes, not the %d of the model", len(got), len(model))
	}
	return nil
}

// appendLog appends numbered 4 KiB records to a file it keeps open,
// fsyncing each, and remembers how many fsyncs returned.
type appendLog struct {
	mu    sync.Mutex
	acked int
}

func appendRecord(i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("%07d\n", i)), 4096/8)
}

func (a *appendLog) run(ctx context.Context, path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	for i := 0; ctx.Err() == nil; i++ {
		if _, err := f.Write(appendRecord(i)); err != nil {
			f.Close()
			return fmt.Errorf("record %d: write: %w", i, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("record %d: fsync: %w", i, err)
		}
		a.mu.Lock()
		a.acked = i + 1
		a.mu.Unlock()
	}
	return f.Close()
}

func (a *appendLog) content() []byte {
	var b []byte
	for i := range a.acked {
		b = append(b, appendRecord(i)...)
	}
	return b
}

// nameLoop creates, stats, renames, links, lists and removes names in dir
// until ctx ends; every call must succeed.
func nameLoop(ctx context.Context, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for i := 0; ctx.Err() == nil; i++ {
		f, g, h := filepath.Join(dir, fmt.Sprint("f", i)), filepath.Join(dir, fmt.Sprint("g", i)), filepath.Join(dir, fmt.Sprint("h", i))
		sub := filepath.Join(dir, fmt.Sprint("d", i))
		steps := []struct {
			what string
			do   func() error
		}{
			{"create", func() error {
				file, err := os.OpenFile(f, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
				if err != nil {
					return err
				}
				err = writeAndSync(file, []byte("x"))
				if cerr := file.Close(); err == nil {
					err = cerr
				}
				return err
			}},
			{"stat", func() error { _, err := os.Stat(f); return err }},
			{"rename", func() error { return os.Rename(f, g) }},
			{"link", func() error { return os.Link(g, h) }},
			{"mkdir", func() error { return os.Mkdir(sub, 0o755) }},
			{"readdir", func() error {
				names, err := readDirNames(dir)
				if err == nil && len(names) != 3 {
					err = fmt.Errorf("%d names, want 3: %v", len(names), names)
				}
				return err
			}},
			{"unlink", func() error { return os.Remove(g) }},
			{"unlink", func() error { return os.Remove(h) }},
			{"rmdir", func() error { return os.Remove(sub) }},
		}
		for _, s := range steps {
			if err := s.do(); err != nil {
				return fmt.Errorf("round %d: %s: %w", i, s.what, err)
			}
		}
	}
	return nil
}
