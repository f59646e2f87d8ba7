package simulation

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/admission"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/codestep"
	"github.com/sasflow/sas/shared/followup"
	"github.com/sasflow/sas/shared/notifier"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/scheduler"
	stepkit "github.com/sasflow/sas/shared/step"
	"github.com/sasflow/sas/shared/submission"
	"github.com/sasflow/sas/shared/supervisor"
	"github.com/sasflow/sas/shared/timer"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// OperatorARN is the operators' IAM role, the one principal the
// Submission lets call the operator routes.
const OperatorARN = "arn:aws:iam::123456789012:role/operators"

// release is one deployed version of every function, built for one
// workflow catalog: a pool of containers per function. A container serves
// one invocation at a time, as Lambda's execution environments do; an
// invocation takes a free one or starts a new one (with a clock of its
// own), and a killed invocation's container is gone, with whatever it held
// in memory (an Agent's circuit breakers). A deploy makes a new release,
// function by function.
type release struct {
	cat   workflow.Catalog
	pools map[string]*pool
}

type pool struct {
	free []any
	make func() (any, error)
}

// container is a free container of fn for the invocation ctx belongs to,
// returned to the pool when the invocation ends alive.
func (s *system) container(ctx context.Context, fn string) any {
	r := s.live[fn]
	if strings.HasPrefix(fn, "agent-") {
		r = s.live[topology.Agent]
	}
	pl := r.pools[fn]
	if pl == nil {
		return nil
	}
	var h any
	if n := len(pl.free); n > 0 {
		i := s.w.either(n)
		h = pl.free[i]
		pl.free[i] = pl.free[n-1]
		pl.free = pl.free[:n-1]
	} else {
		var err error
		if h, err = pl.make(); err != nil {
			panic(fmt.Sprintf("simulation: a container of %s: %v", fn, err))
		}
	}
	procOf(ctx).atEnd(func(killed bool) {
		if !killed {
			pl.free = append(pl.free, h)
		}
	})
	return h
}

// system is every actor wired to the models, as the stack wires them.
type system struct {
	w      *World
	f      *faults
	sqs    *SQS
	sns    *SNS
	store  *store
	stream *stream
	remote *remoteModel
	// code is the code steps' world: their effects, the ledger's tries.
	code   *codeModel
	policy workflow.Policy
	agent  agent.Config
	log    *slog.Logger

	schedulerQ, responseQ, deadlineQ *Queue
	agentQ                           map[string]*Queue
	steps                            map[string]workflow.Step
	alerts, events                   *Topic
	operators                        *Subscription
	clients                          map[string]*Subscription

	// live is the release each function runs now; the Submission's may lag
	// behind the others' during a deploy.
	live map[string]*release
	// skew bounds how far off each container's clock is.
	skew     time.Duration
	requests int
	// done, when set, says the run is over: the Supervisor's schedule
	// stops, until resweep starts it again (the operators' fix). until
	// ends it in any case; sweeping says it runs.
	done     func() bool
	until    time.Time
	sweeping bool
}

// functions are the names a release is deployed under, the Submission
// last, as the stack's deploy order has it.
var functions = []string{topology.Scheduler, topology.Supervisor, topology.Deadline, topology.Timer, topology.Notifier, topology.Agent, topology.Submission}

