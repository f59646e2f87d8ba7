package streambridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/sasflow/sas/internal/testkit/await"
)

const testARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/state/stream/2024-01-01T00:00:00.000"

// fakeStream is an in-memory stream. Iterators are "shardID|position".
type fakeStream struct {
	mu     sync.Mutex
	shards []*fakeShard // in DescribeStream order
	// pageSize is how many shards one DescribeStream lists; 0 means all.
	pageSize int
	// failGetRecords, if set, may fail a GetRecords call.
	failGetRecords func(shardID string) error
	// failIterator, if set, may fail a GetShardIterator call.
	failIterator func(in *dynamodbstreams.GetShardIteratorInput) error
	describes    []*string // ExclusiveStartShardId of each DescribeStream
	iterators    []string  // "shard TYPE seq" of each GetShardIterator
	gets         map[string]int
}

type fakeShard struct {
	id, parent string
	records    []types.Record
	closed     bool
}

func (f *fakeStream) shard(id string) *fakeShard {
	for _, s := range f.shards {
		if s.id == id {
			return s
		}
	}
	return nil
}

// add appends records with the given sequence numbers to a shard, making the
// shard if needed.
func (f *fakeStream) add(shardID, parent string, seqs ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.shard(shardID)
	if s == nil {
		s = &fakeShard{id: shardID, parent: parent}
		f.shards = append(f.shards, s)
	}
	for _, n := range seqs {
		s.records = append(s.records, record(n))
	}
}

func (f *fakeStream) close(shardID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shard(shardID).closed = true
}

func (f *fakeStream) getCount(shardID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets[shardID]
}

func seq(n int) string { return fmt.Sprintf("%021d", n) }

func record(n int) types.Record {
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k" + strconv.Itoa(n)}}
	return types.Record{
		EventID:      aws.String("id-" + strconv.Itoa(n)),
		EventName:    types.OperationTypeInsert,
		EventSource:  aws.String("aws:dynamodb"),
		EventVersion: aws.String("1.1"),
		Dynamodb: &types.StreamRecord{
			Keys:           key,
			NewImage:       key,
			SequenceNumber: aws.String(seq(n)),
			SizeBytes:      aws.Int64(10),
			StreamViewType: types.StreamViewTypeNewAndOldImages,
		},
	}
}

func (f *fakeStream) DescribeStream(_ context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if aws.ToString(in.StreamArn) != testARN {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no stream " + aws.ToString(in.StreamArn))}
	}
	f.describes = append(f.describes, in.ExclusiveStartShardId)
	start := 0
	if in.ExclusiveStartShardId != nil {
		for i, s := range f.shards {
			if s.id == *in.ExclusiveStartShardId {
				start = i + 1
			}
		}
	}
	end := len(f.shards)
	if f.pageSize > 0 {
		end = min(end, start+f.pageSize)
	}
	d := &types.StreamDescription{StreamArn: aws.String(testARN)}
	for _, s := range f.shards[start:end] {
		sh := types.Shard{ShardId: aws.String(s.id)}
		if s.parent != "" {
			sh.ParentShardId = aws.String(s.parent)
		}
		d.Shards = append(d.Shards, sh)
	}
	if end < len(f.shards) {
		d.LastEvaluatedShardId = aws.String(f.shards[end-1].id)
	}
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: d}, nil
}

func (f *fakeStream) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := aws.ToString(in.ShardId)
	f.iterators = append(f.iterators, strings.TrimSpace(fmt.Sprintf("%s %s %s", id, in.ShardIteratorType, aws.ToString(in.SequenceNumber))))
	if f.failIterator != nil {
		if err := f.failIterator(in); err != nil {
			return nil, err
		}
	}
	s := f.shard(id)
	if s == nil || aws.ToString(in.StreamArn) != testARN {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no shard " + id)}
	}
	pos := 0
	switch in.ShardIteratorType {
	case types.ShardIteratorTypeTrimHorizon:
	case types.ShardIteratorTypeAfterSequenceNumber:
		pos = -1
		for i, r := range s.records {
			if aws.ToString(r.Dynamodb.SequenceNumber) == aws.ToString(in.SequenceNumber) {
				pos = i + 1
			}
		}
		if pos < 0 {
			return nil, fmt.Errorf("fake: no sequence number %q in %s", aws.ToString(in.SequenceNumber), id)
		}
	default:
		return nil, fmt.Errorf("fake: iterator type %s not supported", in.ShardIteratorType)
	}
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(id + "|" + strconv.Itoa(pos))}, nil
}

