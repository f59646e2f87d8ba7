package statestore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
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

	// ByStateIndex lists the records in a listed state
	// (workflow.ProcessState.Listed), newest entry into the state first, for
	// the operators' GET /ops/orders?state=... It is sparse and keys only:
	// only a listed record carries its keys, and they change only when the
	// record's state does, so the bulk of all writes costs it nothing. Its
	// partitions are spread over ListShards per state, so no state's
	// partition is hot.
	ByStateIndex = "ByState"
	// ProcessStateAttr holds the record's state; the index's keys name it.
	ProcessStateAttr = "ProcessState"
	// ByStateKeyAttr is its partition key, "<State>#<shard>" (ByStateKey).
	ByStateKeyAttr = "ByStateKey"
	// ByStateSortAttr is its sort key, "<ms>#<OrderID>" (SortKey) of the
	// time the record entered its state: unique, and in time order.
	ByStateSortAttr = "ByStateSort"

	// ByOwnerIndex lists a caller's own orders, newest first, for the
	// clients' GET /orders. It is on the orders table, whose items are
	// written once and never updated, so it costs one index write per order.
	// Keys only, spread over ListShards per owner like ByState. Orders
	// without an owner, or written before it existed, stay out of it.
	ByOwnerIndex = "ByOwner"
	// OwnerShardAttr is its partition key, "<owner key>#<shard>"
	// (OwnerShard), the key being what the order's owner is matched on
	// (workflow.OwnerKey): its principal's unique ID, or the owner itself
	// where it is unique by itself.
	OwnerShardAttr = "OwnerShard"
	// OwnerSortAttr is its sort key, "<ms>#<OrderID>" (SortKey) of the
	// order's creation.
	OwnerSortAttr = "OwnerSort"

	// ListShards is the number of partitions of each listing, ByState's per
	// state and ByOwner's per owner: a listing's writes spread over them,
	// and a page reads them all. Changing it strands the entries written
	// under the old count, so keep it fixed once deployed.
	ListShards = 32

	// ExpiresAtAttr is the TTL attribute of both tables: Unix seconds
	// after which DynamoDB deletes the item (within days, not at once; the
	// store's reads take it for gone from then on). On a state record it
	// is set by the write that ends the order and removed by one that
	// reopens it; on an order it is written once, at submission
	// (workflow.Machine.OrderExpiresAt, which outlives every open record).
	ExpiresAtAttr = "ExpiresAt"

	// Shards is the fixed number of in-flight index partitions the
	// Supervisor queries in parallel. Each order writes its entry twice
	// (enters, leaves; three units with the transaction's double put), so
	// 64 shards keep each under a partition's 1,000 writes a second up to
	// about 20,000 orders a second. Changing it re-shards only records
	// written afterwards, so keep it fixed once deployed.
	Shards = 64
)

// SummaryAttrs lists what a listing reads of each state record it shows,
// by BatchGetItem (its indexes hold keys only): an order list's summary,
// without the input or the step history.
var SummaryAttrs = []string{
	KeyOrderID, ProcessStateAttr, "Workflow", "Step", "StepIndex", "FailureCount", "Attempt", "LastError",
	"ClientID", "Priority", eventSeqAttr, "Cancelled", "Resubmits", "CreatedAt", "UpdatedAt", ExpiresAtAttr,
}

// eventSeqAttr numbers the changes of a record's client status (EventSeq).
const eventSeqAttr = "EventSeq"

// StateStreamView is what the state table's stream carries: the event
// publisher compares each write's old and new EventSeq.
const StateStreamView = types.StreamViewTypeNewAndOldImages

