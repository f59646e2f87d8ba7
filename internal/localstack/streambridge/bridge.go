// Package streambridge reads a DynamoDB stream and hands batches to a Lambda
// DynamoDB stream handler the way Lambda's event source mapping does with
// ReportBatchItemFailures on. In AWS the order-event publisher consumes the
// state table's stream through such a mapping; locally and in integration
// tests DynamoDB Local serves the Streams API, and this bridge stands in for
// the mapping so the real handler runs unchanged.
//
// Delivery follows Lambda's rules for streams: each shard is read from
// TRIM_HORIZON strictly in order, a child shard only once its parent is
// finished; a batch holds at most BatchSize records of one shard. A handler
// error or panic fails the whole batch, which is delivered again. Batch item
// failures move the checkpoint to the lowest failed sequence number: the
// records before it are done, and the next batch starts at it. After
// MaxRetryAttempts retries of the record at the checkpoint the batch goes to
// OnDiscard, as to an on-failure destination, and the shard moves on.
//
// DynamoDB Local 3.3.0 quirks, found while writing the tests:
//   - It writes an empty map in a stream record as {}, which the SDK reads
//     as a copy of a sibling value (or nil): make the Streams client with
//     ForDynamoDBLocal, which repairs the answers.
//   - A write that changes nothing (the same item put again, a delete of a
//     missing key) writes no record, as in AWS.
//   - Sets come back in an order of the engine's own (sets have none).
//   - Stream ARNs and every record's awsRegion say "ddblocal", whatever the
//     client's region; set Bridge.Region to get the region Lambda would put
//     in the events.
//   - Each stream has a single shard, which never closes on its own; it
//     closes (NextShardIterator nil, EndingSequenceNumber set) when the
//     stream is disabled. Child shards therefore never occur locally; the
//     unit tests cover them with a fake.
//   - Records are readable as soon as the write returns, and sequence numbers
//     are 21-digit counters starting at 1 per stream.
//   - ApproximateCreationDateTime is rounded down to the minute, not to the
//     second as in AWS.
//   - Shard iterators can be used more than once, as in AWS; a malformed one
//     is rejected with ValidationException.
//   - Now and then (seen while other tables were being created and
//     deleted), an iterator taken while the shard was still empty fails
//     every GetRecords, once records arrive, with TrimmedDataAccessException
//     ("attempted to read past the oldest stream record") though nothing was
//     trimmed; a fresh iterator reads fine. The bridge renews a trimmed
//     iterator once before it believes it.
//   - After the stream is disabled DescribeTable has no StreamSpecification
//     but still names the LatestStreamArn.
package streambridge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/sasflow/sas/internal/localstack/esm"
)

// Handler is a Lambda DynamoDB stream handler that reports partial batch
// failures by sequence number.
type Handler func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// StreamsAPI is the part of *dynamodbstreams.Client the Bridge uses.
type StreamsAPI interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

var _ StreamsAPI = (*dynamodbstreams.Client)(nil)

// DescribeTableAPI is the part of *dynamodb.Client StreamARN uses.
type DescribeTableAPI interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

var _ DescribeTableAPI = (*dynamodb.Client)(nil)

const (
	// DefaultBatchSize is Lambda's default for DynamoDB streams.
	DefaultBatchSize = 100
	// MaxBatchSize is the largest batch Lambda allows for DynamoDB streams,
	// and the most records one GetRecords returns.
	MaxBatchSize = 1000
	// DefaultPollInterval is Run's pause after a poll that found nothing.
	DefaultPollInterval = 100 * time.Millisecond
	// describeInterval is how often Run looks for new shards while no shard
	// has finished: in AWS shards roll over every few hours, so once in a
	// while is enough, and DescribeStream is rate limited.
	describeInterval = 10 * time.Second
	// errorBackoff spaces Run's polls after API errors with nothing
	// delivered, so an unreachable engine is not hammered.
	errorBackoff = time.Second
)

