package keeper

import (
	"reflect"
	"sync"
	"testing"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// go-fuse's server must still keep its read buffers where
// touchReadBuffers finds them, or the hook does nothing.
func TestGoFuseKeepsItsReadPool(t *testing.T) {
	f, ok := reflect.TypeOf(fuse.Server{}).FieldByName("readPool")
	require.True(t, ok, "fuse.Server has no readPool field any more")
	require.Equal(t, reflect.TypeOf(sync.Pool{}), f.Type, "fuse.Server's readPool")
}

// Every page of a read buffer made after the hook is resident: the kernel's
// copy of a request into it takes its fast path, which a fatal signal does
// not end.
func TestReadBuffersAreResidentWhenMade(t *testing.T) {
	const size = 1 << 20
	srv := &fuse.Server{}
	f := reflect.ValueOf(srv).Elem().FieldByName("readPool")
	pool := (*sync.Pool)(unsafe.Pointer(f.UnsafeAddr()))
	pool.New = func() any {
		// As go-fuse makes them: fresh memory from the system, never
		// written. Mapped here, so that no page is resident by chance.
		b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			panic(err)
		}
		return b
	}
	require.True(t, touchReadBuffers(srv))
	b := pool.Get().([]byte)
	defer unix.Munmap(b)
	vec := make([]byte, size/unix.Getpagesize())
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, e, "mincore")
	for i, v := range vec {
		require.NotZero(t, v&1, "page %d of %d of a new read buffer is not resident", i, len(vec))
	}
}

func TestReadBuffersOfAServerWithoutPool(t *testing.T) {
	require.False(t, touchReadBuffers(&fuse.Server{}), "a server whose pool makes nothing")
}
