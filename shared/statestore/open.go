package statestore

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/workflow"
)

// OpenCount is what CountOpen found: the open orders of each workflow
// version.
type OpenCount struct {
	// Versions maps a workflow version's ID (a record's Workflow) to its
	// open orders. A version without open orders is absent.
	Versions map[string]VersionCount
	// Truncated: the indexes hold more entries than the limit, so the
	// counts are lower bounds.
	Truncated bool
}

// VersionCount is how many open orders pin one workflow version.
type VersionCount struct {
	// InFlight counts the orders an actor is moving on
	// (workflow.ProcessState.InFlight).
	InFlight int
	// NeedsOperator counts the orders stopped until an operator acts
	// (workflow.ProcessState.NeedsOperator).
	NeedsOperator int
}

// Add counts st, an open record, under its version; a record that is not
// open (it moved on after its index entry was read) is left out.
func (c *OpenCount) Add(st workflow.State) {
	v := c.Versions[st.Workflow]
	switch {
	case st.ProcessState.InFlight():
		v.InFlight++
	case st.ProcessState.NeedsOperator():
		v.NeedsOperator++
	default:
		return
	}
	if c.Versions == nil {
		c.Versions = map[string]VersionCount{}
	}
	c.Versions[st.Workflow] = v
}

// OpenStates are the states whose records CountOpen reads from ByState:
// those waiting for an operator. The records in flight, and those whose
// alert is not yet confirmed, it reads from the in-flight index.
func OpenStates() []workflow.ProcessState {
	return []workflow.ProcessState{workflow.Error, workflow.CompensationFailed}
}

// OpenAttrs is what CountOpen reads of each record: its version, its state
// and its TTL (an expired record is gone, and does not count).
var OpenAttrs = []string{KeyOrderID, "Workflow", ProcessStateAttr, ExpiresAtAttr}

// MaxOpenLimit bounds CountOpen's limit: at most this many keys, and as
// many records read in batches of MaxPage, in one request.
const MaxOpenLimit = 100_000

// CountOpen counts the open orders of each workflow version: the records
// of the in-flight index (every shard) and those in ByState under
// OpenStates. A record in both (an order in Error whose alert is not yet
// confirmed) counts once, a record past its ExpiresAt not at all. It reads
// at most limit index entries (1..MaxOpenLimit), keys only, then the
// records' OpenAttrs by BatchGetItem, eventually consistent: a count is an
// estimate of a moving system anyway, and half the read units. When the
// indexes hold more entries than limit, it counts what it read and says
// Truncated, so one request cannot read the whole table.
func (s *Store) CountOpen(ctx context.Context, limit int) (OpenCount, error) {
	if limit < 1 || limit > MaxOpenLimit {
		return OpenCount{}, fmt.Errorf("count open orders: limit %d outside 1..%d", limit, MaxOpenLimit)
	}
	var parts []openPart
	for _, shard := range ShardNames() {
		parts = append(parts, openPart{InFlightIndex, InFlightShardAttr, shard})
	}
	for _, st := range OpenStates() {
		for i := range ListShards {
			parts = append(parts, openPart{ByStateIndex, ByStateKeyAttr, listPartition(string(st), i)})
		}
	}
	// One entry past the limit tells a full index from one that holds
	// exactly limit entries.
	b := newBudget(limit + 1)
	ids, stopped, err := s.openEntries(ctx, parts, b)
	if err != nil {
		return OpenCount{}, fmt.Errorf("count open orders: %w", err)
	}
	out := OpenCount{Versions: map[string]VersionCount{}, Truncated: stopped || b.read > limit}
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	if len(ids) > limit {
		ids = ids[:limit]
	}
	for chunk := range slices.Chunk(ids, MaxPage) {
		states, err := s.batchGetStates(ctx, chunk, OpenAttrs)
		if err != nil {
			return OpenCount{}, fmt.Errorf("count open orders: %w", err)
		}
		for _, st := range states {
			if !s.expired(st.ExpiresAt) {
				out.Add(st)
			}
		}
	}
	return out, nil
}

// openPart is one partition of an index CountOpen reads.
type openPart struct {
	index, attr, value string
}

// openEntries reads the order IDs of parts, readParallel partitions at a
// time, within b. stopped: a partition that may hold more was left unread
// because b ran out.
func (s *Store) openEntries(ctx context.Context, parts []openPart, b *budget) (ids []string, stopped bool, err error) {
	found := make([][]string, len(parts))
	more := make([]bool, len(parts))
	err = readEach(ctx, len(parts), s.serial, func(ctx context.Context, i int) (err error) {
		found[i], more[i], err = s.partEntries(ctx, parts[i], b)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	for i := range parts {
		ids = append(ids, found[i]...)
		stopped = stopped || more[i]
	}
	return ids, stopped, nil
}

// partEntries reads one partition's order IDs, a page at a time, each page
// no larger than what b grants; more reports that b ran out before the
// partition did.
func (s *Store) partEntries(ctx context.Context, p openPart, b *budget) (ids []string, more bool, err error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.tables.State),
		IndexName:                 aws.String(p.index),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": p.attr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(p.value)},
	}
	for {
		n := b.take(openPageSize)
		if n == 0 {
			return ids, true, nil
		}
		in.Limit = aws.Int32(int32(n))
		out, err := s.db.Query(ctx, in)
		if err != nil {
			b.give(n, 0)
			return nil, false, fmt.Errorf("query %s of %s: %w", p.value, p.index, err)
		}
		for _, item := range out.Items {
			if v, ok := item[KeyOrderID].(*types.AttributeValueMemberS); ok {
				ids = append(ids, v.Value)
			}
		}
		b.give(n, len(out.Items))
		if in.ExclusiveStartKey = out.LastEvaluatedKey; len(in.ExclusiveStartKey) == 0 {
			return ids, false, nil
		}
	}
}

// minGrant is the smallest grant of a budget with that much left.
const minGrant = 32

// openPageSize bounds one query's page: keys only, far below DynamoDB's
// 1 MB, and a share of the budget the other partitions can still use.
const openPageSize = 1000

// budget shares a number of index entries among the partitions read in
// parallel. A partition takes a grant before each query and gives back
// what the query did not use; it waits while the budget is spent but
// grants are out, since what comes back may be enough for it. So take
// answers 0 only when exactly the whole budget has been read. A grant is
// at most a readParallel-th of what is left (but minGrant), so one
// partition's page does not hold up the others while most of it comes back
// unused, and a nearly spent budget is not read one entry a query.
type budget struct {
	mu   sync.Mutex
	cond *sync.Cond
	left int // not granted
	out  int // granted, not yet given back
	read int // entries read
}

func newBudget(n int) *budget {
	b := &budget{left: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// take grants up to n entries; 0 means the budget is spent.
func (b *budget) take(n int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.left == 0 && b.out > 0 {
		b.cond.Wait()
	}
	n = min(n, b.left, max(minGrant, b.left/readParallel))
	b.left -= n
	b.out += n
	return n
}

// give ends a grant of granted entries of which used were read.
func (b *budget) give(granted, used int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.out -= granted
	b.left += granted - used
	b.read += used
	b.cond.Broadcast()
}
