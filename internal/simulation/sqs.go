package simulation

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

// The SQS model: standard queues as the SQS Developer Guide describes them.
//   - At-least-once: a receive may hand out a copy of a message another
//     consumer holds (Queue.copies), and a send whose answer is lost may
//     have enqueued the message (the port's lost answer).
//   - No order: a receive picks among the visible messages at random.
//   - A received message is invisible for the visibility timeout, which
//     ChangeMessageVisibility sets anew, from now, with the latest receipt
//     handle only; a delete with an older handle may leave the message.
//   - DelaySeconds (0..900) keeps a new message invisible.
//   - Every receive counts; the receive that would pass maxReceiveCount
//     moves the message to the dead-letter queue instead.
//   - A message is at most MaxMessageBytes.
//
// Lambda's event source mapping (the poller) is modelled in esm.go.

// MaxMessageBytes is SQS's message size limit, on a message and on a whole
// SendMessageBatch request: 1 MiB (1,048,576 bytes, the SQS Developer
// Guide's "Amazon SQS message quotas"), the limit the code under test
// counts on (workflow.MaxMessageBytes).
const MaxMessageBytes = workflow.MaxMessageBytes

// maxDelaySeconds is DelaySeconds' limit (15 minutes).
const maxDelaySeconds = 900

type sqsMessage struct {
	id    string
	body  string
	trace string
	// sender is the SenderId SQS stamped: the sending role's ID and session.
	sender    string
	sent      time.Time
	visibleAt time.Time
	receives  int
	// receipt is the latest receipt handle; empty before the first receive.
	receipt string
	gone    bool
	// version tells a message's current place among the waiting from the
	// places it left.
	version int
	// inReady: the message is visible, in its queue's ready list at
	// entry shown; its older entries there are stale.
	inReady bool
	shown   int
}

// readyEntry is a place in a queue's ready list: the message's current
// one when it is visible and was shown as shown.
type readyEntry struct {
	m     *sqsMessage
	shown int
}

func (e readyEntry) live() bool { return e.m.inReady && e.m.shown == e.shown }

// Queue is one SQS standard queue.
type Queue struct {
	name, url, arn  string
	visibility      time.Duration
	maxReceiveCount int
	dlq             *Queue
	// ready are the visible messages, and stale entries of those that
	// have since gone or been hidden (nready counts the first, stale the
	// second, so counting them costs nothing and the list is compacted
	// only once half of it is stale); waiting, the invisible ones by when
	// they show.
	ready         []readyEntry
	nready, stale int
	waiting       waitHeap
	byID          map[string]*sqsMessage
	receipts      int
	live          int
	// onSend runs when a message is enqueued, so the queue's poller wakes.
	onSend func()
	// sent keeps every body enqueued, when kept is set, for the checks.
	kept bool
	sent []string
}

type waiting struct {
	at      time.Time
	m       *sqsMessage
	version int
}

