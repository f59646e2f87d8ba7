package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/jsonwire"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/step"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

// ReplySender sends a message to a queue; shared/queue's *Sender is one.
type ReplySender interface {
	Send(ctx context.Context, queueURL, body string, delay time.Duration) error
}

// Endpointer is implemented by Services that call several remote endpoints,
// so each gets its own circuit breaker. Other Services get one breaker per
// step.
type Endpointer interface {
	Endpoint(req Request) string
}

// Handler processes batches of AgentRequest messages from SQS.
type Handler struct {
	cfg       Config
	svc       Service
	replies   ReplySender
	clk       clock.Clock
	log       *slog.Logger
	sleep     SleepFunc
	backoff   Backoff
	breakers  *Breakers
	router    *Router
	intn      func(n int) int
	alerts    alert.Sender
	redeliver Redeliverer
	workers   Workers
}

// Workers runs work(ctx, i) for every i in [0, n), at most limit at a
// time, and returns once every call has returned. Handle runs a batch's
// records through it, each with the context its call is given.
type Workers func(ctx context.Context, n, limit int, work func(ctx context.Context, i int))

// WithWorkers replaces how Handle runs the records of a batch at once: by
// default each on a goroutine of its own. The deterministic simulation runs
// them as coroutines of the invocation, which its scheduler orders.
func WithWorkers(run Workers) Option { return func(h *Handler) { h.workers = run } }

// goroutines is the default Workers: a goroutine per call, limit at once,
// started in order.
func goroutines(ctx context.Context, n, limit int, work func(ctx context.Context, i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, limit)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			work(ctx, i)
		})
	}
	wg.Wait()
}

// Redeliverer brings a failed message back after a wait of the handler's
// choosing instead of the queue's visibility timeout.
type Redeliverer interface {
	After(ctx context.Context, rec events.SQSMessage, wait time.Duration) error
}

// WithRedelivery brings a request whose reply could not be sent back within
// seconds, so it runs again (the remote replays its result under the same
// key) and replies before CompleteBy; without it the request waits out the
// queue's visibility timeout, past the step's budget.
func WithRedelivery(r Redeliverer) Option { return func(h *Handler) { h.redeliver = r } }

// Option changes a Handler built by New.
type Option func(*Handler)

// WithSleep replaces the real wait between tries, so tests never wait.
func WithSleep(s SleepFunc) Option { return func(h *Handler) { h.sleep = s } }

// WithJitter replaces the random source of the backoff (values in [0, 1)).
func WithJitter(rnd func() float64) Option { return func(h *Handler) { h.backoff.Rand = rnd } }

// WithAlerts reports a poison request on its last receive (Config's
// MaxReceiveCount) to operators.
func WithAlerts(a alert.Sender) Option { return func(h *Handler) { h.alerts = a } }

// WithBreakers shares a set of breakers, e.g. to inspect them in tests.
func WithBreakers(b *Breakers) Option { return func(h *Handler) { h.breakers = b } }

// WithRouteDraw replaces the random source that spreads tries over tied
// replicas (values in [0, n)).
func WithRouteDraw(intn func(n int) int) Option { return func(h *Handler) { h.intn = intn } }

