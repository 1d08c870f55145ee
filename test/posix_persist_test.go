package test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// entryState is everything stat, readlink and listxattr say about one name
// that a restart must not change. st_dev (per mount) and st_blocks (storage
// layout) are left out.
type entryState struct {
	Ino, Nlink          uint64
	Mode, Uid, Gid      uint32
	Rdev                uint64
	Size                int64
	Atime, Mtime, Ctime unix.Timespec
	Symlink             string
	Xattrs              map[string]string
}

// snapshotEntries records the state of each of the names rels under root
// with lstat, readlink and xattr calls only: listing a directory or reading a
// file could move its atime.
func snapshotEntries(t testing.TB, root string, rels []string) map[string]entryState {
	t.Helper()
	out := map[string]entryState{}
	for _, rel := range rels {
		p := filepath.Join(root, rel)
		// readlink first: it may move the link's atime once (relatime),
		// and the lstat below must see the result.
		var target string
		if st := lstatOf(t, p); st.Mode&unix.S_IFMT == unix.S_IFLNK {
			var err error
			target, err = os.Readlink(p)
			require.NoError(t, err)
		}
		st := lstatOf(t, p)
		out[rel] = entryState{
			Ino: st.Ino, Nlink: uint64(st.Nlink), Mode: st.Mode, Uid: st.Uid, Gid: st.Gid,
			Rdev: st.Rdev, Size: st.Size, Atime: st.Atim, Mtime: st.Mtim, Ctime: st.Ctim,
			Symlink: target, Xattrs: userXattrs(t, p),
		}
	}
	return out
}

// treeNames lists every name under root, relative to it.
func treeNames(t testing.TB, root string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel, err := filepath.Rel(root, p)
		require.NoError(t, err)
		names = append(names, rel)
		return nil
	})
	require.NoError(t, err)
	sort.Strings(names)
	return names
}

// userXattrs maps each user.* attribute of p to its length and digest.
func userXattrs(t testing.TB, p string) map[string]string {
	t.Helper()
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	require.NoError(t, err, "listxattr %s", p)
	attrs := map[string]string{}
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if !strings.HasPrefix(name, "user.") {
			continue
		}
		v := make([]byte, 64<<10)
		n, err := unix.Lgetxattr(p, name, v)
		require.NoError(t, err, "getxattr %s %s", p, name)
		attrs[name] = fmt.Sprintf("%d bytes, sha256 %x", n, sha256.Sum256(v[:n]))
	}
	return attrs
}

