package test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The crash tests check DESIGN invariants 1 and 2 from outside: writers in
// this process work on the mount while the daemon is killed with SIGKILL at a
// random moment; after a remount every fsync'd state must be there byte for
// byte, and every file must show a state it really had.
//
// What "a state it really had" means, soundly, for each way of writing
// (pages are 4 KiB):
//
//   - A file written front to back by one writer (each write issued after the
//     previous one returned) passes through the states "absent", then every
//     prefix of its content at the boundaries of the daemon's writes. The
//     daemon applies them in order, and a pwrite into a staging file that a
//     SIGKILL interrupts stops at a page boundary, so any prefix is a state
//     the file had; a hole, a byte that was never written, or a length past
//     what was written is not.
//   - An in-place rewrite of a same-length file (pwrite at 0 then fsync) may
//     be split into several requests, so between "old" and "new" the file
//     holds a mixture of the two; each page is wholly old or wholly new.
//   - rename(2) and link(2) are atomic: a name shows the old or the new inode,
//     and a tmp file that was renamed away is gone exactly when its name
//     shows it.
//   - fsync of a new file makes its name durable too: statefs commits a file's
//     directory entry and content in one index transaction. rename and link
//     are counted durable only after the directory is fsync'd, as POSIX
//     asks.
//   - Every inode's st_nlink equals the number of names it has in the tree.

func TestCrashKillDuringWrites(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	rounds := []struct {
		args    []string
		sealing bool // kill while status.json reports files waiting to be sealed
	}{
		{nil, false},
		{sealDelayZero, true},
		{nil, false},
		{sealDelayZero, false},
		{sealDelayZero, true},
	}
	m := mountFS(t, rounds[0].args...)
	// survivors is what earlier rounds left, as verified after their crash;
	// nothing writes it again, so it must never change.
	survivors := map[string]string{}
	for r, round := range rounds {
		dir := fmt.Sprintf("r%d", r)
		histories := crashRound(t, m, rng, dir, round.sealing)

		m.Args = nil
		if r+1 < len(rounds) {
			m.Args = rounds[r+1].args
		}
		m.Start()
		stop := guardStall(t, m, 2*time.Minute, fmt.Sprintf("verifying round %d", r))
		verifyHistories(t, m, fmt.Sprintf("round %d (args %q)", r, round.args), dir, histories)
		requireSurvivors(t, m, fmt.Sprintf("after round %d", r), survivors)
		requireNlinkMatchesNames(t, m)
		for p, sum := range digestTree(t, m.Path(dir)) {
			survivors[path.Join(dir, p)] = sum
		}
		stop()
		if t.Failed() {
			t.Fatalf("round %d failed\ndaemon log:\n%s", r, tail(m.Log(), 4000))
		}
	}
	// A clean unmount and mount keeps everything too (invariant 1).
	m.Restart()
	stop := guardStall(t, m, 2*time.Minute, "verifying after a clean restart")
	defer stop()
	requireSurvivors(t, m, "after a clean restart", survivors)
	requireNlinkMatchesNames(t, m)
	t.Logf("%d files survived %d kills", len(survivors), len(rounds))
}

