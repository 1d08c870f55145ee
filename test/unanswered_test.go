package test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
			if size := unansweredTableSize(t, m); tc.want == 0 {
				require.Zero(t, size, "the keeper's table of unanswered requests, on a kernel that resends: no server should record")
			} else {
				require.NotZero(t, size, "the keeper's table of unanswered requests, on a kernel without resend")
			}
		})
	}
}

// unansweredTableSize is the size of the memfd in which the keeper of m
// holds the table of unanswered requests: 0 until a server records into
// it.
func unansweredTableSize(t *testing.T, m *Mount) int64 {
	t.Helper()
	fds := fmt.Sprintf("/proc/%d/fd", m.cmd.Process.Pid)
	entries, err := os.ReadDir(fds)
	require.NoError(t, err)
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join(fds, e.Name()))
		if err != nil || !strings.HasPrefix(link, "/memfd:statefs-keeper-unanswered ") {
			continue
		}
		st, err := os.Stat(filepath.Join(fds, e.Name()))
		require.NoError(t, err)
		return st.Size()
	}
	t.Fatalf("the keeper (pid %d) holds no memfd for the table of unanswered requests", m.cmd.Process.Pid)
	return 0
}

// Without resend, the server SIGKILLed five times at random moments under
// clients that stat, list, create, write, fsync and remove: every call
// returns, with success or EIO (or, for a name whose last call got EIO,
// with what that call may have done: ENOENT, EEXIST), none waits for a dead
// server, and the mount serves on after each kill.
func TestKilledServersLeaveNoCallerWaitingWithoutResend(t *testing.T) {
	m := mountFS(t)
	m.Unmount()
	m.Env = []string{keeper.NoResendEnvVar + "=1"}
	m.Start()
	rng := rand.New(rand.NewPCG(crashSeed(t), 0))

	var stop atomic.Bool
	var clients sync.WaitGroup
	var calls, eio atomic.Int64
	doing := make([]atomic.Value, 4)
	unexpected := make(chan error, 64)
	check := func(err error, tainted bool, what string) bool {
		calls.Add(1)
		switch {
		case err == nil:
			return false
		case errors.Is(err, syscall.EIO):
			eio.Add(1)
			return true
		case tainted && (errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrExist)):
			return false
		}
		select {
		case unexpected <- fmt.Errorf("%s: %w", what, err):
		default:
		}
		return false
	}
	for c := range doing {
		doing[c].Store("nothing yet")
		dir := m.Path(fmt.Sprintf("client-%d", c))
		require.NoError(t, os.Mkdir(dir, 0o755))
		clients.Go(func() {
			tainted := map[string]bool{}
			for i := 0; !stop.Load(); i++ {
				name := filepath.Join(dir, fmt.Sprintf("f%d", i%8))
				doing[c].Store("stat and list")
				_, err := os.Stat(dir)
				check(err, false, "stat")
				_, err = os.ReadDir(dir)
				check(err, false, "readdir")
				doing[c].Store("create, write and fsync " + name)
				tainted[name] = check(createSynced(name, []byte("written")), tainted[name], "create "+name) || tainted[name]
				doing[c].Store("rename " + name)
				tainted[name] = check(os.Rename(name, name+".moved"), tainted[name], "rename "+name) || tainted[name]
				doing[c].Store("remove " + name)
				if !check(os.Remove(name+".moved"), tainted[name], "remove "+name) {
					delete(tainted, name)
				}
			}
			doing[c].Store("done")
		})
	}
	const kills = 5
	for k := range kills {
		time.Sleep(200*time.Millisecond + time.Duration(rng.Int64N(int64(800*time.Millisecond))))
		require.NoError(t, syscall.Kill(m.ServerPID(), syscall.SIGKILL))
		waitLogLine(t, m, 10*time.Second, "resumed the FUSE connection", fmt.Sprintf("generation=%d", k+2), "resend=refused")
	}
	stop.Store(true)
	finished := make(chan struct{})
	go func() { clients.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(15 * time.Second):
		for c := range doing {
			if d := doing[c].Load(); d != "done" {
				t.Errorf("client %d still waits 15s after the last kill, in: %v", c, d)
			}
		}
		t.FailNow()
	}
	close(unexpected)
	for err := range unexpected {
		t.Errorf("a client saw %v", err)
	}
	t.Logf("%d calls, %d answered EIO, over %d kills", calls.Load(), eio.Load(), kills)
	require.NotZero(t, eio.Load(), "no call was answered with EIO: no kill found a request in flight, and the test showed nothing")
	writeSynced(t, m.Path("after"), []byte("served on"))
	requireContent(t, m.Path("after"), []byte("served on"))
}
