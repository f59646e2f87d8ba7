package statestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// The benchmarks measure the claim and commit paths over the wire against
// DynamoDB Local: one conditional UpdateItem each, including encoding and
// decoding the record. Absolute times say more about DynamoDB Local than
// about AWS; allocations and relative cost are what to watch.

func BenchmarkClaim(b *testing.B) {
	s := newStore(b)
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = fmt.Sprintf("o-claim-%d", i)
		seed(b, s, ids[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := claim(s, ids[i], 0, "bench", t0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCommitAndClaimNext(b *testing.B) {
	s := newStore(b)
	ctx := context.Background()
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = fmt.Sprintf("o-commit-%d", i)
		seed(b, s, ids[i])
		if _, err := claim(s, ids[i], 0, "bench", t0); err != nil {
			b.Fatal(err)
		}
	}
	out := json.RawMessage(`{"confirmation":"reserve-inventory-1a2b3c"}`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Apply(ctx, machine.StepCompleted(ids[i], 0, 1, out, "bench", t0)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExpired(b *testing.B) {
	s := newStore(b)
	for i := range 200 {
		id := fmt.Sprintf("o-exp-%d", i)
		seed(b, s, id)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := s.Expired(ctx, t0.Add(time.Hour), 100)
		if err != nil || len(got) != 200 {
			b.Fatalf("Expired = %d, %v", len(got), err)
		}
	}
}
