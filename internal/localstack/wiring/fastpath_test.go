package wiring_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack/wiring"
	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/timer"
	"github.com/sasflow/sas/shared/workflow"
)

// deliverDeadlines follows the stream with the Timer until want Deadlines
// were delivered to the fast path, or fails after 15 s.
func (e *env) deliverDeadlines(want int) {
	e.t.Helper()
	got := 0
	await.Until(e.t, 15*time.Second, fmt.Sprintf("%d Deadlines delivered", want), func() (bool, error) {
		if _, err := e.sys.TimerStream.PollOnce(e.ctx); err != nil {
			e.t.Fatal(err)
		}
		n, err := e.sys.DeadlineBridge.PollOnce(e.ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		got += n
		return got >= want, fmt.Errorf("%d of %d Deadlines delivered", got, want)
	})
}

// TestFastPathRecoversAStepAtItsDeadline: the Agent dies with the first
// step's request. The Timer, following the state table's stream, armed a
// Deadline for the claim; once CompleteBy passes, the Supervisor's fast
// path retries the step with no sweep at all, and the order completes. The
// same Deadline again changes nothing.
func TestFastPathRecoversAStepAtItsDeadline(t *testing.T) {
	t.Parallel()
	var sent []queue.Outgoing
	e := newEnv(t, envOptions{streams: true, wrapDeadlines: func(s timer.Sender) timer.Sender {
		return wiring.Undelayed(recordingSender{next: s, sent: &sent})
	}})
	id := e.submit("")
	e.dropAgentRequests("reserve-inventory", 1)
	claimed := e.state(id)
	e.expire(id)
	e.deliverDeadlines(1)
	if st := e.state(id); st.ProcessState != workflow.Pending || st.FailureCount != 1 || st.Attempt != claimed.Attempt {
		t.Fatalf("after the Deadline %+v", st)
	}
	if n := e.transitions()[workflow.TransitionRetried]; n != 1 {
		t.Fatalf("retries logged %d, want 1", n)
	}
	e.settle()
	st := e.state(id)
	if st.ProcessState != workflow.Processed {
		t.Fatalf("final %+v", st)
	}
	// A duplicate of the first Deadline: the record left that phase.
	if len(sent) == 0 {
		t.Fatal("no Deadline was sent")
	}
	if err := queue.NewSender(e.sqs).SendBatch(e.ctx, e.sys.DeadlineQueue.URL, sent[:1]); err != nil {
		t.Fatal(err)
	}
	if n, err := e.sys.DeadlineBridge.PollOnce(e.ctx); err != nil || n != 1 {
		t.Fatalf("delivered %d, %v", n, err)
	}
	if again := e.state(id); again.ProcessState != workflow.Processed || again.Attempt != st.Attempt || again.FailureCount != st.FailureCount {
		t.Fatalf("a duplicate Deadline changed the record: %+v", again)
	}
}

// recordingSender keeps what it sends.
type recordingSender struct {
	next timer.Sender
	sent *[]queue.Outgoing
}

func (r recordingSender) SendBatch(ctx context.Context, queueURL string, msgs []queue.Outgoing) error {
	*r.sent = append(*r.sent, msgs...)
	return r.next.SendBatch(ctx, queueURL, msgs)
}
