package streambridge_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/sasflow/sas/internal/localstack/streambridge"
	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/internal/testkit/enginetest"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// awaitTimeout bounds every wait on the engine; a loaded machine answers
// slowly now and then.
const awaitTimeout = 30 * time.Second

// streamsClient returns a DynamoDB Streams client for the DynamoDB engine,
// sharing the DynamoDB client's endpoint, credentials, HTTP client and
// retries, with the fix DynamoDB Local needs.
func streamsClient(t *testing.T, db *dynamodb.Client) *dynamodbstreams.Client {
	t.Helper()
	o := db.Options()
	return dynamodbstreams.New(dynamodbstreams.Options{
		Region:       o.Region,
		Credentials:  o.Credentials,
		HTTPClient:   o.HTTPClient,
		BaseEndpoint: o.BaseEndpoint,
		Retryer:      o.Retryer,
	}, streambridge.ForDynamoDBLocal)
}

// createTable makes a table keyed by "pk" with a NEW_AND_OLD_IMAGES stream,
// as the state table has, deletes it when the test ends, and returns its
// name and stream ARN.
func createTable(t *testing.T, db *dynamodb.Client, withStream bool) (name, streamARN string) {
	t.Helper()
	ctx := context.Background()
	name = enginetest.UniqueName(t, "stream")
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
	}
	if withStream {
		in.StreamSpecification = &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages}
	}
	out, err := db.CreateTable(ctx, in)
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
			t.Logf("delete table %s: %v", name, err)
		}
	})
	return name, aws.ToString(out.TableDescription.LatestStreamArn)
}

func key(k string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: k}}
}

func put(t *testing.T, db *dynamodb.Client, table string, item map[string]ddbtypes.AttributeValue) {
	t.Helper()
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatalf("put %v: %v", item["pk"], err)
	}
}

func increment(t *testing.T, db *dynamodb.Client, table, k string) {
	t.Helper()
	if _, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       key(k),
		UpdateExpression:          aws.String("SET n = n + :one"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}},
	}); err != nil {
		t.Fatalf("update %s: %v", k, err)
	}
}

func del(t *testing.T, db *dynamodb.Client, table, k string) {
	t.Helper()
	if _, err := db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key(k)}); err != nil {
		t.Fatalf("delete %s: %v", k, err)
	}
}

// putKeys puts one small item per key.
func putKeys(t *testing.T, db *dynamodb.Client, table string, keys ...string) {
	t.Helper()
	for _, k := range keys {
		put(t, db, table, map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: k}, "n": &ddbtypes.AttributeValueMemberN{Value: "0"}})
	}
}

// awaitStream reads the stream itself until it holds n records, so that a
// test driving PollOnce knows exactly what the first poll will find.
func awaitStream(t *testing.T, sc *dynamodbstreams.Client, arn string, n int) {
	t.Helper()
	ctx := context.Background()
	await.Until(t, awaitTimeout, fmt.Sprintf("%d records on the stream", n), func() (bool, error) {
		got := 0
		d, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
		if err != nil {
			t.Fatalf("describe stream: %v", err)
		}
		for _, s := range d.StreamDescription.Shards {
			it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
				StreamArn: aws.String(arn), ShardId: s.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
			})
			if err != nil {
				t.Fatalf("shard iterator: %v", err)
			}
			for iter := it.ShardIterator; iter != nil; {
				out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
				if err != nil {
					t.Fatalf("get records: %v", err)
				}
				if len(out.Records) == 0 {
					break
				}
				got += len(out.Records)
				iter = out.NextShardIterator
			}
		}
		return got >= n, fmt.Errorf("stream holds %d records", got)
	})
}

// streamOf puts one item per key in a new table and waits until its
// stream holds their records; it returns a Streams client and the
// stream's ARN.
func streamOf(t *testing.T, keys ...string) (*dynamodbstreams.Client, string) {
	t.Helper()
	db := enginetest.DynamoDB(t)
	sc := streamsClient(t, db)
	table, arn := createTable(t, db, true)
	putKeys(t, db, table, keys...)
	awaitStream(t, sc, arn, len(keys))
	return sc, arn
}

// collector is a handler that keeps every batch, fails items as fail says,
// and signals each call on changed.
type collector struct {
	mu      sync.Mutex
	batches [][]events.DynamoDBEventRecord
	fail    func(call int, r events.DynamoDBEventRecord) bool
	err     func(call int) error
	changed chan struct{}
}

