package test

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The fsck tests use `statefs fsck` as the judge of the store's
// consistency: after a clean unmount it must find nothing at all, and after
// a SIGKILL only the leftovers that the next mount or gc removes (staging
// files no inode refers to, chunks no manifest uses).

// fsckJob and fsckSti place files in a Flink job's local state, so that the
// store also holds owners and job roots.
const (
	fsckJob = "0123456789abcdef0123456789abcdef"
	fsckSti = "tm_1/localState/aid_fedcba9876543210fedcba9876543210/jid_" + fsckJob + "/vtx_00000000000000000000000000000001_sti_0"
)

// TestFsckCleanStore writes a tree with hard links, renames, removals,
// sealed and unsealed files and job state, unmounts cleanly, and expects
// fsck to find nothing.
func TestFsckCleanStore(t *testing.T) {
	m := mountFS(t, sealDelayZero...)
	big := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB: sealed into chunks
	putFileWithDirs(t, m.Path("a/b/big"), big)
	putFileWithDirs(t, m.Path("a/b/small"), []byte("small"))
	putFileWithDirs(t, m.Path("a/dup"), big) // shares its chunks with a/b/big
	require.NoError(t, os.Link(m.Path("a/b/big"), m.Path("a/big-link")))
	require.NoError(t, os.Mkdir(m.Path("c"), 0o755))
	require.NoError(t, os.Rename(m.Path("a/b"), m.Path("c/b")))
	require.NoError(t, os.Rename(m.Path("a/dup"), m.Path("c/dup")))
	putFileWithDirs(t, m.Path("c/victim"), []byte("replaced"))
	require.NoError(t, os.Rename(m.Path("c/b/small"), m.Path("c/victim")))
	putFileWithDirs(t, m.Path("gone/x"), []byte("x"))
	require.NoError(t, os.Remove(m.Path("gone/x")))
	require.NoError(t, os.Remove(m.Path("gone")))
	// A RocksDB checkpoint in job state: hard links into a .tmp directory
	// that is renamed into place.
	putFileWithDirs(t, m.Path(fsckSti, "db/000001.sst"), big)
	require.NoError(t, os.MkdirAll(m.Path(fsckSti, "chk_1.tmp"), 0o755))
	require.NoError(t, os.Link(m.Path(fsckSti, "db/000001.sst"), m.Path(fsckSti, "chk_1.tmp/000001.sst")))
	putFileWithDirs(t, m.Path(fsckSti, "chk_1.tmp/CURRENT"), []byte("MANIFEST-000001\n"))
	require.NoError(t, os.Rename(m.Path(fsckSti, "chk_1.tmp"), m.Path(fsckSti, "chk_1")))
	waitStagingEmpty(t, m)

	// Files that stay in staging: written after a restart that seals
	// nothing before the unmount.
	m.Args = []string{"--seal-delay", "1h"}
	m.Restart()
	putFileWithDirs(t, m.Path("c/b/unsealed"), big)
	putFileWithDirs(t, m.Path(fsckSti, "db/LOG"), []byte("log"))
	m.Unmount()
	if n := len(stagingNames(t, m.Store)); n == 0 {
		t.Error("the store has no staging file: the test no longer covers unsealed files")
	}

	for _, verify := range []bool{false, true} {
		ps, r := fsck(t, m.Store, verify)
		if r.code != 0 || len(ps) != 0 {
			t.Errorf("fsck (verify=%v) of a cleanly unmounted store: exit %d, problems %v\n%s", verify, r.code, ps, r.stderr)
		}
	}
	r := runCLI(t, time.Minute, "fsck", "--store", m.Store)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "fsck: ") || !strings.HasSuffix(r.stdout, ", 0 problems\n") {
		t.Errorf("statefs fsck: exit %d, output %q, want one summary line with 0 problems\n%s", r.code, r.stdout, r.stderr)
	}
}

