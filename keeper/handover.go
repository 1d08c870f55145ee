package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A keeper hands its connection to the next keeper, a new binary, in one
// of two ways: a `statefs mount` of the same store and mountpoint asks on
// the keeper's socket (Config.Socket) and takes it over, or SIGHUP makes
// the keeper execute its own binary again, which may have been replaced
// meanwhile. Both pass the same thing (handover): the connection's fds by
// name and where the connection stands, so that the next keeper's first
// server resumes it as after a crash, at the next generation.
//
// Nothing stops before the next keeper is known to fit: it offers what it
// would serve with (offer), and the serving keeper compares it with its own
// (check) while its server still serves. A binary that does not fit is
// refused with one line and changes nothing. A take-over is also given
// back if the new keeper's first server fails before it serves: the old
// keeper then serves on.

// handoverVersion is the version of what passes between keepers: the
// messages on the socket, the handover state and the recorded INIT. A
// keeper hands over only to one of the same version.
const handoverVersion = 1

// The names of the fds a keeper holds besides Config.Files.
const (
	fuseFile     = "fuse"     // the connection, /dev/fuse
	initFile     = "init"     // the recorded INIT
	listenerFile = "listener" // the socket a keeper takes hand-over requests on
)

// handover is what passes from a keeper to the next: where the connection
// stands, and the names of the fds that come with it, in the order they
// come (on the socket, in one SCM_RIGHTS message; after an exec, at the
// numbers in FDs).
type handover struct {
	Mountpoint string `json:"mountpoint"`
	Dev        uint64 `json:"dev"`
	// Generation is the last server's; the next keeper's first server
	// is the one after it, and resumes.
	Generation uint64   `json:"generation"`
	DownSince  int64    `json:"down_since_unix_nano"`
	Pid        int      `json:"pid"` // the keeper that hands over
	Names      []string `json:"names"`
	FDs        []int    `json:"fds,omitempty"` // after an exec only
}

// offer is what a binary that would take the connection over serves with.
type offer struct {
	Handover   int    `json:"handover"`
	Layout     string `json:"layout"`
	Mountpoint string `json:"mountpoint"`
	// Shape is shape(Config.Options).
	Shape map[string]string `json:"shape"`
}

// message is one packet on a keeper's socket (SOCK_SEQPACKET, so one
// message a read). The taking-over keeper sends its Offer; the serving one
// answers Refused, or State with the fds; the taking-over one then says
// Serving once its first server serves, or Failed if it ended before.
type message struct {
	Offer   *offer    `json:"offer,omitempty"`
	Refused string    `json:"refused,omitempty"`
	State   *handover `json:"state,omitempty"`
	Serving bool      `json:"serving,omitempty"`
	Failed  string    `json:"failed,omitempty"`
	// Generation is, with Failed, the last generation the taking-over
	// keeper started: the serving keeper's next comes after it.
	Generation uint64 `json:"generation,omitempty"`
}

func offerOf(cfg Config) offer {
	return offer{Handover: handoverVersion, Layout: cfg.Layout, Mountpoint: cfg.Mountpoint, Shape: shape(cfg.Options)}
}

