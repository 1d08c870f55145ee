package test

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statefs/statefs/internal/crashpoint"
)

// The first server of a keeper's connection dies right after a mutating
// request committed, before its answer (crash point reply-committed); the
// keeper starts the next server, the kernel sends it the request again,
// and the client sees what it would have seen without the kill: success,
// and the change made once (DESIGN invariant 8). Each request gets a mount
// of its own, since only the keeper's first server is armed.
func TestKeeperAnswersACommittedRequestOnce(t *testing.T) {
	m := mountFS(t, "--seal-delay", "1h")
	a, b := pseudoRandom(64<<10, 11), pseudoRandom(64<<10, 12)
	for name, data := range map[string][]byte{"unlinked": a, "from": b, "linked": a} {
		writeSyncedWithDir(t, m.Path("d", name), data)
	}
	require.NoError(t, os.Link(m.Path("d", "unlinked"), m.Path("d", "unlinked-2")))
	require.NoError(t, os.Mkdir(m.Path("d", "empty"), 0o755))
	m.Unmount()

	files := map[string][]byte{"d/unlinked": a, "d/unlinked-2": a, "d/from": b, "d/linked": a}
	for _, tc := range []struct {
		name string
		do   func() error
		made map[string][]byte // the files it makes
		dir  string            // the directory it makes
		gone []string          // the names it removes
	}{
		{"create with O_EXCL", func() error {
			f, err := os.OpenFile(m.Path("d", "new"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			_, err = f.Write([]byte("new"))
			return errors.Join(err, f.Close())
		}, map[string][]byte{"d/new": []byte("new")}, "", nil},
		{"unlink", func() error { return syscall.Unlink(m.Path("d", "unlinked")) }, nil, "", []string{"d/unlinked"}},
		{"rename", func() error { return os.Rename(m.Path("d", "from"), m.Path("d", "to")) },
			map[string][]byte{"d/to": b}, "", []string{"d/from"}},
		{"link", func() error { return os.Link(m.Path("d", "linked"), m.Path("d", "link")) },
			map[string][]byte{"d/link": a}, "", nil},
		{"mkdir", func() error { return syscall.Mkdir(m.Path("d", "dir"), 0o755) }, nil, "d/dir", nil},
		{"rmdir", func() error { return syscall.Rmdir(m.Path("d", "empty")) }, nil, "", []string{"d/empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m.Args = []string{"--seal-delay", "1h"}
			m.Env = []string{crashpoint.EnvVar + "=" + crashpoint.ReplyCommitted}
			m.Start()
			defer m.Unmount()
			err := tc.do()
			banner := "crashpoint: " + crashpoint.ReplyCommitted + " (hit 1): killing the daemon"
			require.Contains(t, m.Log(), banner, "the first server did not die after the commit")
			require.NoError(t, err, "the request, answered by the next server\n%s", tail(m.Log(), 4000))
			waitLogLine(t, m, 10*time.Second, "resumed the FUSE connection", "generation=2", "resend=sent")
			for p, data := range tc.made {
				files[p] = data
			}
			for _, p := range tc.gone {
				delete(files, p)
				_, err := os.Lstat(m.Path(p))
				require.ErrorIs(t, err, os.ErrNotExist, "%s after it was removed", p)
			}
			if tc.dir != "" {
				st, err := os.Stat(m.Path(tc.dir))
				require.NoError(t, err)
				require.True(t, st.IsDir(), "%s is not a directory", tc.dir)
			}
			requireFiles(t, m, files, nil)
			requireNlinkMatchesNames(t, m)
		})
	}
	if ps, r := fsck(t, m.Store, true); r.code != 0 || len(ps) != 0 {
		t.Errorf("fsck after the kills: exit %d, problems %v\n%s", r.code, ps, r.stderr)
	}
}
