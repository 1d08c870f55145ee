package keeper

import (
	"log/slog"
	"reflect"
	"sync"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// touchReadBuffers makes every buffer go-fuse reads requests into
// resident and writable before the kernel copies a request into it.
//
// The kernel copies a request into the reader's buffer after taking it off
// its queue (fuse_dev_do_read). Its page lookup takes a fast path only for
// pages that are present and writable; the slow path gives up with EINTR
// when the reader has a fatal signal pending, and the kernel then ends the
// request with EIO instead of leaving it for FUSE_NOTIFY_RESEND. A server
// SIGKILLed while one of its readers copies a request into a page it never
// touched (a fresh buffer from go-fuse's pool: Go does not write memory it
// got zeroed from the system) thus fails a client's request with EIO at a
// takeover. Writing each page of a buffer once when go-fuse makes it keeps
// the copy on the fast path.
//
// go-fuse keeps the pool in an unexported field (fuse.Server.readPool); if
// that field is gone or changed, nothing is done and it returns false.
func touchReadBuffers(srv *fuse.Server) bool {
	f := reflect.ValueOf(srv).Elem().FieldByName("readPool")
	if !f.IsValid() || f.Type() != reflect.TypeOf(sync.Pool{}) {
		return false
	}
	pool := (*sync.Pool)(unsafe.Pointer(f.UnsafeAddr()))
	made := pool.New
	if made == nil {
		return false
	}
	pool.New = func() any {
		v := made()
		if b, ok := v.([]byte); ok {
			for i := 0; i < len(b); i += 4096 {
				b[i] = 0
			}
			if len(b) > 0 {
				b[len(b)-1] = 0
			}
		}
		return v
	}
	return true
}

// touchReadBuffersOrWarn is touchReadBuffers, which says when go-fuse
// changed under it.
func touchReadBuffersOrWarn(srv *fuse.Server) {
	if !touchReadBuffers(srv) {
		slog.Warn("go-fuse's read buffers are not written before use (its fuse.Server changed): a request read as the server is killed may fail with EIO instead of being sent again")
	}
}