func (f *fakeStream) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, p, ok := strings.Cut(aws.ToString(in.ShardIterator), "|")
	pos, err := strconv.Atoi(p)
	s := f.shard(id)
	if !ok || err != nil || s == nil {
		return nil, fmt.Errorf("fake: bad iterator %q", aws.ToString(in.ShardIterator))
	}
	if f.gets == nil {
		f.gets = make(map[string]int)
	}
	f.gets[id]++
	if f.failGetRecords != nil {
		if err := f.failGetRecords(id); err != nil {
			return nil, err
		}
	}
	limit := int(aws.ToInt32(in.Limit))
	if limit < 1 || limit > MaxBatchSize {
		return nil, fmt.Errorf("fake: Limit %d", limit)
	}
	end := min(len(s.records), pos+limit)
	out := &dynamodbstreams.GetRecordsOutput{Records: slices.Clone(s.records[pos:end])}
	if !s.closed || end < len(s.records) {
		out.NextShardIterator = aws.String(id + "|" + strconv.Itoa(end))
	}
	return out, nil
}

// recorder is a handler that keeps the sequence numbers of every batch and
// answers with respond (success if nil).
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	events  []events.DynamoDBEvent
	respond func(call int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
}

func (r *recorder) handle(_ context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	r.mu.Lock()
	var nums []int
	for _, rec := range ev.Records {
		n, _ := strconv.Atoi(rec.Change.SequenceNumber)
		nums = append(nums, n)
	}
	r.batches = append(r.batches, nums)
	r.events = append(r.events, ev)
	call := len(r.batches)
	r.mu.Unlock()
	if r.respond == nil {
		return events.DynamoDBEventResponse{}, nil
	}
	return r.respond(call, ev)
}

func (r *recorder) seen() [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, b := range r.batches {
		n += len(b)
	}
	return n
}

func failItems(nums ...int) events.DynamoDBEventResponse {
	var resp events.DynamoDBEventResponse
	for _, n := range nums {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: seq(n)})
	}
	return resp
}

func newBridge(f *fakeStream, r *recorder, batchSize int) *Bridge {
	return &Bridge{Client: f, StreamARN: testARN, BatchSize: batchSize, Handler: r.handle}
}

func poll(t *testing.T, b *Bridge, want int) error {
	t.Helper()
	n, err := b.PollOnce(context.Background())
	if n != want {
		t.Errorf("PollOnce delivered %d records, want %d (err %v)", n, want, err)
	}
	return err
}

func mustPoll(t *testing.T, b *Bridge, want int) {
	t.Helper()
	if err := poll(t, b, want); err != nil {
		t.Fatalf("PollOnce: %v", err)
	}
}

func wantBatches(t *testing.T, r *recorder, want ...[]int) {
	t.Helper()
	got := r.seen()
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches = %v, want %v", got, want)
	}
}

func TestPollOnceBatchesInOrder(t *testing.T) {
	t.Parallel()
	f := &fakeStream{}
	f.add("s1", "", 1, 2, 3, 4, 5)
	r := &recorder{}
	b := newBridge(f, r, 2)
	mustPoll(t, b, 5)
	mustPoll(t, b, 0)
	f.add("s1", "", 6)
	mustPoll(t, b, 1)
	wantBatches(t, r, []int{1, 2}, []int{3, 4}, []int{5}, []int{6})
	if got := f.iterators; !slices.Equal(got, []string{"s1 TRIM_HORIZON"}) {
		t.Errorf("GetShardIterator calls = %q, want one at TRIM_HORIZON", got)
	}

	rec := r.events[0].Records[0]
	if rec.EventSourceArn != testARN || rec.AWSRegion != "eu-west-1" || rec.EventSource != "aws:dynamodb" ||
		rec.EventName != "INSERT" || rec.EventID != "id-1" || rec.Change.Keys["pk"].String() != "k1" {
		t.Errorf("record = %+v", rec)
	}
}

