package reqcount

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// The meter asks every DynamoDB request that can report its capacity to do
// so, and reads it back from single and batched responses alike.
func TestCapacityIsAskedAndRead(t *testing.T) {
	t.Parallel()
	put, batch, tx := &dynamodb.PutItemInput{}, &dynamodb.BatchGetItemInput{}, &dynamodb.TransactWriteItemsInput{}
	for _, in := range []any{put, batch, tx} {
		askCapacity(in)
	}
	for name, got := range map[string]ddbtypes.ReturnConsumedCapacity{
		"PutItem": put.ReturnConsumedCapacity, "BatchGetItem": batch.ReturnConsumedCapacity, "TransactWriteItems": tx.ReturnConsumedCapacity,
	} {
		if got != ddbtypes.ReturnConsumedCapacityIndexes {
			t.Errorf("%s: ReturnConsumedCapacity = %q, want %q", name, got, ddbtypes.ReturnConsumedCapacityIndexes)
		}
	}
	// Not DynamoDB, or not a pointer: left alone, no panic.
	askCapacity(&sqs.SendMessageInput{})
	askCapacity(dynamodb.PutItemInput{})
	askCapacity(nil)

	one := ddbtypes.ConsumedCapacity{TableName: aws.String("state"), WriteCapacityUnits: aws.Float64(2)}
	for _, tc := range []struct {
		name string
		out  any
		want int
	}{
		{"single", &dynamodb.UpdateItemOutput{ConsumedCapacity: &one}, 1},
		{"single, none reported", &dynamodb.GetItemOutput{}, 0},
		{"transaction", &dynamodb.TransactWriteItemsOutput{ConsumedCapacity: []ddbtypes.ConsumedCapacity{one, one}}, 2},
		{"not DynamoDB", &sqs.SendMessageOutput{}, 0},
		{"nil", nil, 0},
	} {
		got := capacityOf(tc.out)
		if len(got) != tc.want {
			t.Errorf("%s: %d capacities, want %d", tc.name, len(got), tc.want)
			continue
		}
		for _, c := range got {
			if aws.ToFloat64(c.WriteCapacityUnits) != 2 {
				t.Errorf("%s: capacity %+v, want the response's", tc.name, c)
			}
		}
	}
}

// TestTaggedRequestsCountApart: a request made under a tag counts in the
// totals and under its tag; an untagged one in the totals only.
func TestTaggedRequestsCountApart(t *testing.T) {
	t.Parallel()
	var m Meter
	ctx := context.Background()
	step := WithTag(ctx, "ship-order")
	m.count(step, "DynamoDB UpdateItem", -1, 0)
	m.consumed(step, []ddbtypes.ConsumedCapacity{{TableName: aws.String("ledger"), Table: &ddbtypes.Capacity{CapacityUnits: aws.Float64(1)}}}, false, false)
	m.count(ctx, "SQS SendMessage", 10, 0)
	m.consumed(ctx, []ddbtypes.ConsumedCapacity{{TableName: aws.String("state"), Table: &ddbtypes.Capacity{CapacityUnits: aws.Float64(2)}}}, false, false)
	all, tags := m.Snapshot(), m.SnapshotTags()
	if all.Requests["DynamoDB UpdateItem"] != 1 || all.Requests["SQS SendMessage"] != 1 || all.WRU["ledger"] != 1 || all.WRU["state"] != 2 {
		t.Errorf("totals %+v, want both requests", all)
	}
	got := tags["ship-order"]
	if len(tags) != 1 || got.Requests["DynamoDB UpdateItem"] != 1 || got.Requests["SQS SendMessage"] != 0 || got.WRU["ledger"] != 1 || got.WRU["state"] != 0 {
		t.Errorf("tags %+v, want the tagged request alone under its tag", tags)
	}
	m.Reset()
	if len(m.SnapshotTags()) != 0 || len(m.Snapshot().Requests) != 0 {
		t.Error("Reset kept what was measured")
	}
}