// waitStagingEmpty waits, for at most 10 s, until the store's staging
// directory is empty: every closed file of m has been sealed.
func waitStagingEmpty(t *testing.T, m *Mount) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(stagingNames(t, m.Store)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("files still unsealed after 10s: %v", stagingNames(t, m.Store))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stagingNames lists the files in the staging shards of store.
func stagingNames(t *testing.T, store string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(filepath.Join(store, "staging"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, d.Name())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestFsckAfterKill kills the daemon while writers create, seal, link,
// rename and remove files, and expects fsck to find no inconsistency, only
// leftovers, before and after the next mount recovers the store.
func TestFsckAfterKill(t *testing.T) {
	seed := crashSeed(t)
	for round := range 3 {
		m := mountFS(t, sealDelayZero...)
		stopGuard := guardStall(t, m, 20*time.Second, "writers")
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fsckWriter(m, rand.New(rand.NewPCG(seed, uint64(round*10+w))), w, stop)
			}()
		}
		time.Sleep(time.Duration(300+rand.New(rand.NewPCG(seed, uint64(round))).IntN(700)) * time.Millisecond)
		m.Kill()
		close(stop)
		wg.Wait()
		stopGuard()

		ps, r := fsck(t, m.Store, true)
		requireOnlyLeftovers(t, fmt.Sprintf("round %d: after SIGKILL", round), ps, r, problemStrayStaging, problemGarbageChunk, problemGarbageObject)
		// The next mount removes the stray staging files and keeps
		// everything consistent.
		m.Start()
		m.Unmount()
		ps, r = fsck(t, m.Store, false)
		requireOnlyLeftovers(t, fmt.Sprintf("round %d: after recovery", round), ps, r, problemGarbageChunk, problemGarbageObject)
		if t.Failed() {
			return // crashSeed logs the seed
		}
	}
}

// fsckWriter changes the tree under w<id>/ until stop is closed or the
// mount dies; errors after the kill are expected and ignored. Writer 0
// works in job state, where it renames no file (TestFsckRenameInJobState
// covers that on its own).
func fsckWriter(m *Mount, r *rand.Rand, id int, stop chan struct{}) {
	base := m.Path("w" + string(rune('0'+id)))
	if id == 0 {
		base = m.Path(fsckSti, "w0")
	}
	ops := []int{0, 1, 2, 3, 4, 5}
	if id == 0 {
		ops = []int{0, 1, 2, 4, 5}
	}
	if os.MkdirAll(base, 0o755) != nil {
		return
	}
	content := make([]byte, 200<<10)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		name := filepath.Join(base, "f"+string(rune('a'+r.IntN(8))))
		var err error
		switch ops[r.IntN(len(ops))] {
		case 0, 1:
			n := r.IntN(len(content))
			for j := range content[:n] {
				content[j] = byte(r.IntN(256))
			}
			err = os.WriteFile(name, content[:n], 0o644)
		case 2:
			err = os.Link(name, filepath.Join(base, "l"+string(rune('a'+r.IntN(8)))))
		case 3:
			err = os.Rename(name, filepath.Join(base, "f"+string(rune('a'+r.IntN(8)))))
		case 4:
			os.Remove(name)
			err = os.Remove(filepath.Join(base, "l"+string(rune('a'+r.IntN(8)))))
		case 5:
			var f *os.File
			if f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644); err == nil {
				f.Write(content[:r.IntN(64<<10)])
				os.Remove(name) // unlinked while open: an orphan
				f.Sync()
				f.Close()
			}
		}
		if err != nil && !os.IsNotExist(err) && !os.IsExist(err) {
			return // the mount is gone
		}
	}
}

// TestFsckRefusesMountedStore: fsck works only offline.
func TestFsckRefusesMountedStore(t *testing.T) {
	m := mountFS(t)
	r := runCLI(t, time.Minute, "fsck", "--store", m.Store)
	requireOneLineError(t, r, "unmount")
	m.Unmount()
	if ps, r := fsck(t, m.Store, false); r.code != 0 || len(ps) != 0 {
		t.Errorf("fsck of the unmounted store: exit %d, problems %v", r.code, ps)
	}
}

// TestFsckRenameInJobState renames files within, and into, a job's local
// state, as RocksDB does with CURRENT and Flink with its metadata files:
// the files stay below the job's directory, so they must not become roots
// of the job (the collector removes only directory roots, and fails the
// whole job on a file root whose inode is older than its directory's).
func TestFsckRenameInJobState(t *testing.T) {
	m := mountFS(t)
	putFileWithDirs(t, m.Path("early"), []byte("x"))
	putFileWithDirs(t, m.Path(fsckSti, "chk_1/CURRENT.tmp"), []byte("MANIFEST-000001\n"))
	require.NoError(t, os.Rename(m.Path(fsckSti, "chk_1/CURRENT.tmp"), m.Path(fsckSti, "chk_1/CURRENT")))
	require.NoError(t, os.Rename(m.Path("early"), m.Path(fsckSti, "chk_1/_metadata")))
	m.Unmount()
	if ps, r := fsck(t, m.Store, false); r.code != 0 || len(ps) != 0 {
		t.Errorf("fsck after renames in job state: exit %d, problems %v", r.code, ps)
	}
}
