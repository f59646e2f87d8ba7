// Package actortest holds the doubles the actors' tests share: the
// in-memory state store behind a recording layer, and a queue sender and an
// alert publisher that keep what they are given. All of them write to one
// call log, so a test asserts the order of everything an actor did (the
// write before the dispatch, the publish before its confirmation) and a
// regression that reorders, adds or drops a call fails it.
//
// The store is memstore's, which passes the store's conformance suite: the
// doubles decide nothing, the records they hold are the ones DynamoDB would.
package actortest

import (
	"context"
	"encoding/json"
	"errors"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/testkit/memstore"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// Order IDs for the tests: valid, and in an order that is neither their
// listing's (by deadline, then ID) nor their shards'.
const (
	OrderA = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	OrderB = "2b1f0c8e-5a43-4d6e-9f21-0c7a8e3d4b56"
	OrderC = "d4a7e2f1-0b3c-4e5d-8f6a-7b8c9d0e1f2a"
	OrderD = "0e6b3c9a-1f2d-4a5b-8c7d-9e0f1a2b3c4d"
	OrderE = "5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d"
)

// Sample values of what the stack deploys the Scheduler and the Supervisor
// with.
const (
	SampleSchedulerQueue = "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-scheduler"
	SampleTopicARN       = "arn:aws:sns:eu-west-1:123456789012:sas-alerts"
)

// DeployedEnv is the environment the stack gives the Scheduler and the
// Supervisor for the settings they share (followup.Config), plus kv's
// pairs.
func DeployedEnv(kv ...string) map[string]string {
	env := map[string]string{
		topology.EnvOrdersTable:       "sas-orders",
		topology.EnvStateTable:        "sas-state",
		topology.EnvSchedulerQueueURL: SampleSchedulerQueue,
		topology.EnvAlertTopicARN:     SampleTopicARN,
	}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

// Faults the tests inject: the store throttled, the queue and the topic
// unavailable.
var (
	ErrStore = errors.New("dynamodb: ProvisionedThroughputExceededException")
	ErrQueue = errors.New("sqs: ServiceUnavailable")
	ErrSNS   = errors.New("sns: InternalError")
)

// Doubles are one test's store, sender and publisher, writing to one log.
type Doubles struct {
	Calls   *Calls
	Store   *Store
	Send    *Sender
	Publish *Publisher
}

// New returns empty doubles that succeed at everything; a test sets their
// faults (Store.Fault, Store.Beaten, Send.Fail, Publish.Fail) before it runs
// the actor.
func New() Doubles {
	calls := &Calls{}
	return Doubles{
		Calls:   calls,
		Store:   &Store{Store: memstore.New(), calls: calls},
		Send:    &Sender{calls: calls},
		Publish: &Publisher{calls: calls},
	}
}

// Calls is the log of the calls the doubles saw, one line each: "Apply
// <orderId> <Label>", "GetState <orderId>", "PeekHead <orderId>", "Expired", "Send <queue name>
// <orderId>", "Publish <kind> <orderId>". It is safe for concurrent use.
type Calls struct {
	mu    sync.Mutex
	lines []string
}

func (c *Calls) add(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, line)
}

// Lines returns the calls so far, in order; never nil.
func (c *Calls) Lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string{}, c.lines...)
}