// newSystem creates the queues, topics and the first release.
func newSystem(w *World, f *faults, cat workflow.Catalog, extra workflow.Catalog, skew time.Duration) (*system, error) {
	s := &system{w: w, f: f, policy: workflow.DefaultPolicy(), agent: agent.DefaultConfig(), log: slog.New(slog.DiscardHandler),
		agentQ: map[string]*Queue{}, steps: map[string]workflow.Step{}, clients: map[string]*Subscription{}, live: map[string]*release{}, skew: skew}
	if f.mix[Fix] > 0 {
		// The operators' fix comes past the shortest retention, so what
		// should outlive an order that waits for them is tested there.
		s.policy.Retention = workflow.MinRetention
	}
	s.sqs = newSQS(w, f)
	s.sns = newSNS(w, f)
	s.stream = &stream{w: w}
	s.store = newStore(w, f, s.stream)
	s.store.due = func(seen workflow.State, now time.Time) bool {
		m, err := extra.Machine(seen.Workflow, s.policy)
		if err != nil {
			return true // stranded: stopped with an alert
		}
		_, due := m.Expired(seen, now)
		return due
	}
	// Clocks up to 2*skew apart, and a call up to 3 s slow, plus a second.
	s.store.tolerance = 2*skew + 4*time.Second
	s.remote = newRemote(w, f, s.agent.RemoteTimeout)
	s.code = newCodeModel(w, f, s.store)
	s.store.code = s.code
	s.remote.replicas = []string{"remote-a.example.com", "remote-b.example.com"}
	vis := func(timeout time.Duration) time.Duration { return topology.Visibility(timeout) }
	s.schedulerQ = s.sqs.queue("scheduler", vis(topology.SchedulerTimeout), topology.MaxReceiveCount)
	s.responseQ = s.sqs.queue("responses", vis(topology.SchedulerTimeout), topology.MaxReceiveCount)
	s.deadlineQ = s.sqs.queue("deadlines", vis(topology.DeadlineTimeout), topology.MaxReceiveCount)
	s.deadlineQ.kept = true // for the check that every phase had its Deadline
	// Every step any release may run has its queue from the start.
	for _, c := range []workflow.Catalog{cat, extra} {
		for _, step := range c.Agents() {
			if _, ok := s.agentQ[step.Name]; !ok {
				s.agentQ[step.Name] = s.sqs.queue("agent-"+step.Name, vis(topology.AgentTimeout(step)), topology.MaxReceiveCount)
				s.steps[step.Name] = step
			}
		}
	}
	s.alerts = s.sns.topic("alerts")
	s.operators = s.alerts.subscribe("operators", nil)
	s.events = s.sns.topic("order-events")
	r, err := s.build(cat)
	if err != nil {
		return nil, err
	}
	for _, fn := range functions {
		s.live[fn] = r
	}
	s.mappings()
	return s, nil
}

// subscribe gives a client its events queue, filtered on its clientId.
func (s *system) subscribe(clientID string) {
	if _, ok := s.clients[clientID]; !ok {
		s.clients[clientID] = s.events.subscribe(clientID, map[string][]string{notifier.AttrClientID: {clientID}})
	}
}

// ledger is the code steps' ledger a container with clock clk is given.
func (s *system) ledger(clk clock.Clock) ledger {
	return ledger{m: s.code, st: s.store.port(clk).Store}
}

// clockFor is a new container's clock: off by up to skew either way.
func (s *system) clockFor() clock.Clock {
	if s.skew <= 0 {
		return worldClock{s.w}
	}
	off := s.w.delay(0, 2*s.skew) - s.skew
	return skewed{w: s.w, skew: off}
}

func (s *system) deps(clk clock.Clock) actor.Deps { return actor.Deps{Clock: clk, Log: s.log} }