var (
	// ErrBatchFailed marks a batch the handler failed as a whole, by
	// returning an error, panicking, or reporting an item failure with an
	// empty or unknown ItemIdentifier. The batch is delivered again.
	ErrBatchFailed = errors.New("batch failed")
	// ErrNoStream is returned by StreamARN for a table without an enabled
	// stream.
	ErrNoStream = errors.New("table has no enabled stream")
)

// Bridge feeds one stream to one handler. Set the fields, then call
// PollOnce or Run; do not change them afterwards, nor copy the Bridge. It
// keeps its checkpoints in memory only, so a new Bridge starts again at
// TRIM_HORIZON.
type Bridge struct {
	Client StreamsAPI
	// StreamARN is the stream to read and the events' EventSourceArn.
	StreamARN string
	// Region, if set, is every event's AWSRegion; empty keeps the record's
	// own awsRegion (or the StreamARN's region if a record has none).
	Region string
	// BatchSize is the most records per handler call, 1..MaxBatchSize; zero
	// means DefaultBatchSize.
	BatchSize int
	Handler   Handler
	// OnError, if set, hears of every error Run carries on past.
	OnError func(error)
	// MaxRetryAttempts is how often the record at a shard's checkpoint is
	// delivered again after a failure before its batch is discarded. Zero
	// or less retries until the handler succeeds, like Lambda's -1.
	MaxRetryAttempts int
	// OnDiscard, if set, receives each discarded batch, from the record that
	// kept failing on, like an on-failure destination.
	OnDiscard func(ev events.DynamoDBEvent)
	// PollInterval is Run's pause after a poll that delivered nothing or
	// failed a batch; zero means DefaultPollInterval.
	PollInterval time.Duration

	mu     sync.Mutex // held by each poll, so PollOnce and Run never interleave
	shards map[string]*shard
	order  []string // shard IDs as DescribeStream first listed them
	// rescan asks for a DescribeStream before describeInterval is up: a
	// shard finished, so its children should start now.
	rescan       bool
	lastDescribe time.Time
}

// shard is the Bridge's progress through one shard.
type shard struct {
	id, parent string
	// iter is the next GetRecords iterator; nil until the first fetch and
	// after it expired.
	iter *string
	// lastFetched is the sequence number of the last record read, to ask
	// for a fresh iterator after it.
	lastFetched string
	// pending holds the records read but not yet done, from the
	// checkpoint on.
	pending []events.DynamoDBEventRecord
	// closed means GetRecords has nothing more: the shard ended.
	closed bool
	// done means closed with nothing pending, which lets children start.
	done bool
	// attempts counts the failed deliveries of pending[0].
	attempts int
}

// PollOnce looks for new shards, then, on every shard whose turn it is,
// delivers the records available now, batch after batch, until the shard
// has no more or a batch fails; a failed batch is retried by the next call,
// from its checkpoint. A child shard whose parent finishes during the call
// is read in the same call. It returns how many records it handed to the
// handler, redeliveries included. Errors on one shard do not keep the others
// from being read; all are returned, joined, and a batch the handler failed
// as a whole yields one wrapping ErrBatchFailed. Item failures are not
// errors.
func (b *Bridge) PollOnce(ctx context.Context) (delivered int, err error) {
	if err := b.validate(); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	res := b.poll(ctx, true, 0)
	return res.delivered, errors.Join(res.errs...)
}

// Run polls until ctx is done, then returns nil. Unlike PollOnce it
// delivers at most one batch per shard in each round, so a busy shard does
// not hold the others back, and it describes the stream only now and then
// and when a shard finishes. Errors do not stop it: they go to OnError. It
// returns an error at once only if the Bridge is misconfigured.
func (b *Bridge) Run(ctx context.Context) error {
	if err := b.validate(); err != nil {
		return err
	}
	esm.Loop(ctx, func(ctx context.Context) time.Duration {
		b.mu.Lock()
		describe := b.rescan || time.Since(b.lastDescribe) >= describeInterval
		res := b.poll(ctx, describe, 1)
		b.mu.Unlock()
		if ctx.Err() != nil {
			return 0
		}
		if b.OnError != nil {
			for _, err := range res.errs {
				b.OnError(err)
			}
		}
		switch {
		case len(res.errs) > 0 && res.delivered == 0:
			return max(errorBackoff, b.pollInterval())
		case res.delivered == 0 || res.failed:
			return b.pollInterval()
		}
		return 0
	})
	return nil
}

