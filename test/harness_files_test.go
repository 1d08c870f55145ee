package test

import (
	"bytes"
	"crypto/sha256"
	endian "encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The helpers that make and check files and trees, on a mount or in a
// store directory.

// pseudoRandom is n reproducible pseudo-random bytes.
func pseudoRandom(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// crashSeed is the seed of a randomized test's RNG: STATEFS_CRASH_SEED, or
// compressible returns n bytes of text-like content, different per seed,
// that zstd shrinks to well under half: a seal keeps it as chunks.
func compressible(n int, seed int64) []byte {
	rng := rand.New(rand.NewSource(seed))
	words := []string{"checkpoint", "operator", "key", "window", "count", "sum", "state", "timer"}
	b := make([]byte, 0, n+32)
	for len(b) < n {
		b = append(b, words[rng.Intn(len(words))]...)
		b = strconv.AppendInt(append(b, '='), int64(rng.Intn(1000)), 10)
		b = append(b, ' ')
	}
	return b[:n]
}

// the clock. It is printed when the test fails so a failure can be replayed.
func crashSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STATEFS_CRASH_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("STATEFS_CRASH_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("seed %d", seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("failed with seed %d; replay with STATEFS_CRASH_SEED=%d", seed, seed)
		}
	})
	return seed
}

// describe names content briefly for a failure message.
func describe(b []byte) string {
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%d bytes sha256 %x", len(b), sum[:6])
}

// isPrefix reports whether b is a prefix of of.
func isPrefix(b, of []byte) bool { return len(b) <= len(of) && bytes.Equal(b, of[:len(b)]) }

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// putFile writes data to path, as os.WriteFile does (no fsync).
func putFile(t testing.TB, path string, data []byte, perm os.FileMode) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, data, perm))
}

// putFileWithDirs is putFile (mode 0644) that first makes the missing
// directories on the way to path.
func putFileWithDirs(t testing.TB, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	putFile(t, path, data, 0o644)
}

// writeAndSync writes data to f and fsyncs it, returning the first error.
// A short write without an error is an error too: the bytes were not
// stored and nobody was told.
func writeAndSync(f *os.File, data []byte) error {
	n, err := f.Write(data)
	if err == nil && n != len(data) {
		err = fmt.Errorf("short write of %d of %d bytes without an error", n, len(data))
	}
	if err == nil {
		err = f.Sync()
	}
	return err
}

// createSynced writes data to the file at path (created, or truncated),
// fsyncs and closes it, and returns the first error.
func createSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = writeAndSync(f, data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeSynced writes data to path, making its directories, and fsyncs it:
// what fsync covered survives the daemon's SIGKILL (invariant 1).
func writeSynced(t testing.TB, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, createSynced(path, data))
}

// writeSyncedWithDir is writeSynced that fsyncs the file's directory too,
// as POSIX asks for a new name to be durable, and only then closes the
// file, so that the file's release is the last request it makes.
func writeSyncedWithDir(t testing.TB, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, writeAndSync(f, data))
	syncDir(t, filepath.Dir(path))
	require.NoError(t, f.Close())
}

// fsyncOpened fsyncs and closes the file or directory an open call
// returned (os.Open, os.Root.Open), or returns the open's error.
func fsyncOpened(f *os.File, err error) error {
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// fsyncPath fsyncs the file or directory at path.
func fsyncPath(path string) error { return fsyncOpened(os.Open(path)) }

// syncDir fsyncs the directory dir.
func syncDir(t testing.TB, dir string) {
	t.Helper()
	if err := fsyncPath(dir); err != nil {
		t.Fatalf("fsync %s: %v", dir, err)
	}
}

func fileBytes(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// requireContent compares a file's bytes with want without dumping megabytes
// into the failure message.
func requireContent(t testing.TB, path string, want []byte) {
	t.Helper()
	got := fileBytes(t, path)
	requireSameBytes(t, want, got, path)
}

func requireSameBytes(t testing.TB, want, got []byte, what string) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	if len(want) != len(got) {
		t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("%s: first difference at offset %d: got %#x, want %#x", what, i, got[i], want[i])
		}
	}
}

// requireTree checks files (path relative to the mount → content): with
// present each is there with exactly its content, else each is gone.
func requireTree(t *testing.T, m *Mount, files map[string][]byte, present bool) {
	t.Helper()
	for p, b := range files {
		if present {
			requireContent(t, m.Path(p), b)
			continue
		}
		_, err := os.Lstat(m.Path(p))
		require.True(t, os.IsNotExist(err), "%s should be gone: %v", p, err)
	}
}

// requireAbsent fails (without stopping the test) when path exists: bad
// input must change nothing.
func requireAbsent(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists after a refused command (err %v); bad input must change nothing", path, err)
	}
}