func TestRegion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, bridge, record, want string
	}{
		{"from ARN", "", "", "eu-west-1"},
		{"from record", "", "ddblocal", "ddblocal"},
		{"set", "us-east-1", "ddblocal", "us-east-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeStream{}
			f.add("s1", "", 1)
			if tc.record != "" {
				f.shards[0].records[0].AwsRegion = aws.String(tc.record)
			}
			r := &recorder{}
			b := newBridge(f, r, 0)
			b.Region = tc.bridge
			mustPoll(t, b, 1)
			if got := r.events[0].Records[0].AWSRegion; got != tc.want {
				t.Errorf("AWSRegion = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestItemFailureMovesCheckpoint(t *testing.T) {
	t.Parallel()
	f := &fakeStream{}
	f.add("s1", "", 1, 2, 3, 4, 5, 6)
	r := &recorder{respond: func(call int, _ events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if call == 1 {
			return failItems(3, 2), nil // the lowest, 2, is the checkpoint
		}
		return events.DynamoDBEventResponse{}, nil
	}}
	b := newBridge(f, r, 3)
	mustPoll(t, b, 3) // the failed batch ends this poll
	mustPoll(t, b, 5)
	mustPoll(t, b, 0)
	// The retry starts at 2, is topped up to a full batch, and 1 never
	// comes back.
	wantBatches(t, r, []int{1, 2, 3}, []int{2, 3, 4}, []int{5, 6})
}

func TestWholeBatchFailures(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name    string
		fail    func(events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
		wantErr []string
	}{
		{"error", func(events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			return events.DynamoDBEventResponse{}, boom
		}, []string{"boom"}},
		{"panic", func(events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			panic("kaboom")
		}, []string{"panicked", "kaboom"}},
		{"empty item identifier", func(events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: seq(2)}, {}}}, nil
		}, []string{"empty ItemIdentifier"}},
		{"unknown item identifier", func(events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			return failItems(2, 99), nil
		}, []string{strconv.Quote(seq(99)), "not in the batch"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeStream{}
			f.add("s1", "", 1, 2, 3)
			r := &recorder{respond: func(call int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				if call == 1 {
					return tc.fail(ev)
				}
				return events.DynamoDBEventResponse{}, nil
			}}
			b := newBridge(f, r, 2)
			err := poll(t, b, 2)
			if !errors.Is(err, ErrBatchFailed) {
				t.Fatalf("err = %v, want ErrBatchFailed", err)
			}
			for _, s := range append(tc.wantErr, "s1", testARN) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			mustPoll(t, b, 3)
			wantBatches(t, r, []int{1, 2}, []int{1, 2}, []int{3})
		})
	}
}

func TestHandlerCannotChangeRetriedRecords(t *testing.T) {
	t.Parallel()
	f := &fakeStream{}
	f.add("s1", "", 1, 2)
	r := &recorder{respond: func(call int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if call == 1 {
			ev.Records[0].EventID = "changed"
			return events.DynamoDBEventResponse{}, errors.New("boom")
		}
		return events.DynamoDBEventResponse{}, nil
	}}
	b := newBridge(f, r, 0)
	_ = poll(t, b, 2)
	mustPoll(t, b, 2)
	if got := r.events[1].Records[0].EventID; got != "id-1" {
		t.Errorf("retried EventID = %q, want id-1", got)
	}
}