func newCollector() *collector { return &collector{changed: make(chan struct{}, 1)} }

func (c *collector) handle(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches = append(c.batches, ev.Records)
	call := len(c.batches)
	defer func() {
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}()
	if c.err != nil {
		if err := c.err(call); err != nil {
			return events.DynamoDBEventResponse{}, err
		}
	}
	var resp events.DynamoDBEventResponse
	for _, r := range ev.Records {
		if c.fail != nil && c.fail(call, r) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
		}
	}
	return resp, nil
}

func (c *collector) seen() [][]events.DynamoDBEventRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.batches)
}

// await waits until cond holds of the batches seen, checking after every
// handler call.
func (c *collector) await(t *testing.T, what string, cond func([][]events.DynamoDBEventRecord) bool) {
	t.Helper()
	timeout := time.After(awaitTimeout)
	for !cond(c.seen()) {
		select {
		case <-c.changed:
		case <-timeout:
			t.Fatalf("timed out waiting for %s; saw %d batches", what, len(c.seen()))
		}
	}
}

func pk(r events.DynamoDBEventRecord) string { return r.Change.Keys["pk"].String() }

func keysOf(batches [][]events.DynamoDBEventRecord) [][]string {
	var out [][]string
	for _, b := range batches {
		var keys []string
		for _, r := range b {
			keys = append(keys, pk(r))
		}
		out = append(out, keys)
	}
	return out
}

func number(t *testing.T, image map[string]events.DynamoDBAttributeValue) string {
	t.Helper()
	v, ok := image["n"]
	if !ok || v.DataType() != events.DataTypeNumber {
		t.Errorf("image %v has no number n", image)
		return ""
	}
	return v.Number()
}

// everyType is an item with an attribute of every type, nested, and what
// Lambda would hand a handler for it.
func everyType(k string) (map[string]ddbtypes.AttributeValue, map[string]events.DynamoDBAttributeValue) {
	item := map[string]ddbtypes.AttributeValue{
		"pk":   &ddbtypes.AttributeValueMemberS{Value: k},
		"n":    &ddbtypes.AttributeValueMemberN{Value: "0"},
		"bin":  &ddbtypes.AttributeValueMemberB{Value: []byte{0, 1, 254}},
		"ss":   &ddbtypes.AttributeValueMemberSS{Value: []string{"x", "y"}},
		"ns":   &ddbtypes.AttributeValueMemberNS{Value: []string{"1.5", "-2"}}, // want has it sorted
		"bs":   &ddbtypes.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}},
		"flag": &ddbtypes.AttributeValueMemberBOOL{Value: true},
		"nul":  &ddbtypes.AttributeValueMemberNULL{Value: true},
		"l": &ddbtypes.AttributeValueMemberL{Value: []ddbtypes.AttributeValue{
			&ddbtypes.AttributeValueMemberS{Value: "first"},
			&ddbtypes.AttributeValueMemberL{Value: []ddbtypes.AttributeValue{}},
			&ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{"deep": &ddbtypes.AttributeValueMemberBOOL{Value: false}}},
			&ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{}},
		}},
		// Empty maps at every depth: DynamoDB Local writes them untyped.
		"e": &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{}},
		"m": &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{
			"inner": &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{
				"n":   &ddbtypes.AttributeValueMemberN{Value: "42"},
				"nul": &ddbtypes.AttributeValueMemberNULL{Value: true},
				"b":   &ddbtypes.AttributeValueMemberB{Value: []byte("hi")},
			}},
			"empty": &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{}},
		}},
	}
	want := map[string]events.DynamoDBAttributeValue{
		"pk":   events.NewStringAttribute(k),
		"n":    events.NewNumberAttribute("0"),
		"bin":  events.NewBinaryAttribute([]byte{0, 1, 254}),
		"ss":   events.NewStringSetAttribute([]string{"x", "y"}),
		"ns":   events.NewNumberSetAttribute([]string{"-2", "1.5"}),
		"bs":   events.NewBinarySetAttribute([][]byte{{1}, {2, 3}}),
		"flag": events.NewBooleanAttribute(true),
		"nul":  events.NewNullAttribute(),
		"l": events.NewListAttribute([]events.DynamoDBAttributeValue{
			events.NewStringAttribute("first"),
			events.NewListAttribute([]events.DynamoDBAttributeValue{}),
			events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"deep": events.NewBooleanAttribute(false)}),
			events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{}),
		}),
		"e": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{}),
		"m": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
			"inner": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
				"n":   events.NewNumberAttribute("42"),
				"nul": events.NewNullAttribute(),
				"b":   events.NewBinaryAttribute([]byte("hi")),
			}),
			"empty": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{}),
		}),
	}
	return item, want
}

