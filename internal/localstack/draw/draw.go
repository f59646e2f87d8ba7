// Package draw makes replayable random choices: each number is a hash of a
// seed, what the choice is about and how often it was made before, never a
// draw from a shared stream, so the same seed makes the same choices however
// goroutines interleave. The fault injectors (internal/localstack/chaos, the remote
// simulator, the local stack's agent crashes) all draw from it.
package draw

import (
	"encoding/binary"
	"hash/fnv"
)

// Unit returns a number in [0, 1) determined by seed, key and n alone.
func Unit(seed uint64, key string, n uint64) float64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(key))
	binary.LittleEndian.PutUint64(b[:], n)
	h.Write(b[:])
	// FNV mixes short inputs poorly; a final avalanche (MurmurHash3's) fixes
	// that.
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return float64(x>>11) / (1 << 53)
}
