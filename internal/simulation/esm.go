package simulation

import (
	"context"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// sqsMapping is Lambda's event source mapping on one queue, as the Lambda
// Developer Guide describes it for standard queues: pollers receive
// batches of up to batch messages as soon as they are visible (no batching
// window), up to concurrency invocations at once; after an invocation, the
// messages it did not report as failed are deleted; the failed ones, and
// every message of an invocation that failed or died, come back when
// their visibility timeout ends (or when the handler changed it). The
// deletes go in DeleteMessageBatch requests, which report "the result of
// the action on each message individually" (the SQS API Reference's
// DeleteMessageBatch,
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_DeleteMessageBatch.html):
// a message whose delete failed (PartialBatch) stays in flight and comes
// back when its visibility timeout ends, handled or not, as Lambda warns
// ("Lambda event source mappings process each event at least once, and
// duplicate processing of records can occur",
// https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventsourcemapping.html).
type sqsMapping struct {
	s           *SQS
	q           *Queue
	name        string
	batch       int
	concurrency int
	timeout     time.Duration
	handle      func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)
	running     int
	wakeAt      time.Time
	waking      bool
}

func (s *SQS) mapping(q *Queue, name string, batch, concurrency int, timeout time.Duration,
	handle func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)) *sqsMapping {
	m := &sqsMapping{s: s, q: q, name: name, batch: batch, concurrency: concurrency, timeout: timeout, handle: handle}
	q.onSend = func() { m.wake(s.w.now.Add(s.w.delay(time.Millisecond, 50*time.Millisecond))) }
	return m
}

// wake polls at t, unless a poll is due sooner.
func (m *sqsMapping) wake(t time.Time) {
	if m.waking && !m.wakeAt.After(t) {
		return
	}
	m.waking, m.wakeAt = true, t
	m.s.w.at(t, func() {
		if !m.wakeAt.Equal(t) {
			return // superseded by a sooner wake
		}
		m.waking = false
		m.poll()
	})
}

// poll starts invocations while messages are visible and concurrency
// allows, and wakes again when the next invisible message shows.
func (m *sqsMapping) poll() {
	w := m.s.w
	for m.running < m.concurrency {
		recs := m.s.receive(m.q, m.batch)
		if len(recs) == 0 {
			break
		}
		m.invoke(recs)
	}
	if m.running < m.concurrency {
		if next, ok := m.q.nextVisible(w.now); ok {
			m.wake(next)
		}
	}
}

func (m *sqsMapping) invoke(recs []events.SQSMessage) {
	w := m.s.w
	m.running++
	ev := events.SQSEvent{Records: recs}
	var resp events.SQSEventResponse
	var err error
	w.spawn(m.name, m.timeout, func(ctx context.Context) {
		resp, err = m.handle(ctx, ev)
	}, func(killed bool) {
		m.running--
		if !killed && err == nil {
			failed := map[string]bool{}
			for _, f := range resp.BatchItemFailures {
				failed[f.ItemIdentifier] = true
			}
			for _, r := range recs {
				if failed[r.MessageId] {
					continue
				}
				if m.s.f.strike(PartialBatch) {
					// DeleteMessageBatch reports each entry alone; one it
					// failed stays in flight and comes back.
					w.log.add(w.now, m.q.name, "sqs.delete failed", r.MessageId)
					continue
				}
				m.s.delete(m.q, r.ReceiptHandle)
			}
		}
		m.poll()
	})
}