// StreamARN returns the ARN of table's current stream.
func StreamARN(ctx context.Context, db DescribeTableAPI, table string) (string, error) {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return "", fmt.Errorf("describe table %s for its stream: %w", table, err)
	}
	t := out.Table
	// LatestStreamArn outlives a disabled stream, so the specification
	// decides whether there is one to read.
	if t == nil || t.StreamSpecification == nil || !aws.ToBool(t.StreamSpecification.StreamEnabled) || aws.ToString(t.LatestStreamArn) == "" {
		return "", fmt.Errorf("table %s: %w", table, ErrNoStream)
	}
	return aws.ToString(t.LatestStreamArn), nil
}

// pollResult sums up one poll of every shard.
type pollResult struct {
	delivered int
	// failed means a batch failed and waits to be retried.
	failed bool
	errs   []error
}

// poll reads every shard whose turn it is, at most maxBatches batches each
// (no limit if zero). Passes repeat so that a child whose parent finished
// in this poll is read in it too.
func (b *Bridge) poll(ctx context.Context, describe bool, maxBatches int) pollResult {
	var res pollResult
	if describe {
		if err := b.describe(ctx); err != nil {
			res.errs = append(res.errs, err)
		}
	}
	polled := make(map[string]bool, len(b.order))
	for progressed := true; progressed && ctx.Err() == nil; {
		progressed = false
		for _, id := range b.order {
			sh := b.shards[id]
			if polled[id] || !b.ready(sh) {
				continue
			}
			polled[id], progressed = true, true
			b.pollShard(ctx, sh, maxBatches, &res)
		}
	}
	return res
}

// describe learns the stream's shards, all pages of them.
func (b *Bridge) describe(ctx context.Context) error {
	if b.shards == nil {
		b.shards = make(map[string]*shard)
	}
	var start *string
	for {
		out, err := b.Client.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{
			StreamArn:             aws.String(b.StreamARN),
			ExclusiveStartShardId: start,
		})
		if err != nil {
			return fmt.Errorf("describe stream %s: %w", b.StreamARN, err)
		}
		d := out.StreamDescription
		if d == nil {
			return fmt.Errorf("describe stream %s: no description in the answer", b.StreamARN)
		}
		for _, s := range d.Shards {
			id := aws.ToString(s.ShardId)
			if id == "" || b.shards[id] != nil {
				continue
			}
			b.shards[id] = &shard{id: id, parent: aws.ToString(s.ParentShardId)}
			b.order = append(b.order, id)
		}
		start = d.LastEvaluatedShardId
		if start == nil {
			break
		}
	}
	b.rescan = false
	b.lastDescribe = time.Now()
	return nil
}

// ready says whether sh may be read: a child waits for its parent to
// finish, unless the parent is unknown (trimmed from the stream long ago).
func (b *Bridge) ready(sh *shard) bool {
	if sh.done {
		return false
	}
	parent := b.shards[sh.parent]
	return parent == nil || parent.done
}

// pollShard delivers sh's batches until it has nothing available, a batch
// fails, or maxBatches (if positive) were delivered.
func (b *Bridge) pollShard(ctx context.Context, sh *shard, maxBatches int, res *pollResult) {
	fetchFailed := false
	for n := 0; maxBatches <= 0 || n < maxBatches; n++ {
		if ctx.Err() != nil {
			return
		}
		// Top up to a full batch: after an item failure the retried batch
		// starts at the checkpoint and, as in Lambda, is filled with later
		// records. After a failed fetch, what was read is still delivered.
		if len(sh.pending) < b.batchSize() && !sh.closed && !fetchFailed {
			if err := b.fetch(ctx, sh); err != nil {
				res.errs = append(res.errs, err)
				fetchFailed = true
			}
		}
		if len(sh.pending) == 0 {
			b.finish(sh)
			return
		}
		delivered, retry, err := b.deliver(ctx, sh)
		res.delivered += delivered
		if err != nil {
			res.errs = append(res.errs, err)
		}
		if retry {
			res.failed = true
			return
		}
	}
}

