package localstack

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack/chaos"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// Every retry and stale reply is put down to one cause, by what the run
// recorded of its claim: a fault that kept an Agent from the request, the
// Agent's queue, the reply's way and queue, a fault the Agent met, or
// nothing found.
func TestEachLateClaimHasOneCause(t *testing.T) {
	t.Parallel()
	// The claim: order o, attempt 2 of charge-payment, 3 s budget and 5 s
	// allowance, claimed at t0; its deadline is t0+8s.
	t0 := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	const budget, lease = 3 * time.Second, 8 * time.Second
	deadline := t0.Add(lease)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	req := message.AgentRequest{OrderID: "o", Step: "charge-payment", StepIndex: 1, Attempt: 2, CompleteBy: deadline}
	retry := claimEvent{at: deadline.Add(30 * time.Millisecond), order: "o", step: "charge-payment", attempt: 2}
	type took struct {
		after   time.Duration
		crashed bool
	}
	tests := []struct {
		name    string
		took    []took        // deliveries of the request, after the claim
		replied time.Duration // when its reply was sent, after the claim; 0: never
		marks   []mark
		ev      claimEvent
		lag     bool
		want    Cause
	}{
		{name: "taken at once, nothing injected, no reply", took: []took{{0, false}}, ev: retry, want: CauseNone},
		{name: "never taken", ev: retry, want: CauseQueue},
		{name: "taken after the deadline", took: []took{{9 * time.Second, false}}, ev: retry, want: CauseQueue},
		{name: "taken with less than half the budget left", took: []took{{6600 * time.Millisecond, false}}, ev: retry, want: CauseQueue},
		{name: "taken with half the budget left", took: []took{{6500 * time.Millisecond, false}}, ev: retry, want: CauseNone},
		// Before, the Supervisor's retry of a claim that had met the
		// replica fault was the fault's, whatever else had happened to it.
		{name: "met a replica at fault, taken too late", took: []took{{7 * time.Second, false}},
			marks: []mark{{cause: CauseReplica, from: at(7100 * time.Millisecond), order: "o", attempt: 2}}, ev: retry, want: CauseQueue},
		{name: "met a replica at fault, replied in time", took: []took{{time.Second, false}}, replied: 2 * time.Second,
			marks: []mark{{cause: CauseReplica, from: at(1100 * time.Millisecond), order: "o", attempt: 2}}, ev: retry, want: CauseReplyQueue},
		{name: "met a replica at fault in time, no reply", took: []took{{time.Second, false}},
			marks: []mark{{cause: CauseReplica, from: at(1100 * time.Millisecond), order: "o", attempt: 2}}, ev: retry, want: CauseReplica},
		{name: "replied in time, the reply late", took: []took{{0, false}}, replied: time.Second, ev: retry, want: CauseReplyQueue},
		{name: "replied after the deadline", took: []took{{0, false}}, replied: 9 * time.Second, ev: retry, want: CauseNone},
		{name: "replied after the deadline, agents lagging", took: []took{{0, false}}, replied: 9 * time.Second, ev: retry, lag: true, want: CauseAgentLag},
		{name: "the invocation killed, the request back after the deadline", took: []took{{100 * time.Millisecond, true}, {10 * time.Second, false}},
			ev: retry, want: CauseCrash},
		{name: "a killed invocation after the deadline is not why", took: []took{{0, false}, {10 * time.Second, true}},
			ev: retry, want: CauseNone},
		{name: "the remote hung on the step, taken in time", took: []took{{0, false}},
			marks: remoteMarks([]remotesim.Injection{{At: at(time.Second), OrderID: "o", Step: "charge-payment", Fault: remotesim.Hang}}),
			ev:    retry, want: remoteCause(remotesim.Hang)},
		{name: "the remote hung on the step, taken too late", took: []took{{7 * time.Second, false}},
			marks: remoteMarks([]remotesim.Injection{{At: at(7100 * time.Millisecond), OrderID: "o", Step: "charge-payment", Fault: remotesim.Hang}}),
			ev:    retry, want: CauseQueue},
		{name: "remote faults of another step, order, undo or claim are not why", took: []took{{0, false}},
			marks: remoteMarks([]remotesim.Injection{
				{At: at(time.Second), OrderID: "o", Step: "reserve-inventory", Fault: remotesim.Hang},
				{At: at(time.Second), OrderID: "p", Step: "charge-payment", Fault: remotesim.Hang},
				{At: at(time.Second), OrderID: "o", Step: "charge-payment", Undo: true, Fault: remotesim.Hang},
				{At: at(-time.Second), OrderID: "o", Step: "charge-payment", Fault: remotesim.Hang},
				{At: deadline.Add(time.Second), OrderID: "o", Step: "charge-payment", Fault: remotesim.Hang},
			}), ev: retry, want: CauseNone},
		{name: "the first of two faults met", took: []took{{0, false}},
			marks: slices.Concat(remoteMarks([]remotesim.Injection{{At: at(2 * time.Second), OrderID: "o", Step: "charge-payment", Fault: remotesim.Hang}}),
				[]mark{{cause: CauseReplica, from: at(time.Second), order: "o", attempt: 2}}),
			ev: retry, want: CauseReplica},
		{name: "killed after its claim, never dispatched",
			marks: chaosMarks([]chaos.Strike{{At: t0, Point: chaos.KillAfterClaim, OrderID: "o", Attempt: 2}}), ev: retry, want: Cause(chaos.KillAfterClaim)},
		{name: "a kill of another claim is not why",
			marks: chaosMarks([]chaos.Strike{{At: t0, Point: chaos.KillAfterClaim, OrderID: "o", Attempt: 1}}), ev: retry, want: CauseQueue},
		{name: "a delayed request is why it was late", took: []took{{7 * time.Second, false}},
			marks: chaosMarks([]chaos.Strike{{At: t0, Point: chaos.DelaySend, OrderID: "o", Attempt: 2, Message: string(message.KindAgentRequest)}}),
			ev:    retry, want: Cause(chaos.DelaySend)},
		{name: "a delayed reply", took: []took{{0, false}}, replied: time.Second,
			marks: chaosMarks([]chaos.Strike{{At: at(time.Second), Point: chaos.DelaySend, OrderID: "o", Attempt: 2, Message: string(message.KindAgentReply)}}),
			ev:    claimEvent{at: deadline.Add(time.Second), order: "o", step: "charge-payment", attempt: 2}, want: Cause(chaos.DelaySend)},
		{name: "a throttled commit of the reply", took: []took{{0, false}}, replied: time.Second,
			marks: chaosMarks([]chaos.Strike{{At: at(time.Second), Point: chaos.ThrottleCommit, OrderID: "o", Attempt: 2}}),
			ev:    retry, want: Cause(chaos.ThrottleCommit)},
		{name: "an Agent killed before its reply", took: []took{{0, false}},
			marks: chaosMarks([]chaos.Strike{{At: at(time.Second), Point: chaos.KillBeforeReply, OrderID: "o", Attempt: 2, Message: string(message.KindAgentReply)}}),
			ev:    retry, want: Cause(chaos.KillBeforeReply)},
		{name: "chaos's strikes that end no claim are not why", took: []took{{0, false}},
			marks: chaosMarks([]chaos.Strike{
				{At: at(time.Second), Point: chaos.KillAfterPublish, OrderID: "o"},
				{At: at(time.Second), Point: chaos.DelaySend, OrderID: "o", Attempt: 2, Message: string(message.KindDeadline)},
			}), ev: retry, want: CauseNone},
		{name: "an engine outage during the claim", took: []took{{7 * time.Second, false}},
			marks: []mark{{cause: CauseOutage, from: at(-time.Second), to: at(time.Second), phase: phaseRequest}}, ev: retry, want: CauseOutage},
		{name: "an engine outage before the claim", took: []took{{0, false}},
			marks: []mark{{cause: CauseOutage, from: at(-3 * time.Second), to: at(-time.Second), phase: phaseRequest}}, ev: retry, want: CauseNone},
		{name: "retried before its deadline", took: []took{{0, false}},
			ev: claimEvent{at: deadline.Add(-time.Second), order: "o", step: "charge-payment", attempt: 2}, want: CauseEarly},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var c claims
			for _, d := range tt.took {
				c.delivered(req, budget, t0.Add(d.after), d.crashed)
			}
			if tt.replied > 0 {
				c.replied("o", 2, t0.Add(tt.replied))
			}
			a := newAttribution(c.snapshot(), tt.marks, func(string) time.Duration { return lease }, tt.lag)
			if got := a.cause(tt.ev); got != tt.want {
				t.Errorf("cause %q, want %q", got, tt.want)
			}
		})
	}
}