// sortSets returns a copy of item with every set sorted, at any depth:
// DynamoDB keeps no order in sets. everyType lists its sets sorted.
func sortSets(item map[string]events.DynamoDBAttributeValue) map[string]events.DynamoDBAttributeValue {
	if item == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(item))
	for k, v := range item {
		out[k] = sortSet(v)
	}
	return out
}

func sortSet(v events.DynamoDBAttributeValue) events.DynamoDBAttributeValue {
	switch v.DataType() {
	case events.DataTypeStringSet:
		return events.NewStringSetAttribute(slices.Sorted(slices.Values(v.StringSet())))
	case events.DataTypeNumberSet:
		return events.NewNumberSetAttribute(slices.Sorted(slices.Values(v.NumberSet())))
	case events.DataTypeBinarySet:
		return events.NewBinarySetAttribute(slices.SortedFunc(slices.Values(v.BinarySet()), bytes.Compare))
	case events.DataTypeMap:
		return events.NewMapAttribute(sortSets(v.Map()))
	case events.DataTypeList:
		l := make([]events.DynamoDBAttributeValue, len(v.List()))
		for i, e := range v.List() {
			l[i] = sortSet(e)
		}
		return events.NewListAttribute(l)
	}
	return v
}

// TestRunDeliversEveryChangeOnceInOrder writes puts, updates and deletes on
// two keys, runs the bridge, and checks the handler got each change once, in
// order, with the right images.
func TestRunDeliversEveryChangeOnceInOrder(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := enginetest.DynamoDB(t)
	table, arn := createTable(t, db, true)
	if got, err := streambridge.StreamARN(ctx, db, table); err != nil || got != arn {
		t.Fatalf("StreamARN = %q, %v; want %q", got, err, arn)
	}
	start := time.Now()

	c := newCollector()
	b := &streambridge.Bridge{
		Client:       streamsClient(t, db),
		StreamARN:    arn,
		Region:       enginetest.Region,
		BatchSize:    3,
		Handler:      c.handle,
		PollInterval: 10 * time.Millisecond,
	}
	var mu sync.Mutex
	var runErrs []error
	b.OnError = func(err error) { mu.Lock(); runErrs = append(runErrs, err); mu.Unlock() }
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()

	itemA, wantA := everyType("a")
	put(t, db, table, itemA)
	put(t, db, table, itemA) // a put that changes nothing writes no record, as in AWS
	putKeys(t, db, table, "b")
	increment(t, db, table, "a")
	increment(t, db, table, "b")
	increment(t, db, table, "a")
	increment(t, db, table, "a")
	del(t, db, table, "b")
	del(t, db, table, "a")
	del(t, db, table, "never-there") // deleting nothing writes no record
	// Everything before the sentinel reaches the handler before it, so once
	// it arrives the count of the rest is final: a duplicate would show.
	putKeys(t, db, table, "sentinel")
	c.await(t, "the sentinel", func(batches [][]events.DynamoDBEventRecord) bool {
		for _, b := range batches {
			for _, r := range b {
				if pk(r) == "sentinel" {
					return true
				}
			}
		}
		return false
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	mu.Lock()
	if len(runErrs) != 0 {
		t.Errorf("Run reported %v", runErrs)
	}
	mu.Unlock()

	var all []events.DynamoDBEventRecord
	for _, batch := range c.seen() {
		if len(batch) == 0 || len(batch) > 3 {
			t.Errorf("batch of %d records, want 1..3", len(batch))
		}
		all = append(all, batch...)
	}
	if last := all[len(all)-1]; pk(last) != "sentinel" {
		t.Errorf("last record is %q, want the sentinel", pk(last))
	}
	all = all[:len(all)-1]

	ids := map[string]bool{}
	prev := big.NewInt(-1)
	byKey := map[string][]events.DynamoDBEventRecord{}
	for _, r := range all {
		if ids[r.EventID] {
			t.Errorf("event %s delivered twice", r.EventID)
		}
		ids[r.EventID] = true
		seq, ok := new(big.Int).SetString(r.Change.SequenceNumber, 10)
		if !ok || seq.Cmp(prev) <= 0 {
			t.Errorf("sequence number %q after %v: not increasing", r.Change.SequenceNumber, prev)
		} else {
			prev = seq
		}
		if r.EventID == "" || r.EventSource != "aws:dynamodb" || r.EventSourceArn != arn || r.AWSRegion != enginetest.Region ||
			r.EventVersion == "" || r.Change.StreamViewType != "NEW_AND_OLD_IMAGES" || r.Change.SizeBytes <= 0 {
			t.Errorf("record = %+v", r)
		}
		if !reflect.DeepEqual(r.Change.Keys, map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(pk(r))}) {
			t.Errorf("Keys = %v", r.Change.Keys)
		}
		// DynamoDB Local rounds the time down to the minute.
		if at := r.Change.ApproximateCreationDateTime.Time; at.Before(start.Add(-time.Minute)) || at.After(time.Now().Add(time.Minute)) {
			t.Errorf("ApproximateCreationDateTime %v is not about now (%v)", at, start)
		}
		byKey[pk(r)] = append(byKey[pk(r)], r)
	}

	tests := []struct {
		key   string
		names []string
		ns    []string // n of each record's NewImage, "" if none
	}{
		{"a", []string{"INSERT", "MODIFY", "MODIFY", "MODIFY", "REMOVE"}, []string{"0", "1", "2", "3", ""}},
		{"b", []string{"INSERT", "MODIFY", "REMOVE"}, []string{"0", "1", ""}},
	}
	for _, tc := range tests {
		recs := byKey[tc.key]
		var names []string
		for _, r := range recs {
			names = append(names, r.EventName)
		}
		if !slices.Equal(names, tc.names) {
			t.Errorf("%s: events %v, want %v", tc.key, names, tc.names)
			continue
		}
		for i, r := range recs {
			switch {
			case i == 0 && r.Change.OldImage != nil:
				t.Errorf("%s: INSERT has OldImage %v", tc.key, r.Change.OldImage)
			case i > 0 && number(t, r.Change.OldImage) != tc.ns[i-1]:
				// Each old image is the new image before it: nothing lost
				// or reordered in between.
				t.Errorf("%s #%d: old n = %s, want %s", tc.key, i, number(t, r.Change.OldImage), tc.ns[i-1])
			}
			if tc.ns[i] == "" {
				if r.Change.NewImage != nil {
					t.Errorf("%s: REMOVE has NewImage %v", tc.key, r.Change.NewImage)
				}
			} else if got := number(t, r.Change.NewImage); got != tc.ns[i] {
				t.Errorf("%s #%d: new n = %s, want %s", tc.key, i, got, tc.ns[i])
			}
		}
	}
	// Every image of a carries every attribute type, converted in full.
	for i, r := range byKey["a"] {
		want := maps.Clone(wantA)
		if i < 4 {
			want["n"] = events.NewNumberAttribute(strconv.Itoa(i))
			if got := sortSets(r.Change.NewImage); !reflect.DeepEqual(got, want) {
				t.Errorf("a #%d NewImage =\n%v\nwant\n%v", i, got, want)
			}
		}
		if i > 0 {
			want["n"] = events.NewNumberAttribute(strconv.Itoa(i - 1))
			if got := sortSets(r.Change.OldImage); !reflect.DeepEqual(got, want) {
				t.Errorf("a #%d OldImage =\n%v\nwant\n%v", i, got, want)
			}
		}
	}
	if n := len(all); n != 8 {
		t.Errorf("%d records before the sentinel, want 8", n)
	}
}

// TestPollOnceItemFailureRedeliversFromFailed fails one record once and
// checks the next batch starts at it: nothing before it comes back.
func TestPollOnceItemFailureRedeliversFromFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc, arn := streamOf(t, "k0", "k1", "k2", "k3", "k4")

	c := newCollector()
	c.fail = func(call int, r events.DynamoDBEventRecord) bool {
		return call == 1 && (pk(r) == "k2" || pk(r) == "k4")
	}
	b := &streambridge.Bridge{Client: sc, StreamARN: arn, BatchSize: 10, Handler: c.handle}
	for i, want := range []int{5, 3, 0} {
		if n, err := b.PollOnce(ctx); n != want || err != nil {
			t.Errorf("poll %d = %d, %v; want %d, nil", i+1, n, err, want)
		}
	}
	seen := c.seen()
	want := [][]string{{"k0", "k1", "k2", "k3", "k4"}, {"k2", "k3", "k4"}}
	if got := keysOf(seen); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches = %v, want %v", got, want)
	}
	for i, r := range seen[1] {
		if orig := seen[0][i+2]; r.EventID != orig.EventID || r.Change.SequenceNumber != orig.Change.SequenceNumber {
			t.Errorf("redelivered %s as %s/%s, first as %s/%s", pk(r), r.EventID, r.Change.SequenceNumber, orig.EventID, orig.Change.SequenceNumber)
		}
	}
	// Without Region the events carry DynamoDB Local's own region.
	if got := seen[0][0].AWSRegion; got != "ddblocal" {
		t.Errorf("AWSRegion = %q, want DynamoDB Local's %q", got, "ddblocal")
	}
}

