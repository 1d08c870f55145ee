package test

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The kernel serves an inode either through passthrough or through its page
// cache, never both: opens of a file that is read sealed, then written, then
// read again while the writer is open must all succeed and see one content.
func TestOpenModesMix(t *testing.T) {
	m := mountFS(t, "--seal-delay", "0")
	data := pseudoRandom(3<<20, 1)
	p := m.Path("f")
	putFile(t, p, data, 0o644)
	waitAllSealed(t, m)

	r1, err := os.Open(p) // sealed content, through the page cache
	require.NoError(t, err)
	buf := make([]byte, 4096)
	_, err = r1.ReadAt(buf, 0)
	require.NoError(t, err)

	w, err := os.OpenFile(p, os.O_RDWR, 0) // moves the content to staging
	require.NoError(t, err)
	patch := pseudoRandom(4096, 2)
	_, err = w.WriteAt(patch, 1<<20)
	require.NoError(t, err)
	copy(data[1<<20:], patch)

	_, err = r1.ReadAt(buf, 1<<20)
	require.NoError(t, err)
	require.Equal(t, patch, buf, "a reader opened before the writer sees its bytes")
	require.NoError(t, r1.Close())

	r2, err := os.Open(p) // the writer is still open, not through passthrough
	require.NoError(t, err, "opening for reading while a writer is open")
	_, err = r2.ReadAt(buf, 1<<20)
	require.NoError(t, err)
	require.Equal(t, patch, buf)
	require.NoError(t, w.Close())
	require.NoError(t, r2.Close())

	r3, err := os.Open(p) // nothing open: passthrough again
	require.NoError(t, err)
	require.NoError(t, r3.Close())
	waitAllSealed(t, m)
	requireContent(t, p, data)
}

// The mount reads ahead 4 MiB by default and what --read-ahead says
// otherwise, instead of FUSE's 128 KiB.
func TestMountSetsReadAhead(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "4096"},
		{[]string{"--read-ahead", "1MiB"}, "1024"},
	} {
		m := mountFS(t, tc.args...)
		var st syscall.Stat_t
		if err := syscall.Stat(m.Dir, &st); err != nil {
			t.Fatal(err)
		}
		path := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != tc.want {
			t.Errorf("mount %v: %s = %s, want %s", tc.args, path, got, tc.want)
		}
		m.Unmount()
	}
}
