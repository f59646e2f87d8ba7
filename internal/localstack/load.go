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
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// LoadCapacity is `make load`'s capacity model: a remote service that
// answers in one second and takes 20 calls at once from each Agent, so the
// Agents' MaximumConcurrency is 2 and the model's capacity 20 orders a
// second; the API sheds past two seconds of queued work (40 requests). The deployed default (100 ms, 50 calls: 500 a second) is more
// than two cores can drive through DynamoDB Local; the mechanisms under
// load, and every figure derived from the model, are the same.
func LoadCapacity() topology.Capacity {
	return topology.Capacity{RemoteLatency: time.Second, RemoteConcurrency: 20, AdmitWait: 2 * time.Second}
}

// LoadOptions are the deployed timing (DeployedOptions) with the capacity
// model c: every remote call takes c.RemoteLatency, each Agent runs
// c.AgentMaxConcurrency invocations at once, and the Submission's
// admission check follows c, as the stack configures them.
func LoadOptions(c topology.Capacity) Options {
	o := DeployedOptions()
	o.Capacity, o.AgentPollers = &c, c.AgentMaxConcurrency()
	lat := remotesim.Duration(c.RemoteLatency)
	o.Faults = remotesim.Faults{Latency: 1, LatencyMin: lat, LatencyMax: lat}
	return o
}

// LoadWatch is the io.Writer of the handlers' JSON logs during a load run:
// it notes when each order was processed and counts the transitions a
// load can cause (Supervisor retries, stale replies, give-ups,
// compensations), and passes every line on to Next.
type LoadWatch struct {
	Next io.Writer

	mu        sync.Mutex
	processed map[string]time.Time
	counts    map[workflow.Transition]int
}

// Write takes one JSON line per call, as slog's JSON handler writes it.
func (w *LoadWatch) Write(p []byte) (int, error) {
	for line := range bytes.Lines(p) {
		if !bytes.Contains(line, []byte(`"transition"`)) {
			continue
		}
		var rec struct {
			Time       time.Time           `json:"time"`
			OrderID    string              `json:"orderId"`
			Transition workflow.Transition `json:"transition"`
		}
		if json.Unmarshal(line, &rec) != nil || rec.OrderID == "" {
			continue
		}
		w.mu.Lock()
		if w.processed == nil {
			w.processed, w.counts = map[string]time.Time{}, map[workflow.Transition]int{}
		}
		w.counts[rec.Transition]++
		if rec.Transition == workflow.TransitionProcessed {
			w.processed[rec.OrderID] = rec.Time
		}
		w.mu.Unlock()
	}
	if w.Next != nil {
		return w.Next.Write(p)
	}
	return len(p), nil
}

func (w *LoadWatch) count(t workflow.Transition) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[t]
}

func (w *LoadWatch) processedAt(id string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.processed[id]
	return t, ok
}

// Load offers orders to a running stack at a steady rate, open loop: each
// order is submitted at its own instant whether or not earlier ones were
// answered, as independent clients would. Orders go to the Submission
// handler directly, as API Gateway would hand them over (the local API's
// SigV4 check is glue, not the system under load).
type Load struct {
	Stack *Stack
	Watch *LoadWatch
	// Warm is left out of the completion rate at the start of a level,
	// while the first orders are still on their way.
	Warm time.Duration
	// Drain bounds the wait, after a level, for its admitted orders.
	Drain time.Duration
	// Mix, when set, gives each order a priority class: of every ten
	// orders in a row, Mix[c] are of class c (MixedLoad). Unset, every
	// order names none, and is normal.
	Mix map[workflow.Priority]int
}

// MixedLoad is `make load`'s mixed run: of every ten orders, two high,
// five normal and three low.
func MixedLoad() map[workflow.Priority]int {
	return map[workflow.Priority]int{workflow.PriorityHigh: 2, workflow.PriorityNormal: 5, workflow.PriorityLow: 3}
}