// finish marks sh done once it is closed and everything in it delivered.
func (b *Bridge) finish(sh *shard) {
	if sh.closed && len(sh.pending) == 0 && !sh.done {
		sh.done = true
		b.rescan = true
	}
}

// fetch appends the next records of sh to its pending ones.
func (b *Bridge) fetch(ctx context.Context, sh *shard) error {
	for attempt := 0; ; attempt++ {
		if sh.iter == nil {
			if err := b.iterator(ctx, sh); err != nil || sh.closed {
				return err
			}
		}
		out, err := b.Client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{
			ShardIterator: sh.iter,
			Limit:         aws.Int32(int32(b.batchSize() - len(sh.pending))),
		})
		var expired *types.ExpiredIteratorException
		var trimmed *types.TrimmedDataAccessException
		if attempt == 0 && (errors.As(err, &expired) || errors.As(err, &trimmed)) {
			// Iterators live 15 minutes. A trimmed one points past the
			// stream's retention, or, in DynamoDB Local, was taken while the
			// shard was empty. A fresh iterator after the last record read
			// tells the two apart: GetShardIterator fails if it is trimmed.
			sh.iter = nil
			continue
		}
		if err != nil {
			return fmt.Errorf("get records from shard %s of %s: %w", sh.id, b.StreamARN, err)
		}
		for _, r := range out.Records {
			ev, err := ConvertRecord(r, b.StreamARN)
			if err != nil {
				// Resume at this record next time: the shard stops here,
				// loudly, rather than skip it.
				sh.iter = nil
				return fmt.Errorf("shard %s of %s: %w", sh.id, b.StreamARN, err)
			}
			ev.AWSRegion = b.region(ev.AWSRegion)
			sh.pending = append(sh.pending, ev)
			sh.lastFetched = ev.Change.SequenceNumber
		}
		sh.iter = out.NextShardIterator
		sh.closed = sh.iter == nil
		return nil
	}
}

// iterator sets sh.iter to a fresh iterator: at TRIM_HORIZON, or after the
// last record read.
func (b *Bridge) iterator(ctx context.Context, sh *shard) error {
	in := &dynamodbstreams.GetShardIteratorInput{
		StreamArn:         aws.String(b.StreamARN),
		ShardId:           aws.String(sh.id),
		ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	}
	if sh.lastFetched != "" {
		in.ShardIteratorType = types.ShardIteratorTypeAfterSequenceNumber
		in.SequenceNumber = aws.String(sh.lastFetched)
	}
	out, err := b.Client.GetShardIterator(ctx, in)
	var gone *types.ResourceNotFoundException
	var trimmed *types.TrimmedDataAccessException
	if errors.As(err, &trimmed) && sh.lastFetched != "" {
		// The records after the last one read outlived the stream's
		// retention: carry on with the oldest left, as Lambda does, and
		// say so.
		lost := sh.lastFetched
		sh.lastFetched = ""
		if err := b.iterator(ctx, sh); err != nil {
			return err
		}
		return fmt.Errorf("shard %s of %s: records after %s were trimmed before they were read; resuming at TRIM_HORIZON: %w", sh.id, b.StreamARN, lost, err)
	}
	if errors.As(err, &gone) {
		// The shard outlived the stream's retention or the stream was
		// deleted: nothing more will come from it.
		sh.closed = true
		return fmt.Errorf("shard %s of %s is gone, so it counts as finished: %w", sh.id, b.StreamARN, err)
	}
	if err != nil {
		return fmt.Errorf("get %s iterator of shard %s of %s: %w", in.ShardIteratorType, sh.id, b.StreamARN, err)
	}
	sh.iter = out.ShardIterator
	sh.closed = sh.iter == nil
	return nil
}