func lstatOf(t testing.TB, path string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Lstat(path, &st), "lstat %s", path)
	return st
}

func fstatOf(t testing.TB, f *os.File) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(int(f.Fd()), &st))
	return st
}

// dropCache evicts a file's pages from the kernel page cache so that the next
// read is answered by the filesystem, not by pages the kernel kept.
func dropCache(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
}

// requireSysErr fails unless err is one of the errnos in want. Several are
// allowed only where POSIX or Linux permits either answer.
func requireSysErr(t testing.TB, err error, want ...syscall.Errno) {
	t.Helper()
	for _, w := range want {
		if errors.Is(err, w) {
			return
		}
	}
	var got syscall.Errno
	if errors.As(err, &got) {
		t.Fatalf("got errno %d (%v), want one of %v", int(got), got, errnoNames(want))
	}
	t.Fatalf("got %v, want one of %v", err, errnoNames(want))
}

func errnoNames(es []syscall.Errno) []string {
	var s []string
	for _, e := range es {
		s = append(s, fmt.Sprintf("%d (%v)", int(e), e))
	}
	return s
}

// requireNoSpace fails unless err is ENOSPC or EDQUOT.
func requireNoSpace(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("%s on a full disk: %v, want ENOSPC or EDQUOT", what, err)
	}
}

// readDirNames lists the names in dir, sorted.
func readDirNames(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names, err
}

// rawDirent is one linux_dirent64 record as getdents64 returns it.
type rawDirent struct {
	Ino  uint64
	Off  int64
	Type uint8
	Name string
}

// getdents lists dir with raw getdents64 calls of bufSize bytes each, so
// "." and ".." are seen as the kernel reports them and a small buffer makes
// the filesystem resume from its own offsets many times.
func getdents(t testing.TB, dir string, bufSize int) []rawDirent {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	var out []rawDirent
	buf := make([]byte, bufSize)
	for {
		n, err := unix.Getdents(fd, buf)
		require.NoError(t, err, "getdents %s", dir)
		if n == 0 {
			return out
		}
		for b := buf[:n]; len(b) > 0; {
			reclen := int(endian.NativeEndian.Uint16(b[16:18]))
			require.Greater(t, reclen, 19, "bad rawDirent record length")
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			out = append(out, rawDirent{
				Ino:  endian.NativeEndian.Uint64(b[0:8]),
				Off:  int64(endian.NativeEndian.Uint64(b[8:16])),
				Type: b[18],
				Name: string(name),
			})
			b = b[reclen:]
		}
	}
}

// direntNames is the set of names in ds without "." and "..", failing on a
// name listed twice.
func direntNames(t testing.TB, ds []rawDirent) map[string]rawDirent {
	t.Helper()
	m := map[string]rawDirent{}
	for _, d := range ds {
		if d.Name == "." || d.Name == ".." {
			continue
		}
		_, dup := m[d.Name]
		require.False(t, dup, "readdir listed %q twice", d.Name)
		m[d.Name] = d
	}
	return m
}

// treeFacts choose what describeTree says of each entry besides its path
// and its type and permission bits.
type treeFacts uint

const (
	factOwner    treeFacts = 1 << iota // inode number, link count, uid and gid
	factSize                           // size, of every entry
	factFileSize                       // size, of regular files
	factFileTime                       // mtime, of regular files
	factTime                           // mtime, of every entry
	factContent                        // a regular file's content digest, a symlink's target
)

// describeTree lists every entry under root (outside a mount's .statefs),
// relative to root, with the facts asked for, one line each, sorted: two
// descriptions are equal only if none of those facts changed.
func describeTree(t testing.TB, root string, facts treeFacts) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == ".statefs" {
			return filepath.SkipDir
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		typ := st.Mode & syscall.S_IFMT
		line := fmt.Sprintf("%s mode=%o", rel, st.Mode)
		if facts&factOwner != 0 {
			line += fmt.Sprintf(" ino=%d nlink=%d uid=%d gid=%d", st.Ino, st.Nlink, st.Uid, st.Gid)
		}
		if facts&factSize != 0 || facts&factFileSize != 0 && typ == syscall.S_IFREG {
			line += fmt.Sprintf(" size=%d", st.Size)
		}
		if facts&factTime != 0 || facts&factFileTime != 0 && typ == syscall.S_IFREG {
			line += fmt.Sprintf(" mtime=%d.%09d", st.Mtim.Sec, st.Mtim.Nsec)
		}
		if facts&factContent != 0 {
			switch typ {
			case syscall.S_IFREG:
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				line += " " + describe(data)
			case syscall.S_IFLNK:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				line += " -> " + target
			}
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// digestTree maps every regular file under dir (relative name) to the
// SHA-256 of its content.
func digestTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sum := sha256.Sum256(data)
		sums[filepath.ToSlash(rel)] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Errorf("digesting %s: %v", dir, err)
	}
	return sums
}

