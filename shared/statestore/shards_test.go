package statestore

import (
	"crypto/rand"
	"fmt"
	"testing"
)

// TestShardsSpreadOrders measures how evenly order IDs (random UUIDs, as
// the Submission makes them) spread over the in-flight index's shards and
// the listings' shards: the busiest shard's share bounds the write rate a
// partition of the index takes (docs/cost-and-limits.md's table of limits
// uses it).
func TestShardsSpreadOrders(t *testing.T) {
	t.Parallel()
	const n = 100_000
	ids := make([]string, n)
	for i := range ids {
		var b [16]byte
		rand.Read(b[:])
		ids[i] = fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	}
	for _, tc := range []struct {
		index  string
		shards int
		of     func(string) string
	}{
		{InFlightIndex, Shards, ShardOf},
		// ByState's shards within one state, and ByOwner's within one owner.
		{ByStateIndex + ", " + ByOwnerIndex, ListShards, func(id string) string { return fmt.Sprint(ListShardOf(id)) }},
	} {
		count := map[string]int{}
		for _, id := range ids {
			count[tc.of(id)]++
		}
		if len(count) != tc.shards {
			t.Fatalf("%s: %d shards used, want %d", tc.index, len(count), tc.shards)
		}
		busiest := 0
		for _, c := range count {
			busiest = max(busiest, c)
		}
		ratio := float64(busiest) / (float64(n) / float64(tc.shards))
		t.Logf("%s: busiest of %d shards holds %d of %d orders: %.3f of an even share", tc.index, tc.shards, busiest, n, ratio)
		// A uniform hash keeps the busiest of 64 shards within about 4
		// standard deviations (~10%) of an even share at this count, and
		// of 32 within about 7%.
		if ratio > 1.15 {
			t.Errorf("%s: busiest shard has %.2f times an even share", tc.index, ratio)
		}
	}
}