type waitHeap []waiting

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h waitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *waitHeap) Push(x any)        { *h = append(*h, x.(waiting)) }
func (h *waitHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// hide makes m invisible until at.
func (q *Queue) hide(m *sqsMessage, at time.Time) {
	q.leave(m)
	m.visibleAt = at
	m.version++
	heap.Push(&q.waiting, waiting{at: at, m: m, version: m.version})
}

// promote moves the messages whose time has come to ready.
func (q *Queue) promote(now time.Time) {
	for len(q.waiting) > 0 && !q.waiting[0].at.After(now) {
		e := heap.Pop(&q.waiting).(waiting)
		if !e.m.gone && e.version == e.m.version {
			q.show(e.m)
		}
	}
}

// remove marks m deleted.
func (q *Queue) remove(m *sqsMessage) {
	if !m.gone {
		q.leave(m)
		m.gone = true
		m.version++
		q.live--
		delete(q.byID, m.id)
	}
}

// show adds m to the ready list.
func (q *Queue) show(m *sqsMessage) {
	q.leave(m)
	m.shown++
	q.ready = append(q.ready, readyEntry{m: m, shown: m.shown})
	m.inReady = true
	q.nready++
}

// leave makes m's entry in the ready list, if it has one, stale.
func (q *Queue) leave(m *sqsMessage) {
	if m.inReady {
		m.inReady = false
		q.nready--
		q.stale++
	}
}

// SQS is the model's endpoint: every queue, by URL.
type SQS struct {
	w      *World
	f      *faults
	queues map[string]*Queue
	ids    int
}

func newSQS(w *World, f *faults) *SQS { return &SQS{w: w, f: f, queues: map[string]*Queue{}} }

// queue creates a queue with a dead-letter queue of its own, as the stack
// does, and returns it.
func (s *SQS) queue(name string, visibility time.Duration, maxReceiveCount int) *Queue {
	mk := func(n string) *Queue {
		q := &Queue{name: n, url: "https://sqs.us-east-1.amazonaws.com/123456789012/" + n,
			arn: "arn:aws:sqs:us-east-1:123456789012:" + n, visibility: visibility, byID: map[string]*sqsMessage{}}
		s.queues[q.url] = q
		return q
	}
	q := mk(name)
	q.dlq = mk(name + "-dlq")
	q.maxReceiveCount = maxReceiveCount
	return q
}

// errQueueMissing is SQS's AWS.SimpleQueueService.NonExistentQueue.
var errQueueMissing = errors.New("AWS.SimpleQueueService.NonExistentQueue: the specified queue does not exist")

func (s *SQS) lookup(url string) (*Queue, error) {
	q, ok := s.queues[url]
	if !ok {
		return nil, fmt.Errorf("%w: %s", errQueueMissing, url)
	}
	return q, nil
}

// enqueue puts a message on q, as sent by sender.
func (s *SQS) enqueue(q *Queue, body, traceHeader, sender string, delay int32) {
	s.ids++
	m := &sqsMessage{id: "m" + strconv.Itoa(s.ids), body: body, trace: traceHeader, sender: sender, sent: s.w.now}
	q.byID[m.id] = m
	if delay > 0 {
		q.hide(m, s.w.now.Add(time.Duration(delay)*time.Second))
	} else {
		m.visibleAt = s.w.now
		q.show(m)
	}
	q.live++
	if q.kept {
		q.sent = append(q.sent, body)
	}
	s.w.log.add(s.w.now, q.name, "sqs.enqueue", m.id)
	if q.onSend != nil {
		q.onSend()
	}
}

func checkMessage(body string, delay int32) error {
	switch {
	case len(body) > MaxMessageBytes:
		return fmt.Errorf("InvalidParameterValue: message of %d bytes is over %d", len(body), MaxMessageBytes)
	case delay < 0 || delay > maxDelaySeconds:
		return fmt.Errorf("InvalidParameterValue: DelaySeconds %d is outside 0..%d", delay, maxDelaySeconds)
	}
	return nil
}

func traceOf(attrs map[string]sqstypes.MessageSystemAttributeValue) string {
	if v, ok := attrs[trace.SQSAttribute]; ok {
		return aws.ToString(v.StringValue)
	}
	return ""
}

// As is the SQS endpoint as the role role (its unique ID) calls it in
// session: SQS stamps each message it sends with the SenderId
// "<role>:<session>", which the sender does not choose ("SenderId", ReceiveMessage,
// Amazon SQS API Reference,
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ReceiveMessage.html).
func (s *SQS) As(role, session string) *SQSAs { return &SQSAs{SQS: s, sender: role + ":" + session} }

// SQSAs is the SQS endpoint as one role calls it.
type SQSAs struct {
	*SQS
	sender string
}

var _ queue.Client = (*SQSAs)(nil)

// SendMessage is sqs.Client's, stamped with the role's SenderId.
func (a *SQSAs) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return a.SQS.send(ctx, in, a.sender)
}

// SendMessageBatch is sqs.Client's, stamped with the role's SenderId.
func (a *SQSAs) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return a.SQS.sendBatch(ctx, in, a.sender)
}

// SendMessage is sqs.Client's, through the port's faults, from no role of
// the system's (a test's).
func (s *SQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return s.send(ctx, in, anonymousSender)
}

// anonymousSender is the SenderId of a message sent by no role of the
// system's.
const anonymousSender = "AIDAANONYMOUS"