// Check fails the test unless the calls so far are want, in order.
func (c *Calls) Check(tb testing.TB, want ...string) {
	tb.Helper()
	if got := c.Lines(); !slices.Equal(got, want) {
		tb.Errorf("calls =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// Label names a change in the call log: its Transition, or for the two
// changes that have none, "alert-resent" (the Supervisor publishing an
// alert nobody confirmed) and "alert-sent" (an alert's confirmation).
func Label(c workflow.Change) string {
	switch {
	case c.Transition != "":
		return string(c.Transition)
	case c.Alert != "":
		return "alert-resent"
	}
	return "alert-sent"
}

// Store is a memstore.Store that logs the calls the actors make (Apply,
// GetState, Expired) and keeps what each Apply was asked and answered. Set
// the embedded store's Fault to fail a call, Put to start from a record.
type Store struct {
	*memstore.Store
	calls *Calls

	// ListAhead, when set, answers Expired as of that much later than the
	// caller asked, so records not due yet reach the caller, as from an
	// index read by a clock running ahead; the actor must leave them alone.
	ListAhead time.Duration

	mu      sync.Mutex
	race    func(workflow.Change) bool
	applies []Applied
	listed  []Listing
}

// Applied is one Apply: the change asked for, and the record written or the
// error.
type Applied struct {
	Change workflow.Change
	State  workflow.State
	Err    error
}

// Listing is one Expired call: the instant and the limit asked for.
type Listing struct {
	Now   time.Time
	Limit int
}

// Apply logs the change and applies it.
func (s *Store) Apply(ctx context.Context, c workflow.Change) (workflow.State, error) {
	s.calls.add("Apply " + c.OrderID + " " + Label(c))
	s.mu.Lock()
	race := s.race
	s.mu.Unlock()
	if race != nil && race(c) {
		// Another actor commits the same change first, unlogged.
		_, _ = s.Store.Apply(ctx, c)
	}
	st, err := s.Store.Apply(ctx, c)
	s.mu.Lock()
	s.applies = append(s.applies, Applied{Change: c, State: st, Err: err})
	s.mu.Unlock()
	return st, err
}

// Beaten makes every change labelled label (of orderID, or of any order
// when it is "") lose its race: another actor applies the same change just
// before, so this one's fence refuses it, as the second of two Supervisors
// or of two alert confirmations is refused.
func (s *Store) Beaten(label, orderID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.race = func(c workflow.Change) bool {
		return Label(c) == label && (orderID == "" || c.OrderID == orderID)
	}
}

// GetState logs the read and reads.
func (s *Store) GetState(ctx context.Context, orderID string) (workflow.State, error) {
	s.calls.add("GetState " + orderID)
	return s.Store.GetState(ctx, orderID)
}

// PeekHead logs the read and reads.
func (s *Store) PeekHead(ctx context.Context, orderID string) (workflow.State, error) {
	s.calls.add("PeekHead " + orderID)
	return s.Store.PeekHead(ctx, orderID)
}

// Record reads the record of orderID as the store holds it, without
// logging the read (a Fault still applies); the test fails if it cannot.
func (s *Store) Record(tb testing.TB, orderID string) workflow.State {
	tb.Helper()
	st, err := s.Store.GetState(context.Background(), orderID)
	if err != nil {
		tb.Fatalf("read %s: %v", orderID, err)
	}
	return st
}

// Expired logs the query and runs it, ListAhead later.
func (s *Store) Expired(ctx context.Context, now time.Time, limit int) ([]workflow.State, error) {
	s.calls.add("Expired")
	s.mu.Lock()
	s.listed = append(s.listed, Listing{Now: now, Limit: limit})
	s.mu.Unlock()
	return s.Store.Expired(ctx, now.Add(s.ListAhead), limit)
}

// Applies returns every Apply so far, in order.
func (s *Store) Applies() []Applied {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.applies)
}

// Changes returns the changes of the Applies labelled label, in order.
func (s *Store) Changes(label string) []workflow.Change {
	var out []workflow.Change
	for _, a := range s.Applies() {
		if Label(a.Change) == label {
			out = append(out, a.Change)
		}
	}
	return out
}

// Listings returns every Expired call so far.
func (s *Store) Listings() []Listing {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.listed)
}

// Fault returns a memstore Fault failing with err the calls to method for
// one of orderIDs (any order when none is named) and, for Apply, of changes
// labelled label (any when it is "").
func Fault(err error, method, label string, orderIDs ...string) func(string, workflow.Change) error {
	return func(m string, c workflow.Change) error {
		switch {
		case m != method,
			method == "Apply" && label != "" && Label(c) != label,
			len(orderIDs) > 0 && !slices.Contains(orderIDs, c.OrderID):
			return nil
		}
		return err
	}
}

// Sent is one message a Sender was given.
type Sent struct {
	QueueURL, Body string
	Delay          time.Duration
}

// Sender is an SQS sender that logs and keeps every message; Fail, when
// set, decides its answer.
type Sender struct {
	Fail  func(queueURL, body string) error
	calls *Calls

	mu   sync.Mutex
	sent []Sent
}

// Send logs the message as "Send <queue name> <orderId>" and keeps it.
func (s *Sender) Send(_ context.Context, queueURL, body string, delay time.Duration) error {
	var m struct {
		OrderID string `json:"orderId"`
	}
	if json.Unmarshal([]byte(body), &m) != nil || m.OrderID == "" {
		m.OrderID = "?"
	}
	s.calls.add("Send " + path.Base(queueURL) + " " + m.OrderID)
	s.mu.Lock()
	s.sent = append(s.sent, Sent{QueueURL: queueURL, Body: body, Delay: delay})
	s.mu.Unlock()
	if s.Fail != nil {
		return s.Fail(queueURL, body)
	}
	return nil
}

// Sent returns every message so far, in order.
func (s *Sender) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// Publisher is an alert publisher that logs and keeps every alert; Fail,
// when set, decides its answer.
type Publisher struct {
	Fail  func(alert.Alert) error
	calls *Calls

	mu        sync.Mutex
	published []alert.Alert
}

var _ alert.Sender = (*Publisher)(nil)

// Publish logs the alert as "Publish <kind> <orderId>" and keeps it.
func (p *Publisher) Publish(_ context.Context, a alert.Alert) error {
	p.calls.add("Publish " + string(a.Kind) + " " + a.OrderID)
	p.mu.Lock()
	p.published = append(p.published, a)
	p.mu.Unlock()
	if p.Fail != nil {
		return p.Fail(a)
	}
	return nil
}

// Published returns every alert so far, in order.
func (p *Publisher) Published() []alert.Alert {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.published)
}

// Digest is what a test compares of a record in one go: where it is, under
// which Attempt, how often its step failed, whether a Scheduler holds it and
// whether it still owes an alert.
type Digest struct {
	State     workflow.ProcessState
	Step      int
	Attempt   int
	Failures  int
	Locked    bool
	AlertOwed bool
}

// DigestOf digests st.
func DigestOf(st workflow.State) Digest {
	return Digest{State: st.ProcessState, Step: st.StepIndex, Attempt: st.Attempt, Failures: st.FailureCount,
		Locked: st.LockedBy != "", AlertOwed: st.AlertPending}
}