func TestMaxRetryAttempts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		max         int
		respond     func(call int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
		polls       []int // records delivered by each poll
		wantBatches [][]int
		wantDiscard [][]int
	}{
		{
			name: "item failure discarded after 2 retries",
			max:  2,
			respond: func(_ int, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				for _, r := range ev.Records {
					if r.Change.SequenceNumber == seq(2) {
						return failItems(2), nil
					}
				}
				return events.DynamoDBEventResponse{}, nil
			},
			// 2 fails at its first delivery and both retries; the batch it
			// heads is discarded, and 4 follows in the same poll.
			polls:       []int{2, 2, 3},
			wantBatches: [][]int{{1, 2}, {2, 3}, {2, 3}, {4}},
			wantDiscard: [][]int{{2, 3}},
		},
		{
			name: "handler error discarded after 1 retry",
			max:  1,
			respond: func(call int, _ events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				if call <= 2 {
					return events.DynamoDBEventResponse{}, errors.New("down")
				}
				return events.DynamoDBEventResponse{}, nil
			},
			polls:       []int{2, 4},
			wantBatches: [][]int{{1, 2}, {1, 2}, {3, 4}},
			wantDiscard: [][]int{{1, 2}},
		},
		{
			name: "progress resets the count",
			max:  1,
			respond: func(call int, _ events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				switch call {
				case 1:
					return failItems(2), nil // 1 done; 2 failed once
				case 2:
					return failItems(3), nil // 2 done; 3 failed once
				}
				return events.DynamoDBEventResponse{}, nil
			},
			polls:       []int{2, 2, 2},
			wantBatches: [][]int{{1, 2}, {2, 3}, {3, 4}},
		},
		{
			name: "zero retries forever",
			max:  0,
			respond: func(call int, _ events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				if call <= 5 {
					return failItems(1), nil
				}
				return events.DynamoDBEventResponse{}, nil
			},
			polls:       []int{2, 2, 2, 2, 2, 4},
			wantBatches: [][]int{{1, 2}, {1, 2}, {1, 2}, {1, 2}, {1, 2}, {1, 2}, {3, 4}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeStream{}
			f.add("s1", "", 1, 2, 3, 4)
			r := &recorder{respond: tc.respond}
			b := newBridge(f, r, 2)
			b.MaxRetryAttempts = tc.max
			var discarded [][]int
			b.OnDiscard = func(ev events.DynamoDBEvent) {
				var nums []int
				for _, rec := range ev.Records {
					n, _ := strconv.Atoi(rec.Change.SequenceNumber)
					nums = append(nums, n)
				}
				discarded = append(discarded, nums)
			}
			for _, want := range tc.polls {
				_ = poll(t, b, want)
			}
			_ = poll(t, b, 0)
			wantBatches(t, r, tc.wantBatches...)
			if !slices.EqualFunc(discarded, tc.wantDiscard, slices.Equal) {
				t.Errorf("discarded %v, want %v", discarded, tc.wantDiscard)
			}
		})
	}
}

func TestChildShardsWaitForParent(t *testing.T) {
	t.Parallel()
	f := &fakeStream{pageSize: 2}
	// Children are listed before their parent, so order of listing cannot
	// be what keeps them waiting.
	f.add("child-a", "parent", 10, 11)
	f.add("child-b", "parent", 20)
	f.add("grandchild", "child-a", 30)
	f.add("parent", "", 1, 2)
	f.add("orphan", "trimmed-long-ago", 40)
	r := &recorder{}
	b := newBridge(f, r, 10)

	mustPoll(t, b, 3) // parent is open: only parent and orphan
	wantBatches(t, r, []int{1, 2}, []int{40})
	for _, id := range []string{"child-a", "child-b", "grandchild"} {
		if n := f.getCount(id); n != 0 {
			t.Errorf("%s read %d times while its parent is open", id, n)
		}
	}
	if len(f.describes) != 3 || f.describes[0] != nil || aws.ToString(f.describes[1]) != "child-b" || aws.ToString(f.describes[2]) != "parent" {
		t.Errorf("DescribeStream pages started at %v", f.describes)
	}

	f.close("parent")
	f.close("child-a")
	mustPoll(t, b, 4) // parent finishes, then both children, then the grandchild, in one poll
	got := r.seen()[2:]
	slices.SortFunc(got, func(a, b []int) int { return a[0] - b[0] })
	if !slices.EqualFunc(got, [][]int{{10, 11}, {20}, {30}}, slices.Equal) {
		t.Errorf("after parent closed, batches = %v", got)
	}
	pos := map[int]int{}
	for i, batch := range r.seen() {
		pos[batch[0]] = i
	}
	if pos[30] < pos[10] {
		t.Errorf("grandchild delivered before child-a: %v", r.seen())
	}
	before := f.getCount("parent")
	mustPoll(t, b, 0)
	if f.getCount("parent") != before {
		t.Error("a finished shard was read again")
	}
}

func TestExpiredIteratorResumesAfterLastRead(t *testing.T) {
	t.Parallel()
	f := &fakeStream{}
	f.add("s1", "", 1, 2)
	r := &recorder{}
	b := newBridge(f, r, 0)
	mustPoll(t, b, 2)
	f.add("s1", "", 3)
	expired := false
	f.failGetRecords = func(string) error {
		if !expired {
			expired = true
			return &types.ExpiredIteratorException{Message: aws.String("expired")}
		}
		return nil
	}
	mustPoll(t, b, 1)
	wantBatches(t, r, []int{1, 2}, []int{3})
	if want := []string{"s1 TRIM_HORIZON", "s1 AFTER_SEQUENCE_NUMBER " + seq(2)}; !slices.Equal(f.iterators, want) {
		t.Errorf("GetShardIterator calls = %q, want %q", f.iterators, want)
	}
}

