package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
)

// The kinds of problem Check reports about files, beside index.Check's.
const (
	ProblemMissingChunk   = "missing-chunk"      // a chunk a manifest uses is not in the chunk store
	ProblemCorruptChunk   = "corrupt-chunk"      // a chunk a manifest uses does not read back as its hash (verify only)
	ProblemMissingStaging = "missing-staging"    // a staging reference whose file does not exist
	ProblemStrayStaging   = "stray-staging"      // a staging file no inode refers to: a crash left it, Open removes it
	ProblemStagingFile    = "staging-file"       // an entry of the staging directory that is not a regular file
	ProblemGarbageChunk   = "garbage-chunk"      // a chunk file no manifest uses: Sweep removes it
	ProblemDamagedFile    = "damaged-file"       // a file that uses a missing or corrupt chunk or object: Repair makes its lost ranges holes
	ProblemMissingObject  = "missing-object"     // an object a manifest is, not in the object store
	ProblemCorruptObject  = "corrupt-object"     // an object a manifest is, that does not read back as its hash (verify only)
	ProblemQuarantined    = "quarantined-object" // an object the scrub found damaged: opens of its files fail
	ProblemGarbageObject  = "garbage-object"     // an object file no manifest is: Sweep removes it
)

// IsError reports whether p is a real inconsistency rather than a leftover
// that the store removes by itself: a stray staging file (Open) or a chunk
// no manifest uses (Sweep). After a crash, a consistent store may show both.
func IsError(p index.Problem) bool {
	return p.Kind != ProblemGarbageChunk && p.Kind != ProblemStrayStaging && p.Kind != ProblemGarbageObject
}

