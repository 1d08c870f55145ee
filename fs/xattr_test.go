package fs

import (
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// White-box: fill answers getxattr(2)'s and listxattr(2)'s size probe: an
// empty buffer asks for the size, a short one is ERANGE with the size.
func TestFill(t *testing.T) {
	v := []byte("value")
	for _, c := range []struct {
		name  string
		dest  int
		n     uint32
		errno syscall.Errno
	}{
		{"an empty buffer asks for the size", 0, 5, 0},
		{"a short buffer is ERANGE", 4, 5, syscall.ERANGE},
		{"an exact buffer takes the value", 5, 5, 0},
		{"a longer buffer takes the value", 64, 5, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dest := make([]byte, c.dest)
			n, errno := fill(dest, v)
			if n != c.n || errno != c.errno {
				t.Errorf("fill(%d bytes) = %d, %v; want %d, %v", c.dest, n, errno, c.n, c.errno)
			}
			if errno == 0 && c.dest > 0 && string(dest[:n]) != "value" {
				t.Errorf("fill copied %q", dest[:n])
			}
		})
	}
	if n, errno := fill(nil, nil); n != 0 || errno != 0 {
		t.Errorf("fill of nothing: %d, %v", n, errno)
	}
}

// Extended attributes follow getxattr(2) and setxattr(2): flags
// XATTR_CREATE and XATTR_REPLACE, ENODATA for a missing one, ERANGE for a
// bad name, and a change moves the ctime.
func TestXattrs(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	e, fh, errno := k.create(root, rootNode, "file", 0o644)
	if errno != 0 {
		t.Fatalf("create: %v", errno)
	}
	// The kernel asks for security.capability at a new file's first write.
	if _, errno := k.getxattr(e.node, "security.capability", make([]byte, 64)); errno != syscall.ENODATA {
		t.Errorf("getxattr on a new file: %v, want ENODATA", errno)
	}
	ctime := func() int64 { return k.mustInode(e.attr.Ino).Ctime }
	steps := []struct {
		name  string
		call  func() syscall.Errno
		want  syscall.Errno
		moves bool // the ctime
	}{
		{"set on the open new file", func() syscall.Errno { return k.setxattr(e.node, "user.a", []byte("one"), 0) }, 0, true},
		{"create of an existing one is EEXIST", func() syscall.Errno { return k.setxattr(e.node, "user.a", []byte("two"), unix.XATTR_CREATE) }, syscall.EEXIST, false},
		{"replace of a missing one is ENODATA", func() syscall.Errno { return k.setxattr(e.node, "user.b", []byte("two"), unix.XATTR_REPLACE) }, syscall.ENODATA, false},
		{"replace of an existing one", func() syscall.Errno { return k.setxattr(e.node, "user.a", []byte("three"), unix.XATTR_REPLACE) }, 0, true},
		{"create of a new one", func() syscall.Errno { return k.setxattr(e.node, "user.b", nil, unix.XATTR_CREATE) }, 0, true},
		{"an empty name is ERANGE", func() syscall.Errno { return k.setxattr(e.node, "", []byte("v"), 0) }, syscall.ERANGE, false},
		{"a name over 255 bytes is ERANGE", func() syscall.Errno { return k.setxattr(e.node, "user."+strings.Repeat("n", 251), []byte("v"), 0) }, syscall.ERANGE, false},
		{"a name of 255 bytes is fine", func() syscall.Errno { return k.setxattr(e.node, "user."+strings.Repeat("n", 250), []byte("v"), 0) }, 0, true},
		{"remove of a missing one is ENODATA", func() syscall.Errno { return k.removexattr(e.node, "user.c") }, syscall.ENODATA, false},
		{"remove", func() syscall.Errno { return k.removexattr(e.node, "user."+strings.Repeat("n", 250)) }, 0, true},
	}
	for _, s := range steps {
		before := ctime()
		if got := s.call(); got != s.want {
			t.Errorf("%s: %v, want %v", s.name, got, s.want)
		}
		if moved := ctime() != before; moved != s.moves {
			t.Errorf("%s: ctime moved %v, want %v", s.name, moved, s.moves)
		}
	}
	k.release(e.node, fh)

	if n, errno := k.getxattr(e.node, "user.a", nil); n != 5 || errno != 0 {
		t.Errorf("getxattr size probe: %d, %v; want 5", n, errno)
	}
	if _, errno := k.getxattr(e.node, "user.a", make([]byte, 2)); errno != syscall.ERANGE {
		t.Errorf("getxattr into a short buffer: %v, want ERANGE", errno)
	}
	buf := make([]byte, 64)
	if n, errno := k.getxattr(e.node, "user.a", buf); errno != 0 || string(buf[:n]) != "three" {
		t.Errorf("getxattr: %q, %v; want %q", buf[:n], errno, "three")
	}
	if _, errno := k.getxattr(e.node, "user.c", buf); errno != syscall.ENODATA {
		t.Errorf("getxattr of a missing one: %v, want ENODATA", errno)
	}
	if n, errno := k.listxattr(e.node, nil); n != 14 || errno != 0 {
		t.Errorf("listxattr size probe: %d, %v; want 14", n, errno)
	}
	if n, errno := k.listxattr(e.node, buf); errno != 0 || string(buf[:n]) != "user.a\x00user.b\x00" {
		t.Errorf("listxattr: %q, %v", buf[:n], errno)
	}
}

// An attribute set on a file still open from its create is found: the
// create's "no attributes" shortcut ends with the first setxattr.
func TestXattrOnAFileOpenSinceCreate(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	e, fh, errno := k.create(root, rootNode, "file", 0o644)
	if errno != 0 {
		t.Fatalf("create: %v", errno)
	}
	defer k.release(e.node, fh)
	if errno := k.setxattr(e.node, "security.capability", []byte{1, 2, 3}, 0); errno != 0 {
		t.Fatalf("setxattr: %v", errno)
	}
	if n, errno := k.getxattr(e.node, "security.capability", make([]byte, 64)); n != 3 || errno != 0 {
		t.Errorf("getxattr while still open from the create: %d bytes, %v; want 3", n, errno)
	}
}
