package store

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/statefs/statefs/cas"
	"github.com/statefs/statefs/index"
)

// The kinds of problem Check reports about files, beside index.Check's.
const (
	ProblemMissingChunk   = "missing-chunk"   // a chunk a manifest uses is not in the chunk store
	ProblemCorruptChunk   = "corrupt-chunk"   // a chunk a manifest uses does not read back as its hash (verify only)
	ProblemMissingStaging = "missing-staging" // a staging reference whose file does not exist
	ProblemStrayStaging   = "stray-staging"   // a staging file no inode refers to: a crash left it, Open removes it
	ProblemStagingFile    = "staging-file"    // an entry of the staging directory that is not a regular file
	ProblemGarbageChunk   = "garbage-chunk"   // a chunk file no manifest uses: Sweep removes it
)

// IsError reports whether p is a real inconsistency rather than a leftover
// that the store removes by itself: a stray staging file (Open) or a chunk
// no manifest uses (Sweep). After a crash, a consistent store may show both.
func IsError(p index.Problem) bool {
	return p.Kind != ProblemGarbageChunk && p.Kind != ProblemStrayStaging
}

// OpenForCheck opens the existing store in dir for an offline check: it
// takes the lock as Open does (ErrInUse if a daemon serves the store) but
// recovers nothing, so that Check sees exactly what the last process left.
// The store is not created if missing. The caller only reads it, and
// closes it.
func OpenForCheck(dir string) (*Store, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "FORMAT")); err != nil {
		return nil, fmt.Errorf("%s is not a statefs store (no FORMAT file)", dir)
	}
	if err := checkFormat(dir); err != nil {
		return nil, err
	}
	for _, sub := range []string{"index", "chunks", "staging"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("store %s has no %s directory", dir, sub)
		}
	}
	lock, err := takeLock(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{Dir: dir, lock: lock}
	if err := s.open(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Check runs index.Check and then checks the files against the index:
// every chunk a manifest uses is in the chunk store (with verify, it reads
// each one and checks its hash: DESIGN invariant 5), every staging
// reference has its file, and every staging file and chunk file is
// referred to. Use IsError to tell inconsistencies from leftovers. The
// store must not be in use (OpenForCheck).
func (s *Store) Check(verify bool) ([]index.Problem, error) {
	problems, used, err := s.Index.Check()
	if err != nil {
		return nil, err
	}
	add := func(kind, format string, args ...any) {
		problems = append(problems, index.Problem{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	var buf []byte
	for _, h := range used {
		if !verify {
			ok, err := s.Chunks.Has(h)
			if err != nil {
				return nil, err
			}
			if !ok {
				add(ProblemMissingChunk, "chunk %s", h)
			}
			continue
		}
		buf, err = s.Chunks.Get(h, buf)
		switch {
		case errors.Is(err, cas.ErrNotFound):
			add(ProblemMissingChunk, "chunk %s", h)
		case errors.Is(err, cas.ErrCorrupt):
			add(ProblemCorruptChunk, "%v", err)
		case err != nil:
			return nil, err
		}
	}
	var garbage []cas.Hash
	err = s.Chunks.Walk(func(h cas.Hash, _ int64) error {
		if _, ok := slices.BinarySearchFunc(used, h, compareHash); !ok {
			garbage = append(garbage, h)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(garbage, compareHash)
	for _, h := range garbage {
		add(ProblemGarbageChunk, "chunk %s is used by no manifest", h)
	}
	fileProblems, err := s.checkStaging()
	if err != nil {
		return nil, err
	}
	return append(problems, fileProblems...), nil
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