// replicaLog is a run's log of replicas at fault and the tries of claims
// of order o at step s, for the Tap: each line 10 ms after the one before,
// unless wait says otherwise.
type replicaLog struct {
	buf bytes.Buffer
	log *slog.Logger
	now time.Time
}

func newReplicaLog() *replicaLog {
	l := &replicaLog{now: time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)}
	l.log = slog.New(slog.NewJSONHandler(&l.buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			l.now = l.now.Add(10 * time.Millisecond)
			return slog.Time(slog.TimeKey, l.now)
		}
		return a
	}}))
	return l
}

func (l *replicaLog) wait(d time.Duration) { l.now = l.now.Add(d) }

func (l *replicaLog) atFault(host string, slow time.Duration) {
	l.log.Warn(msgReplicaAtFault, slog.String("replica", "http://"+host), slog.Duration("slow", slow))
}

func (l *replicaLog) healed(host string) {
	l.log.Info(msgReplicaHealed, slog.String("replica", "http://"+host))
}

func (l *replicaLog) try(attempt int, host string) {
	l.log.Warn(msgTryFailed, slog.String("agentStep", "s"), slog.String("orderId", "o"), slog.String("step", "s"),
		slog.Int("attempt", attempt), slog.String("endpoint", host))
}

func (l *replicaLog) breaker(msg, host string) {
	l.log.Warn(msg, slog.String("agentStep", "s"), slog.String("endpoint", host), slog.Bool("compensate", false))
}

