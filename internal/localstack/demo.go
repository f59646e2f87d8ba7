package localstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/notifier"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/submission"
	"github.com/sasflow/sas/shared/workflow"
)

// Demo is one run of orders through a local stack.
type Demo struct {
	Stack *Stack
	Tap   *Tap
	// Orders to submit through the HTTP API, by Clients concurrent clients,
	// at most Rate a second (0: as fast as they go). A long run wants a rate
	// the system sustains; otherwise the queues back up past the step
	// budgets and the run measures overload.
	Orders, Clients int
	Rate            float64
	// Timeout bounds the whole run.
	Timeout time.Duration
	// Progress receives the live progress: redrawn in place when Live (a
	// terminal), a line every few seconds otherwise (CI logs).
	Progress io.Writer
	Live     bool
	// RunID makes this run's Idempotency-Keys unique.
	RunID string
	// Workflows is what the orders name in turn, order i the i-th modulo
	// its length: a workflow's name or a version's ID, "" for none (the
	// default's current version). Empty: every order names none.
	// DemoVersions makes it.
	Workflows []string

	// shed counts the 429s the clients got so far (Summary.Shed).
	shed *atomic.Int64
}

// Summary is what a demo did, read back from the state records, the remote
// service's effect counts and the alert topic.
type Summary struct {
	Submitted, Processed, Errored, InFlight int
	// Orders that stopped and were undone, whose undo failed (alerted), and
	// that were cancelled before anything needed undoing.
	Compensated, CompensationFailed, Cancelled int
	// UndoneSteps counts the steps undone; UndoErrors lists every breach of
	// the compensation invariant: each step of a compensated order whose
	// effect was applied is undone exactly once, no step of a processed
	// order is undone, and nothing is undone twice.
	UndoneSteps int
	UndoErrors  []string
	// Events counts the distinct status events (order, seq) DemoClientID's
	// queue received, EventDeliveries every delivery. EventErrors lists
	// every breach of the notification invariant: each order's events are
	// numbered 1..EventSeq without a gap, a seq always carries the same
	// state, the last one is the record's committed state, and each
	// carries the priority class the order was submitted with, as its
	// record does.
	Events, EventDeliveries int
	EventErrors             []string
	// LeftApplied lists the effects of ended orders (Compensated,
	// Cancelled) that the remote applied and nobody undid: a compensable
	// step of an order that ended must net nothing, whatever its agent was
	// told. (Orders in Error or CompensationFailed are an operator's, with
	// an alert, and keep what they did until one decides.)
	LeftApplied []string
	// Unreported lists the effects of steps without an undo that the
	// remote applied in an order that did not complete, and that neither
	// the order's state nor its LastError owns up to: a Compensated order
	// with one, or an order in Error or Cancelled whose LastError does not
	// name it. NotUndoable counts the orders whose LastError does.
	Unreported  []string
	NotUndoable int
	// Unbounded lists orders whose Attempt passed what the policy allows
	// (every step and every undo claimed at most MaxFailures times): an
	// order cycling without end.
	Unbounded []string
	// Rejected submissions got no 202 (they would be client mistakes here).
	Rejected int
	// Shed counts the 429s of the admission check: each client waited its
	// Retry-After and submitted the order again under the same
	// Idempotency-Key, as a client of the API should.
	Shed int
	// From the handlers' transition logs. Waits counts the extended waits
	// of steps whose retry policy waits (Waiting).
	SupervisorRetries, Requeues, StaleReplies, GaveUp, PermanentFaults, Waits int
	// RetryCauses and StaleCauses count the Supervisor's retries and the
	// stale replies by what made each claim outlive its deadline: a fault
	// the run injected into it, or its wait in the queue (Cause).
	RetryCauses, StaleCauses map[Cause]int
	// Under chaos's replica fault: the Agents' tries that failed on a
	// replica at fault; the tries sent back to one after a try of the same
	// claim had failed there while another replica could take it; and the
	// Supervisor's retries the fault caused (RetryCauses). The routing's
	// goal is no repeat and no retry.
	ReplicaFailedTries, ReplicaRepeats, ReplicaRetries int
	// RecoveredBySupervisor counts Processed orders that the Supervisor
	// retried or requeued at least once.
	RecoveredBySupervisor int
	// Alerts are the distinct alerts delivered to the alert topic;
	// MissingAlerts names orders in Error without one (with their
	// AlertPending flag).
	Alerts, AlertDeliveries int
	MissingAlerts           []string
	// DispatchAlerts counts the dispatch-failed alerts of orders whose
	// compensation then ran (they need no operator for the order itself,
	// but for the queue).
	DispatchAlerts int
	// WaitNotices counts the waiting notices (severity warning) of orders
	// whose step waits: they ask nothing of an operator.
	WaitNotices    int
	AgentCrashes   int64
	RemoteCalls    int
	CompletedSteps int
	// DuplicateEffects lists idempotency keys applied more than once;
	// MissingEffects lists completed steps whose effect never happened.
	DuplicateEffects, MissingEffects []string
	// CodeSteps counts the code steps' effects; CodeReruns, those that ran
	// again after an earlier run of the same key had succeeded: the
	// ledger's window, an effect whose ledger write never happened (see
	// CodeEffects). A key run twice at once is a DuplicateEffects entry.
	CodeSteps, CodeReruns int
	// OverThreshold lists records whose FailureCount passed MaxFailures;
	// Orphans, orders and state records without their other half;
	// StaleCommits, replies of superseded attempts that were committed
	// (seen only under chaos, where the store is wrapped).
	OverThreshold, Orphans, StaleCommits []string
	P50, P99, Max                        time.Duration
	Elapsed                              time.Duration
	Faults                               remotesim.Faults
	// Under chaos: faults injected by kind, engine outages.
	Injected string
	Outages  int64
	// Versions counts the orders per workflow version, the one each record
	// is pinned to, by ID. VersionErrors lists every order pinned to
	// another version than the one its submission named, and every effect
	// or undo of a step its order's version does not have.
	Versions      []VersionCount
	VersionErrors []string
}

