package submission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

const orderA = "7c9e6679-7425-40de-944b-e07fc1f90ae7"

// at builds the record of an order that reached step i in state ps: the
// steps before i succeeded, step i was tried attempts times.
func at(id string, ps workflow.ProcessState, i, attempts int) workflow.State {
	st := workflow.NewState(id, workflow.Default(), json.RawMessage(`{}`), testNow.Add(-time.Hour), testNow.Add(-time.Hour))
	st.ProcessState, st.StepIndex, st.Step = ps, i, st.Steps[i].Name
	st.Owner = callerA
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
		st.Steps[i].State, st.LastError = workflow.StepFailed, "card declined"
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

// schedules decodes what was sent to the scheduler queue.
func schedules(t *testing.T, out *outbox) []message.Schedule {
	t.Helper()
	var ms []message.Schedule
	for _, m := range out.sent() {
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

func TestRetry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		seen      workflow.State
		wantState workflow.ProcessState
		wantMsg   message.Schedule
	}{
		{"error at the first step", at(orderA, workflow.Error, 0, 1), workflow.Pending,
			message.NewSchedule(orderA, 0, "resubmitted")},
		{"error at the second step", at(orderA, workflow.Error, 1, 3), workflow.Pending,
			message.NewSchedule(orderA, 1, "resubmitted")},
		{"failed compensation", at(orderA, workflow.CompensationFailed, 0, 1), workflow.CompensationPending,
			message.NewCompensation(orderA, 0, "resubmitted")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			tt.seen.FailureCount = 2
			f.store.put(tt.seen)
			req := post("/orders/" + orderA + "/retry")
			req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:user/ops"}}
			readOperatorAccepted(t, f.do(t, req), orderA, tt.wantState)

			st := f.store.state(orderA)
			if st.ProcessState != tt.wantState || st.Resubmits != 1 || st.FailureCount != 0 ||
				!st.CompleteBy.Equal(testNow.Add(testConfig().ClaimTimeout)) || st.StepIndex != tt.seen.StepIndex {
				t.Fatalf("stored %+v", st)
			}
			if ms := schedules(t, f.out); len(ms) != 1 || ms[0] != tt.wantMsg {
				t.Fatalf("sent %+v, want %+v", ms, tt.wantMsg)
			}
			l := logged(t, f, "order resubmitted")
			if l[workflow.TransitionKey] != "resubmitted" || l["orderId"] != orderA || l["caller"] != "arn:aws:iam::123456789012:user/ops" ||
				l["from"] != string(tt.seen.ProcessState) || l["state"] != string(tt.wantState) {
				t.Fatalf("log %v", l)
			}
		})
	}
}