// A try sent back to a replica at fault after one of its claim failed
// there is a repeat, unless the routing had nowhere better to go.
func TestTapCountsTriesSentBackToAReplicaAtFault(t *testing.T) {
	t.Parallel()
	const a, b = "127.0.0.1:1", "127.0.0.1:2"
	tests := []struct {
		name         string
		write        func(l *replicaLog)
		tries, twice int
	}{
		{"once at fault, then elsewhere", func(l *replicaLog) { l.atFault(a, 0); l.try(1, a) }, 1, 0},
		{"twice at fault", func(l *replicaLog) { l.atFault(a, 0); l.try(1, a); l.try(1, a) }, 2, 1},
		{"three times at fault", func(l *replicaLog) { l.atFault(a, 0); l.try(1, a); l.try(1, a); l.try(1, a) }, 3, 2},
		{"two claims once each", func(l *replicaLog) { l.atFault(a, 0); l.try(1, a); l.try(2, a) }, 2, 0},
		{"the other replica failed too", func(l *replicaLog) { l.atFault(a, 0); l.try(1, a); l.try(1, b); l.try(1, a) }, 2, 0},
		{"the other replica's breaker open", func(l *replicaLog) {
			l.breaker(msgBreakerOpened, b)
			l.atFault(a, 0)
			l.try(1, a)
			l.try(1, a)
		}, 2, 0},
		{"the other replica's breaker closed again", func(l *replicaLog) {
			l.breaker(msgBreakerOpened, b)
			l.breaker(msgBreakerClosed, b)
			l.atFault(a, 0)
			l.try(1, a)
			l.try(1, a)
		}, 2, 1},
		// The routing avoids a replica a try of the claim failed on,
		// whatever made it fail.
		{"failed there before the fault too", func(l *replicaLog) { l.try(1, a); l.atFault(a, 0); l.try(1, a) }, 1, 1},
		// A line comes a moment after its try failed; a slow replica
		// fails the tries it held for up to their timeout after it healed.
		{"just after it healed", func(l *replicaLog) { l.atFault(a, 0); l.try(1, a); l.healed(a); l.try(2, a) }, 2, 0},
		{"long after it healed", func(l *replicaLog) { l.atFault(a, 0); l.try(1, a); l.healed(a); l.wait(time.Second); l.try(2, a) }, 1, 0},
		{"a slow replica, within its hold after it healed", func(l *replicaLog) {
			l.atFault(a, time.Second)
			l.try(1, a)
			l.healed(a)
			l.wait(900 * time.Millisecond)
			l.try(1, a)
		}, 2, 1},
		{"a slow replica, past its hold after it healed", func(l *replicaLog) {
			l.atFault(a, time.Second)
			l.try(1, a)
			l.healed(a)
			l.wait(1200 * time.Millisecond)
			l.try(1, a)
		}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newReplicaLog()
			tt.write(l)
			tap := &Tap{}
			if _, err := tap.Write(l.buf.Bytes()); err != nil {
				t.Fatal(err)
			}
			if tries, twice := tap.ReplicaFaults(); tries != tt.tries || twice != tt.twice {
				t.Errorf("failed tries %d, sent back %d; want %d, %d\n%s", tries, twice, tt.tries, tt.twice, l.buf.String())
			}
		})
	}
}

// The Tap keeps each retry and stale reply with its claim, and notes the
// claims a replica at fault held up: those whose last failed try was on
// it.
func TestTapKeepsRetriesAndStaleRepliesByClaim(t *testing.T) {
	t.Parallel()
	l := newReplicaLog()
	l.atFault("127.0.0.1:1", 0)
	l.try(3, "127.0.0.1:1")
	l.try(4, "127.0.0.1:1") // then held up elsewhere
	l.try(4, "127.0.0.1:2")
	l.log.Info("retried", slog.String("orderId", "o"), slog.String("step", "s"), slog.Int("attempt", 3),
		workflow.TransitionRetried.Attr(), slog.Group("handback", slog.Bool("compensate", true)))
	l.log.Warn("stale reply dropped", slog.String("orderId", "o"), slog.String("step", "s"), slog.Int("attempt", 2),
		slog.Bool("compensate", false), workflow.TransitionStaleReply.Attr())
	tap := &Tap{}
	for line := range bytes.Lines(l.buf.Bytes()) {
		if _, err := tap.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	retries, stales := tap.events()
	if len(retries) != 1 || retries[0].order != "o" || retries[0].attempt != 3 || !retries[0].undo || retries[0].at.IsZero() {
		t.Errorf("retries %+v", retries)
	}
	if len(stales) != 1 || stales[0].attempt != 2 || stales[0].undo {
		t.Errorf("stale replies %+v", stales)
	}
	if m := tap.replicaMarks(); len(m) != 1 || m[0].order != "o" || m[0].attempt != 3 || m[0].cause != CauseReplica {
		t.Errorf("replica marks %+v", m)
	}
	if got := fmt.Sprint(tap.Counts()); got != "map[retried:1 stale-reply:1]" {
		t.Errorf("counts %s", got)
	}
}