// check says why the keeper cannot hand its connection to a binary that
// offers o, or nil if it can.
func (k *keeper) check(o offer) error {
	switch {
	case o.Handover != handoverVersion:
		return fmt.Errorf("the new binary speaks hand-over version %d, this keeper %d", o.Handover, handoverVersion)
	case o.Layout != k.cfg.Layout:
		return fmt.Errorf("the new binary's servers keep the connection's state in layout %q, this keeper's in %q", o.Layout, k.cfg.Layout)
	case o.Mountpoint != k.conn.mountpoint:
		return fmt.Errorf("the store is in use: this keeper serves it on %s, not %s", k.conn.mountpoint, o.Mountpoint)
	case !k.served:
		return errors.New("no server has served the connection yet")
	case k.from != nil:
		return errors.New("this keeper is still taking the connection over")
	}
	mine := shape(k.cfg.Options)
	var differ []string
	for _, name := range slices.Sorted(maps.Keys(joinKeys(mine, o.Shape))) {
		if a, b := optionValue(mine, name), optionValue(o.Shape, name); a != b {
			differ = append(differ, fmt.Sprintf("%s (serving: %s; new: %s)", name, a, b))
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("mount options that shape the connection differ from the serving keeper's: %s", strings.Join(differ, ", "))
	}
	return nil
}

func joinKeys(a, b map[string]string) map[string]string {
	all := maps.Clone(a)
	maps.Copy(all, b)
	return all
}

func optionValue(shape map[string]string, name string) string {
	v, ok := shape[name]
	switch {
	case !ok:
		return "unset"
	case v == "":
		return "set"
	}
	return v
}

// state is the handover of the keeper's connection and files.
func (k *keeper) state() (handover, []*os.File) {
	h := handover{Mountpoint: k.conn.mountpoint, Dev: k.conn.dev, Generation: k.generation, Pid: os.Getpid(),
		Names: []string{fuseFile, initFile}}
	if !k.downSince.IsZero() {
		h.DownSince = k.downSince.UnixNano()
	}
	files := []*os.File{k.conn.fuse, k.init}
	for _, name := range slices.Sorted(maps.Keys(k.files)) {
		h.Names = append(h.Names, name)
		files = append(files, k.files[name])
	}
	if k.listenerFile != nil {
		h.Names = append(h.Names, listenerFile)
		files = append(files, k.listenerFile)
	}
	return h, files
}

// adopt makes the connection and files of h this keeper's: files are the
// fds h names, in its order. A file the previous keeper held that this
// binary does not know is kept and passed on; one this binary knows that
// it did not hold is made.
func (k *keeper) adopt(h handover, files []*os.File) error {
	if len(files) != len(h.Names) {
		return fmt.Errorf("the hand-over names %d fds and brought %d", len(h.Names), len(files))
	}
	for i, f := range files {
		unix.CloseOnExec(fdOf(f))
		switch name := h.Names[i]; name {
		case fuseFile:
			k.conn = &conn{mountpoint: h.Mountpoint, fuse: f, dev: h.Dev}
		case initFile:
			k.init = f
		case listenerFile:
			k.listenerFile = f
		default:
			k.files[name] = f
		}
	}
	if k.conn == nil || k.init == nil {
		return errors.New("the hand-over brought no connection or no recorded INIT")
	}
	for _, name := range k.cfg.Files {
		if k.files[name] == nil {
			f, err := memfd(name)
			if err != nil {
				return err
			}
			k.files[name] = f
		}
	}
	k.generation, k.served = h.Generation, true
	if h.DownSince != 0 {
		k.downSince = time.Unix(0, h.DownSince)
	}
	return nil
}

// release lets go of the connection and the files once the next keeper
// holds them: the mount stays, served by it.
func (k *keeper) release() {
	if k.listener != nil {
		k.listener.Close()
		k.listener = nil
	}
	k.closeFiles()
	k.conn.close()
}

// takeOverRequest is a hand-over asked for on the socket, by a peer of the
// keeper's own uid, which waits on conn for the answer.
type takeOverRequest struct {
	conn  *net.UnixConn
	pid   int
	offer offer
}

// takeOver takes the connection over from the keeper that answers on
// cfg.Socket (c), or says in one line why that keeper refused.
// ctx's end before the connection came gives it back: the serving keeper
// serves on.
func (k *keeper) takeOver(ctx context.Context, c *net.UnixConn) error {
	// The connection is taken from a keeper of this user only: whatever
	// answers on the socket would serve the mount.
	cred, err := peer(c)
	if err != nil {
		return fmt.Errorf("asking the keeper on %s: %w", k.cfg.Socket, err)
	}
	if int(cred.Uid) != os.Geteuid() {
		return fmt.Errorf("what answers on %s is a process of uid %d, not a keeper of this user", k.cfg.Socket, cred.Uid)
	}
	o := offerOf(k.cfg)
	if err := send(c, message{Offer: &o}, nil); err != nil {
		return fmt.Errorf("asking the keeper on %s: %w", k.cfg.Socket, err)
	}
	interrupt := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
	defer interrupt()
	m, files, err := receive(c)
	if err == nil && ctx.Err() != nil {
		closeAll(files)
		send(c, message{Failed: "the taking-over keeper was stopped before it adopted the connection"}, nil)
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("taking the connection over from the keeper on %s: %w", k.cfg.Socket, err)
	}
	if m.Refused != "" {
		return fmt.Errorf("the keeper on %s refused the take-over: %s", k.cfg.Socket, m.Refused)
	}
	if m.State == nil {
		closeAll(files)
		return fmt.Errorf("the keeper on %s answered neither a refusal nor its connection", k.cfg.Socket)
	}
	if dev, err := deviceOf(k.cfg.Mountpoint); err != nil || dev != m.State.Dev {
		closeAll(files)
		send(c, message{Failed: "the connection is not the mount on " + k.cfg.Mountpoint}, nil)
		return fmt.Errorf("the keeper on %s handed over a connection that is not the mount on %s", k.cfg.Socket, k.cfg.Mountpoint)
	}
	if err := k.adopt(*m.State, files); err != nil {
		closeAll(files)
		send(c, message{Failed: err.Error()}, nil)
		return err
	}
	k.from = c
	k.tookOver(*m.State)
	return nil
}

// tookOver logs that the keeper holds the connection of h, and where it
// continues.
func (k *keeper) tookOver(h handover) {
	slog.Info("took the FUSE connection over from its keeper", "from_pid", h.Pid, "mountpoint", h.Mountpoint,
		"generation", k.generation+1, "binary", k.exe)
}

// tellPredecessor tells the keeper this one took the connection from
// whether its first server serves (failed "") or ended before (failed
// says how): that keeper lets go of the connection, or serves on.
func (k *keeper) tellPredecessor(failed string) {
	if k.from == nil {
		return
	}
	m := message{Serving: failed == "", Failed: failed}
	if failed != "" {
		m.Generation = k.generation
	}
	if err := send(k.from, m, nil); err != nil {
		slog.Warn("could not tell the previous keeper how the take-over went", "err", err)
	}
	k.from.Close()
	k.from = nil
}

// handOver passes the connection to the keeper that asked with r, whose
// offer fits and whose server has stopped (DESIGN's "One server at a
// time"), and returns true once that keeper's first server serves. false:
// it failed, the keeper keeps the connection, and k.generation is then the
// last the other keeper started, which the keeper's next server follows.
func (k *keeper) handOver(r *takeOverRequest) bool {
	defer r.conn.Close()
	h, files := k.state()
	if err := send(r.conn, message{State: &h}, files); err != nil {
		slog.Warn("handing the connection over failed; serving on", "to_pid", r.pid, "err", err)
		return false
	}
	m, _, err := receive(r.conn)
	if err != nil || !m.Serving {
		// The other keeper's first server may have served a little; it
		// is the one the other started (it runs no other until that one
		// served), unless it says a later one.
		k.generation = max(k.generation+1, m.Generation)
		slog.Warn("the take-over failed; serving on", "to_pid", r.pid, "failed", m.Failed, "err", err)
		return false
	}
	slog.Info("handed the FUSE connection over; holding nothing, this process exits on SIGTERM or SIGINT without unmounting",
		"to_pid", r.pid, "generation", k.generation+1)
	k.release()
	return true
}

// listen takes hand-over requests on cfg.Socket from now on: on the
// listener the keeper inherited, or on a new one, unless another keeper
// answers there.
func (k *keeper) listen() {
	if k.cfg.Socket == "" || k.listener != nil {
		return
	}
	if k.listenerFile == nil {
		if answers(k.cfg.Socket) {
			slog.Warn("another keeper answers on the hand-over socket; taking no hand-over requests", "socket", k.cfg.Socket)
			return
		}
		os.Remove(k.cfg.Socket) // a dead keeper's
		l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: k.cfg.Socket, Net: "unixpacket"})
		if err == nil {
			err = os.Chmod(k.cfg.Socket, 0o600)
		}
		if err == nil {
			k.listenerFile, err = l.File()
			l.SetUnlinkOnClose(false)
			l.Close()
		}
		if err != nil {
			slog.Warn("could not listen for hand-over requests", "socket", k.cfg.Socket, "err", err)
			return
		}
	}
	l, err := net.FileListener(k.listenerFile)
	if err != nil {
		slog.Warn("could not listen for hand-over requests", "socket", k.cfg.Socket, "err", err)
		return
	}
	k.listener = l.(*net.UnixListener)
	k.listener.SetUnlinkOnClose(false) // the socket is the connection's: the next keeper listens on it
	go k.accept(k.listener)
}