// VersionCount is one workflow version's row of Summary.Versions.
type VersionCount struct {
	ID string
	// Steps is how many steps the version has.
	Steps int
	// Other counts Error, CompensationFailed and Cancelled.
	Submitted, Processed, Compensated, Other, InFlight int
	// Effects counts the remote effects applied for its orders.
	Effects int
}

// Err reports why the run failed: an order left in flight or an effect
// applied twice or never.
func (s Summary) Err() error {
	var errs []error
	if s.InFlight > 0 {
		errs = append(errs, fmt.Errorf("%d orders not terminal", s.InFlight))
	}
	if s.Rejected > 0 {
		errs = append(errs, fmt.Errorf("%d submissions rejected", s.Rejected))
	}
	if len(s.DuplicateEffects) > 0 {
		errs = append(errs, fmt.Errorf("effects applied more than once: %v", s.DuplicateEffects))
	}
	if len(s.MissingEffects) > 0 {
		errs = append(errs, fmt.Errorf("completed steps without an effect: %v", s.MissingEffects))
	}
	for _, l := range []struct {
		what string
		ids  []string
	}{
		{"records past MaxFailures", s.OverThreshold}, {"orders and state records without their other half", s.Orphans},
		{"stale attempts committed", s.StaleCommits}, {"effects of stopped orders left applied", s.LeftApplied},
		{"effects without an undo neither undone nor reported", s.Unreported},
		{"orders cycling past their bound", s.Unbounded},
	} {
		if len(l.ids) > 0 {
			errs = append(errs, fmt.Errorf("%s: %v", l.what, l.ids))
		}
	}
	if len(s.EventErrors) > 0 {
		errs = append(errs, fmt.Errorf("notification invariant broken: %v", s.EventErrors))
	}
	if len(s.UndoErrors) > 0 {
		errs = append(errs, fmt.Errorf("compensation invariant broken: %v", s.UndoErrors))
	}
	if len(s.VersionErrors) > 0 {
		errs = append(errs, fmt.Errorf("workflow versions mixed up: %v", s.VersionErrors))
	}
	if s.Alerts != s.Errored+s.CompensationFailed || len(s.MissingAlerts) > 0 {
		errs = append(errs, fmt.Errorf("%d alerts for %d orders in Error or CompensationFailed; without one: %v",
			s.Alerts, s.Errored+s.CompensationFailed, s.MissingAlerts))
	}
	return errors.Join(errs...)
}

