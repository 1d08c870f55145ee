package keeper

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SIGHUP makes a keeper hand its connection to its own binary, executed
// again in its place: the binary is first run as a child that says what it
// would serve with (probe), and executed only if that fits (check); the
// handover then passes in the environment, the fds inherited.

// Environment variables of a keeper's own: HandoverEnvVar carries the
// handover to the binary a keeper executes again; probeEnvVar asks that
// binary, run first as a child, to write its offer to the fd it names.
const (
	HandoverEnvVar = "STATEFS_KEEPER_HANDOVER"
	probeEnvVar    = "STATEFS_KEEPER_PROBE"
)

// probeTimeout bounds how long the binary SIGHUP executes may take to say
// what it would serve with.
const probeTimeout = 30 * time.Second

// probe runs the keeper's binary (which may have been replaced) with the
// keeper's arguments as a child that only offers, and checks the offer:
// the keeper executes the binary in its own place only if it fits.
func (k *keeper) probe() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(k.exe, os.Args[1:]...)
	cmd.Env = append(keeperEnv(), probeEnvVar+"=3")
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stderr = os.Stderr
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fmt.Errorf("running %s: %w", k.exe, err)
	}
	timer := time.AfterFunc(probeTimeout, func() { cmd.Process.Kill() })
	defer timer.Stop()
	b, _ := io.ReadAll(r)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%s with this keeper's arguments did not say what it would serve with: %w", k.exe, err)
	}
	var o offer
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("%s does not speak the keeper's hand-over (it said %q)", k.exe, b)
	}
	return k.check(o)
}

// answerProbe writes cfg's offer to the fd named in probeEnvVar: this
// process is a probe of a keeper about to execute its binary again.
func answerProbe(fd string, cfg Config) error {
	n, err := strconv.Atoi(fd)
	if err != nil {
		return fmt.Errorf("%s=%q is not an fd", probeEnvVar, fd)
	}
	f := os.NewFile(uintptr(n), "probe")
	defer f.Close()
	return json.NewEncoder(f).Encode(offerOf(cfg))
}

// reexec executes the keeper's binary in this process with the same
// arguments, the connection's fds inherited and the handover in
// HandoverEnvVar; it returns only if the exec failed, with the fds as they
// were.
//
// A ctx done before the exec stops it: the signal that ended ctx would be
// lost with this image, and the next would serve on.
func (k *keeper) reexec(ctx context.Context) error {
	h, files := k.state()
	defer func() {
		for _, f := range files {
			unix.CloseOnExec(fdOf(f))
		}
	}()
	for _, f := range files {
		fd := fdOf(f)
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			return err
		}
		h.FDs = append(h.FDs, fd)
	}
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	slog.Info("executing the keeper's binary again; it takes the FUSE connection over", "binary", k.exe, "generation", k.generation+1)
	// An ignored signal stays ignored across the exec, until the new image
	// takes SIGHUP at Run's start; one handled goes back to its default
	// action, which would end the keeper and the mount with it.
	restore, err := ignoreInKernel(syscall.SIGHUP)
	if err != nil {
		return err
	}
	defer restore()
	if err := ctx.Err(); err != nil {
		return err
	}
	return syscall.Exec(k.exe, os.Args, append(keeperEnv(), HandoverEnvVar+"="+string(b)))
}

// kernelSigaction is the kernel's struct sigaction on linux/amd64 and
// linux/arm64, the layout Go's runtime uses there too.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// ignoreInKernel makes sig ignored by the kernel alone, and restore puts
// back what it was. signal.Ignore would do it too, but it also stops the
// delivery of sig to Go's channels before it marks it ignored, and Go's
// handler of a sig caught in between ends the process (its default
// action); here Go's handler, until the kernel's change, still delivers.
func ignoreInKernel(sig syscall.Signal) (restore func(), err error) {
	ignore, old := kernelSigaction{handler: 1}, kernelSigaction{} // 1: SIG_IGN
	if _, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&ignore)),
		uintptr(unsafe.Pointer(&old)), unsafe.Sizeof(old.mask), 0, 0); errno != 0 {
		return nil, fmt.Errorf("ignoring %v: %w", sig, errno)
	}
	return func() {
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&old)), 0, unsafe.Sizeof(old.mask), 0, 0)
	}, nil
}

// reexecuted is the handover this process was executed with by its
// keeper (ok false: none). The variable is removed, so that nothing this
// process starts sees it.
func reexecuted() (h handover, files []*os.File, ok bool, err error) {
	v, ok := os.LookupEnv(HandoverEnvVar)
	if !ok {
		return h, nil, false, nil
	}
	os.Unsetenv(HandoverEnvVar)
	if err := json.Unmarshal([]byte(v), &h); err != nil || len(h.FDs) != len(h.Names) {
		return h, nil, true, fmt.Errorf("%s=%q is not what a keeper sets", HandoverEnvVar, v)
	}
	for i, fd := range h.FDs {
		files = append(files, os.NewFile(uintptr(fd), h.Names[i]))
	}
	return h, files, true, nil
}

// keeperEnv is the keeper's environment less the variables that are the
// keeper's to set.
func keeperEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == EnvVar || name == HandoverEnvVar || name == probeEnvVar
	})
}
