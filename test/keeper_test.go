package test

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A server killed with SIGKILL while clients stat and list the mount's
// root is replaced by its keeper on the same connection: no client sees
// an error, ENOTCONN least of all, a file written before the kill reads
// back, the next server logs the takeover and counts the restart, and
// SIGTERM to the keeper then unmounts, both processes exiting 0 (Unmount
// checks the keeper's exit, which reports its server's).
func TestKeeperTakesOverAKilledServer(t *testing.T) {
	addr := freeAddr(t)
	m := mountFS(t, "--metrics-addr", addr)
	writeSynced(t, m.Path("f"), []byte("there before the kill"))
	var (
		stop       atomic.Bool
		rounds     atomic.Int64
		notConn    atomic.Int64
		mu         sync.Mutex
		otherError error
		clients    sync.WaitGroup
	)
	for range 2 {
		clients.Go(func() {
			for !stop.Load() {
				_, err := os.Stat(m.Dir)
				if err == nil {
					_, err = os.ReadDir(m.Dir)
				}
				switch {
				case errors.Is(err, syscall.ENOTCONN):
					notConn.Add(1)
				case err != nil:
					mu.Lock()
					otherError = err
					mu.Unlock()
				}
				rounds.Add(1)
			}
		})
	}
	server := m.ServerPID()
	time.Sleep(100 * time.Millisecond)
	if err := syscall.Kill(server, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitLogLine(t, m, 10*time.Second, "resumed the FUSE connection", "generation=2", "restarts=1", "resend=sent")
	before := rounds.Load()
	for deadline := time.Now().Add(5 * time.Second); rounds.Load() < before+20 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	stop.Store(true)
	clients.Wait()
	if n := notConn.Load(); n > 0 {
		t.Errorf("%d stats or listings of the root gave ENOTCONN across the server's kill", n)
	}
	if otherError != nil {
		t.Errorf("a client saw %v across the kill", otherError)
	}
	if rounds.Load() < before+20 {
		t.Errorf("the clients made %d rounds after the takeover, want 20", rounds.Load()-before)
	}
	requireContent(t, m.Path("f"), []byte("there before the kill"))
	if got := scrapeMetrics(t, addr).value("statefs_server_restarts_total", ""); got != 1 {
		t.Errorf("statefs_server_restarts_total = %v after one kill, want 1", got)
	}
	next := m.ServerPID()
	m.Unmount()
	if alive(next) {
		t.Errorf("the server %d still runs after its keeper exited", next)
	}
}

// SIGTERM to the server itself leaves the connection to the next server:
// it exits 0 without unmounting, and its keeper starts the next at once.
func TestKeeperRestartsAServerOnSIGTERM(t *testing.T) {
	m := mountFS(t)
	writeSynced(t, m.Path("f"), []byte("kept across the restart"))
	if err := syscall.Kill(m.ServerPID(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLogLine(t, m, 10*time.Second, "the server ended", "generation=1", `how="exit status 0"`)
	waitLogLine(t, m, 10*time.Second, "resumed the FUSE connection", "generation=2")
	if !isMounted(m.Dir) {
		t.Fatalf("%s is not mounted after the server's restart", m.Dir)
	}
	requireContent(t, m.Path("f"), []byte("kept across the restart"))
}

// A `statefs mount` of the store whose keeper serves the mountpoint, with
// mount options that shape the connection other than the serving keeper's,
// is refused in one line that names them, and the serving keeper's server
// serves on, untouched.
func TestTakeOverWithOtherMountOptionsIsRefused(t *testing.T) {
	m := mountFS(t)
	writeSynced(t, m.Path("f"), []byte("served"))
	server := m.ServerPID()
	r := runCLI(t, 20*time.Second, "mount", "--allow-other", "--store", m.Store, m.Dir)
	requireOneLineError(t, r, "refused the take-over", "allow_other (serving: unset; new: set)")
	if now := m.ServerPID(); now != server {
		t.Errorf("the server is %d after a refused take-over, was %d", now, server)
	}
	requireContent(t, m.Path("f"), []byte("served"))
}