// TestPosixPersistence: after a clean unmount and mount every name, inode
// number, mode, owner, time, xattr, link and byte is as it was.
func TestPosixPersistence(t *testing.T) {
	m := mountFS(t)
	tree := m.Path("tree")
	at := func(rel ...string) string { return filepath.Join(append([]string{tree}, rel...)...) }
	contents := map[string][]byte{}
	put := func(rel string, data []byte, mode uint32) {
		putFile(t, at(rel), data, 0o600)
		require.NoError(t, unix.Chmod(at(rel), mode))
		contents[rel] = data
	}

	require.NoError(t, os.MkdirAll(at("dir1", "sub", "deeper"), 0o755))
	require.NoError(t, os.Mkdir(at("dir2"), 0o755))
	require.NoError(t, unix.Chmod(at("dir1"), 0o750))
	require.NoError(t, os.Chown(at("dir1"), 1234, 5678))
	require.NoError(t, unix.Lsetxattr(at("dir1"), "user.dir", []byte("on a directory"), 0))

	put("dir1/file", pseudoRandom(100_000, 41), 0o640)
	require.NoError(t, os.Chown(at("dir1", "file"), 1234, 5678))
	require.NoError(t, unix.Lsetxattr(at("dir1", "file"), "user.a", []byte("1"), 0))
	require.NoError(t, unix.Lsetxattr(at("dir1", "file"), "user.big", pseudoRandom(4096, 42), 0))
	put("dir1/empty", nil, 0o600)
	put("dir2/exec", []byte("#!/bin/sh\n"), 0o4755)
	put("big", pseudoRandom(3<<20+17, 43), 0o644)
	put("orig", []byte("renamed file"), 0o644)
	require.NoError(t, unix.Rename(at("orig"), at("renamed")))
	contents["renamed"] = contents["orig"]
	delete(contents, "orig")
	put("deleted", []byte("gone"), 0o644)
	require.NoError(t, os.Remove(at("deleted")))
	delete(contents, "deleted")
	put("trunc", pseudoRandom(1<<20, 44), 0o644)
	require.NoError(t, os.Truncate(at("trunc"), 1000))
	contents["trunc"] = contents["trunc"][:1000]

	sparse := append(make([]byte, 1<<20), "x"...)
	f, err := os.Create(at("dir1", "sparse"))
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("x"), 1<<20)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	contents["dir1/sparse"] = sparse

	require.NoError(t, os.Link(at("dir1", "file"), at("dir2", "hardlink")))
	contents["dir2/hardlink"] = contents["dir1/file"]
	require.NoError(t, os.Symlink("dir1/file", at("sym-rel")))
	require.NoError(t, os.Symlink(at("big"), at("sym-abs")))
	require.NoError(t, os.Symlink("missing", at("sym-dangling")))
	require.NoError(t, os.Lchown(at("sym-dangling"), 77, 88))

	ts := []unix.Timespec{{Sec: 1_600_000_000, Nsec: 111_111_111}, {Sec: 1_500_000_000, Nsec: 222_222_222}}
	for _, rel := range []string{"dir1/file", "dir1", "big", "sym-rel"} {
		require.NoError(t, unix.UtimesNanoAt(unix.AT_FDCWD, at(rel), ts, unix.AT_SYMLINK_NOFOLLOW))
	}

	names := []string{
		".", "big", "dir1", "dir1/empty", "dir1/file", "dir1/sparse", "dir1/sub", "dir1/sub/deeper",
		"dir2", "dir2/exec", "dir2/hardlink", "renamed", "sym-abs", "sym-dangling", "sym-rel", "trunc",
	}
	before := snapshotEntries(t, tree, names)
	checkContents := func(when string) {
		t.Helper()
		for rel, want := range contents {
			got := fileBytes(t, at(rel))
			requireSameBytes(t, want, got, rel+" "+when)
		}
		requireContent(t, at("sym-rel"), contents["dir1/file"])
	}

	m.Restart()
	requireSameEntries(t, before, snapshotEntries(t, tree, names), "after restart", true)
	require.Equal(t, names, treeNames(t, tree), "names after restart")
	checkContents("after restart")

	// Listing and reading may have moved atimes (relatime); everything else
	// must survive a second restart as well.
	afterReads := snapshotEntries(t, tree, names)
	m.Restart()
	requireSameEntries(t, afterReads, snapshotEntries(t, tree, names), "after a second restart", false)
	require.Equal(t, names, treeNames(t, tree), "names after a second restart")
	checkContents("after a second restart")
	_, err = os.Lstat(at("deleted"))
	requireSysErr(t, err, unix.ENOENT)
	_, err = os.Lstat(at("orig"))
	requireSysErr(t, err, unix.ENOENT)

	// New inode numbers never reuse ones in use.
	putFile(t, at("new"), []byte("new"), 0o644)
	newIno := lstatOf(t, at("new")).Ino
	for rel, e := range afterReads {
		require.NotEqual(t, e.Ino, newIno, "new file got the inode number of %s", rel)
	}
}

// requireSameEntries compares two snapshots; withAtime says whether atimes
// must match too.
func requireSameEntries(t testing.TB, want, got map[string]entryState, when string, withAtime bool) {
	t.Helper()
	var names []string
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		w, g := want[n], got[n]
		if !withAtime {
			w.Atime, g.Atime = unix.Timespec{}, unix.Timespec{}
		}
		require.Equal(t, w, g, "%s: %s differs", when, n)
	}
	require.Len(t, got, len(want), "%s: extra entries", when)
}

// TestPosixStoreNames checks DESIGN invariant 6: nothing in the store is
// named after the caller's paths, so a 255-byte name needs no room there.
func TestPosixStoreNames(t *testing.T) {
	m := mountFS(t, "--seal-delay", "0")
	marker := "statefsprobe"
	long := marker + strings.Repeat("L", 255-len(marker))
	dir := m.Path(marker + strings.Repeat("D", 255-len(marker)))
	require.NoError(t, os.Mkdir(dir, 0o755))

	check := func(when string) {
		t.Helper()
		err := filepath.WalkDir(m.Store, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // the daemon may remove files while we walk
			}
			require.NotContains(t, d.Name(), marker, "%s: the store has a file named after a path: %s", when, p)
			return nil
		})
		require.NoError(t, err)
	}

	f, err := os.Create(filepath.Join(dir, long))
	require.NoError(t, err)
	require.NoError(t, writeAndSync(f, pseudoRandom(1<<20, 51)))
	check("while the file is open")
	require.NoError(t, f.Close())
	require.NoError(t, os.Symlink(long, filepath.Join(dir, marker+"sym")))
	require.NoError(t, os.Link(filepath.Join(dir, long), m.Path(marker+"link")))
	check("after close")
	waitAllSealed(t, m)
	check("after sealing")
	m.Restart()
	check("after restart")
	requireContent(t, filepath.Join(dir, long), pseudoRandom(1<<20, 51))
}