// New builds a Handler, reporting every problem of cfg and of the ports at
// once. The Lambda builds it once, so breakers keep their state across the
// invocations of a warm container. It adds agentStep to every log line, so
// callers do not.
func New(cfg Config, svc Service, replies ReplySender, deps actor.Deps, opts ...Option) (*Handler, error) {
	err := actor.Check("agent", cfg.Validate(), actor.Port{Name: "Service", Value: svc}, actor.Port{Name: "ReplySender", Value: replies})
	if err != nil {
		return nil, err
	}
	deps = deps.WithDefaults()
	if cfg.MaxOutputBytes == 0 {
		cfg.MaxOutputBytes = workflow.DefaultMaxOutputBytes
	}
	h := &Handler{
		cfg:     cfg,
		svc:     svc,
		replies: replies,
		clk:     deps.Clock,
		log:     deps.Log.With(slog.String("agentStep", cfg.Step)),
		sleep:   clock.Sleep,
		backoff: Backoff{Base: cfg.RetryBase, Max: cfg.RetryMax, Rand: rand.Float64},
		workers: goroutines,
	}
	for _, o := range opts {
		o(h)
	}
	if h.breakers == nil {
		h.breakers = NewBreakers(cfg.BreakerFailures, cfg.BreakerCooldown, h.clk)
	}
	h.breakers.OnChange(h.breakerChanged)
	// A failure costs about a timeout, and a replica's record fades over a
	// cooldown, the time its breaker would keep it out.
	h.router = NewRouter(h.breakers, h.clk, cfg.RemoteTimeout, cfg.BreakerCooldown, h.intn)
	return h, nil
}

// breakerChanged logs an endpoint's breaker opening or closing: the line an
// operator reads of a replica going down or coming back.
func (h *Handler) breakerChanged(endpoint string, to BreakerState) {
	switch to {
	case Open:
		h.log.Warn("breaker opened", slog.String("endpoint", Host(endpoint)), slog.Bool("compensate", strings.HasSuffix(endpoint, "/compensate")),
			slog.Duration("cooldown", h.cfg.BreakerCooldown))
	case Closed:
		h.log.Info("breaker closed", slog.String("endpoint", Host(endpoint)), slog.Bool("compensate", strings.HasSuffix(endpoint, "/compensate")))
	}
}

// disposition is what becomes of a record's message.
type disposition int

const (
	// done: delete the message (processed, or deliberately dropped).
	done disposition = iota
	// redeliver: list it in BatchItemFailures; the queue delivers it again
	// and, past maxReceiveCount, moves it to the dead-letter queue.
	redeliver
)

// Handle processes a batch concurrently and reports the records to deliver
// again. It never returns an error: that would redeliver the whole batch,
// including the records that were done.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	log := actor.InvocationLog(ctx, h.log)
	var (
		resp events.SQSEventResponse
		mu   sync.Mutex
	)
	h.workers(ctx, len(ev.Records), h.cfg.Concurrency, func(ctx context.Context, i int) {
		rec := ev.Records[i]
		if h.handleRecord(ctx, log, rec) == redeliver {
			mu.Lock()
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			mu.Unlock()
		}
	})
	return resp, nil
}