// TestPollOnceHandlerErrorRedeliversBatch fails the first call with an
// error and checks the whole batch comes again, then the rest.
func TestPollOnceHandlerErrorRedeliversBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc, arn := streamOf(t, "k0", "k1", "k2", "k3")

	c := newCollector()
	c.err = func(call int) error {
		if call == 1 {
			return errors.New("database down")
		}
		return nil
	}
	b := &streambridge.Bridge{Client: sc, StreamARN: arn, BatchSize: 2, Handler: c.handle}
	n, err := b.PollOnce(ctx)
	if n != 2 || !errors.Is(err, streambridge.ErrBatchFailed) {
		t.Errorf("poll 1 = %d, %v; want 2, ErrBatchFailed", n, err)
	}
	for i, want := range []int{4, 0} {
		if n, err := b.PollOnce(ctx); n != want || err != nil {
			t.Errorf("poll %d = %d, %v; want %d, nil", i+2, n, err, want)
		}
	}
	want := [][]string{{"k0", "k1"}, {"k0", "k1"}, {"k2", "k3"}}
	if got := keysOf(c.seen()); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches = %v, want %v", got, want)
	}
}

// countingClient counts the Streams calls that read a shard.
type countingClient struct {
	streambridge.StreamsAPI
	reads atomic.Int64
}