// requireSameFiles checks that got (path → SHA-256) holds exactly the
// files of want, with their content.
func requireSameFiles(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	var problems []string
	for p, sum := range want {
		switch g, ok := got[p]; {
		case !ok:
			problems = append(problems, p+" is gone")
		case g != sum:
			problems = append(problems, p+" changed content")
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			problems = append(problems, p+" appeared")
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		t.Errorf("%s (%d) changed: %s", what, len(want), strings.Join(problems, "; "))
	}
}

// walkFiles calls fn with the path and the name relative to the mount of
// everything in the mount that is not a directory, outside .statefs.
func walkFiles(m *Mount, fn func(path, rel string) error) error {
	return filepath.WalkDir(m.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == m.Path(".statefs") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(m.Dir, p)
		if err != nil {
			return err
		}
		return fn(p, rel)
	})
}

// heldViewInoBits are set in the inode numbers .statefs/held shows: a held
// file is the same inode as in the tree, under a number of its own
// (fs/heldview.go).
const heldViewInoBits = 3 << 62

// requireNlinkMatchesNames checks that every file's link count is the number
// of names it has: in the tree (outside .statefs) and in the held trees that
// .statefs/held shows (held deletes keep a removed tree's names, and so its
// files' links).
func requireNlinkMatchesNames(t *testing.T, m *Mount) {
	t.Helper()
	for _, p := range nlinkMismatches(m) {
		t.Error(p)
	}
}

// requireNlinkSettles is requireNlinkMatchesNames on a mount that holds
// deletes. A removal the holder has not decided yet leaves the name in the
// pending area, which nothing shows but which still counts in the file's
// link count, until the holder removes it, a hold window after removals
// stopped, or holds its tree, which .statefs/held then shows (the kernel
// may keep the old count for its attribute timeout, a second). So the
// check is repeated until it passes, for at most within.
func requireNlinkSettles(t *testing.T, m *Mount, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		problems := nlinkMismatches(m)
		if len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range problems {
				t.Errorf("after waiting %v for held deletes to be decided: %s", within, p)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nlinkMismatches describes every file whose link count differs from its
// number of names in the tree and in the held trees, and what could not be
// walked.
func nlinkMismatches(m *Mount) []string {
	names := map[uint64][]string{}
	nlink := map[uint64]uint64{}
	note := func(p string) error {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		ino := st.Ino &^ heldViewInoBits
		names[ino] = append(names[ino], p)
		nlink[ino] = uint64(st.Nlink)
		return nil
	}
	var problems []string
	if err := walkFiles(m, func(p, _ string) error { return note(p) }); err != nil {
		problems = append(problems, fmt.Sprintf("walking the mount: %v", err))
	}
	held, err := os.ReadDir(m.Path(".statefs/held"))
	if err != nil && !os.IsNotExist(err) {
		problems = append(problems, fmt.Sprintf("listing the held trees: %v", err))
	}
	for _, h := range held {
		err := filepath.WalkDir(m.Path(".statefs/held", h.Name()), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			return note(p)
		})
		if err != nil {
			problems = append(problems, fmt.Sprintf("walking held tree %s: %v", h.Name(), err))
		}
	}
	for ino, ns := range names {
		if nlink[ino] != uint64(len(ns)) {
			problems = append(problems, fmt.Sprintf("inode %d has nlink %d but %d names: %q", ino, nlink[ino], len(ns), ns))
		}
	}
	sort.Strings(problems)
	return problems
}

// chunkFiles lists the paths of the chunk files of store, sorted.
func chunkFiles(t *testing.T, store string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(filepath.Join(store, "chunks"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasPrefix(d.Name(), ".") {
			paths = append(paths, p)
		}
		return err
	})
	require.NoError(t, err)
	slices.Sort(paths)
	return paths
}

// chunkBytes is the disk space the store's chunk files take.
func chunkBytes(t testing.TB, m *Mount) int64 { return dirBytes(t, filepath.Join(m.Store, "chunks")) }

// contentBytes is the disk space the store's chunk and object files take.
func contentBytes(t testing.TB, m *Mount) int64 {
	return chunkBytes(t, m) + dirBytes(t, filepath.Join(m.Store, "objects"))
}

// dirBytes is the length of the files under dir, summed.
func dirBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			total += info.Size()
		}
		return err
	})
	require.NoError(t, err)
	return total
}

// freeBytes is the space left for unprivileged writers on path's
// filesystem.
func freeBytes(t testing.TB, path string) int64 {
	t.Helper()
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(path, &st))
	return int64(st.Bavail) * st.Bsize
}
