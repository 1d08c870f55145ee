package test

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/statefs/statefs/internal/crashpoint"
	"github.com/statefs/statefs/keeper"
)

// The first server of a keeper's connection dies in the middle of a mkdir,
// after its commit and before its answer (crash point reply-committed). On
// a kernel that cannot send the request again to the next server (Linux
// before 6.9, played here with keeper.NoResendEnvVar), the next server
// answers it with EIO before it serves, instead of leaving the caller
// waiting until the mount ends: the caller sees EIO for a mkdir that was
// made, which the kernel shows once the next server has dropped what it
// cached of the name; and the mount serves on. With resend (this kernel's own), the same
// mkdir succeeds, answered by the next server from its reply record.
func TestKeeperFailsARequestItCannotResend(t *testing.T) {
	m := mountFS(t)
	m.Unmount()
	for _, tc := range []struct {
		name   string
		env    []string
		want   syscall.Errno // 0: success
		resend string
	}{
		{"without resend", []string{keeper.NoResendEnvVar + "=1"}, syscall.EIO, "resend=refused"},
		{"with resend", nil, 0, "resend=sent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == 0 && !keeper.KernelResends() {
				t.Skip("the kernel cannot send a request again (Linux 6.9)")
			}
			m.Env = append([]string{crashpoint.EnvVar + "=" + crashpoint.ReplyCommitted}, tc.env...)
			m.Start()
			defer m.Unmount()
			dir := m.Path(tc.name)
			answered := make(chan error, 1)
			go func() { answered <- syscall.Mkdir(dir, 0o755) }()
			var err error
			select {
			case err = <-answered:
			case <-time.After(15 * time.Second):
				t.Fatalf("the mkdir in flight when its server died is unanswered after 15s\n%s", tail(m.Log(), 4000))
			}
			require.Contains(t, m.Log(), "crashpoint: "+crashpoint.ReplyCommitted+" (hit 1): killing the daemon",
				"the first server did not die in the mkdir")
			if tc.want == 0 {
				require.NoError(t, err, "the mkdir, answered by the next server")
			} else {
				require.ErrorIs(t, err, tc.want, "the mkdir, answered by the next server")
			}
			waitLogLine(t, m, 10*time.Second, "resumed the FUSE connection", "generation=2", tc.resend)
			if tc.want != 0 {
				waitLogLine(t, m, time.Second, "resumed the FUSE connection", "failed=1")
				// The kernel cached the name as missing (the lookup
				// before the mkdir), for --cache-timeout.
				waitLogLine(t, m, 10*time.Second, "dropped the kernel's caches", "names=1")
			}
			st, err := os.Stat(dir)
			require.NoError(t, err, "the directory the dead server made")
			require.True(t, st.IsDir())
			writeSynced(t, m.Path(tc.name, "after"), []byte("served on"))
			requireContent(t, m.Path(tc.name, "after"), []byte("served on"))
		})
	}
}