func TestTrimmedIteratorIsRenewed(t *testing.T) {
	t.Parallel()
	f := &fakeStream{}
	f.add("s1", "", 1)
	trims := 0
	f.failGetRecords = func(string) error {
		// One spurious trim at the first read (as DynamoDB Local does on an
		// iterator taken from an empty shard) and one later.
		if trims < 2 && (trims == 0 || f.gets["s1"] > 3) {
			trims++
			return &types.TrimmedDataAccessException{Message: aws.String("trimmed")}
		}
		return nil
	}
	r := &recorder{}
	b := newBridge(f, r, 0)
	mustPoll(t, b, 1)
	f.add("s1", "", 2)
	mustPoll(t, b, 1)
	wantBatches(t, r, []int{1}, []int{2})
	want := []string{"s1 TRIM_HORIZON", "s1 TRIM_HORIZON", "s1 AFTER_SEQUENCE_NUMBER " + seq(1)}
	if trims != 2 || !slices.Equal(f.iterators, want) {
		t.Errorf("%d trims; GetShardIterator calls = %q, want %q", trims, f.iterators, want)
	}
}

func TestTrimmedRecordsRestartAtTrimHorizon(t *testing.T) {
	t.Parallel()
	f := &fakeStream{}
	f.add("s1", "", 1)
	r := &recorder{}
	b := newBridge(f, r, 0)
	mustPoll(t, b, 1)
	f.add("s1", "", 2)
	// The records after 1 are really gone: GetRecords fails, and so does an
	// iterator after 1.
	f.failGetRecords = func(string) error {
		f.failGetRecords = nil
		return &types.TrimmedDataAccessException{Message: aws.String("trimmed")}
	}
	f.failIterator = func(in *dynamodbstreams.GetShardIteratorInput) error {
		if in.ShardIteratorType == types.ShardIteratorTypeAfterSequenceNumber {
			return &types.TrimmedDataAccessException{Message: aws.String("trimmed")}
		}
		return nil
	}
	var te *types.TrimmedDataAccessException
	if err := poll(t, b, 0); !errors.As(err, &te) || !strings.Contains(err.Error(), "after "+seq(1)) || !strings.Contains(err.Error(), "TRIM_HORIZON") {
		t.Fatalf("err = %v, want a TrimmedDataAccessException naming the last record read", err)
	}
	mustPoll(t, b, 2) // the fake trimmed nothing really: 1 comes again
	wantBatches(t, r, []int{1}, []int{1, 2})
	want := []string{"s1 TRIM_HORIZON", "s1 AFTER_SEQUENCE_NUMBER " + seq(1), "s1 TRIM_HORIZON"}
	if !slices.Equal(f.iterators, want) {
		t.Errorf("GetShardIterator calls = %q, want %q", f.iterators, want)
	}
}

func TestShardGoneCountsAsFinished(t *testing.T) {
	t.Parallel()
	f := &fakeStream{}
	f.add("parent", "", 1)
	f.add("child", "parent", 2)
	f.failIterator = func(in *dynamodbstreams.GetShardIteratorInput) error {
		if aws.ToString(in.ShardId) == "parent" {
			return &types.ResourceNotFoundException{Message: aws.String("gone")}
		}
		return nil
	}
	r := &recorder{}
	b := newBridge(f, r, 0)
	err := poll(t, b, 1)
	var nf *types.ResourceNotFoundException
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "parent") {
		t.Errorf("err = %v, want ResourceNotFoundException about parent", err)
	}
	wantBatches(t, r, []int{2})
}

func TestAPIErrorsDoNotStopOtherShards(t *testing.T) {
	t.Parallel()
	f := &fakeStream{}
	f.add("bad", "", 1)
	f.add("good", "", 2)
	boom := errors.New("throttled")
	f.failGetRecords = func(id string) error {
		if id == "bad" {
			return boom
		}
		return nil
	}
	r := &recorder{}
	b := newBridge(f, r, 0)
	err := poll(t, b, 1)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "shard bad") || errors.Is(err, ErrBatchFailed) {
		t.Errorf("err = %v", err)
	}
	wantBatches(t, r, []int{2})
	f.failGetRecords = nil
	mustPoll(t, b, 1)
	wantBatches(t, r, []int{2}, []int{1})
}