// accept reads each request on l and passes it to the serving loop. Only
// a peer of the keeper's own uid is heard: the socket hands out the whole
// mount.
func (k *keeper) accept(l *net.UnixListener) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return
		}
		go func() {
			// The request is read before it is answered, even a refused
			// one: a socket closed with a message unread resets its
			// peer, which would lose the answer.
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			m, files, err := receive(c)
			closeAll(files)
			c.SetReadDeadline(time.Time{})
			cred, credErr := peer(c)
			if credErr != nil || int(cred.Uid) != os.Geteuid() {
				if credErr == nil {
					slog.Warn("refused a hand-over request from another user", "uid", cred.Uid, "pid", cred.Pid)
				} else {
					slog.Warn("refused a hand-over request whose user is unknown", "err", credErr)
				}
				send(c, message{Refused: "the keeper hands over only to its own user"}, nil)
				c.Close()
				return
			}
			if err != nil || m.Offer == nil {
				send(c, message{Refused: "the request offered nothing"}, nil)
				c.Close()
				return
			}
			k.requests <- &takeOverRequest{conn: c, pid: int(cred.Pid), offer: *m.Offer}
		}()
	}
}

// refuse answers r with why not, and changes nothing.
func refuse(r *takeOverRequest, why error) {
	slog.Warn("refused a take-over; serving on", "pid", r.pid, "why", why)
	send(r.conn, message{Refused: why.Error()}, nil)
	r.conn.Close()
}