func TestRetryRejects(t *testing.T) {
	t.Parallel()
	secret := errors.New("dynamodb: throttled arn:aws:dynamodb:secret-table")
	errState := at(orderA, workflow.Error, 1, 1)
	tests := []struct {
		name       string
		path       string
		seen       *workflow.State // nil: no such order
		wrap       func(*storeFuncs)
		status     int
		typ        string
		wantDetail string
	}{
		{"not found", "/orders/" + orderA + "/retry", nil, nil, 404, ProblemNotFound, "no order with ID " + orderA},
		{"bad ID", "/orders/a_b/retry", nil, nil, 400, ProblemMalformed, "order ID"},
		{"long ID", "/orders/" + strings.Repeat("a", 65) + "/retry", nil, nil, 400, ProblemMalformed, "order ID"},
		{"read fails", "/orders/" + orderA + "/retry", &errState, func(s *storeFuncs) {
			s.getState = func(context.Context, string) (workflow.State, error) { return workflow.State{}, secret }
		}, 500, ProblemInternal, "internal error"},
		{"write fails", "/orders/" + orderA + "/retry", &errState, func(s *storeFuncs) {
			s.resubmit = func(context.Context, workflow.State, workflow.Resubmission, time.Time) (workflow.State, error) {
				return workflow.State{}, secret
			}
		}, 500, ProblemInternal, "internal error"},
		{"changed meanwhile", "/orders/" + orderA + "/retry", &errState, func(s *storeFuncs) {
			s.resubmit = func(context.Context, workflow.State, workflow.Resubmission, time.Time) (workflow.State, error) {
				return workflow.State{}, fmt.Errorf("resubmit: %w", workflow.ErrStale)
			}
		}, 409, ProblemConflict, "order " + orderA + " was changed by another request; read it again"},
		{"deleted meanwhile", "/orders/" + orderA + "/retry", &errState, func(s *storeFuncs) {
			s.resubmit = func(context.Context, workflow.State, workflow.Resubmission, time.Time) (workflow.State, error) {
				return workflow.State{}, fmt.Errorf("resubmit: %w", workflow.ErrNotFound)
			}
		}, 404, ProblemNotFound, "no order with ID " + orderA},
	}
	for _, ps := range workflow.ProcessStates() {
		if ps.NeedsOperator() {
			continue
		}
		st := at(orderA, ps, 1, 1)
		tests = append(tests, struct {
			name       string
			path       string
			seen       *workflow.State
			wrap       func(*storeFuncs)
			status     int
			typ        string
			wantDetail string
		}{"in " + string(ps), "/orders/" + orderA + "/retry", &st, nil, 409, ProblemConflict,
			"order " + orderA + " is " + string(ps) + "; only orders in Error or CompensationFailed can be retried"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tt.wrap)
			if tt.seen != nil {
				f.store.put(*tt.seen)
			}
			resp := f.do(t, post(tt.path))
			p := readProblem(t, resp, tt.status)
			if p.Type != tt.typ || !strings.Contains(p.Detail, tt.wantDetail) || p.RequestID != "req-1" {
				t.Fatalf("problem %+v, want type %s and detail %q", p, tt.typ, tt.wantDetail)
			}
			if strings.Contains(resp.Body, "secret") {
				t.Fatalf("leaks the cause: %s", resp.Body)
			}
			if f.store.writeCount() != 0 || len(f.out.sent()) != 0 {
				t.Fatalf("a refused retry wrote (%d) or sent (%d)", f.store.writeCount(), len(f.out.sent()))
			}
			if tt.seen != nil && tt.wrap == nil && f.store.state(orderA).ProcessState != tt.seen.ProcessState {
				t.Fatalf("state changed to %s", f.store.state(orderA).ProcessState)
			}
		})
	}
}

func TestRetrySendFailureStillAccepted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.out.err = errors.New("sqs: throttled")
	f.store.put(at(orderA, workflow.Error, 0, 1))
	readOperatorAccepted(t, f.do(t, post("/orders/"+orderA+"/retry")), orderA, workflow.Pending)
	if f.store.state(orderA).ProcessState != workflow.Pending {
		t.Fatal("not resubmitted")
	}
	if l := logged(t, f, "schedule message not sent; the Supervisor will re-send it"); l["level"] != "WARN" || !strings.Contains(fmt.Sprint(l["error"]), "throttled") {
		t.Fatalf("log %v", l)
	}
}

