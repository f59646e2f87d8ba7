package costrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/sasflow/sas/internal/testkit/reqcount"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// SweepRead is the read units one Supervisor sweep consumed with
// Terminal finished records in the table beside InFlight in-flight ones.
type SweepRead struct {
	InFlight, Terminal int
	RRU                float64
}

// Sweep measures what one sweep reads as terminal records pile up: it
// writes inFlight records that are due, then, for each count of terminal,
// tops the table up to that many finished records and runs one Expired.
// The sweep reads the in-flight index and the records in it, so the units
// should not grow with the terminal records.
func Sweep(ctx context.Context, dynamoDBURL string, inFlight int, terminal []int) ([]SweepRead, error) {
	var meter reqcount.Meter
	db := dynamodb.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(dynamoDBURL),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
		APIOptions:  []func(*middleware.Stack) error{meter.Add}})
	prefix := "sweep-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	tables := statestore.Tables{Orders: prefix + "-orders", State: prefix + "-state"}
	if err := statestore.CreateTables(ctx, db, tables); err != nil {
		return nil, err
	}
	store := statestore.New(db, tables)
	now := time.Now().UTC()
	def := workflow.Reference()
	for i := range inFlight {
		id := fmt.Sprintf("in-flight-%06d", i)
		o := workflow.Order{OrderID: id, CustomerID: "c-1", Currency: "EUR", Owner: "sweep", CreatedAt: now}
		st := workflow.NewState(id, def, json.RawMessage(`{"orderId":"`+id+`"}`), now, now.Add(-time.Second))
		if err := store.CreateOrder(ctx, o, st); err != nil {
			return nil, err
		}
	}
	var out []SweepRead
	written := 0
	for _, n := range terminal {
		if err := putTerminal(ctx, db, tables.State, written, n); err != nil {
			return nil, err
		}
		written = max(written, n)
		meter.Reset()
		due, err := store.Expired(ctx, now, 1000)
		if err != nil {
			return nil, err
		}
		if len(due) != inFlight {
			return nil, fmt.Errorf("sweep found %d due records, want %d", len(due), inFlight)
		}
		rru := 0.0
		for _, v := range meter.Snapshot().RRU {
			rru += v
		}
		out = append(out, SweepRead{InFlight: inFlight, Terminal: n, RRU: rru})
	}
	return out, nil
}

// putTerminal writes finished records from..to-1: Processed, out of the
// in-flight index, about as large as a real one.
func putTerminal(ctx context.Context, db *dynamodb.Client, table string, from, to int) error {
	history := strings.Repeat("x", 600)
	var batch []types.WriteRequest
	flush := func() error {
		for len(batch) > 0 {
			res, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: batch}})
			if err != nil {
				return fmt.Errorf("write terminal records: %w", err)
			}
			batch = res.UnprocessedItems[table]
		}
		return nil
	}
	for i := from; i < to; i++ {
		batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			statestore.KeyOrderID: &types.AttributeValueMemberS{Value: fmt.Sprintf("done-%07d", i)},
			"ProcessState":        &types.AttributeValueMemberS{Value: string(workflow.Processed)},
			"Steps":               &types.AttributeValueMemberS{Value: history},
		}}})
		if len(batch) == 25 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}
