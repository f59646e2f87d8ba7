package submission

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/admission"
	"github.com/sasflow/sas/shared/workflow"
)

func TestShedOrderIs429WithRetryAfterAndWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.decision = &admission.Decision{RetryAfter: 3 * time.Second, Queue: "https://sqs.example/q/reserve", Depth: 812}

	resp := f.do(t, postOrder(validBody, IdempotencyKeyHeader, "k-1"))
	p := readProblem(t, resp, 429)
	if p.Type != ProblemOverloaded || !strings.Contains(p.Detail, "retry after 3 s") {
		t.Errorf("problem %+v, want %s saying when to retry", p, ProblemOverloaded)
	}
	if resp.Headers["Retry-After"] != "3" {
		t.Errorf("Retry-After = %q, want 3", resp.Headers["Retry-After"])
	}
	f.wroteNothing(t, "a shed order")
	if logs := f.logs.String(); !strings.Contains(logs, `"msg":"order shed"`) || !strings.Contains(logs, `"depth":812`) {
		t.Errorf("no shed line with the queue's depth:\n%s", logs)
	}

	// Room again: the same request, key and all, is taken as new.
	f.mu.Lock()
	f.decision = nil
	f.mu.Unlock()
	if resp := f.do(t, postOrder(validBody, IdempotencyKeyHeader, "k-1")); resp.StatusCode != 202 || resp.Headers[ReplayedHeader] != "" {
		t.Fatalf("retry after the shed: %d %v %s, want a fresh 202", resp.StatusCode, resp.Headers, resp.Body)
	}
}

// TestPriorityIsAdmittedByItsClassAndKept: the admission check is asked
// about each new order's class (normal when it names none), and the class
// is written with the record, a high one shown by GET; a normal one costs
// the record nothing.
func TestPriorityIsAdmittedByItsClassAndKept(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	high := readAccepted(t, f.do(t, postOrder(strings.Replace(validBody, `"currency"`, `"priority":"high","currency"`, 1))))
	normal := readAccepted(t, f.do(t, postOrder(validBody)))
	f.mu.Lock()
	classes := slices.Clone(f.classes)
	f.mu.Unlock()
	if want := []workflow.Priority{workflow.PriorityHigh, workflow.PriorityNormal}; !slices.Equal(classes, want) {
		t.Errorf("admission asked about %v, want %v", classes, want)
	}
	if st := f.state(t, high.OrderID); st.Priority != workflow.PriorityHigh {
		t.Errorf("high order's record has priority %q", st.Priority)
	}
	if st := f.state(t, normal.OrderID); st.Priority != "" {
		t.Errorf("normal order's record has priority %q, want none stored", st.Priority)
	}
	resp := f.do(t, request("GET", "/orders/"+high.OrderID, nil, ""))
	if resp.StatusCode != 200 || !strings.Contains(resp.Body, `"priority":"high"`) {
		t.Errorf("GET of the high order: %d %s, want its priority", resp.StatusCode, resp.Body)
	}
}

func TestClientMistakesAreAnsweredWhileShedding(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.decision = &admission.Decision{RetryAfter: time.Second}
	for _, tt := range []struct {
		body string
		want int
	}{{`{"customerId":`, 400}, {`{"customerId":"c","currency":"EUR","items":[]}`, 422}} {
		if resp := f.do(t, postOrder(tt.body)); resp.StatusCode != tt.want {
			t.Errorf("%s: status %d, want %d: a malformed order is the client's to fix whatever the load", tt.body, resp.StatusCode, tt.want)
		}
	}
	// Reads are never shed.
	if resp := f.do(t, request("GET", "/orders", nil, "")); resp.StatusCode != 200 {
		t.Errorf("GET /orders while shedding: %d", resp.StatusCode)
	}
}

// TestARetryOfAnAcceptedOrderIsNeverShed: while the agents' queues are
// over their backlog, a client retrying a POST whose 202 it lost gets the
// answer of its order (202, the same ID, marked as a replay), and one that
// reuses the key with another body gets 422, as without load: only new
// orders are shed. The key is read only when an order would be shed.
func TestARetryOfAnAcceptedOrderIsNeverShed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	first := readAccepted(t, f.do(t, postOrder(validBody, IdempotencyKeyHeader, "k-accepted")))
	if n := f.called("GetKey"); n != 0 {
		t.Fatalf("an admitted order read its key %d times, want none", n)
	}
	f.mu.Lock()
	f.decision = &admission.Decision{RetryAfter: 3 * time.Second, Queue: "https://sqs.example/q/reserve", Depth: 812}
	f.mu.Unlock()

	retry := f.do(t, postOrder(validBody, IdempotencyKeyHeader, "k-accepted"))
	if a := readAccepted(t, retry); a.OrderID != first.OrderID || retry.Headers[ReplayedHeader] != "true" {
		t.Errorf("the retry while shedding answered %d %s (replayed %q), want its order %s", retry.StatusCode, retry.Body, retry.Headers[ReplayedHeader], first.OrderID)
	}
	other := strings.Replace(validBody, `"quantity":2`, `"quantity":3`, 1)
	if p := readProblem(t, f.do(t, postOrder(other, IdempotencyKeyHeader, "k-accepted")), 422); p.Type != ProblemIdempotencyKey {
		t.Errorf("the key with another body while shedding: %+v", p)
	}
	if p := readProblem(t, f.do(t, postOrder(validBody, IdempotencyKeyHeader, "k-new")), 429); p.Type != ProblemOverloaded {
		t.Errorf("a new order while shedding: %+v", p)
	}
	if p := readProblem(t, f.do(t, postOrder(validBody)), 429); p.Type != ProblemOverloaded {
		t.Errorf("a new order without a key while shedding: %+v", p)
	}
	if creates, orders := f.called("CreateOrder"), f.store.Writes(); creates != 1 || orders != 1 {
		t.Errorf("creates %d, orders %d; want the first one only", creates, orders)
	}
}