// deliver hands the first batch of sh.pending to the handler and moves the
// checkpoint by its answer. retry says the batch failed and waits to be
// delivered again.
func (b *Bridge) deliver(ctx context.Context, sh *shard) (delivered int, retry bool, err error) {
	n := min(b.batchSize(), len(sh.pending))
	// A copy, so a handler that changes its event cannot change a retry.
	ev := events.DynamoDBEvent{Records: slices.Clone(sh.pending[:n])}
	resp, herr := esm.Call(ctx, b.Handler, ev)
	failedAt := n
	if herr == nil {
		failedAt, herr = checkpoint(ev, resp)
	} else {
		failedAt = 0
	}
	if herr != nil {
		err = fmt.Errorf("%w: handler for shard %s of %s: %w", ErrBatchFailed, sh.id, b.StreamARN, herr)
	}
	if failedAt == n {
		sh.pending, sh.attempts = sh.pending[n:], 0
		b.finish(sh)
		return n, false, nil
	}
	if failedAt > 0 {
		// The records before the checkpoint are done; the one at it has
		// failed once.
		sh.pending, sh.attempts = sh.pending[failedAt:], 1
	} else {
		sh.attempts++
	}
	if b.MaxRetryAttempts > 0 && sh.attempts > b.MaxRetryAttempts {
		discarded := events.DynamoDBEvent{Records: ev.Records[failedAt:]}
		sh.pending, sh.attempts = sh.pending[n-failedAt:], 0
		b.finish(sh)
		if b.OnDiscard != nil {
			b.OnDiscard(discarded)
		}
		return n, false, err
	}
	return n, true, err
}

// checkpoint returns the index in ev of the first record to deliver again:
// that of the lowest failed sequence number, or len(ev.Records) if none
// failed. An empty ItemIdentifier, or one not in the batch, fails the whole
// batch, as Lambda treats it.
func checkpoint(ev events.DynamoDBEvent, resp events.DynamoDBEventResponse) (int, error) {
	pos := make(map[string]int, len(ev.Records))
	for i, r := range ev.Records {
		pos[r.Change.SequenceNumber] = i
	}
	first := len(ev.Records)
	for _, f := range resp.BatchItemFailures {
		if f.ItemIdentifier == "" {
			return 0, errors.New("a batch item failure has an empty ItemIdentifier")
		}
		i, ok := pos[f.ItemIdentifier]
		if !ok {
			return 0, fmt.Errorf("batch item failure names sequence number %q, which is not in the batch", f.ItemIdentifier)
		}
		first = min(first, i)
	}
	return first, nil
}

func (b *Bridge) validate() error {
	var errs []error
	if b.StreamARN == "" {
		errs = append(errs, errors.New("no StreamARN"))
	}
	if b.BatchSize < 0 || b.BatchSize > MaxBatchSize {
		errs = append(errs, fmt.Errorf("BatchSize %d is outside 1..%d", b.BatchSize, MaxBatchSize))
	}
	if b.PollInterval < 0 {
		errs = append(errs, fmt.Errorf("PollInterval %v is negative", b.PollInterval))
	}
	return esm.Validate("streambridge", b.StreamARN, b.Client != nil, b.Handler != nil, errs...)
}

func (b *Bridge) batchSize() int { return cmp.Or(b.BatchSize, DefaultBatchSize) }

func (b *Bridge) pollInterval() time.Duration { return cmp.Or(b.PollInterval, DefaultPollInterval) }

// region returns the AWSRegion of an event whose record said recordRegion.
func (b *Bridge) region(recordRegion string) string {
	switch {
	case b.Region != "":
		return b.Region
	case recordRegion != "":
		return recordRegion
	default:
		return esm.ARNRegion(b.StreamARN)
	}
}
