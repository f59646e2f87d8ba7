package statestore

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/jsonstrict"
	"github.com/sasflow/sas/shared/workflow"
)

// Page is one page of a listing.
type Page struct {
	States []workflow.State
	// Next is the opaque cursor of the next page; empty at the end.
	Next string
}

// ErrBadCursor is wrapped when a listing cursor cannot be read: a client
// mistake.
var ErrBadCursor = errors.New("bad cursor")

// ErrNotListed is wrapped when a listing by state is asked for a state
// that is not listed (workflow.ProcessState.Listed): a client mistake.
var ErrNotListed = errors.New("state not listed")

// MaxPage is the largest page a listing returns.
const MaxPage = 100

// readParallel bounds the shard queries of one page in flight at once: a
// page reads ListShards partitions, and neither the Lambda's connection
// pool nor the table needs all of them at the same instant.
const readParallel = 8

// Listing is one of the two listings, by state (StateListing) and by owner
// (OwnerListing): the sharded index it pages through, newest first, and the
// cursors that carry a position in it from page to page. The Store queries
// DynamoDB with it, and the in-memory store (internal/testkit/memstore)
// answers the same shard queries from its maps, so both check limits and
// cursors, and merge the shards into pages, alike.
type Listing struct {
	name     string // names the listing in errors
	refused  error  // why the listing cannot be read at all; nil when it can
	serial   bool   // read the shards one after the other (WithSerialReads)
	index    string
	partAttr string                       // the index's partition key,
	part     func(int) string             // and the partition of each shard
	sortAttr string                       // the index's sort key, a SortKey
	resume   func(string) (string, error) // a cursor's sort key; refuses another listing's cursor
	cursor   func(after string) string
}

// Entry is a record's place in a listing: its order and its sort key.
type Entry struct {
	OrderID string
	Sort    string
}

// Shard is what the query of one shard of a listing answered.
type Shard struct {
	// Entries, newest first.
	Entries []Entry
	// More: the shard may hold further entries after the last one (DynamoDB
	// answered a LastEvaluatedKey). Only a shard with entries may say so.
	More bool
}

// ReadShard queries the partition part of a listing's index: at most limit
// entries whose sort key is below after (all of them when after is empty),
// newest first.
type ReadShard func(ctx context.Context, part, after string, limit int) (Shard, error)

// Read reads a page of the listing: it checks limit (1..MaxPage) and the
// cursor a client sent back, reads every shard below the cursor with read,
// and merges them. It returns the page's order IDs, newest first, and the
// cursor of the next page, empty only when no shard can hold more. A cursor
// that is not this listing's wraps ErrBadCursor.
func (l Listing) Read(ctx context.Context, limit int, cursor string, read ReadShard) (ids []string, next string, err error) {
	after, err := l.start(limit, cursor)
	if err != nil {
		return nil, "", err
	}
	shards, err := l.readShards(ctx, after, limit, read)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", l.name, err)
	}
	page, more, err := merge(shards, limit)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", l.name, err)
	}
	for _, e := range page {
		ids = append(ids, e.OrderID)
	}
	if more {
		next = l.cursor(page[len(page)-1].Sort)
	}
	return ids, next, nil
}

// start checks the listing, the limit and the cursor: the sort key the page
// starts below, "" for the first page.
func (l Listing) start(limit int, cursor string) (string, error) {
	if l.refused != nil {
		return "", fmt.Errorf("%s: %w", l.name, l.refused)
	}
	if limit < 1 || limit > MaxPage {
		return "", fmt.Errorf("%s: limit %d outside 1..%d", l.name, limit, MaxPage)
	}
	if cursor == "" {
		return "", nil
	}
	return l.resume(cursor)
}