func (h *Handler) handleRecord(ctx context.Context, log *slog.Logger, rec events.SQSMessage) (d disposition) {
	ctx, log, span := trace.BeginSQS(ctx, log.With(slog.String("messageId", rec.MessageId)), rec, "agent "+h.cfg.Step)
	defer func() { span.End(d != done) }()
	// A bug must not take the rest of the batch down; the message goes back
	// to the queue and, if it keeps failing, to the dead-letter queue.
	defer func() {
		if p := recover(); p != nil {
			log.Error(actor.BatchItemFailed, slog.String("reason", "panic while handling a record"), slog.String("panic", fmt.Sprint(p)))
			d = redeliver
		}
	}()

	m, err := message.DecodeAgentRequest(rec.Body)
	if err != nil {
		return h.poison(ctx, log, rec, "poison agent request", err, "receiveCount", rec.Attributes["ApproximateReceiveCount"])
	}
	log = log.With(slog.String("orderId", m.OrderID), slog.String("step", m.Step), slog.Int("stepIndex", m.StepIndex), slog.Int("attempt", m.Attempt))
	span.Annotate("order_id", m.OrderID)
	if m.Step != h.cfg.Step {
		err := fmt.Errorf("%w: a request for step %q reached the %q agent", message.ErrPoison, m.Step, h.cfg.Step)
		return h.poison(ctx, log, rec, "poison agent request: the request is for another step", err)
	}
	if !h.clk.Now().Before(m.CompleteBy) {
		log.Info("deadline passed, sending nothing", slog.Time("completeBy", m.CompleteBy))
		return done
	}

	if m.Action.Undo() {
		log = log.With(slog.Bool("compensate", true))
	}
	var out json.RawMessage
	var at triedAt
	if _, ok := h.svc.(step.Undoer); m.Action.Undo() && !ok {
		err = step.Reject(CodeNotCompensable, "the agent for step "+m.Step+" cannot undo it")
	} else {
		out, at, err = h.perform(ctx, log, RequestFrom(m), m.CompleteBy)
	}
	if errors.Is(err, ErrRedeliver) {
		// As a Lambda that died in the try: no reply, and the message comes
		// back after its visibility timeout.
		log.Warn(actor.BatchItemFailed, slog.String("reason", "the try ended without an answer"), slog.Any("error", err))
		return redeliver
	}

	// A late agent stays silent: the Supervisor has taken over the step, and
	// a reply now would race its recovery.
	if !h.clk.Now().Before(m.CompleteBy) {
		log.Warn("deadline passed, sending nothing", slog.Time("completeBy", m.CompleteBy), slog.Any("error", err))
		return done
	}
	var reply message.AgentReply
	switch {
	case err == nil:
		reply = h.succeeded(log, m, out)
	case step.IsPermanent(err):
		reply = failed(m, FaultOf(err))
		log.Warn("step failed permanently", slog.String("endpoint", at.host()), slog.Any("error", err), slog.String("faultCode", reply.Fault.Code))
	default:
		// Nothing to say before the deadline; the Supervisor recovers the step.
		log.Warn("step failed transiently until the deadline, sending nothing", slog.String("endpoint", at.host()), slog.Any("error", err))
		return done
	}
	return h.sendReply(ctx, log, rec, m, reply)
}

// poison logs a request that can never be processed, err first among attrs,
// and leaves it to the queue's redrive policy, alerting on its last receive.
func (h *Handler) poison(ctx context.Context, log *slog.Logger, rec events.SQSMessage, msg string, err error, attrs ...any) disposition {
	log.Error(actor.BatchItemFailed, append([]any{"reason", msg, "error", err}, attrs...)...)
	alert.PoisonOnLastReceive(ctx, h.alerts, rec, err, h.cfg.MaxReceiveCount, h.clk.Now(), log)
	return redeliver
}

// sendReply sends the reply of rec's request. A reply that cannot be sent
// brings the request back soon: running the step again (the remote replays
// its result under the key) while CompleteBy still allows a reply.
func (h *Handler) sendReply(ctx context.Context, log *slog.Logger, rec events.SQSMessage, m message.AgentRequest, reply message.AgentReply) disposition {
	if err := h.replies.Send(ctx, h.cfg.ResponseQueueURL, encodeReply(m, reply), 0); err != nil {
		wait := queue.RedeliveryDelay(queue.ReceiveCount(rec))
		log.Warn(actor.BatchItemFailed, slog.String("reason", "sending the reply failed; the request comes back soon"), slog.Any("error", err), slog.Any("outcome", reply.Outcome), slog.Duration("in", wait))
		if h.redeliver != nil {
			if rerr := h.redeliver.After(ctx, rec, wait); rerr != nil {
				log.Warn("redelivery not brought forward; the queue's visibility timeout applies", slog.Any("error", rerr))
			}
		}
		return redeliver
	}
	// Debug: the Scheduler logs the transition the reply makes, and a line
	// per reply here would double what every order writes to CloudWatch.
	log.Debug("reply sent", slog.Any("outcome", reply.Outcome))
	return done
}

