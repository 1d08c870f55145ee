package cas

import (
	"encoding/hex"
	"fmt"

	"github.com/zeebo/blake3"
)

// Hash identifies a chunk: the BLAKE3-256 hash of its uncompressed bytes.
type Hash [32]byte

// Sum returns the hash of data.
func Sum(data []byte) Hash {
	return blake3.Sum256(data)
}

// String returns the hash as 64 lowercase hex digits, the chunk's file name.
func (h Hash) String() string {
	return hex.EncodeToString(h[:])
}

// ParseHash parses the form String returns: exactly 64 lowercase hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return Hash{}, fmt.Errorf("cas: bad hash %q: want %d lowercase hex digits, got %d characters", s, 2*len(h), len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return Hash{}, fmt.Errorf("cas: bad hash %q: character %d is %q, want a lowercase hex digit", s, i, c)
		}
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return Hash{}, fmt.Errorf("cas: bad hash %q: %w", s, err)
	}
	return h, nil
}