// build makes a release of every function for cat.
func (s *system) build(cat workflow.Catalog) (*release, error) {
	r := &release{cat: cat, pools: map[string]*pool{}}
	alerts := alert.NewPublisher(s.sns, s.alerts.arn)
	agentURLs := map[string]string{}
	var urls []string
	for _, step := range cat.Agents() {
		agentURLs[step.Name] = s.agentQ[step.Name].url
		urls = append(urls, s.agentQ[step.Name].url)
	}
	first := map[string]string{}
	for _, step := range cat.FirstSteps() {
		first[step] = agentURLs[step]
	}
	admit := topology.DefaultCapacity().Admission(urls)
	fns := map[string]func() (any, error){}
	fns[topology.Submission] = func() (any, error) {
		clk := s.clockFor()
		deps := s.deps(clk)
		gate, err := admission.New(admit, queue.NewDepths(s.sqs), deps)
		if err != nil {
			return nil, err
		}
		return submission.New(submission.Config{
			AgentQueues: first, SchedulerQueueURL: s.schedulerQ.url, Workflows: cat, ClaimTimeout: s.policy.ClaimTimeout,
			Retention: s.policy.Retention, OrdersTable: "orders", StateTable: "state", Admission: admit,
			AlertTopicARN: s.alerts.arn, OperatorPrincipals: []string{OperatorARN},
		}, s.store.port(clk), s.sender(topology.Submission), gate, deps, submission.WithAlerts(alerts), submission.WithOrderIDs(s.orderID))
	}
	shared := followup.Config{OrdersTable: "orders", StateTable: "state", SchedulerQueueURL: s.schedulerQ.url,
		AlertTopicARN: s.alerts.arn, OperatorAPIURL: "https://api.example.com", Workflows: cat, Policy: s.policy}
	// The Scheduler commits a reply only from its step's Agent's role, as
	// the stack's REPLY_SENDERS names them.
	senders := map[string]string{}
	for _, step := range cat.Agents() {
		senders[step.Name] = roleID("agent-" + step.Name)
	}
	schedCfg := scheduler.Config{Config: shared, ResponseQueueURL: s.responseQ.url, AgentQueues: agentURLs, MaxReceiveCount: topology.MaxReceiveCount,
		ReplySenders: senders}
	fns[topology.Scheduler] = func() (any, error) {
		clk := s.clockFor()
		return scheduler.New(schedCfg, s.store.port(clk), s.sender(topology.Scheduler), alerts, s.deps(clk),
			scheduler.WithRedelivery(queue.NewRedeliverer(s.sqs, s.schedulerQ.url, s.responseQ.url)))
	}
	supCfg := supervisor.Config{Config: shared, BatchLimit: supervisor.DefaultBatchLimit}
	fns[topology.Supervisor] = func() (any, error) {
		clk := s.clockFor()
		return supervisor.New(supCfg, s.store.port(clk), s.sender(topology.Supervisor), alerts, s.deps(clk))
	}
	fns[topology.Deadline] = func() (any, error) {
		clk := s.clockFor()
		return supervisor.New(supCfg, s.store.port(clk), s.sender(topology.Deadline), alerts, s.deps(clk),
			supervisor.WithRedelivery(queue.NewRedeliverer(s.sqs, s.deadlineQ.url)))
	}
	fns[topology.Timer] = func() (any, error) {
		clk := s.clockFor()
		return timer.New(timer.Config{DeadlineQueueURL: s.deadlineQ.url, LedgerTable: "ledger", CodeSteps: slices.Sorted(maps.Keys(codeSteps))},
			s.sender(topology.Timer), s.ledger(clk), s.deps(clk))
	}
	fns[topology.Notifier] = func() (any, error) {
		return notifier.New(notifier.Config{OrderEventsTopicARN: s.events.arn}, notifier.NewPublisher(s.sns, s.events.arn), s.deps(s.clockFor()))
	}
	for _, step := range cat.Agents() {
		fns["agent-"+step.Name] = func() (any, error) { return s.newAgent(step, alerts) }
	}
	for _, name := range slices.Sorted(maps.Keys(fns)) {
		mk := fns[name]
		r.pools[name] = &pool{make: mk}
		// One container of each up front, so a configuration error shows
		// at once.
		h, err := mk()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		r.pools[name].free = append(r.pools[name].free, h)
	}
	return r, nil
}

func (s *system) newAgent(step workflow.Step, alerts alert.Sender) (*agent.Handler, error) {
	cfg := s.agent
	q := s.agentQ[step.Name]
	if code, ok := codeSteps[step.Name]; ok {
		return s.newCodeAgent(step, code(s.code), alerts)
	}
	// Two replicas of the services, one state behind both (the model).
	cfg.Step, cfg.ResponseQueueURL, cfg.RemoteBaseURL = step.Name, s.responseQ.url, ""
	cfg.RemoteBaseURLs = nil
	for _, h := range s.remote.replicas {
		cfg.RemoteBaseURLs = append(cfg.RemoteBaseURLs, "https://"+h)
	}
	cfg.AlertTopicARN, cfg.MaxOutputBytes, cfg.RequestQueueURL = s.alerts.arn, step.OutputLimit(), q.url
	svc := agent.NewReplicatedHTTPService(cfg.Endpoints(), &http.Client{Transport: s.remote})
	a, err := agent.New(cfg, svc, s.sender("agent-"+step.Name), s.deps(s.clockFor()), agent.WithAlerts(alerts),
		agent.WithRedelivery(queue.NewRedeliverer(s.sqs, q.url)), agent.WithSleep(s.f.sleep),
		agent.WithJitter(s.w.float), agent.WithRouteDraw(s.w.either), agent.WithWorkers(s.w.workers))
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", step.Name, err)
	}
	return a, nil
}

