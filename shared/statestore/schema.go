package statestore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The table layout lives here, in one place: the store's expressions, the
// local engines' tables and the CDK stack all read these names, so they cannot
// drift apart.
const (
	// KeyOrderID is the partition key of both tables.
	KeyOrderID = "OrderID"

	// InFlightIndex is the sparse GSI the Supervisor queries. Only records
	// that carry InFlightShard appear in it: the in-flight ones, and those in
	// Error or CompensationFailed whose alert is not yet confirmed sent. It
	// holds keys only and has no sort key, so an entry is written when the
	// record enters it and deleted when it leaves, and never moves in
	// between: a claim that sets a new CompleteBy costs the index nothing.
	// The sweep reads the records themselves to see their deadlines.
	InFlightIndex = "InFlightByDeadline"
	// InFlightShardAttr is the GSI partition key: one of Shards values, spread
	// by a hash of the order ID so no shard becomes a hot partition.
	InFlightShardAttr = "InFlightShard"
	// CompleteByAttr is the deadline of the record's current phase, in Unix
	// milliseconds.
	CompleteByAttr = "CompleteBy"

	// ByStateIndex lists orders by state, newest change first, for the
	// operators' GET /ops/orders?state=... Every record is in it.
	ByStateIndex = "ByState"
	// ProcessStateAttr is its partition key.
	ProcessStateAttr = "ProcessState"
	// ChangedAtAttr is its sort key: the time of the record's last write, in
	// Unix milliseconds.
	ChangedAtAttr = "ChangedAt"

	// ByOwnerIndex lists a caller's own orders, newest first, for the
	// clients' GET /orders. It is on the orders table, whose items are
	// written once and never updated, so it costs one index write per order.
	// Orders written before it existed carry neither key and stay out of it.
	ByOwnerIndex = "ByOwner"
	// OwnerAttr is its partition key: the normalized IAM principal that
	// submitted the order (workflow.Order.Owner).
	OwnerAttr = "Owner"
	// CreatedAtMsAttr is its sort key: the order's creation time in Unix
	// milliseconds (CreatedAt, the RFC 3339 text, does not sort as a time).
	CreatedAtMsAttr = "CreatedAtMs"

	// Shards is the fixed number of in-flight index partitions the
	// Supervisor queries in parallel. Each order writes its entry twice
	// (enters, leaves; three units with the transaction's double put), so
	// 64 shards keep each under a partition's 1,000 writes a second up to
	// about 20,000 orders a second. Changing it re-shards only records
	// written afterwards, so keep it fixed once deployed.
	Shards = 64
)

// ByStateProjection lists the non-key attributes ByState copies: what an
// order list shows.
var ByStateProjection = []string{
	"Workflow", "Step", "StepIndex", "FailureCount", "Attempt", "LastError",
	"ClientID", "EventSeq", "Cancelled", "Resubmits", "CreatedAt", "UpdatedAt",
}

// StateStreamView is what the state table's stream carries: the event
// publisher compares each write's old and new EventSeq.
const StateStreamView = types.StreamViewTypeNewAndOldImages

// Tables names the two DynamoDB tables.
type Tables struct {
	Orders string
	State  string
}

// Validate reports a missing table name.
func (t Tables) Validate() error {
	if t.Orders == "" || t.State == "" {
		return errors.New("statestore: both the orders and the state table need a name")
	}
	return nil
}

// ShardOf returns the GSI shard of an order.
func ShardOf(orderID string) string {
	h := fnv.New32a()
	h.Write([]byte(orderID))
	return fmt.Sprintf("s%02d", h.Sum32()%Shards)
}

// ShardNames lists every shard value.
func ShardNames() []string {
	names := make([]string, Shards)
	for i := range names {
		names[i] = fmt.Sprintf("s%02d", i)
	}
	return names
}

// CreateTableInputs returns the CreateTable requests for both tables, on
// demand. The CDK stack declares the same keys and index from the constants
// above; local engines and tests create the tables from these.
func CreateTableInputs(t Tables) []*dynamodb.CreateTableInput {
	// Keys only: the listing reads the page's state records anyway, and
	// an index of keys cannot go stale.
	orders := tableInput(t.Orders, gsi{ByOwnerIndex, OwnerAttr, CreatedAtMsAttr, nil})
	state := tableInput(t.State,
		gsi{InFlightIndex, InFlightShardAttr, "", nil},
		gsi{ByStateIndex, ProcessStateAttr, ChangedAtAttr, ByStateProjection})
	state.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: StateStreamView}
	return []*dynamodb.CreateTableInput{orders, state}
}

// gsi is a global secondary index: a string partition key and, unless
// sort is empty, a number sort key (Unix milliseconds).
type gsi struct {
	name, hash, sort string
	nonKey           []string // what it copies besides the keys; nil: keys only
}

// tableInput is the request of a table on demand, keyed by KeyOrderID, with
// the indexes given.
func tableInput(name string, indexes ...gsi) *dynamodb.CreateTableInput {
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(KeyOrderID), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(KeyOrderID), AttributeType: types.ScalarAttributeTypeS}},
	}
	for _, ix := range indexes {
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String(ix.hash), AttributeType: types.ScalarAttributeTypeS})
		keys := []types.KeySchemaElement{{AttributeName: aws.String(ix.hash), KeyType: types.KeyTypeHash}}
		if ix.sort != "" {
			in.AttributeDefinitions = append(in.AttributeDefinitions,
				types.AttributeDefinition{AttributeName: aws.String(ix.sort), AttributeType: types.ScalarAttributeTypeN})
			keys = append(keys, types.KeySchemaElement{AttributeName: aws.String(ix.sort), KeyType: types.KeyTypeRange})
		}
		proj := &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}
		if ix.nonKey != nil {
			proj = &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: ix.nonKey}
		}
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName: aws.String(ix.name), KeySchema: keys, Projection: proj,
		})
	}
	return in
}

// TableCreator is the part of the DynamoDB client CreateTables uses.
type TableCreator interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// CreateTables creates both tables (for local engines and tests; in AWS the
// CDK stack owns them). An existing table is left as it is.
func CreateTables(ctx context.Context, c TableCreator, t Tables) error {
	for _, in := range CreateTableInputs(t) {
		_, err := c.CreateTable(ctx, in)
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("create table %s: %w", aws.ToString(in.TableName), err)
		}
	}
	return nil
}