// crashRound runs writers in dir on m and SIGKILLs the daemon under them. It
// returns what each writer did, once all of them have stopped.
func crashRound(t *testing.T, m *Mount, rng *rand.Rand, dir string, sealing bool) []*history {
	t.Helper()
	stop := guardStall(t, m, 60*time.Second, dir+": writing")
	const writers = 4
	for w := range writers {
		require.NoError(t, os.MkdirAll(m.Path(dir, fmt.Sprintf("w%d", w)), 0o755))
	}
	// The directories must outlive the crash, or every fsync'd file in
	// them would go with them.
	for _, d := range []string{"", dir} {
		syncDir(t, m.Path(d))
	}
	for w := range writers {
		syncDir(t, m.Path(dir, fmt.Sprintf("w%d", w)))
	}

	// Writers resolve names through a directory fd on the mount, so that
	// after the kill they fail instead of writing into the bare mountpoint
	// underneath.
	root, err := os.OpenRoot(m.Dir)
	require.NoError(t, err)
	defer root.Close()

	var killed atomic.Bool
	ws := make([]*writer, writers)
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = &writer{
			root:   root,
			dir:    path.Join(dir, fmt.Sprintf("w%d", i)),
			rng:    rand.New(rand.NewPCG(rng.Uint64(), uint64(i))),
			killed: &killed,
		}
		wg.Go(ws[i].run)
	}

	start := time.Now()
	delay := 150*time.Millisecond + time.Duration(rng.Int64N(int64(1200*time.Millisecond)))
	time.Sleep(delay)
	if sealing {
		waitSealBacklog(t, m, 3*time.Second)
	}
	stop()
	killed.Store(true)
	m.Kill()
	t.Logf("%s: killed the daemon after %v", dir, time.Since(start).Round(time.Millisecond))

	waitOrFail(t, &wg, dir+": writers")

	var all []*history
	for _, w := range ws {
		if w.errBeforeKill != nil {
			t.Errorf("%s: writer failed while the daemon was still running: %v", w.dir, w.errBeforeKill)
		}
		all = append(all, w.done...)
	}
	return all
}

// waitOrFail waits for the writers of wg, which the daemon's kill must
// have stopped.
func waitOrFail(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still blocked 30s after the daemon was killed", what)
	}
}

// kind is a way a writer writes a file; each has its own rule for what may
// be found after a crash (see the comment at the top of this file).
type kind int

const (
	kindSynced   kind = iota // written front to back, fsync'd, closed
	kindUnsynced             // written front to back, closed without fsync
	kindRewrite              // same-length versions, each written in place at 0 and fsync'd
	kindAppend               // records appended with O_APPEND, fsync after each, like a WAL
	kindReplace              // each version written to a tmp, fsync'd, renamed over the name, dir fsync'd
	kindLink                 // written, fsync'd, hard-linked under a second name, dir fsync'd
	kinds
)

var kindNames = [...]string{"synced", "unsynced", "rewrite", "append", "replace", "link"}

// history is what a writer did to one name, and how far it got before the
// daemon died. Indexes are into versions; -1 means "none".
type history struct {
	kind kind
	name string // relative to the mount
	// versions are the successive contents of name (for kindAppend, the
	// whole file after each append; for kindReplace, what each tmp held).
	versions [][]byte
	started  int // the last version whose writing began
	durable  int // the last version that fsync (and the dir fsync) confirmed

	tmps         []string // kindReplace: tmps[i] held versions[i] before its rename
	tmpSynced    int      // kindReplace: the last tmp whose fsync returned
	renameIssued int      // kindReplace: the last version whose rename was issued

	link        string // kindLink: the second name
	linkIssued  bool   // kindLink: link(2) was called
	linkDurable bool   // kindLink: link(2) and the dir fsync returned
}

// writer is one goroutine writing files under dir until the daemon dies.
type writer struct {
	root   *os.Root
	dir    string
	rng    *rand.Rand
	killed *atomic.Bool
	seq    int
	done   []*history
	// previous contents, reused so that the store sees duplicate chunks
	pool [][]byte

	errBeforeKill error // an error the daemon returned while still alive
}

func (w *writer) run() {
	var rewrite, appendTo, replace *history
	for {
		var err error
		switch k := kind(w.rng.IntN(int(kinds))); k {
		case kindSynced, kindUnsynced:
			err = w.writeNew(w.newHistory(k), k == kindSynced)
		case kindRewrite:
			if rewrite == nil || w.rng.IntN(4) == 0 {
				rewrite = w.newHistory(k)
			}
			err = w.rewrite(rewrite)
		case kindAppend:
			if appendTo == nil || w.rng.IntN(8) == 0 {
				appendTo = w.newHistory(k)
			}
			err = w.append(appendTo)
		case kindReplace:
			if replace == nil || w.rng.IntN(4) == 0 {
				replace = w.newHistory(k)
			}
			err = w.replace(replace)
		case kindLink:
			err = w.writeLinked(w.newHistory(k))
		}
		if err != nil {
			if !w.killed.Load() {
				w.errBeforeKill = err
			}
			return
		}
	}
}