// succeeded is the reply of a step or undo the service completed. Its
// output enters the system here, so it is checked here: one that is not JSON
// in UTF-8, or over the step's limit (it would overflow the later requests
// that carry it, or the state record), fails the step uncertainly, since the
// remote did apply it. The limit applies to the output as every message and
// the record will hold it (compacted, see jsonwire), which is what the
// Scheduler measures again. An undo that happened is reported as done
// whatever its output; an output it cannot carry is dropped.
func (h *Handler) succeeded(log *slog.Logger, m message.AgentRequest, out json.RawMessage) message.AgentReply {
	var fault *message.Fault
	if len(out) > 0 {
		if compact, err := jsonwire.Compact(out); err == nil && utf8.Valid(compact) {
			out = compact
		} else {
			fault = &message.Fault{Code: CodeInvalidOutput, Message: "the step's output is not JSON in UTF-8"}
		}
	}
	if fault == nil && len(out) > h.cfg.MaxOutputBytes {
		fault = &message.Fault{Code: CodeOutputTooLarge, Message: workflow.OutputTooLarge(m.Step, len(out), h.cfg.MaxOutputBytes)}
	}
	if fault != nil && m.Action.Undo() {
		log.Warn("undo output dropped", slog.String("reason", fault.Message))
		out, fault = nil, nil
	}
	if fault != nil {
		log.Error("the step's output is refused", slog.String("faultCode", fault.Code), slog.Int("bytes", len(out)))
		fault.Uncertain = true
		return failed(m, *fault)
	}
	r := newReply(m, message.Succeeded)
	r.Output = out
	return r
}

// encodeReply encodes reply, turning a reply too large for a message into a
// Failed one: the remote would return the same output on every retry.
func encodeReply(m message.AgentRequest, reply message.AgentReply) string {
	body := message.Encode(reply)
	if len(body) > message.MaxBodyBytes {
		body = message.Encode(failed(m, message.Fault{
			Code:      CodeOutputTooLarge,
			Message:   fmt.Sprintf("the reply of %d bytes exceeds %d", len(body), message.MaxBodyBytes),
			Uncertain: true,
		}))
	}
	return body
}

func newReply(m message.AgentRequest, o message.Outcome) message.AgentReply {
	return message.AgentReply{
		V:         message.Version,
		Kind:      message.KindAgentReply,
		OrderID:   m.OrderID,
		Workflow:  m.Workflow,
		Step:      m.Step,
		StepIndex: m.StepIndex,
		Attempt:   m.Attempt,
		Action:    m.Action,
		Outcome:   o,
	}
}

func failed(m message.AgentRequest, f message.Fault) message.AgentReply {
	r := newReply(m, message.Failed)
	r.Fault = &f
	return r
}

// perform runs the retry loop until success, a permanent error, or the
// deadline: CompleteBy or the Lambda's own deadline, whichever is sooner,
// less the safety margin kept to send the reply.
// It returns the endpoint of the last try made.
func (h *Handler) perform(ctx context.Context, log *slog.Logger, req Request, completeBy time.Time) (json.RawMessage, triedAt, error) {
	now := h.clk.Now()
	budget := completeBy.Sub(now)
	// The Lambda's deadline is wall-clock time while CompleteBy is read
	// through the injected clock, so both become a budget from now.
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(dl))
	}
	budget -= h.cfg.SafetyMargin
	if budget <= 0 {
		return nil, "", errors.New("no time left for a try")
	}
	deadline := now.Add(budget)
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()

	targets := h.targets(req)
	// failed marks the replicas a try of this request failed on, so the
	// next try goes elsewhere while another replica lets it through.
	failed := make([]bool, len(targets.svcs))

	// ambiguous records a try that failed without proving nothing was
	// applied (a timeout, a reset connection, a 5xx, a 409 in_progress,
	// whose other call may apply it): a permanent fault after it, such as
	// a 422 for a request the remote may have applied before, is no proof
	// either.
	ambiguous := false
	var last triedAt
	for n := 0; ; n++ {
		remaining := deadline.Sub(h.clk.Now())
		if remaining <= 0 || ctx.Err() != nil {
			return nil, last, fmt.Errorf("out of time after %d tries", n)
		}
		out, at, err := h.try(ctx, targets, failed, req, min(h.cfg.RemoteTimeout, remaining))
		if at != "" {
			last = at
		}
		if errors.Is(err, ErrRedeliver) {
			return nil, last, err
		}
		if step.IsPermanent(err) && ambiguous {
			err = step.Uncertain(err)
		}
		if err == nil || step.IsPermanent(err) {
			return out, last, err
		}
		ambiguous = ambiguous || mayHaveApplied(err)
		delay := h.backoff.Delay(n)
		if ra, ok := RetryAfter(err); ok {
			delay = max(delay, ra)
		}
		// Waiting past the deadline only to give up then is pointless.
		if !h.clk.Now().Add(delay).Before(deadline) {
			return nil, last, fmt.Errorf("try %d%s: %w (no time for another)", n+1, at, err)
		}
		log.Warn("try failed, retrying", slog.Int("try", n+1), slog.String("endpoint", at.host()), slog.Any("error", err), slog.Duration("retryIn", delay))
		if serr := h.sleep(ctx, delay); serr != nil {
			return nil, last, fmt.Errorf("try %d%s: %w (no time for another)", n+1, at, err)
		}
	}
}

