package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"
)

// ioBlock is the buffer every copy and read uses.
const ioBlock = 1 << 20

// flinkID is a Flink AbstractID (32 lower-case hex digits) derived from
// label, so that every run writes the same paths.
func flinkID(label string) string {
	sum := sha256.Sum256([]byte(label))
	return hex.EncodeToString(sum[:16])
}

// flinkUUID is a java.util.UUID string derived from label.
func flinkUUID(label string) string {
	h := flinkID("uuid " + label)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// subtaskDir is where Flink keeps the local checkpoints of subtask 0 of a
// job's vertex: tm_<rid>/localState/aid_<a>/jid_<j>/vtx_<v>_sti_0.
func subtaskDir(root, job string) string {
	return filepath.Join(root, "tm_bench", "localState", "aid_"+flinkID("allocation"),
		"jid_"+flinkID(job), "vtx_"+flinkID("vertex")+"_sti_0")
}

// rocksDBDir is where Flink keeps a live RocksDB instance of a job's
// operator: tm_<rid>/tmp/job_<j>_op_<op>_uuid_<uuid>/db.
func rocksDBDir(root, job string) string {
	return filepath.Join(root, "tm_bench", "tmp",
		"job_"+flinkID(job)+"_op_WindowOperator_"+flinkID("operator")+"_uuid_"+flinkUUID(job), "db")
}

// writeRandomFile writes size incompressible bytes, the same for the same
// seed, as compressed SST blocks are.
func writeRandomFile(path string, size int64, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	_, err = io.CopyN(f, rand.NewChaCha8(key), size)
	return closeAfter(f, err)
}

// writeCompressibleFile writes size bytes of text that compresses as
// uncompressed SST blocks and logs do, the same for the same seed: lines
// of a hex key and a value of random lower-case letters written twice (as
// db_bench makes its values compress to half). zstd at its fastest level
// shrinks it to about two fifths.
func writeCompressibleFile(path string, size int64, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	r := rand.New(rand.NewChaCha8(key))
	w := bufio.NewWriterSize(f, ioBlock)
	var line []byte
	half := make([]byte, 48)
	for n := int64(0); n < size; n += int64(len(line)) {
		for i := range half {
			half[i] = 'a' + byte(r.IntN(26))
		}
		line = fmt.Appendf(line[:0], "%016x %s%s\n", r.Uint64(), half, half)
		if rest := size - n; int64(len(line)) > rest {
			line = line[:rest]
		}
		if _, err := w.Write(line); err != nil {
			return closeAfter(f, err)
		}
	}
	return closeAfter(f, w.Flush())
}

// closeAfter closes f and returns the first error.
func closeAfter(f *os.File, err error) error {
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// progress records how many bytes a copy had written when, so that its
// throughput over any window can be read afterwards.
type progress struct {
	mu      sync.Mutex
	samples []progressSample
}

type progressSample struct {
	at    time.Time
	bytes int64
}

func (p *progress) add(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	total := n
	if len(p.samples) > 0 {
		total += p.samples[len(p.samples)-1].bytes
	}
	p.samples = append(p.samples, progressSample{time.Now(), total})
}

// Rate is the MB/s at which the copy went from byte from to byte to.
func (p *progress) Rate(from, to float64) float64 {
	return (to - from) / 1e6 / p.TimeAt(to).Sub(p.TimeAt(from)).Seconds()
}

// TimeAt is when the copy had written bytes, interpolated between the
// samples around it.
func (p *progress) TimeAt(bytes float64) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.samples), func(i int) bool { return float64(p.samples[i].bytes) >= bytes })
	switch {
	case len(p.samples) == 0:
		return time.Time{}
	case i == 0:
		return p.samples[0].at
	case i == len(p.samples):
		return p.samples[i-1].at
	}
	a, b := p.samples[i-1], p.samples[i]
	frac := (bytes - float64(a.bytes)) / float64(b.bytes-a.bytes)
	return a.at.Add(time.Duration(frac * float64(b.at.Sub(a.at))))
}

// Last is when the copy last wrote.
func (p *progress) Last() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.samples) == 0 {
		return time.Time{}
	}
	return p.samples[len(p.samples)-1].at
}

// Bytes is how many bytes had been written at t, interpolated between the
// samples around it.
func (p *progress) Bytes(t time.Time) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.samples), func(i int) bool { return !p.samples[i].at.Before(t) })
	switch {
	case len(p.samples) == 0 || i == 0:
		return 0
	case i == len(p.samples):
		return float64(p.samples[i-1].bytes)
	}
	a, b := p.samples[i-1], p.samples[i]
	frac := float64(t.Sub(a.at)) / float64(b.at.Sub(a.at))
	return float64(a.bytes) + frac*float64(b.bytes-a.bytes)
}

// copyDir copies the regular files of src into a new directory dst the way
// RocksDB copies a checkpoint when it cannot hard-link: read and write in
// user space, fdatasync each file (its CopyFile with the default
// use_fsync=false), then fsync the directory. It returns the bytes copied.
func copyDir(src, dst string, p *progress) (int64, error) {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return 0, err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, ioBlock)
	var total int64
	for _, e := range entries {
		n, err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), buf, p)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, fsyncPath(dst)
}

func copyFile(src, dst string, buf []byte, p *progress) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	var total int64
	for {
		n, rerr := in.Read(buf)
		if n > 0 {
			if _, err := out.Write(buf[:n]); err != nil {
				return total, closeAfter(out, err)
			}
			total += int64(n)
			p.add(int64(n))
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return total, closeAfter(out, rerr)
		}
	}
	return total, closeAfter(out, syscall.Fdatasync(int(out.Fd())))
}

func fsyncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return closeAfter(f, f.Sync())
}

// readTree reads every regular file under dir and returns the bytes read.
func readTree(dir string) (int64, error) {
	buf := make([]byte, ioBlock)
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		n, err := io.CopyBuffer(io.Discard, onlyReader{f}, buf)
		total += n
		return closeAfter(f, err)
	})
	return total, err
}

// onlyReader hides everything but Read, so io.CopyBuffer reads through
// the buffer it is given.
type onlyReader struct{ io.Reader }

// diskUsage is the allocated size of everything under dir, as du counts
// it: blocks, hard-linked files once.
func diskUsage(dir string) (int64, error) {
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while walking: a daemon's temporary file
		}
		if err != nil {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no stat", path)
		}
		if st.Nlink > 1 && !d.IsDir() {
			id := inode{st.Dev, st.Ino}
			if seen[id] {
				return nil
			}
			seen[id] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total, err
}