// dialKeeper connects to the keeper on socket, if one answers there.
func dialKeeper(socket string) (*net.UnixConn, bool) {
	if socket == "" {
		return nil, false
	}
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: socket, Net: "unixpacket"})
	return c, err == nil
}

func answers(socket string) bool {
	c, ok := dialKeeper(socket)
	if ok {
		c.Close()
	}
	return ok
}

// peer is the credentials of c's other end.
func peer(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, credErr
}

// maxFiles bounds the fds one message carries.
const maxFiles = 32

func send(c *net.UnixConn, m message, files []*os.File) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = fdOf(f)
		}
		oob = unix.UnixRights(fds...)
	}
	_, _, err = c.WriteMsgUnix(b, oob, nil)
	return err
}

func receive(c *net.UnixConn) (message, []*os.File, error) {
	var m message
	b, oob := make([]byte, 1<<16), make([]byte, unix.CmsgSpace(maxFiles*4))
	n, oobn, _, _, err := c.ReadMsgUnix(b, oob)
	if err != nil {
		return m, nil, err
	}
	var files []*os.File
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return m, nil, err
	}
	for _, cm := range msgs {
		fds, err := unix.ParseUnixRights(&cm)
		if err != nil {
			closeAll(files)
			return m, nil, err
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "handed over"))
		}
	}
	if n == 0 {
		closeAll(files)
		return m, nil, io.EOF
	}
	if err := json.Unmarshal(b[:n], &m); err != nil {
		closeAll(files)
		return m, nil, fmt.Errorf("a message that does not decode: %w", err)
	}
	return m, files, nil
}

// fdOf is f's fd number, f left as it is. (*os.File).Fd puts a socket in
// blocking mode, and the listening socket's open file description is
// shared with the listener that accepts on it, in this keeper and the
// next: an accept(2) that blocks in the kernel is not ended by the
// listener's Close, and would take a request meant for the next keeper.
func fdOf(f *os.File) int {
	fd := -1
	if raw, err := f.SyscallConn(); err == nil {
		raw.Control(func(u uintptr) { fd = int(u) })
	}
	return fd
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