// barrier lets n callers through only once all n arrived, so concurrent
// requests all read before any writes.
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
		f := newFixture(t, func(s *storeFuncs) {
			read := s.getState
			s.getState = func(ctx context.Context, id string) (workflow.State, error) {
				st, err := read(ctx, id)
				b.wait()
				return st, err
			}
		})
		f.store.put(at(orderA, workflow.Error, 1, 2))

		var wg sync.WaitGroup
		resps := make([]events.APIGatewayV2HTTPResponse, 2)
		errs := make([]error, 2)
		for i := range resps {
			wg.Go(func() { resps[i], errs[i] = f.h.Handle(context.Background(), post("/orders/"+orderA+"/retry")) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("Handle returned %v; errors must be responses", err)
		}

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
		if ms := schedules(t, f.out); len(ms) != 1 || ms[0] != message.NewSchedule(orderA, 1, "resubmitted") {
			t.Fatalf("sent %+v, want one schedule of step 1", ms)
		}
		if st := f.store.state(orderA); st.Resubmits != 1 || f.store.writeCount() != 1 {
			t.Fatalf("resubmits %d, writes %d; want 1, 1", st.Resubmits, f.store.writeCount())
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
	}{
		{"pending first step, never tried", at(orderA, workflow.Pending, 0, 0), workflow.Cancelled, 0, nil},
		{"pending first step after a timeout", at(orderA, workflow.Pending, 0, 1), workflow.CompensationPending, 0, ptr(message.NewCompensation(orderA, 0, "cancelled"))},
		{"processing first step", at(orderA, workflow.Processing, 0, 1), workflow.CompensationPending, 0, ptr(message.NewCompensation(orderA, 0, "cancelled"))},
		{"pending second step", at(orderA, workflow.Pending, 1, 0), workflow.CompensationPending, 0, ptr(message.NewCompensation(orderA, 0, "cancelled"))},
		{"processing second step", processingSecond, workflow.CompensationPending, 1, ptr(message.NewCompensation(orderA, 1, "cancelled"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			f.store.put(tt.seen)
			readOperatorAccepted(t, f.do(t, post("/orders/"+orderA+"/cancel")), orderA, tt.wantState)

			st := f.store.state(orderA)
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
			f.store.put(st)
			readOperatorAccepted(t, f.do(t, post("/orders/"+orderA+"/cancel")), orderA, ps)
			if f.store.writeCount() != 0 || len(f.out.sent()) != 0 {
				t.Fatalf("a repeated cancel wrote (%d) or sent (%d)", f.store.writeCount(), len(f.out.sent()))
			}
		})
	}
}

func TestCancelRejects(t *testing.T) {
	t.Parallel()
	secret := errors.New("dynamodb: throttled arn:aws:dynamodb:secret-table")
	pending := at(orderA, workflow.Pending, 0, 1)
	type test struct {
		name       string
		path       string
		seen       *workflow.State
		wrap       func(*storeFuncs)
		status     int
		typ        string
		wantDetail string
	}
	tests := []test{
		{"not found", "/orders/" + orderA + "/cancel", nil, nil, 404, ProblemNotFound, "no order with ID " + orderA},
		{"bad ID", "/orders/a.b/cancel", nil, nil, 400, ProblemMalformed, "order ID"},
		{"read fails", "/orders/" + orderA + "/cancel", &pending, func(s *storeFuncs) {
			s.getState = func(context.Context, string) (workflow.State, error) { return workflow.State{}, secret }
		}, 500, ProblemInternal, "internal error"},
		{"write fails", "/orders/" + orderA + "/cancel", &pending, func(s *storeFuncs) {
			s.cancel = func(context.Context, workflow.State, workflow.Stop, time.Time, time.Time) (workflow.State, error) {
				return workflow.State{}, secret
			}
		}, 500, ProblemInternal, "internal error"},
		{"deleted meanwhile", "/orders/" + orderA + "/cancel", &pending, func(s *storeFuncs) {
			s.cancel = func(context.Context, workflow.State, workflow.Stop, time.Time, time.Time) (workflow.State, error) {
				return workflow.State{}, fmt.Errorf("cancel: %w", workflow.ErrNotFound)
			}
		}, 404, ProblemNotFound, "no order with ID " + orderA},
	}
	// Every state an order cannot be cancelled in, other than by a cancel.
	for _, ps := range workflow.ProcessStates() {
		if ps == workflow.Pending || ps == workflow.Processing || ps == workflow.Error {
			continue
		}
		st := at(orderA, ps, 1, 1)
		tests = append(tests, test{"in " + string(ps), "/orders/" + orderA + "/cancel", &st, nil, 409, ProblemConflict,
			"order " + orderA + " is " + string(ps) + "; only orders in Pending, Processing or Error can be cancelled"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tt.wrap)
			if tt.seen != nil {
				f.store.put(*tt.seen)
			}
			resp := f.do(t, post(tt.path))
			p := readProblem(t, resp, tt.status)
			if p.Type != tt.typ || !strings.Contains(p.Detail, tt.wantDetail) {
				t.Fatalf("problem %+v, want type %s and detail %q", p, tt.typ, tt.wantDetail)
			}
			if strings.Contains(resp.Body, "secret") {
				t.Fatalf("leaks the cause: %s", resp.Body)
			}
			if f.store.writeCount() != 0 || len(f.out.sent()) != 0 {
				t.Fatalf("a refused cancel wrote (%d) or sent (%d)", f.store.writeCount(), len(f.out.sent()))
			}
		})
	}
}

// TestCancelRacesScheduler: a Scheduler claims the order between the
// cancel's read and its write. The cancel reads again and stops the order
// as it now is: the claimed step may have been applied, so it is undone.
func TestCancelRacesScheduler(t *testing.T) {
	t.Parallel()
	var f *fixture
	var seen []workflow.State
	f = newFixture(t, func(s *storeFuncs) {
		cancel := s.cancel
		s.cancel = func(ctx context.Context, st workflow.State, stop workflow.Stop, now, claimBy time.Time) (workflow.State, error) {
			seen = append(seen, st)
			if len(seen) == 1 {
				f.store.put(at(orderA, workflow.Processing, 0, 1)) // the Scheduler's claim
			}
			return cancel(ctx, st, stop, now, claimBy)
		}
	})
	f.store.put(at(orderA, workflow.Pending, 0, 0))
	readOperatorAccepted(t, f.do(t, post("/orders/"+orderA+"/cancel")), orderA, workflow.CompensationPending)
	if len(seen) != 2 || seen[0].ProcessState != workflow.Pending || seen[1].ProcessState != workflow.Processing || seen[1].Attempt != 1 {
		t.Fatalf("cancel saw %+v", seen)
	}
	if ms := schedules(t, f.out); len(ms) != 1 || ms[0] != message.NewCompensation(orderA, 0, "cancelled") {
		t.Fatalf("sent %+v", ms)
	}
	if st := f.store.state(orderA); st.Attempt != 2 || !st.Cancelled || st.Steps[0].Compensation != workflow.StepPending {
		t.Fatalf("stored %+v", st)
	}
}

// TestCancelRacesToTheEnd: the order changes meanwhile into a state a
// cancel no longer applies to.
func TestCancelRacesToTheEnd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		then   workflow.State
		status int
	}{
		{"processed meanwhile", at(orderA, workflow.Processed, 1, 1), 409},
		{"compensated meanwhile", at(orderA, workflow.Compensated, 1, 1), 409},
		{"cancelled by another request", func() workflow.State {
			st := at(orderA, workflow.CompensationPending, 0, 1)
			st.Cancelled = true
			return st
		}(), 202},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var f *fixture
			var calls atomic.Int32
			f = newFixture(t, func(s *storeFuncs) {
				s.cancel = func(context.Context, workflow.State, workflow.Stop, time.Time, time.Time) (workflow.State, error) {
					calls.Add(1)
					f.store.put(tt.then)
					return workflow.State{}, fmt.Errorf("cancel: %w", workflow.ErrStale)
				}
			})
			f.store.put(at(orderA, workflow.Processing, 1, 1))
			resp := f.do(t, post("/orders/"+orderA+"/cancel"))
			if tt.status == 202 {
				readOperatorAccepted(t, resp, orderA, tt.then.ProcessState)
			} else if p := readProblem(t, resp, tt.status); p.Type != ProblemConflict || !strings.Contains(p.Detail, string(tt.then.ProcessState)) {
				t.Fatalf("problem %+v", p)
			}
			if calls.Load() != 1 || len(f.out.sent()) != 0 {
				t.Fatalf("cancel calls %d, sent %d; want 1, 0", calls.Load(), len(f.out.sent()))
			}
		})
	}
}