// sealedFile is one file of TestPosixSeal and the bytes it must hold.
type sealedFile struct {
	name string
	data []byte
}

// TestPosixSeal: content moves from staging to chunks in the background;
// reads give the same bytes before, during and after, and a sealed file can
// be changed in place.
func TestPosixSeal(t *testing.T) {
	m := mountFS(t, "--seal-delay", "0")
	random := pseudoRandom(20<<20+333, 61)
	block := pseudoRandom(1<<20, 62)
	holes := make([]byte, 10<<20+15)
	copy(holes[0:], pseudoRandom(4096, 63))
	copy(holes[3<<20:], pseudoRandom(64<<10, 64))
	copy(holes[10<<20+5:], "0123456789")

	files := []sealedFile{
		{"small", []byte("hello, sealed world\n")},
		{"empty", nil},
		{"random", random},
		{"random-copy", random}, // deduplicated against "random"
		{"zeros", make([]byte, 2<<20)},
		{"repeated", bytes.Repeat(block, 8)},
		{"holes", holes},
	}
	for _, f := range files {
		if f.name == "holes" {
			writeWithHoles(t, m.Path(f.name), holes)
		} else {
			putFile(t, m.Path(f.name), f.data, 0o644)
		}
	}
	check := func(when string) {
		t.Helper()
		for _, f := range files {
			p := m.Path(f.name)
			require.Equal(t, int64(len(f.data)), lstatOf(t, p).Size, "%s %s: size", f.name, when)
			dropCache(t, p)
			requireSameBytes(t, f.data, fileBytes(t, p), f.name+" "+when)
		}
	}
	check("right after close")
	waitAllSealed(t, m)
	check("once sealed")
	m.Restart()
	check("after restart")

	// Change a sealed file in the middle, without O_TRUNC.
	f, err := os.OpenFile(m.Path("random"), os.O_RDWR, 0)
	require.NoError(t, err)
	patch := pseudoRandom(4096, 65)
	_, err = f.WriteAt(patch, 7<<20+123)
	require.NoError(t, err)
	changed := append([]byte(nil), random...)
	copy(changed[7<<20+123:], patch)
	files[2].data = changed
	got := make([]byte, len(changed))
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	requireSameBytes(t, changed, got, "random while open after the change")
	require.NoError(t, f.Close())

	// Append to a sealed file and overwrite a hole of another.
	a, err := os.OpenFile(m.Path("small"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = a.Write([]byte("appended\n"))
	require.NoError(t, err)
	require.NoError(t, a.Close())
	files[0].data = append(append([]byte(nil), files[0].data...), "appended\n"...)
	h, err := os.OpenFile(m.Path("holes"), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = h.WriteAt([]byte("in the hole"), 5<<20)
	require.NoError(t, err)
	require.NoError(t, h.Close())
	copy(holes[5<<20:], "in the hole")

	// Shrink then grow a sealed file: no old bytes come back.
	require.NoError(t, os.Truncate(m.Path("repeated"), 1<<20+5))
	require.NoError(t, os.Truncate(m.Path("repeated"), 4<<20))
	files[5].data = append(append([]byte(nil), block...), block[:5]...)
	files[5].data = append(files[5].data, make([]byte, 4<<20-len(files[5].data))...)

	check("after changing sealed files")
	waitAllSealed(t, m)
	check("after sealing the changes")
	m.Restart()
	check("after changes and restart")
}

// writeWithHoles writes only the non-zero 4 KiB blocks of data, leaving holes.
func writeWithHoles(t testing.TB, path string, data []byte) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	zero := make([]byte, 4096)
	for off := 0; off < len(data); off += 4096 {
		blk := data[off:min(off+4096, len(data))]
		if !bytes.Equal(blk, zero[:len(blk)]) {
			_, err := f.WriteAt(blk, int64(off))
			require.NoError(t, err)
		}
	}
	require.NoError(t, f.Truncate(int64(len(data))))
	require.NoError(t, f.Close())
}
