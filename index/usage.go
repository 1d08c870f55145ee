package index

// Usage counts what the index holds.
type Usage struct {
	Files       int   `json:"files"`
	Directories int   `json:"directories"`
	SealedBytes int64 `json:"sealed_bytes"` // logical bytes of sealed files
	SealBacklog int   `json:"seal_backlog"` // files whose content waits in staging
	Chunks      int   `json:"chunks"`       // distinct chunks manifests refer to
	ChunkRefs   int64 `json:"chunk_refs"`   // manifest extents, over all files
	Objects     int   `json:"objects"`      // distinct objects manifests are
	ObjectRefs  int64 `json:"object_refs"`  // files whose content is an object
	Quarantined int   `json:"quarantined"`  // objects the scrub found damaged
	// Orphans are files with no name left whose content is not freed yet:
	// a handle still has them open, or the kernel has not forgotten them.
	// OrphanBytes are their logical bytes as of their last seal.
	Orphans      int   `json:"orphans"`
	OrphanBytes  int64 `json:"orphan_bytes"`
	Jobs         int   `json:"jobs"`
	GarbageMarks int   `json:"garbage_marks"` // chunks whose last reference went since the last sweep
}

// Usage scans the index once.
func (tx *Tx) Usage() (Usage, error) {
	var u Usage
	err := tx.scan(kindPrefix(prefixInode), true, func(k, v []byte) (bool, error) {
		n, err := unmarshalInode(0, v)
		if err != nil {
			return false, err
		}
		switch {
		case n.IsDir():
			u.Directories++
		case n.IsRegular():
			u.Files++
			if n.Nlink == 0 {
				u.Orphans++
				u.OrphanBytes += int64(n.Size)
			}
			if n.Staging != 0 {
				u.SealBacklog++
			} else {
				u.SealedBytes += int64(n.Size)
			}
		}
		return true, nil
	})
	if err != nil {
		return u, err
	}
	counts := []struct {
		prefix byte
		fn     func(k, v []byte) error
	}{
		{prefixChunk, func(k, v []byte) error {
			h, _ := keyHash(k)
			refs, err := decodeRefs(h, v)
			u.Chunks++
			u.ChunkRefs += int64(refs)
			return err
		}},
		{prefixObject, func(k, v []byte) error {
			h, _ := keyHash(k)
			refs, err := decodeRefs(h, v)
			u.Objects++
			u.ObjectRefs += int64(refs)
			return err
		}},
		{prefixQuarantine, func(_, _ []byte) error { u.Quarantined++; return nil }},
		{prefixJob, func(_, _ []byte) error { u.Jobs++; return nil }},
		{prefixGarbage, func(_, _ []byte) error { u.GarbageMarks++; return nil }},
	}
	for _, c := range counts {
		err := tx.scan(kindPrefix(c.prefix), c.prefix == prefixChunk || c.prefix == prefixObject, func(k, v []byte) (bool, error) {
			return true, c.fn(k, v)
		})
		if err != nil {
			return u, err
		}
	}
	return u, nil
}