// TestCancelGivesUp: an order that changes under every try is answered
// with a 409 after a bounded number of tries, not a loop.
func TestCancelGivesUp(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := newFixture(t, func(s *storeFuncs) {
		s.cancel = func(context.Context, workflow.State, workflow.Stop, time.Time, time.Time) (workflow.State, error) {
			calls.Add(1)
			return workflow.State{}, fmt.Errorf("cancel: %w", workflow.ErrStale)
		}
	})
	f.store.put(at(orderA, workflow.Processing, 0, 1))
	p := readProblem(t, f.do(t, post("/orders/"+orderA+"/cancel")), 409)
	if p.Type != ProblemConflict || !strings.Contains(p.Detail, "kept changing") {
		t.Fatalf("problem %+v", p)
	}
	if calls.Load() != cancelTries || len(f.out.sent()) != 0 {
		t.Fatalf("cancel calls %d, sent %d; want %d, 0", calls.Load(), len(f.out.sent()), cancelTries)
	}
}

func TestCancelSendFailureStillAccepted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.out.err = errors.New("sqs: throttled")
	f.store.put(at(orderA, workflow.Processing, 0, 1))
	readOperatorAccepted(t, f.do(t, post("/orders/"+orderA+"/cancel")), orderA, workflow.CompensationPending)
	if len(f.out.sent()) != 1 || f.store.state(orderA).ProcessState != workflow.CompensationPending {
		t.Fatalf("sent %d, state %s", len(f.out.sent()), f.store.state(orderA).ProcessState)
	}
	if l := logged(t, f, "schedule message not sent; the Supervisor will re-send it"); l["level"] != "WARN" || l["compensate"] != true {
		t.Fatalf("log %v", l)
	}
}

