package submission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/internal/testkit/memstore"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

const orderA = "7c9e6679-7425-40de-944b-e07fc1f90ae7"

// at builds the record of an order that reached step i in state ps: the
// steps before i succeeded, step i was tried attempts times.
func at(id string, ps workflow.ProcessState, i, attempts int) workflow.State {
	st := workflow.NewState(id, workflow.Reference(), json.RawMessage(`{}`), testNow.Add(-time.Hour), testNow.Add(-time.Hour))
	st.ProcessState, st.StepIndex, st.Step = ps, i, st.Steps[i].Name
	ownBy(&st, callerA)
	st.Attempt = i + attempts
	st.EventSeq = 1 + i
	for j := 0; j < i; j++ {
		st.Steps[j].State, st.Steps[j].Attempts = workflow.StepSucceeded, 1
	}
	st.Steps[i].Attempts = attempts
	switch ps {
	case workflow.Processing:
		st.Steps[i].State = workflow.StepProcessing
	case workflow.Error:
		st.Steps[i].State, st.LastError = workflow.StepFailed, workflow.RejectionMessage("card-declined", "the issuer declined the card", false)
		st.Steps[i].Error = st.LastError
	case workflow.CompensationFailed, workflow.Compensating, workflow.CompensationPending:
		st.Steps[i].Compensation = workflow.StepFailed
	}
	return st
}

func post(path string) events.APIGatewayV2HTTPRequest { return request("POST", path, nil, "") }

// readOperatorAccepted checks a 202 of retry or cancel.
func readOperatorAccepted(t *testing.T, resp events.APIGatewayV2HTTPResponse, id string, state workflow.ProcessState) {
	t.Helper()
	if resp.StatusCode != 202 || resp.Headers["Content-Type"] != "application/json" {
		t.Fatalf("status %d, headers %v, body %s", resp.StatusCode, resp.Headers, resp.Body)
	}
	want := fmt.Sprintf(`{"orderId":%q,"state":%q,"links":{"self":"/orders/%s"}}`, id, state, id)
	if resp.Body != want || resp.Headers["Location"] != "/orders/"+id {
		t.Fatalf("202 body %s, Location %q; want %s", resp.Body, resp.Headers["Location"], want)
	}
}

// schedules decodes what was sent to the scheduler queue, skipping new
// orders' first steps (sent to their Agent).
func schedules(t *testing.T, out *outbox) []message.Schedule {
	t.Helper()
	var ms []message.Schedule
	for _, m := range out.sent() {
		if m.queueURL == testFirstAgentURL {
			continue // a new order's first step, dispatched at submission
		}
		if m.queueURL != testQueueURL || m.delay != 0 {
			t.Fatalf("sent %+v", m)
		}
		s, err := message.DecodeSchedule(m.body)
		if err != nil {
			t.Fatalf("schedule message %s: %v", m.body, err)
		}
		ms = append(ms, s)
	}
	return ms
}

// sendFailedMsg is what an operator route logs when the schedule message of
// a committed change was not sent (shared/followup).
const sendFailedMsg = "not handed back to the Scheduler; the Supervisor re-sends it"

// logged finds the log record with the given message.
func logged(t *testing.T, f *fixture, msg string) map[string]any {
	t.Helper()
	for _, l := range f.logs.Records(t) {
		if l["msg"] == msg {
			return l
		}
	}
	t.Fatalf("no %q log line in %v", msg, f.logs.Records(t))
	return nil
}

// errQueue fails the sends of a test whose queue is down.
var errQueue = errors.New("sqs: throttled")