// classOf is the class of the i-th order of a level under mix: spread
// through each ten, highest class first, so every second of a level offers
// each class its share.
func classOf(mix map[workflow.Priority]int, i int) workflow.Priority {
	if len(mix) == 0 {
		return ""
	}
	slot := i % 10
	for _, c := range workflow.Priorities {
		if slot < mix[c] {
			return c
		}
		slot -= mix[c]
	}
	return workflow.PriorityNormal
}

// ClassLevel is what a level measured of one priority class.
type ClassLevel struct {
	Offered, Admitted, Shed, Failed, Unfinished int
	// Latencies of the class's admitted orders, submission to Processed,
	// sorted.
	Latencies []time.Duration
}

// P is the nearest-rank p-th percentile of the class's latencies.
func (c ClassLevel) P(p float64) time.Duration { return Percentile(c.Latencies, p) }

// LoadLevel is what one level measured.
type LoadLevel struct {
	Rate     float64
	Duration time.Duration
	// Offered counts the orders submitted; Admitted the 202s; Shed the
	// 429s; Failed anything else (a 5xx or an error).
	Offered, Admitted, Shed, Failed int
	// CompletedPerSecond is the orders processed a second after Warm,
	// until the level's end.
	CompletedPerSecond float64
	// Latencies of the admitted orders, submission to Processed, sorted.
	// Unfinished counts those not processed within Drain.
	Latencies  []time.Duration
	Unfinished int
	// What the level's orders (and late work of earlier levels) caused.
	Retries, StaleReplies, GiveUps, Compensations int
	// Classes holds each class's figures when the load was mixed.
	Classes map[workflow.Priority]*ClassLevel
}

// P is the nearest-rank p-th percentile of the admitted orders' latencies.
func (l LoadLevel) P(p float64) time.Duration { return Percentile(l.Latencies, p) }

// Run offers rate orders a second for d, then waits for the admitted ones.
func (l Load) Run(ctx context.Context, rate float64, d time.Duration) (LoadLevel, error) {
	res := LoadLevel{Rate: rate, Duration: d}
	before := map[workflow.Transition]int{}
	for _, t := range []workflow.Transition{workflow.TransitionRetried, workflow.TransitionStaleReply, workflow.TransitionGaveUp, workflow.TransitionCompensating} {
		before[t] = l.Watch.count(t)
	}
	type answer struct {
		id     string
		status int
		at     time.Time
		class  workflow.Priority
	}
	n := int(math.Round(rate * d.Seconds()))
	answers := make([]answer, n)
	var wg sync.WaitGroup
	start := time.Now()
	run := strconv.FormatInt(start.UnixNano(), 36)
	for i := range n {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second))))):
		}
		wg.Go(func() {
			at, class := time.Now(), classOf(l.Mix, i)
			id, status := l.submit(ctx, run+"-"+strconv.Itoa(i), class)
			answers[i] = answer{id, status, at, class}
		})
	}
	end := start.Add(d)
	wg.Wait()
	res.Offered = n
	class := func(a answer) *ClassLevel {
		if len(l.Mix) == 0 {
			return &ClassLevel{} // counted nowhere
		}
		if res.Classes == nil {
			res.Classes = map[workflow.Priority]*ClassLevel{}
		}
		if res.Classes[a.class] == nil {
			res.Classes[a.class] = &ClassLevel{}
		}
		return res.Classes[a.class]
	}
	var admitted []answer
	for _, a := range answers {
		c := class(a)
		c.Offered++
		switch a.status {
		case http.StatusAccepted:
			admitted = append(admitted, a)
			c.Admitted++
		case http.StatusTooManyRequests:
			res.Shed++
			c.Shed++
		default:
			res.Failed++
			c.Failed++
		}
	}
	res.Admitted = len(admitted)

	drainBy := time.Now().Add(l.Drain)
	var done []time.Time
	for _, a := range admitted {
		for {
			t, ok := l.Watch.processedAt(a.id)
			if ok {
				res.Latencies = append(res.Latencies, t.Sub(a.at))
				c := class(a)
				c.Latencies = append(c.Latencies, t.Sub(a.at))
				done = append(done, t)
				break
			}
			if time.Now().After(drainBy) {
				res.Unfinished++
				class(a).Unfinished++
				break
			}
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	slices.Sort(res.Latencies)
	for _, c := range res.Classes {
		slices.Sort(c.Latencies)
	}
	from := start.Add(l.Warm)
	var completed int
	for _, t := range done {
		if !t.Before(from) && !t.After(end) {
			completed++
		}
	}
	res.CompletedPerSecond = float64(completed) / end.Sub(from).Seconds()
	res.Retries = l.Watch.count(workflow.TransitionRetried) - before[workflow.TransitionRetried]
	res.StaleReplies = l.Watch.count(workflow.TransitionStaleReply) - before[workflow.TransitionStaleReply]
	res.GiveUps = l.Watch.count(workflow.TransitionGaveUp) - before[workflow.TransitionGaveUp]
	res.Compensations = l.Watch.count(workflow.TransitionCompensating) - before[workflow.TransitionCompensating]
	return res, nil
}

// submit posts one order and returns its ID (for a 202) and the status.
func (l Load) submit(ctx context.Context, requestID string, class workflow.Priority) (string, int) {
	prio := ""
	if class != "" {
		prio = `,"priority":"` + string(class) + `"`
	}
	req := events.APIGatewayV2HTTPRequest{RawPath: "/orders", RouteKey: "POST /orders",
		Headers: map[string]string{"content-type": "application/json"},
		Body:    `{"customerId":"c-load","currency":"EUR","items":[{"sku":"BOOK-1","quantity":1,"unitPriceCents":1200}]` + prio + `}`}
	req.RequestContext.HTTP.Method = http.MethodPost
	req.RequestContext.RequestID = "load-" + requestID
	req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		IAM: apigw.LocalUser(apigw.Credential{AccessKeyID: "load"})}
	resp, err := l.Stack.Sys.Submission.Handle(ctx, req)
	if err != nil {
		return "", 0
	}
	var a struct{ OrderID string }
	if resp.StatusCode == http.StatusAccepted && json.Unmarshal([]byte(resp.Body), &a) != nil {
		return "", 0
	}
	return a.OrderID, resp.StatusCode
}