// readShards queries every shard, readParallel at a time; the first failure
// cancels the others.
func (l Listing) readShards(ctx context.Context, after string, limit int, read ReadShard) ([]Shard, error) {
	shards := make([]Shard, ListShards)
	err := readEach(ctx, len(shards), l.serial, func(ctx context.Context, i int) (err error) {
		shards[i], err = read(ctx, l.part(i), after, limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	return shards, nil
}

// readEach runs read for 0..n-1, readParallel at a time (one after the
// other in the caller's goroutine when serial); the first failure cancels
// the others and is the one returned.
func readEach(ctx context.Context, n int, serial bool, read func(ctx context.Context, i int) error) error {
	if serial {
		for i := range n {
			if err := read(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	slots := make(chan struct{}, readParallel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			if errs[i] = read(ctx, i); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	// The reads cancelled by another's failure say only that.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return errors.Join(errs...)
}

// merge takes a page of at most limit entries from the shards' answers,
// newest first, and reports whether more may follow it. A shard that may
// hold more has shown nothing below its last entry, so the page stops
// there: whatever comes next in that shard could come before the page's
// remaining entries. Each shard answers up to limit entries, so a page is
// short only when a shard's answer was (DynamoDB cuts an answer at 1 MB).
func merge(shards []Shard, limit int) ([]Entry, bool, error) {
	var all []Entry
	floor, more := "", false
	for i, s := range shards {
		if s.More && len(s.Entries) == 0 {
			return nil, false, fmt.Errorf("shard %d answered no entries but more to come", i)
		}
		all = append(all, s.Entries...)
		if s.More {
			floor, more = max(floor, s.Entries[len(s.Entries)-1].Sort), true
		}
	}
	slices.SortFunc(all, func(a, b Entry) int { return cmp.Compare(b.Sort, a.Sort) })
	n := 0
	for n < len(all) && n < limit && all[n].Sort >= floor {
		n++
	}
	return all[:n], more || n < len(all), nil
}

// shardReader queries a listing's index in table, one shard at a time.
// An answer without entries that DynamoDB says is not the last (it stopped
// at its size limit) is followed on, so a shard that may hold more has
// shown some.
func (s *Store) shardReader(table string, l Listing) ReadShard {
	return func(ctx context.Context, part, after string, limit int) (Shard, error) {
		in := &dynamodb.QueryInput{
			TableName:                 aws.String(table),
			IndexName:                 aws.String(l.index),
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ExpressionAttributeNames:  map[string]string{"#pk": l.partAttr},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(part)},
			ScanIndexForward:          aws.Bool(false),
			Limit:                     aws.Int32(int32(limit)),
		}
		if after != "" {
			in.KeyConditionExpression = aws.String("#pk = :pk AND #sk < :after")
			in.ExpressionAttributeNames["#sk"] = l.sortAttr
			in.ExpressionAttributeValues[":after"] = str(after)
		}
		var sh Shard
		for {
			out, err := s.db.Query(ctx, in)
			if err != nil {
				return Shard{}, fmt.Errorf("query %s of %s: %w", part, l.index, err)
			}
			for _, item := range out.Items {
				e, err := entryOf(item, l.sortAttr)
				if err != nil {
					return Shard{}, fmt.Errorf("query %s of %s: %w", part, l.index, err)
				}
				sh.Entries = append(sh.Entries, e)
			}
			sh.More = len(out.LastEvaluatedKey) > 0
			if len(sh.Entries) > 0 || !sh.More {
				return sh, nil
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
}

// entryOf reads an index item's keys.
func entryOf(item map[string]types.AttributeValue, sortAttr string) (Entry, error) {
	id, ok1 := item[KeyOrderID].(*types.AttributeValueMemberS)
	sort, ok2 := item[sortAttr].(*types.AttributeValueMemberS)
	if !ok1 || !ok2 {
		return Entry{}, fmt.Errorf("an index item without its keys: %v", item)
	}
	return Entry{OrderID: id.Value, Sort: sort.Value}, nil
}

// list reads a page of l from its index on table, then the page's state
// records in one BatchGetItem, and returns those keep admits in the index's
// order. Records carry SummaryAttrs only (no Input, no step history).
func (s *Store) list(ctx context.Context, table string, l Listing, limit int, cursor string, keep func(workflow.State) bool) (Page, error) {
	l.serial = s.serial
	ids, next, err := l.Read(ctx, limit, cursor, s.shardReader(table, l))
	if err != nil {
		return Page{}, err
	}
	states, err := s.batchGetStates(ctx, ids, SummaryAttrs)
	if err != nil {
		return Page{}, fmt.Errorf("%s: %w", l.name, err)
	}
	// The cursor is the index page's, so a record left out (gone, or
	// expired and not yet deleted) shortens the page but moves no other.
	p := Page{Next: next}
	for _, id := range ids {
		if st, ok := states[id]; ok && keep(st) && !s.expired(st.ExpiresAt) {
			p.States = append(p.States, st)
		}
	}
	return p, nil
}

// maxCursorLen bounds a cursor before it is decoded.
const maxCursorLen = 512

// encodeCursor is the opaque form of a cursor that decodeCursor reads.
func encodeCursor(c any) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor a client sent back into c, strictly: it is
// outside input, so an unknown member or data after it is refused, and any
// failure wraps ErrBadCursor. The caller checks the fields' ranges.
func decodeCursor(s string, c any) error {
	if len(s) > maxCursorLen {
		return fmt.Errorf("%w: longer than %d bytes", ErrBadCursor, maxCursorLen)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	switch err := jsonstrict.Decode(b, c); {
	case errors.Is(err, jsonstrict.ErrTrailing):
		return fmt.Errorf("%w: data after the cursor", ErrBadCursor)
	case err != nil:
		return fmt.Errorf("%w: not a cursor", ErrBadCursor)
	}
	return nil
}