func (c *countingClient) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	c.reads.Add(1)
	return c.StreamsAPI.GetRecords(ctx, in, optFns...)
}

func (c *countingClient) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	c.reads.Add(1)
	return c.StreamsAPI.GetShardIterator(ctx, in, optFns...)
}

// TestDisabledStreamClosesShard disables the stream, which is how DynamoDB
// Local closes a shard, and checks the bridge delivers what the shard holds
// and then leaves it alone.
func TestDisabledStreamClosesShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := enginetest.DynamoDB(t)
	table, arn := createTable(t, db, true)
	putKeys(t, db, table, "k0", "k1")
	if _, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{
		TableName:           aws.String(table),
		StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(false)},
	}); err != nil {
		t.Fatalf("disable stream: %v", err)
	}
	if _, err := streambridge.StreamARN(ctx, db, table); !errors.Is(err, streambridge.ErrNoStream) {
		t.Errorf("StreamARN of a disabled stream: err = %v, want ErrNoStream", err)
	}

	client := &countingClient{StreamsAPI: streamsClient(t, db)}
	c := newCollector()
	b := &streambridge.Bridge{Client: client, StreamARN: arn, Handler: c.handle}
	if n, err := b.PollOnce(ctx); n != 2 || err != nil {
		t.Fatalf("poll 1 = %d, %v; want 2, nil", n, err)
	}
	reads := client.reads.Load()
	if n, err := b.PollOnce(ctx); n != 0 || err != nil {
		t.Errorf("poll 2 = %d, %v; want 0, nil", n, err)
	}
	if got := client.reads.Load(); got != reads {
		t.Errorf("the closed shard was read %d more times", got-reads)
	}
	if got := keysOf(c.seen()); !slices.EqualFunc(got, [][]string{{"k0", "k1"}}, slices.Equal) {
		t.Errorf("batches = %v", got)
	}
}

func TestStreamARNErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := enginetest.DynamoDB(t)
	table, arn := createTable(t, db, false)
	if arn != "" {
		t.Fatalf("table without a stream has stream %q", arn)
	}
	if got, err := streambridge.StreamARN(ctx, db, table); got != "" || !errors.Is(err, streambridge.ErrNoStream) {
		t.Errorf("no stream: StreamARN = %q, %v; want ErrNoStream", got, err)
	}
	var nf *ddbtypes.ResourceNotFoundException
	if _, err := streambridge.StreamARN(ctx, db, table+"-missing"); !errors.As(err, &nf) {
		t.Errorf("missing table: err = %v, want ResourceNotFoundException", err)
	}
}