// LoadTable writes the levels as `make load` prints them; capacity is the
// rate goodput is measured against.
func LoadTable(out io.Writer, capacity float64, levels []LoadLevel) {
	fmt.Fprintf(out, "%-6s %-8s %-8s %-8s %-6s %-12s %-8s %-7s %-7s %-8s %-6s %-9s %-14s %s\n",
		"load", "offer/s", "offered", "admitted", "shed", "completed/s", "goodput", "p50_s", "p99_s", "retries", "stale", "give-ups", "compensations", "unfinished")
	for _, l := range levels {
		fmt.Fprintf(out, "%-6s %-8.1f %-8d %-8d %-6d %-12.1f %-8.2f %-7.2f %-7.2f %-8d %-6d %-9d %-14d %d\n",
			fmt.Sprintf("%.1fx", l.Rate/capacity), l.Rate, l.Offered, l.Admitted, l.Shed, l.CompletedPerSecond, l.CompletedPerSecond/capacity,
			l.P(50).Seconds(), l.P(99).Seconds(), l.Retries, l.StaleReplies, l.GiveUps, l.Compensations, l.Unfinished)
	}
}

// MixedTable writes a mixed run's levels, one row per level and class.
func MixedTable(out io.Writer, capacity float64, levels []LoadLevel) {
	fmt.Fprintf(out, "%-6s %-8s %-7s %-8s %-8s %-6s %-7s %-7s %s\n",
		"load", "offer/s", "class", "offered", "admitted", "shed", "p50_s", "p99_s", "unfinished")
	for _, l := range levels {
		for _, p := range workflow.Priorities {
			c := l.Classes[p]
			if c == nil {
				continue
			}
			fmt.Fprintf(out, "%-6s %-8.1f %-7s %-8d %-8d %-6d %-7.2f %-7.2f %d\n",
				fmt.Sprintf("%.1fx", l.Rate/capacity), l.Rate, p, c.Offered, c.Admitted, c.Shed, c.P(50).Seconds(), c.P(99).Seconds(), c.Unfinished)
		}
	}
}