func (s *SQS) send(ctx context.Context, in *sqs.SendMessageInput, sender string) (*sqs.SendMessageOutput, error) {
	q, err := s.lookup(aws.ToString(in.QueueUrl))
	if err != nil {
		return nil, err
	}
	body := aws.ToString(in.MessageBody)
	err = s.f.call(ctx, "sqs.SendMessage", q.name, true, func() error {
		if err := checkMessage(body, in.DelaySeconds); err != nil {
			return err
		}
		s.enqueue(q, body, traceOf(in.MessageSystemAttributes), sender, in.DelaySeconds)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &sqs.SendMessageOutput{}, nil
}

// SendMessageBatch is sqs.Client's: each entry succeeds or fails alone,
// "reported individually in the response", a request that succeeds with
// some entries in Failed included (PartialBatch; the SQS API Reference's
// SendMessageBatch,
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html).
func (s *SQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return s.sendBatch(ctx, in, anonymousSender)
}

func (s *SQS) sendBatch(ctx context.Context, in *sqs.SendMessageBatchInput, sender string) (*sqs.SendMessageBatchOutput, error) {
	q, err := s.lookup(aws.ToString(in.QueueUrl))
	if err != nil {
		return nil, err
	}
	if len(in.Entries) == 0 || len(in.Entries) > 10 {
		return nil, fmt.Errorf("AWS.SimpleQueueService.TooManyEntriesInBatchRequest: %d entries", len(in.Entries))
	}
	total := 0
	for _, e := range in.Entries {
		total += len(aws.ToString(e.MessageBody))
	}
	if total > MaxMessageBytes {
		return nil, fmt.Errorf("AWS.SimpleQueueService.BatchRequestTooLong: %d bytes", total)
	}
	out := &sqs.SendMessageBatchOutput{}
	err = s.f.call(ctx, "sqs.SendMessageBatch", q.name, true, func() error {
		for _, e := range in.Entries {
			body := aws.ToString(e.MessageBody)
			if err := checkMessage(body, e.DelaySeconds); err != nil {
				out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"),
					Message: aws.String(err.Error()), SenderFault: true})
				continue
			}
			if s.f.strike(PartialBatch) {
				s.w.log.add(s.w.now, q.name, "sqs.send entry failed", aws.ToString(e.Id))
				out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"),
					Message: aws.String("the message was not sent"), SenderFault: false})
				continue
			}
			s.enqueue(q, body, traceOf(e.MessageSystemAttributes), sender, e.DelaySeconds)
			out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ChangeMessageVisibility is sqs.Client's: only the latest receipt handle of
// a message in flight is honoured.
func (s *SQS) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	q, err := s.lookup(aws.ToString(in.QueueUrl))
	if err != nil {
		return nil, err
	}
	handle := aws.ToString(in.ReceiptHandle)
	err = s.f.call(ctx, "sqs.ChangeMessageVisibility", q.name, true, func() error {
		if in.VisibilityTimeout < 0 || in.VisibilityTimeout > 12*60*60 {
			return fmt.Errorf("InvalidParameterValue: VisibilityTimeout %d", in.VisibilityTimeout)
		}
		m := q.byReceipt(handle)
		if m == nil {
			return fmt.Errorf("ReceiptHandleIsInvalid: %s", handle)
		}
		if !m.visibleAt.After(s.w.now) {
			return fmt.Errorf("AWS.SimpleQueueService.MessageNotInflight: %s", m.id)
		}
		q.hide(m, s.w.now.Add(time.Duration(in.VisibilityTimeout)*time.Second))
		s.w.log.add(s.w.now, q.name, "sqs.visibility", m.id+" "+strconv.Itoa(int(in.VisibilityTimeout))+"s")
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// GetQueueAttributes answers ApproximateNumberOfMessages (the visible
// messages), the one attribute the system reads.
func (s *SQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	q, err := s.lookup(aws.ToString(in.QueueUrl))
	if err != nil {
		return nil, err
	}
	n := 0
	err = s.f.call(ctx, "sqs.GetQueueAttributes", q.name, false, func() error {
		n = q.visible(s.w.now)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		string(sqstypes.QueueAttributeNameApproximateNumberOfMessages): strconv.Itoa(n),
	}}, nil
}

var (
	_ queue.Client           = (*SQS)(nil)
	_ queue.VisibilityClient = (*SQS)(nil)
	_ queue.DepthClient      = (*SQS)(nil)
)

func (q *Queue) byReceipt(handle string) *sqsMessage {
	id, _, _ := strings.Cut(handle, "#")
	if m, ok := q.byID[id]; ok && m.receipt == handle {
		return m
	}
	return nil
}

// visible counts the visible messages, leaving the ready list without
// stale entries.
func (q *Queue) visible(now time.Time) int {
	q.promote(now)
	if q.stale > q.nready {
		live := q.ready[:0]
		for _, e := range q.ready {
			if e.live() {
				live = append(live, e)
			}
		}
		clear(q.ready[len(live):])
		q.ready, q.stale = live, 0
	}
	return q.nready
}

// receive takes up to n visible messages, picked at random, each made
// invisible for the queue's visibility timeout; a message received more
// than maxReceiveCount times goes to the dead-letter queue instead. When
// Copy strikes, a message stays visible after its receive: the copy SQS
// may hand out again.
func (s *SQS) receive(q *Queue, n int) []events.SQSMessage {
	now := s.w.now
	q.visible(now)
	var out []events.SQSMessage
	var copies []*sqsMessage
	for len(out) < n && len(q.ready) > 0 {
		i := s.w.choose.Intn(len(q.ready))
		e := q.ready[i]
		q.ready[i] = q.ready[len(q.ready)-1]
		q.ready = q.ready[:len(q.ready)-1]
		if !e.live() {
			q.stale--
			continue
		}
		m := e.m
		m.inReady = false
		q.nready--
		if q.maxReceiveCount > 0 && m.receives >= q.maxReceiveCount {
			q.remove(m)
			s.w.log.add(now, q.name, "sqs.redrive-to-dlq", m.id)
			s.enqueue(q.dlq, m.body, m.trace, m.sender, 0)
			continue
		}
		m.receives++
		q.receipts++
		m.receipt = m.id + "#" + strconv.Itoa(q.receipts)
		if s.f.strike(Copy) {
			copies = append(copies, m)
		} else {
			q.hide(m, now.Add(q.visibility))
		}
		attrs := map[string]string{
			"SenderId":                         m.sender,
			"ApproximateReceiveCount":          strconv.Itoa(m.receives),
			"SentTimestamp":                    strconv.FormatInt(m.sent.UnixMilli(), 10),
			"ApproximateFirstReceiveTimestamp": strconv.FormatInt(now.UnixMilli(), 10),
		}
		if m.trace != "" {
			attrs[trace.SQSAttribute] = m.trace
		}
		out = append(out, events.SQSMessage{MessageId: m.id, ReceiptHandle: m.receipt, Body: m.body, Attributes: attrs,
			EventSourceARN: q.arn, EventSource: "aws:sqs", AWSRegion: "us-east-1"})
	}
	for _, m := range copies {
		q.show(m)
	}
	return out
}

// delete removes the message received with handle. A handle that is not
// the message's latest deletes it or not (SQS: "the request succeeds, but
// the message might not be deleted"); the model flips a coin.
func (s *SQS) delete(q *Queue, handle string) {
	id, _, _ := strings.Cut(handle, "#")
	m, ok := q.byID[id]
	if !ok {
		return
	}
	if m.receipt == handle || s.w.choose.Intn(2) == 0 {
		q.remove(m)
		s.w.log.add(s.w.now, q.name, "sqs.delete", m.id)
	}
}

// depth counts the messages not yet deleted (visible or not).
func (q *Queue) depth() int { return q.live }

// nextVisible is when the earliest invisible message becomes visible.
func (q *Queue) nextVisible(now time.Time) (time.Time, bool) {
	if q.visible(now) > 0 {
		return now, true
	}
	for len(q.waiting) > 0 {
		e := q.waiting[0]
		if !e.m.gone && e.version == e.m.version {
			return e.at, true
		}
		heap.Pop(&q.waiting)
	}
	return time.Time{}, false
}
