package localstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/internal/localstack/apigw"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// DeployedOptions are the stack's timing as deployed: the default
// workflow's step budgets, the default policy (its backoff and claim
// timeout), the Supervisor on the stack's schedule, the queues' visibility
// timeouts, and no faults. What is measured with them is what a user gets.
func DeployedOptions() Options {
	o := DemoOptions()
	o.Workflows, o.Policy, o.Agent = workflow.Single(workflow.Reference()), workflow.DefaultPolicy(), agent.DefaultConfig()
	o.Faults, o.Crash = remotesim.Faults{}, 0
	o.SuperviseEvery = topology.SupervisorEvery
	o.Visibility = topology.Visibility(topology.SchedulerTimeout)
	return o
}

// RecoveryWatch is the io.Writer of the handlers' JSON logs during a
// Recovery run: it notes, per order, when the Supervisor (its sweep or
// its fast path) decided on the first timeout, and when the Scheduler
// claimed the step again, and passes every line on to Next.
type RecoveryWatch struct {
	Next io.Writer

	mu        sync.Mutex
	decided   map[string]time.Time
	decidedBy map[string]string
	reclaims  map[string]time.Time
}

// Write takes one JSON line per call, as slog's JSON handler writes it.
func (w *RecoveryWatch) Write(p []byte) (int, error) {
	var rec struct {
		Time       time.Time           `json:"time"`
		Function   string              `json:"function"`
		OrderID    string              `json:"orderId"`
		Transition workflow.Transition `json:"transition"`
		Written    struct {
			Attempt int `json:"attempt"`
		} `json:"written"`
	}
	for line := range bytes.Lines(p) {
		if json.Unmarshal(line, &rec) != nil || rec.OrderID == "" {
			continue
		}
		w.mu.Lock()
		if w.decided == nil {
			w.decided, w.decidedBy, w.reclaims = map[string]time.Time{}, map[string]string{}, map[string]time.Time{}
		}
		switch rec.Transition {
		case workflow.TransitionRetried, workflow.TransitionGaveUp, workflow.TransitionRequeued:
			if _, ok := w.decided[rec.OrderID]; !ok {
				w.decided[rec.OrderID], w.decidedBy[rec.OrderID] = rec.Time, rec.Function
			}
		case workflow.TransitionClaimed:
			if _, ok := w.reclaims[rec.OrderID]; !ok && rec.Written.Attempt == 2 {
				w.reclaims[rec.OrderID] = rec.Time
			}
		}
		w.mu.Unlock()
	}
	if w.Next != nil {
		return w.Next.Write(p)
	}
	return len(p), nil
}

func (w *RecoveryWatch) times(id string) (decided, reclaimed time.Time, by string, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	decided, ok1 := w.decided[id]
	reclaimed, ok2 := w.reclaims[id]
	return decided, reclaimed, w.decidedBy[id], ok1 && ok2
}

// Recovery submits Orders orders, spread evenly over Spread so their
// deadlines fall at every phase of the Supervisor's schedule, to a stack
// whose every Agent invocation is killed before it starts (Options.Crash
// 1): each first step times out. Per order it measures CompleteBy → the
// Supervisor's decision, and CompleteBy → the Scheduler's next claim,
// which follows the decision after the policy's backoff.
type Recovery struct {
	Stack   *Stack
	Watch   *RecoveryWatch
	Orders  int
	Spread  time.Duration
	Timeout time.Duration
}

// RecoveryResult is one run's latencies, one per order, sorted, and which
// function made each decision: "deadline" (the fast path) or "supervisor"
// (the sweep).
type RecoveryResult struct {
	Decision, NextClaim []time.Duration
	DecidedBy           map[string]int
}

// Run submits the orders and waits until each was claimed again.
func (r Recovery) Run(ctx context.Context) (RecoveryResult, error) {
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	completeBy := map[string]time.Time{}
	every := r.Spread / time.Duration(max(r.Orders, 1))
	for i := range r.Orders {
		req := events.APIGatewayV2HTTPRequest{RawPath: "/orders", RouteKey: "POST /orders",
			Headers: map[string]string{"content-type": "application/json"},
			Body:    `{"customerId":"c-recovery","currency":"EUR","items":[{"sku":"BOOK-1","quantity":1,"unitPriceCents":1200}]}`}
		req.RequestContext.HTTP.Method = http.MethodPost
		req.RequestContext.RequestID = "recovery-" + strconv.Itoa(i)
		req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: apigw.LocalUser(apigw.Credential{AccessKeyID: "recovery"})}
		resp, err := r.Stack.Sys.Submission.Handle(ctx, req)
		if err != nil || resp.StatusCode != http.StatusAccepted {
			return RecoveryResult{}, fmt.Errorf("submit: %d %s %v", resp.StatusCode, resp.Body, err)
		}
		var a struct{ OrderID string }
		if err := json.Unmarshal([]byte(resp.Body), &a); err != nil {
			return RecoveryResult{}, err
		}
		st, err := r.Stack.Sys.Store.GetState(ctx, a.OrderID)
		if err != nil {
			return RecoveryResult{}, err
		}
		completeBy[a.OrderID] = st.CompleteBy
		select {
		case <-ctx.Done():
			return RecoveryResult{}, ctx.Err()
		case <-time.After(every):
		}
	}
	res := RecoveryResult{DecidedBy: map[string]int{}}
	for id, due := range completeBy {
		for {
			decided, reclaimed, by, ok := r.Watch.times(id)
			if ok {
				res.Decision = append(res.Decision, decided.Sub(due))
				res.NextClaim = append(res.NextClaim, reclaimed.Sub(due))
				res.DecidedBy[by]++
				break
			}
			select {
			case <-ctx.Done():
				return res, fmt.Errorf("order %s not claimed again: %w", id, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	slices.Sort(res.Decision)
	slices.Sort(res.NextClaim)
	return res, nil
}

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
