package statestore

import (
	"crypto/rand"
	"fmt"
	"testing"
)

// TestShardsSpreadOrders measures how evenly order IDs (random UUIDs, as
// the Submission makes them) spread over the in-flight index's shards: the
// busiest shard's share bounds the write rate a partition of the index
// takes (the README's scaling table uses it).
func TestShardsSpreadOrders(t *testing.T) {
	t.Parallel()
	const n = 100_000
	count := map[string]int{}
	for range n {
		var b [16]byte
		rand.Read(b[:])
		count[ShardOf(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]))]++
	}
	if len(count) != Shards {
		t.Fatalf("%d shards used, want %d", len(count), Shards)
	}
	busiest := 0
	for _, c := range count {
		busiest = max(busiest, c)
	}
	ratio := float64(busiest) / (float64(n) / Shards)
	t.Logf("busiest of %d shards holds %d of %d orders: %.3f of an even share", Shards, busiest, n, ratio)
	// A uniform hash keeps the busiest of 64 shards within about 4 standard
	// deviations (~10%) of an even share at this count.
	if ratio > 1.15 {
		t.Errorf("busiest shard has %.2f times an even share", ratio)
	}
}