func TestUnconvertibleRecordStopsShard(t *testing.T) {
	t.Parallel()
	f := &fakeStream{}
	f.add("s1", "", 1, 2)
	f.shards[0].records[1].Dynamodb.NewImage = map[string]types.AttributeValue{"x": &types.UnknownUnionMember{Tag: "NEW"}}
	r := &recorder{}
	b := newBridge(f, r, 0)
	// The record before the bad one is delivered; the bad one never is.
	for _, want := range []int{1, 0} {
		if err := poll(t, b, want); err == nil || !strings.Contains(err.Error(), `"NEW"`) {
			t.Errorf("err = %v, want the unsupported type named", err)
		}
	}
	wantBatches(t, r, []int{1})
	if want := []string{"s1 TRIM_HORIZON", "s1 AFTER_SEQUENCE_NUMBER " + seq(1)}; !slices.Equal(f.iterators, want) {
		t.Errorf("GetShardIterator calls = %q, want %q", f.iterators, want)
	}
}

func TestDescribeError(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	b := &Bridge{Client: &fakeStream{}, StreamARN: testARN + "-other", Handler: r.handle}
	var nf *types.ResourceNotFoundException
	if _, err := b.PollOnce(context.Background()); !errors.As(err, &nf) || !strings.Contains(err.Error(), "describe stream") {
		t.Errorf("err = %v", err)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	await.Until(t, 10*time.Second, what, func() (bool, error) { return cond(), nil })
}

func TestRunFollowsShardsAndRetries(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeStream{}
	f.add("parent", "", 1, 2, 3)
	r := &recorder{respond: func(call int, _ events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if call == 1 {
			return events.DynamoDBEventResponse{}, errors.New("first call fails")
		}
		return events.DynamoDBEventResponse{}, nil
	}}
	b := newBridge(f, r, 2)
	b.PollInterval = time.Millisecond
	var mu sync.Mutex
	var reported []error
	b.OnError = func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() }
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()

	waitFor(t, "the parent's records", func() bool { return r.total() >= 5 })
	// A child appears and the parent closes: Run must find the child at once
	// on the parent's end, not only after describeInterval.
	f.add("child", "parent", 4)
	f.close("parent")
	start := time.Now()
	waitFor(t, "the child's record", func() bool { return r.total() >= 6 })
	if d := time.Since(start); d >= describeInterval {
		t.Errorf("child found after %v", d)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	wantBatches(t, r, []int{1, 2}, []int{1, 2}, []int{3}, []int{4})
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 || !errors.Is(reported[0], ErrBatchFailed) || !strings.Contains(reported[0].Error(), "first call fails") {
		t.Errorf("OnError heard %v", reported)
	}
}

func TestRunIsFairAcrossShards(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fakeStream{}
	f.add("busy", "", 1, 2, 3, 4, 5, 6)
	f.add("quiet", "", 100)
	r := &recorder{}
	b := newBridge(f, r, 1)
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	waitFor(t, "all records", func() bool { return r.total() >= 7 })
	cancel()
	<-done
	// One batch per shard per round: quiet's record comes second, not last.
	if got := r.seen(); len(got) < 2 || got[1][0] != 100 {
		t.Errorf("batches = %v, want quiet's record second", got)
	}
}

// describeTable is a DescribeTableAPI answering with a fixed output.
type describeTable func(*dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error)

func (f describeTable) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return f(in)
}

func TestStreamARN(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	enabled := &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages}
	tests := []struct {
		name    string
		table   *ddbtypes.TableDescription
		err     error
		want    string
		wantErr error
	}{
		{"enabled", &ddbtypes.TableDescription{StreamSpecification: enabled, LatestStreamArn: aws.String(testARN)}, nil, testARN, nil},
		{"no stream", &ddbtypes.TableDescription{}, nil, "", ErrNoStream},
		{"disabled", &ddbtypes.TableDescription{StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(false)}, LatestStreamArn: aws.String(testARN)}, nil, "", ErrNoStream},
		{"no ARN", &ddbtypes.TableDescription{StreamSpecification: enabled}, nil, "", ErrNoStream},
		{"error", nil, boom, "", boom},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := describeTable(func(in *dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error) {
				if aws.ToString(in.TableName) != "state" {
					t.Errorf("TableName = %q", aws.ToString(in.TableName))
				}
				if tc.err != nil {
					return nil, tc.err
				}
				return &dynamodb.DescribeTableOutput{Table: tc.table}, nil
			})
			got, err := StreamARN(context.Background(), db, "state")
			if got != tc.want || !errors.Is(err, tc.wantErr) || (err != nil && !strings.Contains(err.Error(), "state")) {
				t.Errorf("StreamARN = %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