// targets are the replicas a request may go to and the endpoint of each,
// which names its breaker and health.
type targets struct {
	svcs      []Service
	endpoints []string
}

// targets are the Service's replicas (Replicated) or the Service alone.
// An endpoint is the Endpointer's, or the step's route.
func (h *Handler) targets(req Request) targets {
	svcs := []Service{h.svc}
	if r, ok := h.svc.(Replicated); ok {
		if rs := r.Replicas(); len(rs) > 0 {
			svcs = rs
		}
	}
	t := targets{svcs: svcs, endpoints: make([]string, len(svcs))}
	for i, s := range svcs {
		ep := req.Step
		if req.Action.Undo() {
			ep += "/compensate"
		}
		if e, ok := s.(Endpointer); ok {
			ep = e.Endpoint(req)
		}
		t.endpoints[i] = ep
	}
	return t
}

// triedAt is the endpoint a try went to, for its log line and error; empty
// when no breaker let it through.
type triedAt string

func (a triedAt) host() string {
	if a == "" {
		return "none"
	}
	return Host(string(a))
}

// String is what an error says of it.
func (a triedAt) String() string {
	if a == "" {
		return ""
	}
	return " at " + Host(string(a))
}

// try makes one call to the replica the router picks, through its breaker,
// bounded by timeout. A transient failure marks the replica in failed.
func (h *Handler) try(ctx context.Context, t targets, failed []bool, req Request, timeout time.Duration) (json.RawMessage, triedAt, error) {
	rt, err := h.router.pick(t.endpoints, failed)
	if err != nil {
		return nil, "", err
	}
	at := triedAt(t.endpoints[rt.index])
	svc := t.svcs[rt.index]
	// Ignored unless set below, so a panicking Service frees a probe slot.
	result := Ignored
	defer func() { rt.report(result) }()

	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out json.RawMessage
	if u, ok := svc.(step.Undoer); ok && req.Action.Undo() {
		out, err = u.Undo(tctx, req)
	} else {
		out, err = svc.Do(tctx, req)
	}
	switch {
	case errors.Is(err, ErrRedeliver):
		// The try ended as if the Lambda had died: nothing learnt of the
		// service.
	case err == nil || step.IsPermanent(err) || inProgress(err):
		// A key in progress is an answer of a working remote, however
		// often a retry gets it: the replicas share the key's state, so
		// another would answer the same.
		result = Success
	case ctx.Err() != nil:
		// Our own deadline ended the call; that says nothing of the remote.
	default:
		result = Failure
		failed[rt.index] = true
	}
	return out, at, err
}