// TestOperatorRoutes: the operator routes resolve however API Gateway
// presents them.
func TestOperatorRoutes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  events.APIGatewayV2HTTPRequest
	}{
		{"$default", post("/orders/" + orderA + "/cancel")},
		{"named stage", func() events.APIGatewayV2HTTPRequest {
			r := post("/ops/orders/" + orderA + "/cancel")
			r.RequestContext.Stage = "ops"
			return r
		}()},
		{"route key and parameters only", func() events.APIGatewayV2HTTPRequest {
			r := request("", "", nil, "")
			r.RouteKey, r.PathParameters = "POST /orders/{id}/cancel", map[string]string{"id": orderA}
			return r
		}()},
		{"with a body", request("POST", "/orders/"+orderA+"/cancel", map[string]string{"content-type": "text/plain"}, "please")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			f.store.put(at(orderA, workflow.Pending, 0, 0))
			readOperatorAccepted(t, f.do(t, tt.req), orderA, workflow.Cancelled)
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
		CompensationOutput: json.RawMessage(`{not json`), CompensationError: "warehouse timed out"}
	st.Steps[1] = workflow.StepRecord{Name: "charge-payment", State: workflow.StepSucceeded, Attempts: 1,
		Compensation: workflow.StepSucceeded, CompensationAttempts: 1, CompensatedAt: &done,
		CompensationOutput: json.RawMessage(`{"refundId":"rf-1"}`)}
	f := newFixture(t, nil)
	f.store.put(st)
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
		`"compensationAttempts":2,"compensationFailures":1,"compensationError":"warehouse timed out"}`
	want1 := `{"name":"charge-payment","state":"succeeded","attempts":1,"failures":0,"compensation":"succeeded",` +
		`"compensationAttempts":1,"compensatedAt":"2025-02-04T10:15:32Z","compensationOutput":{"refundId":"rf-1"}}`
	if string(got.Steps[0]) != want0 || string(got.Steps[1]) != want1 {
		t.Fatalf("steps\n%s\n%s\nwant\n%s\n%s", got.Steps[0], got.Steps[1], want0, want1)
	}
	if l := logged(t, f, "step compensationOutput is not valid JSON; omitted"); l["step"] != "reserve-inventory" {
		t.Fatalf("log %v", l)
	}
}