// checkSendFailed checks the warning of a committed change whose schedule
// message was not sent: the Supervisor re-sends it, the operator got 202.
func checkSendFailed(t *testing.T, f *fixture) {
	t.Helper()
	if l := logged(t, f, sendFailedMsg); l["level"] != "WARN" || l["orderId"] != orderA || !strings.Contains(fmt.Sprint(l["error"]), "throttled") {
		t.Fatalf("log %v", l)
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		seen      workflow.State
		wantState workflow.ProcessState
		wantMsg   message.Schedule
		sendErr   error // fails the schedule message: still 202, the change is committed
	}{
		{"error at the first step", at(orderA, workflow.Error, 0, 1), workflow.Pending,
			message.NewSchedule(orderA, "order-v1", 0, "resubmitted"), nil},
		{"error at the second step", at(orderA, workflow.Error, 1, 3), workflow.Pending,
			message.NewSchedule(orderA, "order-v1", 1, "resubmitted"), nil},
		{"failed compensation", at(orderA, workflow.CompensationFailed, 0, 1), workflow.CompensationPending,
			message.NewCompensation(orderA, "order-v1", 0, "resubmitted"), nil},
		{"queue down", at(orderA, workflow.Error, 0, 1), workflow.Pending,
			message.NewSchedule(orderA, "order-v1", 0, "resubmitted"), errQueue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			f.out.err = tt.sendErr
			tt.seen.FailureCount = 2
			f.put(tt.seen)
			req := as(post("/orders/"+orderA+"/retry"), operatorUser)
			readOperatorAccepted(t, f.do(t, req), orderA, tt.wantState)

			st := f.state(t, orderA)
			if st.ProcessState != tt.wantState || st.Resubmits != 1 || st.FailureCount != 0 ||
				!st.CompleteBy.Equal(testNow.Add(testConfig().ClaimTimeout)) || st.StepIndex != tt.seen.StepIndex {
				t.Fatalf("stored %+v", st)
			}
			if ms := schedules(t, f.out); len(ms) != 1 || ms[0] != tt.wantMsg {
				t.Fatalf("sent %+v, want %+v", ms, tt.wantMsg)
			}
			l := logged(t, f, "order resubmitted")
			if l[workflow.TransitionKey] != "resubmitted" || l["orderId"] != orderA || l["caller"] != operatorUser ||
				l["from"] != string(tt.seen.ProcessState) || l["state"] != string(tt.wantState) {
				t.Fatalf("log %v", l)
			}
			if tt.sendErr != nil {
				checkSendFailed(t, f)
			}
		})
	}
}

func TestRetryRejects(t *testing.T) {
	t.Parallel()
	secret := errors.New("dynamodb: throttled arn:aws:dynamodb:secret-table")
	errState := at(orderA, workflow.Error, 1, 1)
	// Another operator's retry, committed between this one's read and its
	// write.
	retried := errState
	retried.ProcessState, retried.Attempt, retried.Resubmits = workflow.Pending, errState.Attempt, 1
	tests := []refusal{
		{"not found", "/orders/" + orderA + "/retry", nil, nil, 404, ProblemNotFound, "no order with ID " + orderA},
		{"bad ID", "/orders/a_b/retry", nil, nil, 400, ProblemMalformed, "order ID"},
		{"long ID", "/orders/" + strings.Repeat("a", 65) + "/retry", nil, nil, 400, ProblemMalformed, "order ID"},
		{"read fails", "/orders/" + orderA + "/retry", &errState, failing(failure{method: "GetState", err: secret}),
			500, ProblemInternal, "internal error"},
		{"write fails", "/orders/" + orderA + "/retry", &errState, failing(failure{method: "Apply", transition: workflow.TransitionResubmitted, err: secret}),
			500, ProblemInternal, "internal error"},
		{"changed meanwhile", "/orders/" + orderA + "/retry", &errState, racing(func(int) workflow.State { return retried }),
			409, ProblemConflict, "order " + orderA + " was changed by another request; read it again"},
		// Neither store answers a write with ErrNotFound (a missing record
		// fails the fence: ErrStale), but the handler maps one to 404.
		{"deleted meanwhile", "/orders/" + orderA + "/retry", &errState,
			failing(failure{method: "Apply", err: fmt.Errorf("resubmit: %w", workflow.ErrNotFound)}),
			404, ProblemNotFound, "no order with ID " + orderA},
	}
	for _, ps := range workflow.ProcessStates() {
		if ps.NeedsOperator() || ps == workflow.Waiting {
			continue
		}
		st := at(orderA, ps, 1, 1)
		tests = append(tests, refusal{"in " + string(ps), "/orders/" + orderA + "/retry", &st, nil, 409, ProblemConflict,
			"order " + orderA + " is " + string(ps) + "; only orders in Error, Waiting or CompensationFailed can be retried"})
	}
	checkRefusals(t, tests)
}

