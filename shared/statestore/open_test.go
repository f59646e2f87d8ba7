package statestore_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// batchRecorder records the store's BatchGetItem requests, and answers
// the first of them for half its keys only, leaving the rest unprocessed
// as DynamoDB does under load.
type batchRecorder struct {
	*dynamodb.Client
	mu       sync.Mutex
	batches  []types.KeysAndAttributes
	indexes  map[string]int
	shortcut bool
}

func (r *batchRecorder) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	r.mu.Lock()
	var table string
	for name, ka := range in.RequestItems {
		table = name
		r.batches = append(r.batches, ka)
	}
	first := !r.shortcut
	r.shortcut = true
	r.mu.Unlock()
	if !first {
		return r.Client.BatchGetItem(ctx, in, opts...)
	}
	ka := in.RequestItems[table]
	half := len(ka.Keys) / 2
	now, later := ka, ka
	now.Keys, later.Keys = ka.Keys[:half], ka.Keys[half:]
	out, err := r.Client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{table: now}}, opts...)
	if err == nil {
		out.UnprocessedKeys = map[string]types.KeysAndAttributes{table: later}
	}
	return out, err
}

func (r *batchRecorder) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	r.mu.Lock()
	r.indexes[aws.ToString(in.IndexName)]++
	r.mu.Unlock()
	return r.Client.Query(ctx, in, opts...)
}

// TestCountOpenReadsOnlyWhatItNeeds: the count queries the two indexes
// only, every shard of them, then reads the records in batches of at most
// 100 keys, of the attributes it needs only, and asks again for the keys
// left unprocessed.
func TestCountOpenReadsOnlyWhatItNeeds(t *testing.T) {
	t.Parallel()
	rec := &batchRecorder{indexes: map[string]int{}}
	s, _, _ := openStore(t, func(c *dynamodb.Client) statestore.Client { rec.Client = c; return rec })
	const n = 230
	for i := range n {
		seed(t, s, fmt.Sprintf("o-open-%03d", i))
	}
	got, err := s.CountOpen(context.Background(), 1000)
	if want := map[string]statestore.VersionCount{workflow.Reference().ID(): {InFlight: n}}; err != nil || got.Truncated || !maps.Equal(got.Versions, want) {
		t.Fatalf("counted %+v, truncated %v, %v; want %+v", got.Versions, got.Truncated, err, want)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// Every shard of the in-flight index, and every partition of Error
	// and CompensationFailed in ByState; nothing else.
	if want := map[string]int{statestore.InFlightIndex: statestore.Shards, statestore.ByStateIndex: 2 * statestore.ListShards}; !maps.Equal(rec.indexes, want) {
		t.Errorf("queries %v, want %v", rec.indexes, want)
	}
	keys := 0
	for _, b := range rec.batches {
		keys += len(b.Keys)
		if len(b.Keys) > statestore.MaxPage {
			t.Errorf("a batch of %d keys", len(b.Keys))
		}
		attrs := slices.Sorted(maps.Values(b.ExpressionAttributeNames))
		if want := slices.Sorted(slices.Values(statestore.OpenAttrs)); !slices.Equal(attrs, want) || aws.ToString(b.ProjectionExpression) == "" {
			t.Errorf("a batch projecting %q of %v, want %v", aws.ToString(b.ProjectionExpression), attrs, want)
		}
	}
	// Each record once, and the unprocessed half of the first batch again.
	if len(rec.batches) < 4 || keys <= n || keys > n+statestore.MaxPage/2 {
		t.Errorf("%d batches of %d keys in all, for %d records", len(rec.batches), keys, n)
	}
}