// newCodeAgent is the Agent of a code step, as codestep.Main wires it: the
// real step under the ledger (shared/codestep) in the agent's Handler, with
// no remote. The ledger is the store's, behind the port's faults, and the
// runtime's fault points crash a try after the effect or after the ledger
// write.
func (s *system) newCodeAgent(step workflow.Step, st stepkit.Step, alerts alert.Sender) (*agent.Handler, error) {
	cfg := s.agent
	q := s.agentQ[step.Name]
	cfg.Step, cfg.ResponseQueueURL, cfg.RemoteBaseURL, cfg.RemoteBaseURLs, cfg.Code = step.Name, s.responseQ.url, "", nil, true
	cfg.AlertTopicARN, cfg.MaxOutputBytes, cfg.RequestQueueURL = s.alerts.arn, step.OutputLimit(), q.url
	clk := s.clockFor()
	deps := s.deps(clk)
	svc, err := codestep.New(step.Name, s.code.wrap(st), s.ledger(clk), deps,
		codestep.WithMaxOutputBytes(step.OutputLimit()), codestep.WithOwners(s.code.owner),
		codestep.WithFaults(codestep.Faults{AfterEffect: s.code.crashAfterEffect, AfterLedger: s.code.crashAfterLedger}))
	if err != nil {
		return nil, fmt.Errorf("code step %s: %w", step.Name, err)
	}
	a, err := agent.New(cfg, svc, s.sender("agent-"+step.Name), deps, agent.WithAlerts(alerts),
		agent.WithRedelivery(queue.NewRedeliverer(s.sqs, q.url)), agent.WithSleep(s.f.sleep),
		agent.WithJitter(s.w.float), agent.WithRouteDraw(s.w.either), agent.WithWorkers(s.w.workers))
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", step.Name, err)
	}
	return a, nil
}

// roleID is the unique ID of function fn's IAM role, as IAM writes one
// (AROA and upper-case letters and digits): each function its own role, as
// the stack deploys them.
func roleID(fn string) string {
	return "AROA" + strings.ToUpper(strings.NewReplacer("-", "", "_", "").Replace(fn))
}

// sender is what function fn sends SQS messages through: its own role,
// whose ID SQS stamps on every message (SenderId).
func (s *system) sender(fn string) *queue.Sender {
	return queue.NewSender(s.sqs.As(roleID(fn), "sas-"+fn))
}

// orderID makes the ID of every new order: a counter, never reused.
func (s *system) orderID(_, _ string) string {
	s.requests++
	return "o" + strconv.Itoa(s.requests)
}

// invocation is the context a Lambda invocation runs with: its request ID.
func (s *system) invocation(ctx context.Context, p string) context.Context {
	return lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: p})
}

type sqsHandle = func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// onSQS is the handler an event source mapping invokes: fn's container.
func (s *system) onSQS(fn string) sqsHandle {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		ctx = s.invocation(ctx, procOf(ctx).String())
		switch h := s.container(ctx, fn).(type) {
		case *scheduler.Handler:
			return h.Handle(ctx, ev)
		case *supervisor.Handler:
			return h.HandleDeadlines(ctx, ev)
		case *agent.Handler:
			return h.Handle(ctx, ev)
		case nil:
			// A release without the function: it does not exist yet, and
			// the messages wait.
			return events.SQSEventResponse{}, fmt.Errorf("no %s in this release", fn)
		default:
			panic(fmt.Sprintf("simulation: %s is a %T", fn, h))
		}
	}
}

// mappings starts the event source mappings and the stream readers.
func (s *system) mappings() {
	s.sqs.mapping(s.schedulerQ, "scheduler", topology.SchedulerBatchSize, 5, topology.SchedulerTimeout, s.onSQS(topology.Scheduler))
	s.sqs.mapping(s.responseQ, "scheduler", topology.SchedulerBatchSize, 5, topology.SchedulerTimeout, s.onSQS(topology.Scheduler))
	s.sqs.mapping(s.deadlineQ, "deadline", topology.DeadlineBatchSize, 5, topology.DeadlineTimeout, s.onSQS(topology.Deadline))
	for _, name := range slices.Sorted(maps.Keys(s.agentQ)) {
		q := s.agentQ[name]
		s.sqs.mapping(q, q.name, topology.AgentBatchSize, 5, topology.AgentTimeout(s.steps[name]), s.onSQS(q.name))
	}
	onStream := func(fn string) func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			ctx = s.invocation(ctx, procOf(ctx).String())
			switch h := s.container(ctx, fn).(type) {
			case *timer.Handler:
				return h.Handle(ctx, ev)
			case *notifier.Handler:
				return h.Handle(ctx, ev)
			default:
				panic(fmt.Sprintf("simulation: %s is a %T", fn, h))
			}
		}
	}
	s.stream.readers = []*streamReader{
		{name: "timer", batch: topology.StreamBatchSize, timeout: topology.TimerTimeout, handle: onStream(topology.Timer)},
		{name: "notifier", batch: topology.StreamBatchSize, timeout: topology.TimerTimeout, handle: onStream(topology.Notifier)},
	}
}