// refusal is a request an operator route must refuse.
type refusal struct {
	name       string
	path       string
	seen       *workflow.State // the record; nil: no such order
	fault      fault
	status     int
	typ        string
	wantDetail string
}

// checkRefusals sends each request to a handler of its own: it must answer
// its problem, tell nothing of the cause, and write and send nothing.
func checkRefusals(t *testing.T, tests []refusal) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tt.fault)
			if tt.seen != nil {
				f.put(*tt.seen)
			}
			resp := f.do(t, post(tt.path))
			p := readProblem(t, resp, tt.status)
			if p.Type != tt.typ || !strings.Contains(p.Detail, tt.wantDetail) || p.RequestID != "req-1" {
				t.Fatalf("problem %+v, want type %s and detail %q", p, tt.typ, tt.wantDetail)
			}
			if strings.Contains(resp.Body, "secret") {
				t.Fatalf("leaks the cause: %s", resp.Body)
			}
			f.wroteNothing(t, "a refused request")
			if tt.seen != nil && tt.fault == nil {
				if st := f.state(t, orderA); st.ProcessState != tt.seen.ProcessState {
					t.Fatalf("state changed to %s", st.ProcessState)
				}
			}
		})
	}
}

// atOnce sends n copies of req to h at the same time and returns the
// answers.
func atOnce(t *testing.T, h *Handler, n int, req events.APIGatewayV2HTTPRequest) []events.APIGatewayV2HTTPResponse {
	t.Helper()
	var wg sync.WaitGroup
	resps := make([]events.APIGatewayV2HTTPResponse, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { resps[i], errs[i] = h.Handle(context.Background(), req) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Handle returned %v; errors must be responses", err)
	}
	return resps
}

// barrier lets n callers through only once all n arrived: at the write,
// concurrent requests have all read before any writes.
type barrier struct {
	wg sync.WaitGroup
}

func newBarrier(n int) *barrier {
	b := &barrier{}
	b.wg.Add(n)
	return b
}

func (b *barrier) wait() {
	b.wg.Done()
	b.wg.Wait()
}

// TestConcurrentRetries: two operators retry the same order at once, both
// having read it in Error. Exactly one resubmission may happen: two would
// run the failed step twice.
func TestConcurrentRetries(t *testing.T) {
	t.Parallel()
	for range 20 {
		b := newBarrier(2)
		f := newFixture(t, func(_ *memstore.Store, method string, _ workflow.Change) error {
			if method == "Apply" {
				b.wait()
			}
			return nil
		})
		f.put(at(orderA, workflow.Error, 1, 2))

		resps := atOnce(t, f.h, 2, post("/orders/"+orderA+"/retry"))

		codes := map[int]int{}
		for _, r := range resps {
			codes[r.StatusCode]++
			if r.StatusCode == 409 {
				if p := readProblem(t, r, 409); !strings.Contains(p.Detail, "changed by another request") {
					t.Fatalf("409 detail %q", p.Detail)
				}
			}
		}
		if codes[202] != 1 || codes[409] != 1 {
			t.Fatalf("statuses %v, want one 202 and one 409", codes)
		}
		if ms := schedules(t, f.out); len(ms) != 1 || ms[0] != message.NewSchedule(orderA, "order-v1", 1, "resubmitted") {
			t.Fatalf("sent %+v, want one schedule of step 1", ms)
		}
		if st := f.state(t, orderA); st.Resubmits != 1 || f.store.Writes() != 1 {
			t.Fatalf("resubmits %d, writes %d; want 1, 1", st.Resubmits, f.store.Writes())
		}
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	processingSecond := at(orderA, workflow.Processing, 1, 1)
	tests := []struct {
		name      string
		seen      workflow.State
		wantState workflow.ProcessState
		wantIndex int
		wantMsg   *message.Schedule // nil: nothing to undo, nothing sent
		sendErr   error             // fails the message: still 202, the change is committed
	}{
		{"pending first step, never tried", at(orderA, workflow.Pending, 0, 0), workflow.Cancelled, 0, nil, nil},
		{"pending first step after a timeout", at(orderA, workflow.Pending, 0, 1), workflow.CompensationPending, 0, ptr(message.NewCompensation(orderA, "order-v1", 0, "cancelled")), nil},
		{"processing first step", at(orderA, workflow.Processing, 0, 1), workflow.CompensationPending, 0, ptr(message.NewCompensation(orderA, "order-v1", 0, "cancelled")), nil},
		{"pending second step", at(orderA, workflow.Pending, 1, 0), workflow.CompensationPending, 0, ptr(message.NewCompensation(orderA, "order-v1", 0, "cancelled")), nil},
		{"processing second step", processingSecond, workflow.CompensationPending, 1, ptr(message.NewCompensation(orderA, "order-v1", 1, "cancelled")), nil},
		// The message that failed is the compensation's: the log line does
		// not say so (it carries the error only), the message does.
		{"queue down", at(orderA, workflow.Processing, 0, 1), workflow.CompensationPending, 0, ptr(message.NewCompensation(orderA, "order-v1", 0, "cancelled")), errQueue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			f.out.err = tt.sendErr
			f.put(tt.seen)
			readOperatorAccepted(t, f.do(t, post("/orders/"+orderA+"/cancel")), orderA, tt.wantState)

			st := f.state(t, orderA)
			if st.ProcessState != tt.wantState || !st.Cancelled || st.Attempt != tt.seen.Attempt+1 || st.StepIndex != tt.wantIndex {
				t.Fatalf("stored %+v", st)
			}
			if tt.wantState == workflow.CompensationPending && !st.CompleteBy.Equal(testNow.Add(testConfig().ClaimTimeout)) {
				t.Fatalf("claim deadline %v", st.CompleteBy)
			}
			ms := schedules(t, f.out)
			switch {
			case tt.wantMsg == nil && len(ms) != 0:
				t.Fatalf("sent %+v for an order with nothing to undo", ms)
			case tt.wantMsg != nil && (len(ms) != 1 || ms[0] != *tt.wantMsg):
				t.Fatalf("sent %+v, want %+v", ms, *tt.wantMsg)
			}
			if l := logged(t, f, "order cancelled"); l[workflow.TransitionKey] != "cancelled" || l["orderId"] != orderA || l["state"] != string(tt.wantState) {
				t.Fatalf("log %v", l)
			}
			if tt.sendErr != nil {
				checkSendFailed(t, f)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestCancelRepeated: a cancel that already took effect answers 202 with
// the state the order is in now, and writes and sends nothing.
func TestCancelRepeated(t *testing.T) {
	t.Parallel()
	for _, ps := range []workflow.ProcessState{workflow.Cancelled, workflow.CompensationPending, workflow.Compensating, workflow.Compensated, workflow.CompensationFailed} {
		t.Run(string(ps), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			st := at(orderA, ps, 0, 1)
			st.Cancelled = true
			f.put(st)
			readOperatorAccepted(t, f.do(t, post("/orders/"+orderA+"/cancel")), orderA, ps)
			f.wroteNothing(t, "a repeated cancel")
		})
	}
}

func TestCancelRejects(t *testing.T) {
	t.Parallel()
	secret := errors.New("dynamodb: throttled arn:aws:dynamodb:secret-table")
	pending := at(orderA, workflow.Pending, 0, 1)
	tests := []refusal{
		{"not found", "/orders/" + orderA + "/cancel", nil, nil, 404, ProblemNotFound, "no order with ID " + orderA},
		{"bad ID", "/orders/a.b/cancel", nil, nil, 400, ProblemMalformed, "order ID"},
		{"read fails", "/orders/" + orderA + "/cancel", &pending, failing(failure{method: "GetState", err: secret}),
			500, ProblemInternal, "internal error"},
		{"write fails", "/orders/" + orderA + "/cancel", &pending, failing(failure{method: "Apply", transition: workflow.TransitionCancelled, err: secret}),
			500, ProblemInternal, "internal error"},
		// As for a retry: only a fault, no store, answers a write so.
		{"deleted meanwhile", "/orders/" + orderA + "/cancel", &pending,
			failing(failure{method: "Apply", err: fmt.Errorf("cancel: %w", workflow.ErrNotFound)}),
			404, ProblemNotFound, "no order with ID " + orderA},
	}
	// Every state an order cannot be cancelled in, other than by a cancel.
	for _, ps := range workflow.ProcessStates() {
		if workflow.CanCancel(workflow.State{ProcessState: ps}) {
			continue
		}
		st := at(orderA, ps, 1, 1)
		tests = append(tests, refusal{"in " + string(ps), "/orders/" + orderA + "/cancel", &st, nil, 409, ProblemConflict,
			"order " + orderA + " is " + string(ps) + "; only orders in Pending, Processing, Waiting or Error can be cancelled"})
	}
	checkRefusals(t, tests)
}

// TestCancelRacesScheduler: a Scheduler claims the order between the
// cancel's read and its write. The cancel reads again and stops the order
// as it now is: the claimed step may have been applied, so it is undone.
func TestCancelRacesScheduler(t *testing.T) {
	t.Parallel()
	var fences []workflow.Fence // what each cancel's write was fenced on
	f := newFixture(t, func(store *memstore.Store, method string, c workflow.Change) error {
		if method != "Apply" {
			return nil
		}
		fences = append(fences, c.Fence)
		if len(fences) == 1 {
			store.Put(at(orderA, workflow.Processing, 0, 1)) // the Scheduler's claim
		}
		return nil
	})
	f.put(at(orderA, workflow.Pending, 0, 0))
	readOperatorAccepted(t, f.do(t, post("/orders/"+orderA+"/cancel")), orderA, workflow.CompensationPending)
	if len(fences) != 2 || !slices.Equal(fences[0].In, []workflow.ProcessState{workflow.Pending}) || *fences[0].Attempt != 0 ||
		!slices.Equal(fences[1].In, []workflow.ProcessState{workflow.Processing}) || *fences[1].Attempt != 1 {
		t.Fatalf("cancel wrote fenced on %+v", fences)
	}
	if ms := schedules(t, f.out); len(ms) != 1 || ms[0] != message.NewCompensation(orderA, "order-v1", 0, "cancelled") {
		t.Fatalf("sent %+v", ms)
	}
	if st := f.state(t, orderA); st.Attempt != 2 || !st.Cancelled || st.Steps[0].Compensation != workflow.StepPending || f.store.Writes() != 1 {
		t.Fatalf("stored %+v in %d writes", st, f.store.Writes())
	}
}

// TestCancelRaces: the order changes between the cancel's reads and its
// writes, into a state a cancel no longer applies to, or under every try;
// the cancel answers after a bounded number of tries, not a loop, and
// writes and sends nothing.
func TestCancelRaces(t *testing.T) {
	t.Parallel()
	always := func(st workflow.State) func(int) workflow.State { return func(int) workflow.State { return st } }
	cancelled := at(orderA, workflow.CompensationPending, 0, 1)
	cancelled.Cancelled = true
	tests := []struct {
		name       string
		seen       workflow.State
		then       func(n int) workflow.State // the record before the n-th write
		status     int
		wantDetail string
		tries      int32
	}{
		{"processed meanwhile", at(orderA, workflow.Processing, 1, 1), always(at(orderA, workflow.Processed, 1, 1)), 409, "Processed", 1},
		{"compensated meanwhile", at(orderA, workflow.Processing, 1, 1), always(at(orderA, workflow.Compensated, 1, 1)), 409, "Compensated", 1},
		{"cancelled by another request", at(orderA, workflow.Processing, 1, 1), always(cancelled), 202, "", 1},
		// Before every write a Scheduler has taken the step again.
		{"changing under every try", at(orderA, workflow.Processing, 0, 1), func(n int) workflow.State {
			return at(orderA, workflow.Processing, 0, 1+n)
		}, 409, "kept changing", cancelTries},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			f := newFixture(t, racing(func(n int) workflow.State {
				calls.Store(int32(n))
				return tt.then(n)
			}))
			f.put(tt.seen)
			resp := f.do(t, post("/orders/"+orderA+"/cancel"))
			if tt.status == 202 {
				readOperatorAccepted(t, resp, orderA, tt.then(1).ProcessState)
			} else if p := readProblem(t, resp, tt.status); p.Type != ProblemConflict || !strings.Contains(p.Detail, tt.wantDetail) {
				t.Fatalf("problem %+v", p)
			}
			if calls.Load() != tt.tries || f.store.Writes() != 0 || len(f.out.sent()) != 0 {
				t.Fatalf("cancel writes tried %d, done %d, sent %d; want %d, 0, 0", calls.Load(), f.store.Writes(), len(f.out.sent()), tt.tries)
			}
		})
	}
}

func TestGetOrderCompensation(t *testing.T) {
	t.Parallel()
	done := testNow.Add(2 * time.Second)
	st := at(orderA, workflow.Compensating, 0, 1)
	st.Cancelled, st.EventSeq, st.Attempt, st.Resubmits = true, 4, 3, 0
	st.Steps[0] = workflow.StepRecord{Name: "reserve-inventory", State: workflow.StepCancelled, Attempts: 1,
		Compensation: workflow.StepProcessing, CompensationAttempts: 2, CompensationFailures: 1,
		CompensationOutput: json.RawMessage(`{not json`), CompensationError: "step reserve-inventory attempt 2 did not complete by 2025-02-04T10:15:31Z"}
	st.Steps[1] = workflow.StepRecord{Name: "charge-payment", State: workflow.StepSucceeded, Attempts: 1,
		Compensation: workflow.StepSucceeded, CompensationAttempts: 1, CompensatedAt: &done,
		CompensationOutput: json.RawMessage(`{"refundId":"rf-1"}`)}
	f := newFixture(t, nil)
	f.put(st)
	resp := f.do(t, request("GET", "/orders/"+orderA, nil, ""))
	var got struct {
		Status    string            `json:"status"`
		EventSeq  int               `json:"eventSeq"`
		Cancelled bool              `json:"cancelled"`
		Steps     []json.RawMessage `json:"steps"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &got); resp.StatusCode != 200 || err != nil {
		t.Fatalf("status %d body %s", resp.StatusCode, resp.Body)
	}
	if got.Status != "compensating" || got.EventSeq != 4 || !got.Cancelled || len(got.Steps) != 2 {
		t.Fatalf("body %s", resp.Body)
	}
	want0 := `{"name":"reserve-inventory","state":"cancelled","attempts":1,"failures":0,"compensation":"processing",` +
		`"compensationAttempts":2,"compensationFailures":1,"compensationReason":"undo-timed-out","compensationReasonText":"the undo of step reserve-inventory did not complete in time"}`
	want1 := `{"name":"charge-payment","state":"succeeded","attempts":1,"failures":0,"compensation":"succeeded",` +
		`"compensationAttempts":1,"compensatedAt":"2025-02-04T10:15:32Z","compensationOutput":{"refundId":"rf-1"}}`
	if string(got.Steps[0]) != want0 || string(got.Steps[1]) != want1 {
		t.Fatalf("steps\n%s\n%s\nwant\n%s\n%s", got.Steps[0], got.Steps[1], want0, want1)
	}
	if l := logged(t, f, "step compensationOutput is not valid JSON; omitted"); l["step"] != "reserve-inventory" {
		t.Fatalf("log %v", l)
	}
}