// Print writes the summary for a person.
func (s Summary) Print(w io.Writer) {
	verdict := "OK"
	if err := s.Err(); err != nil {
		verdict = "FAILED: " + strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	fmt.Fprintf(w, `
summary (%v)
  orders      submitted %d · Processed %d · Error %d · in flight %d · rejected %d · shed (429, then resubmitted) %d
%s  undo        Compensated %d · CompensationFailed %d · Cancelled %d · steps undone %d · invariant breaches %d · left applied %d
              stopped with an effect that has no undo, told in LastError and an alert %d · not told %d
  recovery    Supervisor retries %d · requeues %d · extended waits %d (%d notices) · orders recovered by the Supervisor %d
              stale replies refused %d · gave up %d · permanent faults %d · agent crashes %d
              retries by cause: %s
              stale replies by cause: %s
  events      %d status events (%d deliveries) to the client's queue · gaps or mismatches %d
  alerts      %d raised (%d deliveries) for %d orders in Error or CompensationFailed · %d dispatch-failed
  remote      %d calls · %d completed steps · effects per key: %s
  code steps  %d keys applied · %d run again after a try died before its ledger write
  latency     submission to terminal: p50 %v · p99 %v · max %v
  faults      transient %.3g · permanent %.3g · hang %.3g · apply-then-fail %.3g · apply-then-hang %.3g · oversize %.3g · garbage %.3g · hang-then-apply %.3g · latency %.3g
  invariants  past MaxFailures %d · orphans %d · stale attempts committed %d · cycling past their bound %d
%s  verdict     %s
`,
		s.Elapsed.Round(100*time.Millisecond),
		s.Submitted, s.Processed, s.Errored, s.InFlight, s.Rejected, s.Shed,
		versionTable(s),
		s.Compensated, s.CompensationFailed, s.Cancelled, s.UndoneSteps, len(s.UndoErrors), len(s.LeftApplied),
		s.NotUndoable, len(s.Unreported),
		s.SupervisorRetries, s.Requeues, s.Waits, s.WaitNotices, s.RecoveredBySupervisor,
		s.StaleReplies, s.GaveUp, s.PermanentFaults, s.AgentCrashes,
		causeLine(s.RetryCauses), causeLine(s.StaleCauses),
		s.Events, s.EventDeliveries, len(s.EventErrors),
		s.Alerts, s.AlertDeliveries, s.Errored+s.CompensationFailed, s.DispatchAlerts,
		s.RemoteCalls, s.CompletedSteps, effectsVerdict(s),
		s.CodeSteps, s.CodeReruns,
		s.P50.Round(time.Millisecond), s.P99.Round(time.Millisecond), s.Max.Round(time.Millisecond),
		s.Faults.Transient, s.Faults.Permanent, s.Faults.Hang, s.Faults.ApplyThenFail, s.Faults.ApplyThenHang,
		s.Faults.Oversize, s.Faults.Garbage, s.Faults.HangThenApply, s.Faults.Latency,
		len(s.OverThreshold), len(s.Orphans), len(s.StaleCommits), len(s.Unbounded),
		chaosLine(s), verdict)
}

// versionTable is Summary.Versions as lines under the orders line; the
// error/other column counts Error, CompensationFailed and Cancelled.
func versionTable(s Summary) string {
	if len(s.Versions) == 0 {
		return ""
	}
	w := len("version")
	for _, v := range s.Versions {
		w = max(w, len(v.ID))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  versions    %-*s  steps  submitted  Processed  Compensated  error/other  in flight  effects\n", w, "version")
	for _, v := range s.Versions {
		fmt.Fprintf(&b, "              %-*s  %5d  %9d  %9d  %11d  %11d  %9d  %7d\n",
			w, v.ID, v.Steps, v.Submitted, v.Processed, v.Compensated, v.Other, v.InFlight, v.Effects)
	}
	fmt.Fprintf(&b, "              orders on another version than they named, or effects of another version's steps: %d\n", len(s.VersionErrors))
	return b.String()
}

// causeLine lists counts by cause, most first: "queue wait 3 · agent
// crash 2", or "none".
func causeLine(m map[Cause]int) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, c := range causeOrder(m) {
		parts = append(parts, fmt.Sprintf("%s %d", c, m[c]))
	}
	return strings.Join(parts, " · ")
}

func chaosLine(s Summary) string {
	if s.Injected == "" && s.Outages == 0 {
		return ""
	}
	return fmt.Sprintf("  chaos       %s · engine outages %d\n", s.Injected, s.Outages)
}

func effectsVerdict(s Summary) string {
	if len(s.DuplicateEffects) == 0 && len(s.MissingEffects) == 0 {
		return "exactly one per completed step"
	}
	return fmt.Sprintf("%d duplicated, %d missing", len(s.DuplicateEffects), len(s.MissingEffects))
}

// Run submits the orders, shows progress until every order is terminal (or
// the timeout), and summarizes. An error means the run could not be carried
// out; a run that completed with problems returns a Summary whose Err is not
// nil.
func (d Demo) Run(ctx context.Context) (Summary, error) {
	ctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	start := time.Now()
	sum := Summary{Faults: d.Stack.Sim.Faults()}
	d.shed = &atomic.Int64{}

	// Submit in the background and draw progress meanwhile: a paced run
	// takes minutes to submit.
	type submitted struct {
		ids      []string
		named    map[string]string
		classes  map[string]workflow.Priority
		rejected int
		err      error
	}
	subc := make(chan submitted, 1)
	go func() {
		ids, named, classes, rejected, err := d.submit(ctx)
		subc <- submitted{ids, named, classes, rejected, err}
	}()
	var ids []string
	var named map[string]string
	var classes map[string]workflow.Priority
	all := false

	// Wait until every order's record is terminal, drawing progress. The
	// records decide, not the logs: an invocation killed right after its
	// commit never logs the transition. One scan of the state table a
	// tick; a big run scans less often.
	tick := time.NewTicker(time.Second + time.Duration(d.Orders/2000)*time.Second)
	defer tick.Stop()
	lastLine := time.Time{}
	for {
		done, err := d.terminal(ctx)
		if err != nil && ctx.Err() == nil {
			return sum, err
		}
		finished := all && done >= len(ids)
		if d.Live || time.Since(lastLine) >= 3*time.Second || finished {
			total := d.Orders
			if all {
				total = len(ids)
			}
			d.progress(d.Tap.Counts(), total, done, time.Since(start))
			lastLine = time.Now()
		}
		if finished {
			break
		}
		select {
		case r := <-subc:
			if r.err != nil {
				return sum, r.err
			}
			ids, named, classes, all = r.ids, r.named, r.classes, true
			sum.Submitted, sum.Rejected = len(ids), r.rejected
		case <-ctx.Done():
			if !all {
				r := <-subc // submit stops with ctx
				ids, named, classes, sum.Submitted, sum.Rejected = r.ids, r.named, r.classes, len(r.ids), r.rejected
			}
			fmt.Fprintln(d.Progress, "\ntimed out waiting for orders to finish")
			goto summarize
		case <-tick.C:
		}
	}
summarize:
	if d.Live {
		fmt.Fprintln(d.Progress)
	}
	d.Stack.StopOutages()
	sum.Elapsed = time.Since(start)
	// The outbox may still owe alerts; they are due within AlertTimeout.
	errored, final, err := d.readStates(context.Background(), ids, named, &sum)
	if err != nil {
		return sum, err
	}
	for _, st := range final {
		if want, ok := classes[st.OrderID]; ok && st.Priority.Or() != want.Or() {
			sum.EventErrors = append(sum.EventErrors, fmt.Sprintf("%s: submitted %s, its record says %s", st.OrderID, want.Or(), st.Priority.Or()))
		}
	}
	if err := d.checkEvents(final, &sum); err != nil {
		return sum, err
	}
	if err := d.countAlerts(errored, &sum); err != nil {
		return sum, err
	}
	if sum.Orphans, err = d.orphans(); err != nil {
		return sum, err
	}
	if in := d.Stack.chaos; in != nil {
		sum.StaleCommits = in.Ledger().StaleCommits()
		sum.Injected = in.CountsString()
	}
	sum.Outages = d.Stack.Outages()
	counts := d.Tap.Counts()
	sum.SupervisorRetries, sum.Requeues = counts[workflow.TransitionRetried], counts[workflow.TransitionRequeued]
	sum.StaleReplies, sum.GaveUp, sum.PermanentFaults = counts[workflow.TransitionStaleReply], counts[workflow.TransitionGaveUp], counts[workflow.TransitionFailed]
	sum.Waits = counts[workflow.TransitionWaiting]
	sum.ReplicaFailedTries, sum.ReplicaRepeats = d.Tap.ReplicaFaults()
	sum.RetryCauses, sum.StaleCauses = d.attribute()
	sum.ReplicaRetries = sum.RetryCauses[CauseReplica]
	sum.Shed = int(d.shed.Load())
	sum.AgentCrashes = d.Stack.Crashes()
	sum.RemoteCalls = d.Stack.Sim.Calls()
	return sum, nil
}

// attribute names the cause of every Supervisor retry and stale reply from
// what the run recorded: each claim's request on its way to the Agents
// (Stack.claims), the remote's faults, the replica faults the Agents met,
// chaos's strikes and the engine outages.
func (d Demo) attribute() (retries, stales map[Cause]int) {
	marks := slices.Concat(remoteMarks(d.Stack.Sim.Injections()), d.Tap.replicaMarks(), d.Stack.outageMarksSoFar())
	if in := d.Stack.chaos; in != nil {
		marks = append(marks, chaosMarks(in.Strikes())...)
	}
	a := newAttribution(d.Stack.claims.snapshot(), marks, d.Stack.lease, d.Stack.agentLag)
	r, s := d.Tap.events()
	return a.count(r), a.count(s)
}

func (d Demo) progress(c map[workflow.Transition]int, total, done int, elapsed time.Duration) {
	const width = 30
	filled := 0
	if total > 0 {
		filled = width * done / total
	}
	inFlight := total - done
	line := fmt.Sprintf("[%s%s] %d/%d terminal · in flight %d · Processed %d · Error %d · Compensated %d · retries %d · requeues %d · crashes %d · 429s %d · %v",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total, max(inFlight, 0),
		c[workflow.TransitionProcessed], c[workflow.TransitionFailed]+c[workflow.TransitionGaveUp],
		c[workflow.TransitionCompensated],
		c[workflow.TransitionRetried], c[workflow.TransitionRequeued], d.Stack.Crashes(), d.shed.Load(), elapsed.Round(100*time.Millisecond))
	if d.Live {
		fmt.Fprintf(d.Progress, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(d.Progress, line)
	}
}

// closedTime is a channel that never blocks.
var closedTime = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// submit posts the orders through the HTTP API. A failed request is retried
// with the same Idempotency-Key, as a careful client would, and a shed one
// (429) after its Retry-After. named maps each accepted order to the
// workflow its submission named.
func (d Demo) submit(ctx context.Context) (ids []string, named map[string]string, classes map[string]workflow.Priority, rejected int, err error) {
	named, classes = map[string]string{}, map[string]workflow.Priority{}
	client := &http.Client{Timeout: 10 * time.Second}
	jobs := make(chan int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	for range max(d.Clients, 1) {
		wg.Go(func() {
			for i := range jobs {
				id, status, err := d.post(ctx, client, i)
				mu.Lock()
				switch {
				case err != nil && firstErr == nil:
					firstErr = err
				case err == nil && status == http.StatusAccepted:
					ids = append(ids, id)
					named[id] = d.workflowOf(i)
					classes[id] = priorityOf(i)
				case err == nil:
					rejected++
				}
				mu.Unlock()
			}
		})
	}
	start := time.Now()
send:
	for i := range d.Orders {
		var pace <-chan time.Time
		if d.Rate > 0 {
			pace = time.After(time.Until(start.Add(time.Duration(float64(i) / d.Rate * float64(time.Second)))))
		} else {
			pace = closedTime
		}
		select {
		case <-pace:
		case <-ctx.Done():
			break send
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
			break send
		}
	}
	close(jobs)
	wg.Wait()
	return ids, named, classes, rejected, firstErr
}

// workflowOf is what order i names (Demo.Workflows).
func (d Demo) workflowOf(i int) string {
	if len(d.Workflows) == 0 {
		return ""
	}
	return d.Workflows[i%len(d.Workflows)]
}

// priorityOf is the class order i names: each class, and none (normal).
func priorityOf(i int) workflow.Priority {
	return []workflow.Priority{workflow.PriorityHigh, "", workflow.PriorityLow, workflow.PriorityNormal}[i%4]
}

func (d Demo) post(ctx context.Context, client *http.Client, i int) (string, int, error) {
	order := map[string]any{
		"clientId":   DemoClientID,
		"customerId": fmt.Sprintf("c-%03d", i%97),
		"currency":   "EUR",
		"items": []map[string]any{
			{"sku": fmt.Sprintf("BOOK-%d", i%13), "quantity": 1 + i%3, "unitPriceCents": 500 + 25*(i%40)},
		},
	}
	if ref := d.workflowOf(i); ref != "" {
		order["workflow"] = ref
	}
	if p := priorityOf(i); p != "" {
		order["priority"] = p
	}
	body, _ := json.Marshal(order)
	var last error
	// failures counts the tries that failed (an error or a 5xx); a 429 is
	// an answer, and its Retry-After says when to come back.
	for failures, wait := 0, time.Duration(0); failures < 4; {
		if wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return "", 0, fmt.Errorf("POST /orders: %w", ctx.Err())
			}
		}
		wait = time.Duration(failures+1) * 200 * time.Millisecond
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Stack.APIURL+"/orders", bytes.NewReader(body))
		if err != nil {
			return "", 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(submission.IdempotencyKeyHeader, fmt.Sprintf("demo-%s-%06d", d.RunID, i))
		// Signed on every try: a retry after a while needs a fresh time.
		if err := SignRequest(ctx, req, body, DemoAccessKey); err != nil {
			return "", 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err
			failures++
			continue
		}
		var out struct {
			OrderID string `json:"orderId"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			d.shed.Add(1)
			wait = retryAfter(resp.Header.Get("Retry-After"))
			continue
		}
		if resp.StatusCode >= 500 {
			last = fmt.Errorf("POST /orders: %s", resp.Status)
			failures++
			continue
		}
		if resp.StatusCode == http.StatusAccepted && (err != nil || out.OrderID == "") {
			return "", 0, fmt.Errorf("POST /orders: 202 without an order ID: %v", err)
		}
		return out.OrderID, resp.StatusCode, nil
	}
	return "", 0, fmt.Errorf("POST /orders failed 4 times: %w", last)
}

// retryAfter is how long a 429's Retry-After (whole seconds) says to wait,
// a second when it says nothing usable, and a tenth more at most, drawn,
// so clients shed together do not all come back at once.
func retryAfter(header string) time.Duration {
	secs, err := strconv.Atoi(strings.TrimSpace(header))
	if err != nil || secs < 1 {
		secs = 1
	}
	wait := time.Duration(secs) * time.Second
	return wait + rand.N(wait/10+1)
}

// readStates reads every order's state record and checks the remote
// service's effects against the steps the records say completed.
// It returns the orders in Error by the ID their alert carries.
func (d Demo) readStates(ctx context.Context, ids []string, named map[string]string, sum *Summary) (map[string]workflow.State, []workflow.State, error) {
	states := make([]workflow.State, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, id := range ids {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			states[i], errs[i] = d.Stack.Direct.GetState(ctx, id)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, fmt.Errorf("read state records: %w", err)
	}
	errored := map[string]workflow.State{}
	effects := d.Stack.Sim.Effects()
	undos := d.Stack.Sim.Compensations()
	d.addCodeEffects(effects, undos, sum)
	completed := map[string]bool{}
	var latencies []time.Duration
	for _, st := range states {
		if most := d.maxFailures(st); st.FailureCount > most {
			sum.OverThreshold = append(sum.OverThreshold, fmt.Sprintf("%s(%d)", st.OrderID, st.FailureCount))
		}
		if bound := d.attemptBound(st); st.Attempt > bound {
			sum.Unbounded = append(sum.Unbounded, fmt.Sprintf("%s(attempt %d > %d)", st.OrderID, st.Attempt, bound))
		}
		switch st.ProcessState {
		case workflow.Processed:
			sum.Processed++
		case workflow.Error:
			sum.Errored++
			errored[st.OrderID+"/"+strconv.Itoa(st.Attempt)] = st
		case workflow.CompensationFailed:
			sum.CompensationFailed++
			errored[st.OrderID+"/"+strconv.Itoa(st.Attempt)] = st
		case workflow.Compensated:
			sum.Compensated++
		case workflow.Cancelled:
			sum.Cancelled++
		default:
			sum.InFlight++
			continue
		}
		d.checkUndo(st, effects, undos, sum)
		latencies = append(latencies, st.UpdatedAt.Sub(st.CreatedAt))
		recovered := st.Requeues > 0
		for _, step := range st.Steps {
			recovered = recovered || step.Failures > 0
			if step.State == workflow.StepSucceeded {
				key := workflow.IdempotencyKey(st.OrderID, step.Name)
				completed[key] = true
				sum.CompletedSteps++
				if effects[key] == 0 {
					sum.MissingEffects = append(sum.MissingEffects, key)
				}
			}
		}
		if recovered && st.ProcessState == workflow.Processed {
			sum.RecoveredBySupervisor++
		}
	}
	for key, n := range effects {
		if n > 1 {
			sum.DuplicateEffects = append(sum.DuplicateEffects, fmt.Sprintf("%s×%d", key, n))
		}
	}
	slices.Sort(sum.DuplicateEffects)
	d.countVersions(states, named, effects, undos, sum)
	slices.Sort(latencies)
	if n := len(latencies); n > 0 {
		sum.P50, sum.P99, sum.Max = latencies[(n-1)*50/100], latencies[(n-1)*99/100], latencies[n-1]
	}
	return errored, states, nil
}

// countVersions fills Summary.Versions and VersionErrors: each order must
// run the version its submission named (workflow.Catalog.ForNew), and the
// remote must see effects and undos only of that version's steps (a v1
// order never ships, a v2 order does).
func (d Demo) countVersions(states []workflow.State, named map[string]string, effects, undos map[string]int, sum *Summary) {
	rows := map[string]*VersionCount{}
	defs := map[string]workflow.Definition{}
	pinned := map[string]*VersionCount{}
	for _, st := range states {
		r := rows[st.Workflow]
		if r == nil {
			r = &VersionCount{ID: st.Workflow}
			if def, err := d.Stack.workflows.Resolve(st.Workflow); err == nil {
				r.Steps = len(def.Steps)
			}
			rows[st.Workflow] = r
		}
		r.Submitted++
		switch {
		case st.ProcessState == workflow.Processed:
			r.Processed++
		case st.ProcessState == workflow.Compensated:
			r.Compensated++
		case st.ProcessState.Terminal():
			r.Other++
		default:
			r.InFlight++
		}
		if want, err := d.Stack.workflows.ForNew(named[st.OrderID]); err != nil || want.ID() != st.Workflow {
			sum.VersionErrors = append(sum.VersionErrors, fmt.Sprintf("%s named %q and runs %s (want %s, %v)",
				st.OrderID, named[st.OrderID], st.Workflow, want.ID(), err))
		}
		// A version the catalog lacks is checkUndo's breach already.
		def, err := d.Stack.workflows.Resolve(st.Workflow)
		if err == nil && len(st.Steps) != len(def.Steps) {
			sum.VersionErrors = append(sum.VersionErrors, fmt.Sprintf("%s: %d steps recorded, %s has %d", st.OrderID, len(st.Steps), st.Workflow, len(def.Steps)))
		}
		defs[st.OrderID], pinned[st.OrderID] = def, r
	}
	for what, counts := range map[string]map[string]int{"effect": effects, "undo": undos} {
		for key, n := range counts {
			i := strings.LastIndex(key, "/")
			if i < 0 {
				continue
			}
			order, step := key[:i], key[i+1:]
			def, ok := defs[order]
			if !ok {
				continue // not an order of this run
			}
			if what == "effect" {
				pinned[order].Effects += n
			}
			if !slices.ContainsFunc(def.Steps, func(s workflow.Step) bool { return s.Name == step }) {
				sum.VersionErrors = append(sum.VersionErrors, fmt.Sprintf("%s: %s of %s, not a step of %s", order, what, step, pinned[order].ID))
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(rows)) {
		sum.Versions = append(sum.Versions, *rows[id])
	}
	slices.Sort(sum.VersionErrors)
}

// checkEvents drains DemoClientID's queue until every order's last event
// (its record's EventSeq) has come, or 15 s have passed, and checks the
// notification invariant (Summary.EventErrors).
func (d Demo) checkEvents(states []workflow.State, sum *Summary) error {
	want := map[string]workflow.State{}
	for _, st := range states {
		if st.ClientID == DemoClientID {
			want[st.OrderID] = st
		}
	}
	type seen struct {
		state workflow.ProcessState
		step  string
	}
	got := map[string]map[int]seen{}
	// Every event of every order, not only the last: a receive whose
	// answer was lost hides its messages for the queue's visibility
	// timeout, and the later events of the same orders may arrive first.
	complete := func() bool {
		for id, st := range want {
			for seq := 1; seq <= st.EventSeq; seq++ {
				if _, ok := got[id][seq]; !ok {
					return false
				}
			}
		}
		return true
	}
	err := d.drain(d.Stack.EventsWatchURL, "status events", 1, complete, func(ctx context.Context, msgs []sqstypes.Message) error {
		var done []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range msgs {
			sum.EventDeliveries++
			ev, err := notifier.DecodeEvent(aws.ToString(m.Body))
			if err != nil {
				sum.EventErrors = append(sum.EventErrors, "undecodable event: "+err.Error())
			} else {
				if got[ev.OrderID] == nil {
					got[ev.OrderID] = map[int]seen{}
				}
				if st, ok := want[ev.OrderID]; ok && ev.Priority != st.Priority.Or() {
					sum.EventErrors = append(sum.EventErrors, fmt.Sprintf("%s: seq %d says priority %s, the record %s", ev.OrderID, ev.Seq, ev.Priority, st.Priority.Or()))
				}
				s := seen{ev.State, ev.Step}
				if old, ok := got[ev.OrderID][ev.Seq]; ok && old != s {
					sum.EventErrors = append(sum.EventErrors, fmt.Sprintf("%s: seq %d is both %v and %v", ev.OrderID, ev.Seq, old, s))
				}
				got[ev.OrderID][ev.Seq] = s
			}
			done = append(done, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if _, err := d.Stack.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(d.Stack.EventsWatchURL), Entries: done}); err != nil && ctx.Err() == nil {
			return fmt.Errorf("delete status events: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for id, st := range want {
		evs := got[id]
		sum.Events += len(evs)
		for seq := 1; seq <= st.EventSeq; seq++ {
			if _, ok := evs[seq]; !ok {
				sum.EventErrors = append(sum.EventErrors, fmt.Sprintf("%s: no event %d of %d", id, seq, st.EventSeq))
				break
			}
		}
		if len(evs) > st.EventSeq {
			sum.EventErrors = append(sum.EventErrors, fmt.Sprintf("%s: %d events for EventSeq %d", id, len(evs), st.EventSeq))
		}
		if last, ok := evs[st.EventSeq]; ok && last.state != st.ProcessState {
			sum.EventErrors = append(sum.EventErrors, fmt.Sprintf("%s: last event says %s, the record %s", id, last.state, st.ProcessState))
		}
	}
	slices.Sort(sum.EventErrors)
	return nil
}

// attemptBound is the most claims an order can take: each step and each
// undo is claimed at most its threshold (its retry policy's, else
// MaxFailures) times (every claim but the last counts a failure, and the
// threshold-th gives up), a step whose policy waits that many times again
// for each of its waits, a cancel takes one more, and an operator's
// resubmit starts a step's count again.
func (d Demo) attemptBound(st workflow.State) int {
	m, err := d.Stack.workflows.Machine(st.Workflow, d.Stack.policy)
	if err != nil {
		return 2*len(st.Steps)*(1+st.Resubmits)*d.Stack.policy.MaxFailures + 1
	}
	per := 0
	for k, s := range m.Def.Steps {
		rounds := 0
		if r := s.Retry; r != nil && r.OnExhausted == workflow.ExhaustedWait {
			rounds = r.WaitRounds
		}
		per += m.MaxFailuresOf(k) * (rounds + 2)
	}
	return per*(1+st.Resubmits) + 1
}

// maxFailures is the threshold of the step st is at: its retry policy's,
// else the policy's MaxFailures.
func (d Demo) maxFailures(st workflow.State) int {
	m, err := d.Stack.workflows.Machine(st.Workflow, d.Stack.policy)
	if err != nil {
		return d.Stack.policy.MaxFailures
	}
	return m.MaxFailuresOf(st.StepIndex)
}

// checkUndo checks one terminal record against the remote's effects and
// compensations (see Summary.UndoErrors and Summary.LeftApplied).
func (d Demo) checkUndo(st workflow.State, effects, undos map[string]int, sum *Summary) {
	breach := func(format string, args ...any) {
		sum.UndoErrors = append(sum.UndoErrors, st.OrderID+": "+fmt.Sprintf(format, args...))
	}
	// An order that ended nets nothing of what it could undo; one in Error
	// waits for an operator with what it did in place.
	stopped := st.ProcessState == workflow.Compensated || st.ProcessState == workflow.Cancelled
	told := false
	// Compensable by the order's own version.
	def, err := d.Stack.workflows.Resolve(st.Workflow)
	if err != nil {
		breach("%v", err)
	}
	for i, step := range st.Steps {
		key := workflow.IdempotencyKey(st.OrderID, step.Name)
		if undos[key] > 1 {
			breach("%s undone %d times", step.Name, undos[key])
		}
		compensable := i < len(def.Steps) && def.Steps[i].Compensable
		switch {
		case st.ProcessState == workflow.Processed && undos[key] > 0:
			breach("%s of a processed order undone", step.Name)
		case stopped && compensable && effects[key] > undos[key]:
			// Whatever its agent reported: a rejection, an unusable 2xx,
			// a timeout, or a duplicate request that came after.
			sum.LeftApplied = append(sum.LeftApplied, fmt.Sprintf("%s (applied %d, undone %d, order %s)", key, effects[key], undos[key], st.ProcessState))
		case stopped && compensable && effects[key] < undos[key]:
			breach("%s applied %d times and undone %d times", step.Name, effects[key], undos[key])
		case !compensable && effects[key] > 0 && st.ProcessState != workflow.Processed && st.ProcessState != workflow.CompensationFailed:
			// Applied, with no undo, in an order that did not complete: it
			// must not be called Compensated, and it must be told.
			named := strings.HasPrefix(st.LastError, workflow.NotUndoablePrefix) && strings.Contains(st.LastError, "step "+step.Name+" ")
			if st.ProcessState == workflow.Compensated || !named {
				sum.Unreported = append(sum.Unreported, fmt.Sprintf("%s (applied %d, no undo, order %s, last error %q)", key, effects[key], st.ProcessState, st.LastError))
			} else {
				told = true
			}
		}
		if st.ProcessState == workflow.Compensated || st.ProcessState == workflow.Cancelled {
			if step.Compensation == workflow.StepSucceeded {
				sum.UndoneSteps++
			}
			if compensable && step.State == workflow.StepSucceeded && step.Compensation != workflow.StepSucceeded {
				breach("completed step %s not undone (%q)", step.Name, step.Compensation)
			}
		}
	}
	if told {
		sum.NotUndoable++
	}
}

// countAlerts drains the alert watch queue until it has an alert for every
// order in Error (keyed by alert ID), or 15 s have passed: the outbox
// re-sends an unconfirmed alert within AlertTimeout.
func (d Demo) countAlerts(errored map[string]workflow.State, sum *Summary) error {
	seen, dispatch, notices := map[string]bool{}, map[string]bool{}, map[string]bool{}
	enough := func() bool { return len(seen) >= len(errored) }
	err := d.drain(d.Stack.AlertWatchURL, "alerts", 2, enough, func(ctx context.Context, msgs []sqstypes.Message) error {
		for _, m := range msgs {
			var n struct {
				MessageAttributes map[string]struct{ Value string }
			}
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &n); err != nil {
				return fmt.Errorf("alert is not an SNS notification: %w", err)
			}
			sum.AlertDeliveries++
			id := n.MessageAttributes["alertId"].Value
			_, owed := errored[id]
			switch {
			case n.MessageAttributes["severity"].Value == string(workflow.SeverityWarning):
				// A notice of an order that goes on by itself (its step
				// waits): no operator owes it anything.
				notices[id] = true
			case !owed && n.MessageAttributes["kind"].Value == string(alert.KindDispatchFailed):
				// The order's compensation ran; the alert is about the
				// queue that refused it.
				dispatch[id] = true
			default:
				seen[id] = true
			}
			if _, err := d.Stack.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(d.Stack.AlertWatchURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				return fmt.Errorf("delete alert: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	sum.Alerts, sum.DispatchAlerts, sum.WaitNotices = len(seen), len(dispatch), len(notices)
	for id, st := range errored {
		if !seen[id] {
			sum.MissingAlerts = append(sum.MissingAlerts, fmt.Sprintf("%s(AlertPending=%v)", st.OrderID, st.AlertPending))
		}
	}
	slices.Sort(sum.MissingAlerts)
	return nil
}

// drain hands what a watch queue holds to handle, batch after batch, until
// enough holds and quiet receives in a row found nothing, or 15 s have
// passed. handle deletes what it took.
func (d Demo) drain(url, what string, quiet int, enough func() bool, handle func(context.Context, []sqstypes.Message) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for empty := 0; ctx.Err() == nil && (!enough() || empty < quiet); {
		out, err := d.Stack.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return fmt.Errorf("read %s: %w", what, err)
		}
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		if err := handle(ctx, out.Messages); err != nil {
			return err
		}
	}
	return nil
}

// orphans scans both tables: every order has its state record and every
// state record its order (Submission writes them in one transaction).
func (d Demo) orphans() ([]string, error) {
	// keys maps each item's key to the order its Idempotency-Key made, for
	// a key item of the orders table, or to "".
	keys := func(table string) (map[string]string, error) {
		out := map[string]string{}
		p := dynamodb.NewScanPaginator(d.Stack.DynamoDB, &dynamodb.ScanInput{
			TableName: aws.String(table), ProjectionExpression: aws.String("#k, #o"),
			ExpressionAttributeNames: map[string]string{"#k": statestore.KeyOrderID, "#o": statestore.KeyOrderAttr},
		})
		for p.HasMorePages() {
			page, err := p.NextPage(context.Background())
			if err != nil {
				return nil, fmt.Errorf("scan %s: %w", table, err)
			}
			for _, item := range page.Items {
				if v, ok := item[statestore.KeyOrderID].(*ddbtypes.AttributeValueMemberS); ok {
					o, _ := item[statestore.KeyOrderAttr].(*ddbtypes.AttributeValueMemberS)
					out[v.Value] = ""
					if o != nil {
						out[v.Value] = o.Value
					}
				}
			}
		}
		return out, nil
	}
	orders, err := keys(d.Stack.Sys.Tables.Orders)
	if err != nil {
		return nil, err
	}
	states, err := keys(d.Stack.Sys.Tables.State)
	if err != nil {
		return nil, err
	}
	var orphans []string
	for id, made := range orders {
		_, state := states[id]
		switch {
		case made != "":
			if _, ok := states[made]; !ok {
				orphans = append(orphans, "key "+id+" of order "+made+", which has no state")
			}
		case !state:
			orphans = append(orphans, "order "+id+" without state")
		}
	}
	for id := range states {
		if _, ok := orders[id]; !ok {
			orphans = append(orphans, "state "+id+" without order")
		}
	}
	slices.Sort(orphans)
	return orphans, nil
}

// terminal counts the terminal state records, with one scan.
func (d Demo) terminal(ctx context.Context) (int, error) {
	p := dynamodb.NewScanPaginator(d.Stack.DynamoDB, &dynamodb.ScanInput{
		TableName:                aws.String(d.Stack.Sys.Tables.State),
		ProjectionExpression:     aws.String("#s"),
		ExpressionAttributeNames: map[string]string{"#s": "ProcessState"},
	})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return n, fmt.Errorf("scan %s: %w", d.Stack.Sys.Tables.State, err)
		}
		for _, item := range page.Items {
			if v, ok := item["ProcessState"].(*ddbtypes.AttributeValueMemberS); ok && workflow.ProcessState(v.Value).Terminal() {
				n++
			}
		}
	}
	return n, nil
}

// addCodeEffects adds the code steps' effects to the remote's: a key whose
// step succeeded has its effect, and its undo when an undo removed it and
// nothing put it back. Runs after the first are the ledger's window
// (Summary.CodeReruns); runs at once are a breach.
func (d Demo) addCodeEffects(effects, undos map[string]int, sum *Summary) {
	if d.Stack.CodeEffects == nil {
		return
	}
	runs, undone, present, concurrent := d.Stack.CodeEffects.Snapshot()
	for key, n := range runs {
		effects[key] = 1
		sum.CodeSteps++
		sum.CodeReruns += n - 1
		if !present[key] && undone[key] > 0 {
			undos[key] = 1
		}
	}
	for _, key := range concurrent {
		sum.DuplicateEffects = append(sum.DuplicateEffects, key+" (run twice at once)")
	}
}