// resweep runs the Supervisor's scheduled run every minute from now until
// s.until or until the run is done; a schedule already running goes on
// alone. EventBridge invokes the Supervisor asynchronously, and each run
// may not happen (MissedRun), come late (LateRun: EventBridge retries a
// delivery that failed for up to a day, "How EventBridge retries
// delivering events",
// https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-retry-policy.html,
// and an asynchronous event may wait in Lambda's queue, "Understanding
// retry behavior in Lambda",
// https://docs.aws.amazon.com/lambda/latest/dg/invocation-retries.html),
// or come twice (DoubleRun: "it's possible for it to receive the same event
// from Lambda multiple times because the queue itself is eventually
// consistent", "How Lambda handles errors and retries with asynchronous
// invocation",
// https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html).
func (s *system) resweep() {
	if s.sweeping {
		return
	}
	s.sweeping = true
	until := s.until
	var tick func()
	tick = func() {
		if s.w.now.After(until) || (s.done != nil && s.done()) {
			s.sweeping = false
			return
		}
		s.w.after(topology.SupervisorEvery, tick)
		s.store.expire()
		if s.f.strike(MissedRun) {
			s.w.log.add(s.w.now, "schedule", "supervisor run missed", "")
			return
		}
		fired := s.w.now
		late := time.Duration(0)
		if s.f.strike(LateRun) {
			late = s.w.delay(time.Second, lateRunMax)
			s.w.log.add(s.w.now, "schedule", "supervisor run late by "+late.String(), "")
		}
		s.w.after(late, func() { s.scheduled(fired, 0) })
		if s.f.strike(DoubleRun) {
			// Half at once, two pollers of Lambda's queue taking the
			// event; half later.
			again := late + s.w.delay(0, time.Second)
			if s.w.either(2) == 1 {
				again = late + s.w.delay(0, 2*time.Minute)
			}
			s.w.log.add(s.w.now, "schedule", "supervisor run delivered twice, again in "+again.String(), "")
			s.w.after(again, func() { s.scheduled(fired, 0) })
		}
	}
	s.w.after(s.w.delay(0, time.Minute), tick)
}

// lateRunMax bounds how late a scheduled run comes (LateRun).
const lateRunMax = 5 * time.Minute

// scheduled invokes the Supervisor with the scheduled event of the run
// fired at fired, as Lambda's asynchronous invocation does: a run that
// returns an error or dies (killed, timed out) runs again, "two more
// times, with a one-minute wait between the first two attempts, and two
// minutes between the second and third" ("How Lambda handles errors and
// retries with asynchronous invocation").
func (s *system) scheduled(fired time.Time, retry int) {
	var err error
	s.w.spawn("supervisor", topology.SupervisorTimeout, func(ctx context.Context) {
		ctx = s.invocation(ctx, procOf(ctx).String())
		h := s.container(ctx, topology.Supervisor).(*supervisor.Handler)
		err = h.Handle(ctx, events.EventBridgeEvent{DetailType: "Scheduled Event", Source: "aws.events", Time: fired})
	}, func(killed bool) {
		if (killed || err != nil) && retry < asyncRetries {
			wait := time.Duration(retry+1) * time.Minute
			s.w.log.add(s.w.now, "schedule", "supervisor run failed; Lambda retries it in "+wait.String(), "")
			s.w.after(wait, func() { s.scheduled(fired, retry+1) })
		}
	})
}

// asyncRetries is how many times Lambda retries an asynchronous invocation
// that failed, by default.
const asyncRetries = 2

// deploy rolls out a release for cat: each function at its own moment
// within a minute, the Submission last.
func (s *system) deploy(cat workflow.Catalog) error {
	r, err := s.build(cat)
	if err != nil {
		return err
	}
	last := time.Duration(0)
	for _, fn := range functions {
		d := s.w.delay(0, time.Minute)
		if fn == topology.Submission {
			d = last + s.w.delay(time.Millisecond, 5*time.Second)
		}
		last = max(last, d)
		s.w.after(d, func() {
			s.live[fn] = r
			s.w.log.add(s.w.now, "deploy", "function updated", fn)
		})
	}
	return nil
}

// operatorCaller is an operator's session of OperatorARN, as IAM names the
// caller of a signed request.
const operatorCaller = "arn:aws:sts::123456789012:assumed-role/operators/on-call"