// OpenReadOnly opens the existing store in dir to read it while no daemon
// serves it (ErrInUse if one does), and changes none of its files: it
// recovers nothing, upgrades nothing, keeps no free-space reserve, and its
// index and chunk store refuse writes. A store whose daemon was killed is
// read as the kill left it (index.OpenReadOnly replays the index's log in a
// scratch copy). Several read-only opens may share a store.
func OpenReadOnly(dir string) (*Store, error) {
	dir, err := existingStore(dir)
	if err != nil {
		return nil, err
	}
	lock, err := takeLock(dir, true)
	if err != nil {
		return nil, err
	}
	s := &Store{Dir: dir, lock: lock}
	if s.Index, err = index.OpenReadOnly(filepath.Join(dir, "index")); err != nil {
		s.Close()
		return nil, err
	}
	if s.chunks, err = cas.OpenReadOnly(filepath.Join(dir, "chunks")); err != nil {
		s.Close()
		return nil, err
	}
	if s.objects, err = cas.OpenObjectsReadOnly(filepath.Join(dir, "objects")); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// OpenForRepair opens the existing store in dir for an offline repair: it
// takes the lock as Open does (ErrInUse if a daemon serves the store) but
// recovers nothing, so that Check and Repair see exactly what the last
// process left. The store is not created if missing.
func OpenForRepair(dir string) (*Store, error) {
	dir, err := existingStore(dir)
	if err != nil {
		return nil, err
	}
	lock, err := takeLock(dir, false)
	if err != nil {
		return nil, err
	}
	releaseReserveIfFull(dir) // badger needs room to open (space.go)
	s := &Store{Dir: dir, lock: lock}
	if err := s.open(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Stat checks, without opening or changing anything, that dir holds a
// store: its FORMAT file is there. Its error tells a missing directory, a
// directory without FORMAT and one the caller may not read apart: a user
// who runs a command on a store only its owner may read (the daemon's,
// 0700 and root's) is told so, with the path, rather than that there is no
// store.
func Stat(dir string) error {
	path := filepath.Join(dir, "FORMAT")
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("cannot read store %s: permission denied on %s%s", dir, path, ownerOf(dir))
	case errors.Is(err, fs.ErrNotExist):
		if _, derr := os.Stat(dir); errors.Is(derr, fs.ErrNotExist) {
			return fmt.Errorf("%s is not a statefs store (no such directory)", dir)
		}
		return fmt.Errorf("%s is not a statefs store (no FORMAT file)", dir)
	}
	return fmt.Errorf("store %s: %w", dir, err)
}

// ownerOf says who owns dir and its mode, for an error that permissions
// caused, or nothing if even that cannot be read.
func ownerOf(dir string) string {
	fi, err := os.Stat(dir)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf(" (%s is owned by uid %d, mode %04o)", dir, st.Uid, fi.Mode().Perm())
}

// existingStore returns the absolute path of dir if it holds a store this
// statefs reads (a version 1 store is read as it is: its chunk files still
// read), without creating or changing anything.
func existingStore(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := Stat(dir); err != nil {
		return "", err
	}
	if _, err := checkFormat(dir); err != nil {
		return "", err
	}
	for _, sub := range []string{"index", "chunks", "staging"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("store %s has no %s directory", dir, sub)
		}
	}
	return dir, nil
}

// Check runs index.Check and then checks the files against the index:
// every chunk a manifest uses is a chunk file in the chunk store (with
// verify, it reads each one and checks its hash: DESIGN invariant 5),
// every staging reference has its file, and every staging file and chunk
// file is referred to. Each file that uses a lost chunk (missing, or not
// reading back as its hash) is reported once more, as a damaged file with
// its paths and lost ranges: that is what Repair would change. Use IsError
// to tell inconsistencies from leftovers. The store must not be in use
// (OpenReadOnly or OpenForRepair).
func (s *Store) Check(verify bool) ([]index.Problem, error) {
	problems, used, err := s.Index.Check()
	if err != nil {
		return nil, err
	}
	add := func(kind, format string, args ...any) {
		problems = append(problems, index.Problem{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	files, err := s.chunkFiles()
	if err != nil {
		return nil, err
	}
	lost, _ := s.lostChunks(context.Background(), used, files, verify, nil)
	for _, h := range used {
		if l, ok := lost[h]; ok {
			add(l.kind, "chunk %s: %s", h, l.why)
		}
	}
	usedObjects, objectFiles, err := s.objectSet()
	if err != nil {
		return nil, err
	}
	lostObjects, err := s.lostObjects(context.Background(), usedObjects, objectFiles, verify, nil, nil)
	if err != nil {
		return nil, err
	}
	for _, h := range usedObjects {
		if l, ok := lostObjects[h]; ok {
			add(l.kind, "object %s: %s", h, l.why)
		}
	}
	for _, h := range objectFiles {
		if _, ok := slices.BinarySearchFunc(usedObjects, h, compareHash); !ok {
			add(ProblemGarbageObject, "object %s is no file's content", h)
		}
	}
	damaged, err := s.Index.DamagedFiles(isIn(lost), isIn(lostObjects))
	if err != nil {
		return nil, err
	}
	for _, d := range damaged {
		add(ProblemDamagedFile, "%s", describeDamage(d))
	}
	for _, h := range files {
		if _, ok := slices.BinarySearchFunc(used, h, compareHash); ok {
			continue
		}
		add(ProblemGarbageChunk, "chunk %s is used by no manifest", h)
	}
	fileProblems, err := s.checkStaging()
	if err != nil {
		return nil, err
	}
	return append(problems, fileProblems...), nil
}

// lostChunk is why a chunk a manifest uses, or an object a manifest is,
// cannot be read.
type lostChunk struct {
	kind string // ProblemMissingChunk or ProblemCorruptChunk; ProblemMissingObject, ProblemCorruptObject or ProblemQuarantined
	why  string
}

// isIn is the predicate of membership in lost.
func isIn(lost map[cas.Hash]lostChunk) func(cas.Hash) bool {
	return func(h cas.Hash) bool { _, ok := lost[h]; return ok }
}

// chunkFiles lists the chunks that are regular files in the chunk store,
// sorted.
func (s *Store) chunkFiles() ([]cas.Hash, error) {
	var files []cas.Hash
	err := s.chunks.Hashes(func(h cas.Hash) error { files = append(files, h); return nil })
	slices.SortFunc(files, compareHash)
	return files, err
}

// lostChunks finds which of the chunks in used are lost: missing, not a
// regular file (files lists those that are, sorted), or (with verify) not
// reading back as their hash, for whatever reason (a truncated file, bad
// bytes, an I/O error). progress, if set, is called after each chunk with
// the bytes read. It stops early, with what it found so far and ctx's
// error, when ctx is done.
func (s *Store) lostChunks(ctx context.Context, used, files []cas.Hash, verify bool, progress func(bytes int)) (map[cas.Hash]lostChunk, error) {
	lost := map[cas.Hash]lostChunk{}
	var buf []byte
	for _, h := range used {
		if err := ctx.Err(); err != nil {
			return lost, err
		}
		n := 0
		_, regular := slices.BinarySearchFunc(files, h, compareHash)
		switch {
		case !regular:
			switch ok, err := s.chunks.Has(h); {
			case err != nil:
				lost[h] = lostChunk{ProblemCorruptChunk, err.Error()}
			case ok:
				lost[h] = lostChunk{ProblemCorruptChunk, "not a regular file"}
			default:
				lost[h] = lostChunk{ProblemMissingChunk, "missing from the chunk store"}
			}
		case verify:
			b, err := s.chunks.Get(h, buf)
			switch {
			case errors.Is(err, cas.ErrNotFound):
				lost[h] = lostChunk{ProblemMissingChunk, "missing from the chunk store"}
			case err != nil:
				// ErrCorrupt, or an I/O error: either way the bytes are gone.
				lost[h] = lostChunk{ProblemCorruptChunk, err.Error()}
			default:
				buf, n = b, len(b)
			}
		}
		if progress != nil {
			progress(n)
		}
	}
	return lost, nil
}

// describeDamage is one line about a damaged file: its names, size and
// lost ranges.
func describeDamage(d index.DamagedFile) string {
	names := "no name (unlinked, still open)"
	if len(d.Paths) > 0 {
		names = strings.Join(d.Paths, ", ")
	}
	if d.Object != nil {
		return fmt.Sprintf("file %s (inode %d, %d bytes): all of it lost (object %s)", names, d.Ino, d.Size, d.Object)
	}
	var ranges []string
	for _, e := range d.Lost {
		ranges = append(ranges, fmt.Sprintf("%d+%d (chunk %s)", e.Off, e.Len, e.Hash))
	}
	return fmt.Sprintf("file %s (inode %d, %d bytes): %d bytes lost at %s",
		names, d.Ino, d.Size, d.LostBytes(), strings.Join(ranges, ", "))
}

func compareHash(a, b cas.Hash) int { return bytes.Compare(a[:], b[:]) }

// checkStaging compares the staging directory with the staging references.
func (s *Store) checkStaging() ([]index.Problem, error) {
	var problems []index.Problem
	add := func(kind, format string, args ...any) {
		problems = append(problems, index.Problem{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	var refs map[uint64]uint64
	err := s.Index.View(func(tx *index.Tx) (err error) {
		refs, err = tx.StagingRefs()
		return err
	})
	if err != nil {
		return nil, err
	}
	present := map[uint64]bool{}
	err = s.walkStaging(func(f stagingFile) error {
		name, _ := filepath.Rel(s.stagingDir(), f.path)
		_, referred := refs[f.id]
		switch {
		case !f.ok && f.info.Type().IsRegular():
			add(ProblemStrayStaging, "staging file %s is not named after a staging id in its shard", name)
		case !f.ok:
			add(ProblemStagingFile, "staging file %s is not a regular file", name)
		case !referred:
			add(ProblemStrayStaging, "staging file %s belongs to no inode", name)
		default:
			present[f.id] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range slices.Sorted(maps.Keys(refs)) {
		if !present[id] {
			add(ProblemMissingStaging, "inode %d refers to staging file %016x, which does not exist", refs[id], id)
		}
	}
	return problems, nil
}
