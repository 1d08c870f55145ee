package test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statefs/statefs/internal/testenv"
)

// rocksTool runs a RocksDB tool and returns its stdout; it fails the test
// with the tool's output and the daemon's log when the tool fails. A tool
// stuck in the filesystem for longer than limit makes the daemon dump its
// goroutines and exit (see guardStall), which ends the tool with an error.
func rocksTool(t *testing.T, m *Mount, limit time.Duration, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	stop := guardStall(t, m, limit, name+" "+args[0])
	err := cmd.Run()
	stop()
	t.Logf("%s %s: %v", name, strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s %q: %v\nstdout (tail):\n%s\nstderr:\n%s\ndaemon log:\n%s",
			name, args, err, tail(stdout.String(), 2000), tail(stderr.String(), 4000), tail(m.Log(), 30000))
	}
	return stdout.Bytes()
}

// TestRocksDBCheckpointSurvivesKill runs a live RocksDB on the mount the way a
// Flink TaskManager does, takes a native checkpoint (hard links to the live
// SST files), kills the daemon with SIGKILL, and checks that the checkpoint
// and the live database open with exactly the same contents afterwards
// (DESIGN invariants 1 and 2).
func TestRocksDBCheckpointSurvivesKill(t *testing.T) {
	m := mountFS(t)
	testenv.RequireRocksDBTools(t)

	db, ckpt := m.Path("db"), m.Path("ckpt")
	// Small memtables and SST files give many SSTs, flushes and compactions
	// (which unlink SSTs) from a modest amount of data.
	tuning := []string{
		"--db=" + db,
		"--num=200000",
		"--value_size=100",
		"--write_buffer_size=1048576",
		"--target_file_size_base=1048576",
		"--max_bytes_for_level_base=4194304",
		"--compression_type=snappy",
		"--disable_wal=false",
		"--threads=1",
	}
	rocksTool(t, m, 90*time.Second, "db_bench",
		append([]string{"--benchmarks=fillrandom,readrandom", "--seed=1"}, tuning...)...)
	// Reopen the database and overwrite with sync=true: every write fsyncs
	// the WAL, as Flink's RocksDB does when asked to.
	rocksTool(t, m, 60*time.Second, "db_bench",
		append([]string{"--benchmarks=overwrite,readrandom", "--use_existing_db=true", "--sync=true",
			"--writes=2000", "--reads=20000", "--seed=2"}, tuning...)...)

	out := rocksTool(t, m, 60*time.Second, "ldb", "--db="+db, "checkpoint", "--checkpoint_dir="+ckpt)
	if !strings.Contains(string(out), "OK") {
		t.Errorf("ldb checkpoint did not say OK:\n%s", out)
	}
	requireHardLinkedSSTs(t, db, ckpt)

	ckptBefore := scanDigest(t, m, ckpt)
	dbBefore := scanDigest(t, m, db)
	t.Logf("checkpoint: %d keys, db: %d keys", ckptBefore.keys, dbBefore.keys)
	if ckptBefore.keys == 0 || dbBefore.keys == 0 {
		t.Fatalf("empty scans (checkpoint %d keys, db %d keys)", ckptBefore.keys, dbBefore.keys)
	}

	m.Kill()
	m.Start()

	requireHardLinkedSSTs(t, db, ckpt)
	if after := scanDigest(t, m, ckpt); after != ckptBefore {
		t.Errorf("checkpoint after SIGKILL and remount: %d keys sha256 %s, want %d keys sha256 %s",
			after.keys, after.sha, ckptBefore.keys, ckptBefore.sha)
	}
	if after := scanDigest(t, m, db); after != dbBefore {
		t.Errorf("live db after SIGKILL and remount: %d keys sha256 %s, want %d keys sha256 %s",
			after.keys, after.sha, dbBefore.keys, dbBefore.sha)
	}
}

// requireHardLinkedSSTs checks that every SST file of the checkpoint is the
// live database's file under a second name, not a copy: RocksDB links them
// and falls back to copying only on EXDEV or ENOTSUP.
func requireHardLinkedSSTs(t *testing.T, db, ckpt string) {
	t.Helper()
	ssts, err := filepath.Glob(filepath.Join(ckpt, "*.sst"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ssts) == 0 {
		t.Fatalf("checkpoint %s holds no SST files", ckpt)
	}
	for _, p := range ssts {
		var inCkpt, inDB syscall.Stat_t
		if err := syscall.Stat(p, &inCkpt); err != nil {
			t.Errorf("stat %s: %v", p, err)
			continue
		}
		if inCkpt.Nlink < 2 {
			t.Errorf("%s has nlink %d, want >= 2 (a hard link, not a copy)", p, inCkpt.Nlink)
		}
		live := filepath.Join(db, filepath.Base(p))
		if err := syscall.Stat(live, &inDB); err != nil {
			// Compaction may have dropped it from the live db since; then
			// the checkpoint holds the only name left.
			if inCkpt.Nlink != 1 {
				t.Errorf("stat %s: %v, but the checkpoint's copy has nlink %d", live, err, inCkpt.Nlink)
			}
			continue
		}
		if inCkpt.Ino != inDB.Ino {
			t.Errorf("%s has inode %d, %s has %d: want one file under two names", p, inCkpt.Ino, live, inDB.Ino)
		}
	}
}

// scan is what `ldb scan --hex` printed for a database.
type scan struct {
	keys int
	sha  string
}

func scanDigest(t *testing.T, m *Mount, db string) scan {
	t.Helper()
	out := rocksTool(t, m, 60*time.Second, "ldb", "--db="+db, "scan", "--hex")
	sum := sha256.Sum256(out)
	return scan{keys: bytes.Count(out, []byte("\n")), sha: hex.EncodeToString(sum[:])}
}
