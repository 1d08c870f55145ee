package fs

import (
	"strings"
	"syscall"
	"testing"
)

// White-box: checkName refuses only names longer than 255 bytes (bytes,
// not characters). Slashes, NULs, "." and ".." never reach it: the kernel
// splits paths at '/', ends names at NUL and resolves "." and ".." itself
// (go-fuse answers a LOOKUP of either before the tree sees it), so it lets
// them through.
func TestCheckName(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		want syscall.Errno
	}{
		{"a short name passes", "000042.sst", 0},
		{"255 bytes pass", strings.Repeat("n", 255), 0},
		{"256 bytes are too long", strings.Repeat("n", 256), syscall.ENAMETOOLONG},
		{"255 bytes of 2-byte characters and one more pass", strings.Repeat("é", 127) + "n", 0},
		{"128 2-byte characters are 256 bytes: too long", strings.Repeat("é", 128), syscall.ENAMETOOLONG},
		{"the empty name is the kernel's to refuse", "", 0},
		{"a slash is the kernel's to refuse", "a/b", 0},
		{"a NUL is the kernel's to refuse", "a\x00b", 0},
		{"dot is the kernel's", ".", 0},
		{"dot-dot is the kernel's", "..", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := checkName(c.in); got != c.want {
				t.Errorf("checkName(%d bytes) = %v, want %v", len(c.in), got, c.want)
			}
		})
	}
}

// Every request that makes, finds or removes a name refuses a name longer
// than 255 bytes with ENAMETOOLONG, and takes one of 255 (DESIGN
// invariant 6).
func TestEveryNameRequestChecksTheName(t *testing.T) {
	t.Parallel()
	k := newKernel(t, Options{})
	file := k.writeFile(rootNode, "file", []byte("x"))
	dir := k.mkdirAll("dir")
	long := strings.Repeat("n", nameMax+1)
	for _, c := range []struct {
		name string
		call func(name string) syscall.Errno
	}{
		{"lookup", func(name string) syscall.Errno { _, e := k.lookup(rootNode, name); return e }},
		{"mkdir", func(name string) syscall.Errno { _, e := k.mkdir(root, dir.node, name, 0o755); return e }},
		{"mknod", func(name string) syscall.Errno { _, e := k.mknod(dir.node, name, syscall.S_IFIFO|0o644, 0); return e }},
		{"create", func(name string) syscall.Errno {
			e, fh, errno := k.create(root, dir.node, name, 0o644)
			if errno == 0 {
				k.release(e.node, fh)
			}
			return errno
		}},
		{"symlink", func(name string) syscall.Errno { _, e := k.symlink(dir.node, "file", name); return e }},
		{"link", func(name string) syscall.Errno { _, e := k.link(file.node, dir.node, name); return e }},
		{"rename to", func(name string) syscall.Errno { return k.rename(rootNode, "file", rootNode, name, 0) }},
		{"unlink", func(name string) syscall.Errno { return k.unlink(dir.node, name) }},
		{"rmdir", func(name string) syscall.Errno { return k.rmdir(dir.node, name) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.call(long); got != syscall.ENAMETOOLONG {
				t.Errorf("%s of a %d-byte name: %v, want ENAMETOOLONG", c.name, len(long), got)
			}
		})
	}
	// The longest name works for making and finding.
	max := strings.Repeat("m", nameMax)
	if _, errno := k.mkdir(root, dir.node, max, 0o755); errno != 0 {
		t.Fatalf("mkdir of a %d-byte name: %v", len(max), errno)
	}
	if _, errno := k.lookup(dir.node, max); errno != 0 {
		t.Errorf("lookup of a %d-byte name: %v", len(max), errno)
	}
	if errno := k.rmdir(dir.node, max); errno != 0 {
		t.Errorf("rmdir of a %d-byte name: %v", len(max), errno)
	}
}