func (w *writer) newHistory(k kind) *history {
	w.seq++
	h := &history{
		kind:         k,
		name:         path.Join(w.dir, fmt.Sprintf("%s-%d", kindNames[k], w.seq)),
		started:      -1,
		durable:      -1,
		tmpSynced:    -1,
		renameIssued: -1,
	}
	if k == kindLink {
		h.link = h.name + ".link"
	}
	w.done = append(w.done, h)
	return h
}

// content makes the next file content: random (incompressible, like SST
// blocks), repetitive (compressible), or, unless fresh, a copy of an earlier
// one (dedup). Fresh content differs from every earlier version.
func (w *writer) content(size int, fresh bool) []byte {
	switch r := w.rng.IntN(10); {
	case r < 2 && len(w.pool) > 0 && !fresh:
		prev := w.pool[w.rng.IntN(len(w.pool))]
		if len(prev) >= size {
			return bytes.Clone(prev[:size])
		}
	case r < 4 && (!fresh || size >= 64):
		line := fmt.Appendf(nil, "key-%08d value-%x\n", w.rng.IntN(1e6), w.rng.Uint64())
		b := bytes.Repeat(line, size/len(line)+1)[:size]
		return b
	}
	b := make([]byte, size)
	for i := 0; i < size; i += 8 {
		v := w.rng.Uint64()
		for j := 0; j < 8 && i+j < size; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	if len(w.pool) < 16 {
		w.pool = append(w.pool, b)
	} else {
		w.pool[w.rng.IntN(len(w.pool))] = b
	}
	return b
}

// size picks a file size: mostly small, sometimes several chunks.
func (w *writer) size() int {
	switch r := w.rng.IntN(20); {
	case r == 0:
		return 256<<10 + w.rng.IntN(2<<20)
	case r < 5:
		return 16<<10 + w.rng.IntN(240<<10)
	default:
		return w.rng.IntN(16 << 10)
	}
}

// writeSequential writes b to f front to back in pieces of random size, each
// issued after the previous one returned.
func (w *writer) writeSequential(f *os.File, b []byte) error {
	for len(b) > 0 {
		n := min(len(b), 1+w.rng.IntN(96<<10))
		if _, err := f.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (w *writer) writeNew(h *history, sync bool) error {
	h.versions = [][]byte{w.content(w.size(), false)}
	h.started = 0
	f, err := w.root.OpenFile(h.name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := w.writeSequential(f, h.versions[0]); err != nil {
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			return err
		}
		h.durable = 0
	}
	return f.Close()
}

func (w *writer) rewrite(h *history) error {
	if h.started < 0 {
		return w.writeNew(h, true)
	}
	next := w.content(len(h.versions[0]), true)
	h.versions = append(h.versions, next)
	h.started = len(h.versions) - 1
	f, err := w.root.OpenFile(h.name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(next, 0); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	h.durable = h.started
	return f.Close()
}

func (w *writer) append(h *history) error {
	var prev []byte
	if n := len(h.versions); n > 0 {
		prev = h.versions[n-1]
	}
	record := w.content(1+w.rng.IntN(8<<10), false)
	h.versions = append(h.versions, append(bytes.Clone(prev), record...))
	h.started = len(h.versions) - 1
	f, err := w.root.OpenFile(h.name, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := writeAndSync(f, record); err != nil {
		return err
	}
	h.durable = h.started
	return f.Close()
}

func (w *writer) replace(h *history) error {
	i := len(h.versions)
	h.versions = append(h.versions, w.content(16+w.size(), true))
	h.tmps = append(h.tmps, fmt.Sprintf("%s.tmp%d", h.name, i))
	h.started = i
	f, err := w.root.OpenFile(h.tmps[i], os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := w.writeSequential(f, h.versions[i]); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	h.tmpSynced = i
	if err := f.Close(); err != nil {
		return err
	}
	h.renameIssued = i
	if err := w.root.Rename(h.tmps[i], h.name); err != nil {
		return err
	}
	if err := w.syncDir(); err != nil {
		return err
	}
	h.durable = i
	return nil
}

func (w *writer) writeLinked(h *history) error {
	if err := w.writeNew(h, true); err != nil {
		return err
	}
	h.linkIssued = true
	if err := w.root.Link(h.name, h.link); err != nil {
		return err
	}
	if err := w.syncDir(); err != nil {
		return err
	}
	h.linkDurable = true
	return nil
}

// syncDir fsyncs the writer's directory.
func (w *writer) syncDir() error { return fsyncOpened(w.root.Open(w.dir)) }

// found is what a name holds after the crash.
type found struct {
	exists bool
	data   []byte
	ino    uint64
}

func lookup(t *testing.T, m *Mount, name string) found {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(m.Path(name), &st); err != nil {
		if !errors.Is(err, syscall.ENOENT) {
			t.Errorf("%s: lstat: %v", name, err)
		}
		return found{}
	}
	data, err := os.ReadFile(m.Path(name))
	if err != nil {
		t.Errorf("%s: read: %v", name, err)
		return found{}
	}
	return found{exists: true, data: data, ino: st.Ino}
}

// verifyHistories checks every name the writers touched in dir against what
// they did (see the rules at the top of this file), and that dir holds no
// other names.
func verifyHistories(t *testing.T, m *Mount, round, dir string, hs []*history) {
	t.Helper()
	known := map[string]bool{}
	bad := func(h *history, format string, args ...any) {
		t.Errorf("%s: %s (%s; versions %d, started %d, durable %d): %s",
			round, h.name, kindNames[h.kind], len(h.versions), h.started, h.durable, fmt.Sprintf(format, args...))
	}
	for _, h := range hs {
		known[h.name] = true
		got := lookup(t, m, h.name)
		switch h.kind {
		case kindSynced, kindUnsynced, kindLink:
			checkWrittenOnce(h, got, bad)
		case kindRewrite:
			checkRewrite(h, got, bad)
		case kindAppend:
			checkAppend(h, got, bad)
		case kindReplace:
			checkReplace(t, m, h, got, known, bad)
		}
		if h.kind == kindLink {
			known[h.link] = true
			checkLink(t, m, h, got, bad)
		}
	}
	err := filepath.WalkDir(m.Path(dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(m.Dir, p)
		if !d.IsDir() && !known[rel] {
			t.Errorf("%s: %s exists but no writer ever created it", round, rel)
		}
		return nil
	})
	if err != nil {
		t.Errorf("%s: walking %s: %v", round, dir, err)
	}
}

type badFunc func(h *history, format string, args ...any)

// checkWrittenOnce: absent or a prefix of the content while unconfirmed;
// exactly the content once fsync returned.
func checkWrittenOnce(h *history, got found, bad badFunc) {
	switch {
	case h.started < 0:
		if got.exists {
			bad(h, "exists though the writer never created it")
		}
	case h.durable == 0:
		if !got.exists {
			bad(h, "fsync'd file is gone")
		} else if !bytes.Equal(got.data, h.versions[0]) {
			bad(h, "fsync'd file holds %s, want %s", describe(got.data), describe(h.versions[0]))
		}
	case got.exists && !isPrefix(got.data, h.versions[0]):
		bad(h, "unsynced file holds %s, which is no prefix of what was written (%s)",
			describe(got.data), describe(h.versions[0]))
	}
}

// checkRewrite: before the first fsync like checkWrittenOnce; after it, the
// confirmed version, or page by page the confirmed or the in-flight one.
func checkRewrite(h *history, got found, bad badFunc) {
	if h.durable < 0 {
		checkWrittenOnce(h, got, bad)
		return
	}
	old := h.versions[h.durable]
	if !got.exists {
		bad(h, "file with fsync'd version %d is gone", h.durable)
		return
	}
	if h.started == h.durable {
		if !bytes.Equal(got.data, old) {
			bad(h, "holds %s, want the fsync'd version %d %s", describe(got.data), h.durable, describe(old))
		}
		return
	}
	next := h.versions[h.started]
	if len(got.data) != len(old) {
		bad(h, "size %d, but every version has size %d", len(got.data), len(old))
		return
	}
	for off := 0; off < len(old); off += 4096 {
		end := min(off+4096, len(old))
		page := got.data[off:end]
		if !bytes.Equal(page, old[off:end]) && !bytes.Equal(page, next[off:end]) {
			bad(h, "page at %d is neither the fsync'd version %d nor the version %d being written", off, h.durable, h.started)
			return
		}
	}
}

// checkAppend: a prefix of everything written, at least as long as what the
// last fsync confirmed.
func checkAppend(h *history, got found, bad badFunc) {
	if h.started < 0 {
		if got.exists {
			bad(h, "exists though the writer never created it")
		}
		return
	}
	all := h.versions[h.started]
	least := 0
	if h.durable >= 0 {
		least = len(h.versions[h.durable])
		if !got.exists {
			bad(h, "log with %d fsync'd bytes is gone", least)
			return
		}
	}
	if !got.exists {
		return
	}
	if !isPrefix(got.data, all) {
		bad(h, "holds %s, which is no prefix of what was appended (%s)", describe(got.data), describe(all))
	} else if len(got.data) < least {
		bad(h, "holds %d bytes, but fsync confirmed %d", len(got.data), least)
	}
}

// checkReplace: the name shows the last confirmed version or the one whose
// rename was issued; a tmp is gone exactly when its rename shows.
func checkReplace(t *testing.T, m *Mount, h *history, got found, known map[string]bool, bad badFunc) {
	t.Helper()
	for _, tmp := range h.tmps {
		known[tmp] = true
	}
	var allowed []int
	if h.durable >= 0 {
		allowed = append(allowed, h.durable)
	}
	if h.renameIssued > h.durable {
		allowed = append(allowed, h.renameIssued)
	}
	shows := -1
	for _, v := range allowed {
		if got.exists && bytes.Equal(got.data, h.versions[v]) {
			shows = v
		}
	}
	switch {
	case !got.exists && h.durable >= 0:
		bad(h, "name with renamed and dir-fsync'd version %d is gone", h.durable)
	case got.exists && shows < 0:
		bad(h, "holds %s, which is neither the confirmed version nor the one renamed over it", describe(got.data))
	}
	for i, tmp := range h.tmps {
		tg := lookup(t, m, tmp)
		switch {
		case i <= h.durable || i == shows:
			if tg.exists {
				bad(h, "%s still exists though its rename shows under the name", path.Base(tmp))
			}
		case i <= h.tmpSynced:
			// fsync'd and its rename not visible: it must still be here.
			if !tg.exists {
				bad(h, "fsync'd %s is gone and the name does not show it", path.Base(tmp))
			} else if !bytes.Equal(tg.data, h.versions[i]) {
				bad(h, "fsync'd %s holds %s, want %s", path.Base(tmp), describe(tg.data), describe(h.versions[i]))
			}
		case tg.exists && !isPrefix(tg.data, h.versions[i]):
			bad(h, "unsynced %s holds %s, no prefix of %s", path.Base(tmp), describe(tg.data), describe(h.versions[i]))
		}
	}
}

// checkLink: the second name is the same inode as the first, and is there
// once link and the dir fsync returned.
func checkLink(t *testing.T, m *Mount, h *history, got found, bad badFunc) {
	t.Helper()
	lg := lookup(t, m, h.link)
	switch {
	case !lg.exists && h.linkDurable:
		bad(h, "hard link %s is gone though link and the dir fsync returned", path.Base(h.link))
	case lg.exists && !h.linkIssued:
		bad(h, "hard link %s exists though link was never called", path.Base(h.link))
	case lg.exists && !got.exists:
		bad(h, "hard link %s exists but its original name is gone", path.Base(h.link))
	case lg.exists && lg.ino != got.ino:
		bad(h, "hard link %s is inode %d, the original %d", path.Base(h.link), lg.ino, got.ino)
	case lg.exists && !bytes.Equal(lg.data, h.versions[0]):
		bad(h, "hard link %s holds %s, want %s", path.Base(h.link), describe(lg.data), describe(h.versions[0]))
	}
}

// requireSurvivors checks that the mount holds exactly the files of earlier
// rounds with the content they had when they were verified.
func requireSurvivors(t *testing.T, m *Mount, when string, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	digested := map[string]bool{}
	for p := range want {
		dir := strings.SplitN(p, "/", 2)[0]
		if digested[dir] {
			continue
		}
		digested[dir] = true
		for q, sum := range digestTree(t, m.Path(dir)) {
			got[path.Join(dir, q)] = sum
		}
	}
	requireSameFiles(t, when+", files of earlier rounds", want, got)
}

// TestCrashTreeSurvivesRestart writes a tree of files, directories, links
// and attributes, and checks that a clean unmount and mount keeps all of it,
// first while files still wait to be sealed and then after they are sealed
// (DESIGN invariant 1; inode numbers are stable across restarts).
func TestCrashTreeSurvivesRestart(t *testing.T) {
	m := mountFS(t)
	stop := guardStall(t, m, time.Minute, "writing the tree")
	rng := rand.New(rand.NewPCG(crashSeed(t), 1))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	big := random(3<<20 + 17)
	require.NoError(t, os.MkdirAll(m.Path("a", "b", "c"), 0o755))
	require.NoError(t, os.MkdirAll(m.Path("empty", "dir"), 0o700))
	files := map[string][]byte{
		"zero":            {},
		"one":             {'x'},
		"a/page-1":        random(4095),
		"a/page":          random(4096),
		"a/page+1":        random(4097),
		"a/b/mib+7":       random(1<<20 + 7),
		"a/b/c/big":       big,
		"a/b/c/big-copy":  big,
		"a/b/c/big-edit":  append(bytes.Clone(big[:1<<20]), append([]byte("edited"), big[1<<20+6:]...)...),
		"a/b/text":        bytes.Repeat([]byte("compressible line of text\n"), 40000),
		"a/" + longName(): []byte("a 255-byte name\n"),
	}
	for name, data := range files {
		require.NoError(t, os.WriteFile(m.Path(name), data, 0o644))
	}
	require.NoError(t, os.Chmod(m.Path("one"), 0o600))
	require.NoError(t, os.Chmod(m.Path("a", "b", "text"), 0o751))
	require.NoError(t, os.Chtimes(m.Path("a", "page"), time.Unix(1e9, 0), time.Unix(1234567890, 123456789)))
	require.NoError(t, os.Link(m.Path("a", "b", "mib+7"), m.Path("a", "mib+7-link")))
	require.NoError(t, os.Symlink("b/c/big", m.Path("a", "symlink")))
	require.NoError(t, os.WriteFile(m.Path("renamed-from"), []byte("moved\n"), 0o644))
	require.NoError(t, os.Rename(m.Path("renamed-from"), m.Path("a", "b", "renamed-to")))
	require.NoError(t, os.WriteFile(m.Path("removed"), []byte("gone\n"), 0o644))
	require.NoError(t, os.Remove(m.Path("removed")))
	require.NoError(t, os.WriteFile(m.Path("sparse"), []byte("head"), 0o644))
	require.NoError(t, os.Truncate(m.Path("sparse"), 5<<20))

	// Everything a clean restart must keep.
	const kept = factOwner | factFileSize | factFileTime | factContent
	want := describeTree(t, m.Dir, kept)
	stop()
	m.Restart()
	stop = guardStall(t, m, time.Minute, "reading the tree after a restart")
	if got := describeTree(t, m.Dir, kept); got != want {
		t.Errorf("tree changed across a clean restart:\n%s", diffLines(want, got))
	}

	// Seal everything, then restart again: sealed files must read the same.
	stop()
	m.Args = sealDelayZero
	m.Restart()
	stop = guardStall(t, m, 90*time.Second, "sealing the tree")
	waitAllSealed(t, m)
	stop()
	m.Restart()
	defer guardStall(t, m, time.Minute, "reading the sealed tree after a restart")()
	if got := describeTree(t, m.Dir, kept); got != want {
		t.Errorf("tree changed across sealing and a clean restart:\n%s", diffLines(want, got))
	}
}

func longName() string { return strings.Repeat("n", 255) }

// diffLines shows the lines only in want (-) and only in got (+).
func diffLines(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var out []string
	for l := range w {
		if !g[l] {
			out = append(out, "- "+l)
		}
	}
	for l := range g {
		if !w[l] {
			out = append(out, "+ "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
