package wiring_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/notifier"
	"github.com/sasflow/sas/shared/workflow"
)

// dyingPublisher kills the Notifier's invocation (a panic, as the bridge
// sees a Lambda that died) right after publishing a batch that holds the
// first event of a listed seq, so that batch is delivered again.
type dyingPublisher struct {
	next  notifier.Sender
	mu    sync.Mutex
	after map[int]bool
	kills int
}

func (p *dyingPublisher) PublishBatch(ctx context.Context, evs []notifier.Event) (int, error) {
	n, err := p.next.PublishBatch(ctx, evs)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ev := range evs[:n] {
		if p.after[ev.Seq] {
			delete(p.after, ev.Seq)
			p.kills++
			panic("notifier killed after publishing")
		}
	}
	return n, err
}

// subscribe gives a client its private queue for its own events.
func (e *env) subscribe(clientID string) enginetest.Queue {
	e.t.Helper()
	q := enginetest.CreateQueue(e.t, e.sqs, enginetest.UniqueName(e.t, clientID), enginetest.QueueOptions{})
	_, err := enginetest.SNS(e.t).Subscribe(e.ctx, &sns.SubscribeInput{
		TopicArn: aws.String(e.sys.OrderEventsTopicARN), Protocol: aws.String("sqs"), Endpoint: aws.String(q.ARN),
		Attributes: map[string]string{"FilterPolicy": fmt.Sprintf(`{"clientId":[%q]}`, clientID), "RawMessageDelivery": "true"},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return q
}

// pumpEvents delivers the state table's stream to the Notifier until a poll
// finds nothing new; a killed invocation is delivered again.
func (e *env) pumpEvents() {
	e.t.Helper()
	for range 50 {
		n, err := e.sys.Stream.PollOnce(e.ctx)
		if err == nil && n == 0 {
			return
		}
	}
	e.t.Fatal("the stream did not drain")
}

// events reads a client's queue: every event, duplicates included.
func (e *env) events(q enginetest.Queue, atLeast int) []notifier.Event {
	e.t.Helper()
	var out []notifier.Event
	for _, m := range enginetest.ReceiveAll(e.ctx, e.t, e.sqs, q.URL, atLeast, 10*time.Second) {
		ev, err := notifier.DecodeEvent(aws.ToString(m.Body))
		if err != nil {
			e.t.Fatalf("event %s: %v", aws.ToString(m.Body), err)
		}
		out = append(out, ev)
	}
	return out
}

// inOrder drops duplicates by seq, as a client does, and checks that what
// is left is 1..n without a gap.
func inOrder(t *testing.T, evs []notifier.Event) []notifier.Event {
	t.Helper()
	bySeq := map[int]notifier.Event{}
	for _, ev := range evs {
		if old, ok := bySeq[ev.Seq]; ok && (old.State != ev.State || old.Step != ev.Step) {
			t.Fatalf("seq %d published as %s/%s and as %s/%s", ev.Seq, old.State, old.Step, ev.State, ev.Step)
		}
		bySeq[ev.Seq] = ev
	}
	out := make([]notifier.Event, 0, len(bySeq))
	for seq := 1; seq <= len(bySeq); seq++ {
		ev, ok := bySeq[seq]
		if !ok {
			t.Fatalf("gap: no event %d among %v", seq, slices.Sorted(maps.Keys(bySeq)))
		}
		out = append(out, ev)
	}
	return out
}

func statuses(evs []notifier.Event) string {
	var b []string
	for _, ev := range evs {
		b = append(b, fmt.Sprintf("%s:%s", ev.Status, ev.Step))
	}
	return strings.Join(b, " ")
}

func TestStatusEventsReachOnlyTheirClientInOrderEvenWhenThePublisherDies(t *testing.T) {
	t.Parallel()
	dying := &dyingPublisher{after: map[int]bool{2: true, 4: true}}
	e := newEnv(t, envOptions{workflow: workflow.Reference(), streams: true, wrapEvents: func(s notifier.Sender) notifier.Sender {
		dying.next = s
		return dying
	}})
	mine, theirs := e.subscribe("client-a"), e.subscribe("client-b")
	e.sim.RejectStep("charge-payment")
	submit := func(clientID string) string {
		body := orderBody
		if clientID != "" {
			body = strings.Replace(orderBody, `{"customerId"`, `{"clientId":"`+clientID+`","customerId"`, 1)
		}
		resp := e.post(body, "")
		var out struct{ OrderID string }
		if resp.StatusCode != 202 || json.Unmarshal([]byte(resp.Body), &out) != nil {
			t.Fatalf("POST = %d %s", resp.StatusCode, resp.Body)
		}
		return out.OrderID
	}
	id := submit("client-a")
	submit("") // asks for no events
	e.settle()
	e.pumpEvents()

	st := e.state(id)
	if st.ProcessState != workflow.Compensated || st.EventSeq != 5 {
		t.Fatalf("final %+v", st)
	}
	// The kills after seq 2 and 4 make those batches come again: at least
	// the five events, some twice.
	got := e.events(mine, 5)
	enginetest.AssertNoMessages(e.ctx, t, e.sqs, theirs.URL, 300*time.Millisecond)
	if dying.kills != 2 {
		t.Fatalf("%d kills, want 2", dying.kills)
	}
	got = append(got, e.drain(mine)...)
	if len(got) <= 5 {
		t.Errorf("%d deliveries: the killed batches were not delivered again", len(got))
	}
	ordered := inOrder(t, got)
	// The rejected step is undone first: a copy of its request may still
	// reach the remote.
	want := "accepted:reserve-inventory processing:charge-payment compensating:charge-payment compensating:reserve-inventory compensated:reserve-inventory"
	if s := statuses(ordered); s != want {
		t.Fatalf("events %s\nwant   %s", s, want)
	}
	last := ordered[len(ordered)-1]
	if last.OrderID != id || last.ClientID != "client-a" || last.State != st.ProcessState || last.Seq != st.EventSeq {
		t.Fatalf("last event %+v does not match the record %+v", last, st)
	}
}

// drain reads what else is on a client's queue.
func (e *env) drain(q enginetest.Queue) []notifier.Event {
	e.t.Helper()
	var out []notifier.Event
	for {
		msgs, err := e.sqs.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(msgs.Messages) == 0 {
			return out
		}
		for _, m := range msgs.Messages {
			ev, err := notifier.DecodeEvent(aws.ToString(m.Body))
			if err != nil {
				e.t.Fatal(err)
			}
			out = append(out, ev)
			if _, err := e.sqs.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.URL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}
