// Package testbytes makes content for tests: bytes that do not compress,
// the same for the same seed.
package testbytes

import "math/rand/v2"

// Random is n bytes that do not compress (a seal past the inline size
// keeps them as an object), the same for the same seed.
func Random(n int, seed uint64) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}).Read(b)
	return b
}