// Tables names the DynamoDB tables: the orders and the state table, which
// the actors use, and the code steps' idempotency ledger (ledger.go), a
// table of its own so its writes put nothing in the state table's stream
// and a code step's role reaches no order.
type Tables struct {
	Orders string
	State  string
	Ledger string
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

// ListShardOf returns an order's shard in the listings (0..ListShards-1),
// by the same hash as ShardOf.
func ListShardOf(orderID string) int {
	h := fnv.New32a()
	h.Write([]byte(orderID))
	return int(h.Sum32() % ListShards)
}

// ByStateKey is the ByState partition of an order in state.
func ByStateKey(state workflow.ProcessState, orderID string) string {
	return listPartition(string(state), ListShardOf(orderID))
}

// OwnerShard is the ByOwner partition of an order of the owner matched on
// ownerKey (workflow.OwnerKey).
func OwnerShard(ownerKey, orderID string) string {
	return listPartition(ownerKey, ListShardOf(orderID))
}

// listPartition is a listing's partition of shard shard of part.
func listPartition(part string, shard int) string { return fmt.Sprintf("%s#%02d", part, shard) }

// sortMillisDigits holds any Unix millisecond time until the year 2286, so
// that the text of sort keys orders them as their times.
const sortMillisDigits = 13

// SortKey is the listings' sort key of an order at a time: the Unix
// milliseconds, zero-padded so that text order is time order, and the
// order ID, so that no two orders share a key, even in one millisecond.
func SortKey(at time.Time, orderID string) string {
	return fmt.Sprintf("%0*d#%s", sortMillisDigits, max(at.UnixMilli(), 0), orderID)
}

// ValidSortKey reports whether s is a sort key SortKey writes, for the
// cursors a client sends back.
func ValidSortKey(s string) bool {
	ms, id, ok := strings.Cut(s, "#")
	if !ok || len(ms) != sortMillisDigits || !message.ValidOrderID(id) {
		return false
	}
	for _, c := range []byte(ms) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// CreateTableInputs returns the CreateTable requests for the tables t
// names, on demand, in the order orders, state, ledger. The CDK stack
// declares the same keys and index from the constants above; local engines
// and tests create the tables from these.
func CreateTableInputs(t Tables) []*dynamodb.CreateTableInput {
	var out []*dynamodb.CreateTableInput
	if t.Orders != "" {
		// Keys only: the listing reads the page's state records anyway,
		// and an index of keys cannot go stale.
		out = append(out, tableInput(t.Orders, gsi{ByOwnerIndex, OwnerShardAttr, OwnerSortAttr}))
	}
	if t.State != "" {
		state := tableInput(t.State,
			gsi{InFlightIndex, InFlightShardAttr, ""},
			gsi{ByStateIndex, ByStateKeyAttr, ByStateSortAttr})
		state.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: StateStreamView}
		out = append(out, state)
	}
	if t.Ledger != "" {
		out = append(out, LedgerTableInput(t.Ledger))
	}
	return out
}

// LedgerTableInput is the CreateTable request of the ledger, on demand:
// keyed by LedgerKeyAttr alone, no index, no stream. Its TTL is
// LedgerExpiresAtAttr (TimeToLiveInputs).
func LedgerTableInput(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(LedgerKeyAttr), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(LedgerKeyAttr), AttributeType: types.ScalarAttributeTypeS}},
	}
}

// TimeToLiveInputs returns the UpdateTimeToLive requests that turn on TTL
// for the tables t names: on ExpiresAtAttr for the orders and state
// tables, on LedgerExpiresAtAttr for the ledger. TTL is not part of
// CreateTable, so the local engines' tables get it from these after
// CreateTableInputs, and the CDK stack declares the same attribute
// (TableProps.TimeToLiveAttribute).
func TimeToLiveInputs(t Tables) []*dynamodb.UpdateTimeToLiveInput {
	var out []*dynamodb.UpdateTimeToLiveInput
	for _, tt := range []struct{ name, attr string }{{t.Orders, ExpiresAtAttr}, {t.State, ExpiresAtAttr}, {t.Ledger, LedgerExpiresAtAttr}} {
		if tt.name == "" {
			continue
		}
		out = append(out, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(tt.name),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(tt.attr), Enabled: aws.Bool(true)},
		})
	}
	return out
}

// gsi is a global secondary index of keys only: a string partition key
// and, unless sort is empty, a string sort key (SortKey).
type gsi struct {
	name, hash, sort string
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
				types.AttributeDefinition{AttributeName: aws.String(ix.sort), AttributeType: types.ScalarAttributeTypeS})
			keys = append(keys, types.KeySchemaElement{AttributeName: aws.String(ix.sort), KeyType: types.KeyTypeRange})
		}
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName: aws.String(ix.name), KeySchema: keys,
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		})
	}
	return in
}

// TableCreator is the part of the DynamoDB client CreateTables uses.
type TableCreator interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// TableOption changes what CreateTables does.
type TableOption func(*tableOptions)

type tableOptions struct{ noTTL bool }

// WithoutTTL leaves TTL off: for tests whose store runs on a fake clock,
// where the engine's deletion by wall-clock time would remove items the
// test's time has not expired (the store's reads apply ExpiresAt by its
// own clock either way).
func WithoutTTL() TableOption { return func(o *tableOptions) { o.noTTL = true } }

// CreateTables creates the tables t names with TTL on (for local engines and
// tests; in AWS the CDK stack owns them). An existing table is left as it
// is, TTL included.
func CreateTables(ctx context.Context, c TableCreator, t Tables, opts ...TableOption) error {
	var o tableOptions
	for _, opt := range opts {
		opt(&o)
	}
	created := map[string]bool{}
	for _, in := range CreateTableInputs(t) {
		_, err := c.CreateTable(ctx, in)
		var inUse *types.ResourceInUseException
		switch {
		case errors.As(err, &inUse):
		case err != nil:
			return fmt.Errorf("create table %s: %w", aws.ToString(in.TableName), err)
		default:
			created[aws.ToString(in.TableName)] = true
		}
	}
	for _, in := range TimeToLiveInputs(t) {
		if o.noTTL || !created[aws.ToString(in.TableName)] {
			continue
		}
		if _, err := c.UpdateTimeToLive(ctx, in); err != nil {
			return fmt.Errorf("turn on TTL of table %s: %w", aws.ToString(in.TableName), err)
		}
	}
	return nil
}
