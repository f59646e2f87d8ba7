// Package wiring wires the real handlers of every function to DynamoDB, SQS
// and SNS endpoints the way the AWS deployment does: the same tables, one
// queue per channel with a dead-letter queue, and SQS pollers standing in for
// Lambda's event source mappings. End-to-end tests and local commands use it;
// the handlers know nothing of it.
package wiring

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/internal/localstack/sqsbridge"
	"github.com/sasflow/sas/internal/localstack/sqstrace"
	"github.com/sasflow/sas/internal/localstack/streambridge"
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
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/step"
	"github.com/sasflow/sas/shared/submission"
	"github.com/sasflow/sas/shared/supervisor"
	"github.com/sasflow/sas/shared/timer"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// Options configures a System.
type Options struct {
	// TraceSampleRate is the Submission's share of orders recorded as
	// X-Ray traces (submission.Config.TraceSampleRate); the segments go
	// nowhere unless the caller wraps the handlers (shared/segments).
	TraceSampleRate float64
	DynamoDB        *dynamodb.Client
	SQS             *sqs.Client
	// PollSQS, when set, is the client the event source pollers use, so
	// their requests can be told apart from the handlers'; SQS otherwise.
	PollSQS *sqs.Client
	SNS     *sns.Client
	// Streams, when set, reads the state table's stream: the System then
	// has a Stream bridge feeding the order-event Notifier, as the stack's
	// event source mapping does. Make it with streambridge.ForDynamoDBLocal
	// for DynamoDB Local.
	Streams *dynamodbstreams.Client
	// Prefix starts every table, queue and topic name.
	Prefix string
	// Region is put on SQS events, as Lambda does.
	Region string
	// Workflows is every workflow version the system runs, as the
	// deployed catalog (shared/catalog) is: one Agent and queue per step
	// name across them.
	Workflows workflow.Catalog
	Policy    workflow.Policy
	// RemoteBaseURL is the remote service every Agent calls; or
	// RemoteBaseURLs, its replicas, sharing one idempotency state.
	RemoteBaseURL  string
	RemoteBaseURLs []string
	// Agent overrides agent settings; Step, ResponseQueueURL and
	// RemoteBaseURL are filled in per step.
	Agent agent.Config
	// MaxReceiveCount is the redrive policy of every queue.
	MaxReceiveCount int
	// VisibilityTimeout of every queue.
	VisibilityTimeout time.Duration
	Clock             clock.Clock
	Log               *slog.Logger
	// AgentOptions are passed to every agent.New.
	AgentOptions []agent.Option
	// AgentClock, when set, is the agents' clock instead of Clock: a clock
	// running behind makes zombie agents that reply after CompleteBy.
	AgentClock clock.Clock
	// Capacity, when set, turns on the Submission's admission check over
	// the Agents' queues, as the stack configures it from the same model.
	Capacity *topology.Capacity

	// Fault-injection hooks: each wraps what one role's handler is given.
	// Roles are the actors' names (topology.Submission, Scheduler,
	// Supervisor, Agent); the Deadline function shares the Supervisor's.
	WrapStore  func(role string, s Store) Store
	WrapSender func(role string, s Sender) Sender
	// OperatorAPIURL is the API the alerts' CLI commands name.
	OperatorAPIURL string
	// OrderIDs, when set, makes the IDs of new orders instead of random
	// UUIDs (submission.WithOrderIDs), so a test knows them beforehand.
	OrderIDs func(owner, key string) string
	// OperatorPrincipals are the IAM roles and users the Submission lets
	// call the operator routes, as the stack's OPERATOR_PRINCIPALS; none
	// lets nobody.
	OperatorPrincipals []string
	// WrapEvents wraps what the Notifier publishes order events with.
	WrapEvents func(s notifier.Sender) notifier.Sender
	// WrapDeadlines wraps what the Timer sends Deadlines with.
	WrapDeadlines func(s timer.Sender) timer.Sender

	// CodeSteps are the steps that run as Go code, by name, each in
	// process as its Lambda runs it (shared/codestep around the ledger,
	// inside the Agent's handler); every other step calls the remote
	// service. StepEnv is what they read through step.Env.Getenv, StepAWS
	// their AWS configuration.
	CodeSteps map[string]step.New
	StepEnv   map[string]string
	StepAWS   aws.Config
	// WrapStep wraps each code step, CodeStepOptions are passed to every
	// codestep.New: chaos counts effects and crashes tries with them.
	WrapStep        func(name string, s step.Step) step.Step
	CodeStepOptions []codestep.Option
}

// Store is everything the handlers ask of the state store.
type Store interface {
	submission.Store
	scheduler.Store
	supervisor.Store
}

// Sender is how every handler puts a message on a queue.
type Sender interface {
	Send(ctx context.Context, queueURL, body string, delay time.Duration) error
}

var (
	_ Store  = (*statestore.Store)(nil)
	_ Sender = (*queue.Sender)(nil)
)

func (o Options) store(role string, s Store) Store {
	if o.WrapStore == nil {
		return s
	}
	return o.WrapStore(role, s)
}

func (o Options) sender(role string, s Sender) Sender {
	if o.WrapSender == nil {
		return s
	}
	return o.WrapSender(role, s)
}

// Queue names a queue and its dead-letter queue.
type Queue struct {
	Name, URL, ARN string
	DLQURL         string
}

// System is a wired deployment.
type System struct {
	Store      *statestore.Store
	Submission *submission.Handler
	Scheduler  *scheduler.Handler
	Supervisor *supervisor.Handler
	Agents     map[string]*agent.Handler

	SchedulerQueue Queue
	ResponseQueue  Queue
	AgentQueues    map[string]Queue
	AlertTopicARN  string
	Tables         statestore.Tables

	// OrderEventsTopicARN is the clients' order-events topic; Notifier
	// publishes to it from the state table's stream, which Stream (nil
	// without Options.Streams) delivers.
	OrderEventsTopicARN string
	Notifier            *notifier.Handler
	Stream              *streambridge.Bridge

	// Bridges deliver each queue to its handler like an event source
	// mapping: scheduler queue, response queue, then one per agent.
	Bridges []*sqsbridge.Bridge

	// The Supervisor's fast path: Timer turns the state table's stream
	// (TimerStream, nil without Options.Streams) into Deadlines on
	// DeadlineQueue, which DeadlineBridge delivers to Deadline when each
	// is due. DeadlineBridge is not in Bridges: a Deadline waits for its
	// CompleteBy in real time, which tests on a fake clock control.
	Timer          *timer.Handler
	TimerStream    *streambridge.Bridge
	DeadlineQueue  Queue
	Deadline       *supervisor.Handler
	DeadlineBridge *sqsbridge.Bridge

	// NewScheduler and NewSupervisor build further instances with their
	// own clock, wired like the first.
	NewScheduler  func(clock.Clock) *scheduler.Handler
	NewSupervisor func(clock.Clock) *supervisor.Handler
}

// EngineSenderID is the SenderId fauxqs gives every message it receives.
const EngineSenderID = "000000000000"

// Build creates the tables, queues and topic and wires the handlers.
func Build(ctx context.Context, o Options) (*System, error) {
	// The engine does not keep AWSTraceHeader; these clients carry it
	// through as SQS does (see sqstrace).
	o.SQS = sqs.New(o.SQS.Options(), sqstrace.Carry)
	if o.PollSQS != nil {
		o.PollSQS = sqs.New(o.PollSQS.Options(), sqstrace.Carry)
	}
	s := &System{
		Tables:      statestore.Tables{Orders: o.Prefix + "-orders", State: o.Prefix + "-state", Ledger: o.Prefix + "-ledger"},
		AgentQueues: map[string]Queue{},
		Agents:      map[string]*agent.Handler{},
	}
	var tableOpts []statestore.TableOption
	if _, wall := o.Clock.(clock.System); o.Clock != nil && !wall {
		// A test's clock: expiry is the store's to judge by it.
		tableOpts = append(tableOpts, statestore.WithoutTTL())
	}
	if err := statestore.CreateTables(ctx, o.DynamoDB, s.Tables, tableOpts...); err != nil {
		return nil, err
	}
	var storeOpts []statestore.Option
	if o.Clock != nil {
		storeOpts = append(storeOpts, statestore.WithClock(o.Clock)) // expiry by the stack's time
	}
	s.Store = statestore.New(o.DynamoDB, s.Tables, storeOpts...)
	var err error
	if s.SchedulerQueue, err = createQueue(ctx, o, o.Prefix+"-scheduler"); err != nil {
		return nil, err
	}
	if s.ResponseQueue, err = createQueue(ctx, o, o.Prefix+"-responses"); err != nil {
		return nil, err
	}
	topic, err := o.SNS.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(o.Prefix + "-alerts")})
	if err != nil {
		return nil, fmt.Errorf("create alert topic: %w", err)
	}
	s.AlertTopicARN = aws.ToString(topic.TopicArn)

	eventsTopic, err := o.SNS.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(o.Prefix + "-order-events")})
	if err != nil {
		return nil, fmt.Errorf("create order-events topic: %w", err)
	}
	s.OrderEventsTopicARN = aws.ToString(eventsTopic.TopicArn)
	var publisher notifier.Sender = notifier.NewPublisher(o.SNS, s.OrderEventsTopicARN)
	if o.WrapEvents != nil {
		publisher = o.WrapEvents(publisher)
	}
	if s.Notifier, err = notifier.New(notifier.Config{OrderEventsTopicARN: s.OrderEventsTopicARN}, publisher,
		actor.Deps{Log: o.Log.With(slog.String("function", topology.Notifier))}); err != nil {
		return nil, err
	}
	if s.DeadlineQueue, err = createQueue(ctx, o, o.Prefix+"-deadlines"); err != nil {
		return nil, err
	}
	var deadlines timer.Sender = queue.NewSender(o.SQS)
	if o.WrapDeadlines != nil {
		deadlines = o.WrapDeadlines(deadlines)
	}
	timerCfg := timer.Config{DeadlineQueueURL: s.DeadlineQueue.URL, LedgerTable: s.Tables.Ledger,
		CodeSteps: slices.Sorted(maps.Keys(o.CodeSteps))}
	if s.Timer, err = timer.New(timerCfg, deadlines, s.Store,
		actor.Deps{Clock: o.Clock, Log: o.Log.With(slog.String("function", topology.Timer))}); err != nil {
		return nil, err
	}
	if o.Streams != nil {
		arn, err := streambridge.StreamARN(ctx, o.DynamoDB, s.Tables.State)
		if err != nil {
			return nil, err
		}
		s.Stream = &streambridge.Bridge{Client: o.Streams, StreamARN: arn, Region: o.Region, Handler: s.Notifier.Handle}
		s.TimerStream = &streambridge.Bridge{Client: o.Streams, StreamARN: arn, Region: o.Region, Handler: s.Timer.Handle}
	}

	send := queue.NewSender(o.SQS)
	alerts := alert.NewPublisher(o.SNS, s.AlertTopicARN)
	if err := o.Workflows.Validate(); err != nil {
		return nil, err
	}
	agents := o.Workflows.Agents()
	agentQueues := map[string]string{}
	for _, step := range agents {
		q, err := createQueue(ctx, o, o.Prefix+"-agent-"+step.Name)
		if err != nil {
			return nil, err
		}
		s.AgentQueues[step.Name] = q
		agentQueues[step.Name] = q.URL
	}

	var admit admission.Config
	if o.Capacity != nil {
		var urls []string
		for _, step := range agents {
			urls = append(urls, agentQueues[step.Name])
		}
		admit = o.Capacity.Admission(urls)
	}
	subDeps := actor.Deps{Clock: o.Clock, Log: o.Log.With(slog.String("function", topology.Submission))}
	gate, err := admission.New(admit, queue.NewDepths(o.SQS), subDeps)
	if err != nil {
		return nil, err
	}
	// The Submission dispatches to the first steps only, as the stack
	// lets it.
	firstQueues := map[string]string{}
	for _, step := range o.Workflows.FirstSteps() {
		firstQueues[step] = agentQueues[step]
	}
	subOpts := []submission.Option{submission.WithAlerts(alerts)}
	if o.OrderIDs != nil {
		subOpts = append(subOpts, submission.WithOrderIDs(o.OrderIDs))
	}
	s.Submission, err = submission.New(submission.Config{
		AgentQueues: firstQueues, SchedulerQueueURL: s.SchedulerQueue.URL,
		Workflows: o.Workflows, ClaimTimeout: o.Policy.ClaimTimeout, Retention: o.Policy.Retention, OrdersTable: s.Tables.Orders, StateTable: s.Tables.State,
		Admission: admit, AlertTopicARN: s.AlertTopicARN, OperatorPrincipals: o.OperatorPrincipals,
		TraceSampleRate: o.TraceSampleRate,
	}, o.store(topology.Submission, s.Store), o.sender(topology.Submission, send), gate, subDeps, subOpts...)
	if err != nil {
		return nil, err
	}

	// What the Scheduler and the Supervisor share, as the stack gives both.
	shared := followup.Config{
		OrdersTable: s.Tables.Orders, StateTable: s.Tables.State, SchedulerQueueURL: s.SchedulerQueue.URL,
		AlertTopicARN: s.AlertTopicARN, OperatorAPIURL: o.OperatorAPIURL, Workflows: o.Workflows, Policy: o.Policy,
	}
	// fauxqs stamps every message with the SenderId 000000000000, whoever
	// sent it (it has no IAM): locally every Agent is that one sender, and
	// the Scheduler's check of a reply's sender passes any of them. In AWS
	// each Agent's role has an ID of its own (the stack's REPLY_SENDERS).
	senders := map[string]string{}
	for step := range agentQueues {
		senders[step] = EngineSenderID
	}
	schedCfg := scheduler.Config{Config: shared, ResponseQueueURL: s.ResponseQueue.URL, AgentQueues: agentQueues,
		MaxReceiveCount: o.MaxReceiveCount, ReplySenders: senders}
	// Handlers change the visibility of the messages they fail, as the
	// deployed ones do with the event source mapping's messages.
	schedRedeliver := scheduler.WithRedelivery(queue.NewRedeliverer(o.SQS, s.SchedulerQueue.URL, s.ResponseQueue.URL))
	newScheduler := func(clk clock.Clock) (*scheduler.Handler, error) {
		return scheduler.New(schedCfg, o.store(topology.Scheduler, s.Store), o.sender(topology.Scheduler, send), alerts,
			actor.Deps{Clock: clk, Log: o.Log.With(slog.String("function", topology.Scheduler))}, schedRedeliver)
	}
	if s.Scheduler, err = newScheduler(o.Clock); err != nil {
		return nil, err
	}

	supCfg := supervisor.Config{Config: shared, BatchLimit: supervisor.DefaultBatchLimit}
	newSupervisor := func(clk clock.Clock) (*supervisor.Handler, error) {
		return supervisor.New(supCfg, o.store(topology.Supervisor, s.Store), o.sender(topology.Supervisor, send), alerts,
			actor.Deps{Clock: clk, Log: o.Log.With(slog.String("function", topology.Supervisor))})
	}
	if s.Supervisor, err = newSupervisor(o.Clock); err != nil {
		return nil, err
	}
	if s.Deadline, err = supervisor.New(supCfg, o.store(topology.Supervisor, s.Store), o.sender(topology.Supervisor, send), alerts,
		actor.Deps{Clock: o.Clock, Log: o.Log.With(slog.String("function", topology.Deadline))},
		supervisor.WithRedelivery(queue.NewRedeliverer(o.SQS, s.DeadlineQueue.URL))); err != nil {
		return nil, err
	}
	// More Schedulers and Supervisors, each with its own clock, as
	// separate Lambda containers would be.
	s.NewScheduler = func(clk clock.Clock) *scheduler.Handler {
		h, err := newScheduler(clk)
		if err != nil {
			// The same config and ports built s.Scheduler above.
			panic(err)
		}
		return h
	}
	s.NewSupervisor = func(clk clock.Clock) *supervisor.Handler {
		h, err := newSupervisor(clk)
		if err != nil {
			// The same config and ports built s.Supervisor above.
			panic(err)
		}
		return h
	}

	poll := o.PollSQS
	if poll == nil {
		poll = o.SQS
	}
	// Batch sizes as the stack's event source mappings have them.
	bridge := func(q Queue, batch int, h sqsbridge.Handler) *sqsbridge.Bridge {
		return &sqsbridge.Bridge{Client: poll, QueueURL: q.URL, QueueARN: q.ARN, BatchSize: batch, Handler: h, Region: o.Region}
	}
	s.Bridges = append(s.Bridges,
		bridge(s.SchedulerQueue, topology.SchedulerBatchSize, s.Scheduler.Handle),
		bridge(s.ResponseQueue, topology.SchedulerBatchSize, s.Scheduler.Handle))
	s.DeadlineBridge = bridge(s.DeadlineQueue, topology.DeadlineBatchSize, s.Deadline.HandleDeadlines)
	for _, step := range agents {
		cfg := o.Agent
		cfg.Step, cfg.ResponseQueueURL, cfg.RemoteBaseURL, cfg.RemoteBaseURLs = step.Name, s.ResponseQueue.URL, o.RemoteBaseURL, nil
		if len(o.RemoteBaseURLs) > 0 {
			cfg.RemoteBaseURL, cfg.RemoteBaseURLs = "", o.RemoteBaseURLs
		}
		cfg.AlertTopicARN, cfg.MaxReceiveCount = s.AlertTopicARN, o.MaxReceiveCount
		cfg.MaxOutputBytes, cfg.RequestQueueURL = step.OutputLimit(), s.AgentQueues[step.Name].URL
		agentClock := o.AgentClock
		if agentClock == nil {
			agentClock = o.Clock
		}
		var svc agent.Service = agent.NewReplicatedHTTPService(cfg.Endpoints(), agent.NewHTTPClient(cfg.RemoteTimeout))
		if newStep, ok := o.CodeSteps[step.Name]; ok {
			cfg.Code, cfg.RemoteBaseURL, cfg.RemoteBaseURLs = true, "", nil
			// The ledger judges leases by the function's own clock, as in
			// Lambda, where both run in one process.
			ledger := s.Store
			if agentClock != nil {
				ledger = statestore.New(o.DynamoDB, s.Tables, statestore.WithClock(agentClock))
			}
			cs, err := o.codeStep(ctx, step, newStep, ledger, actor.Deps{Clock: agentClock, Log: o.Log.With(slog.String("function", topology.CodeStep))})
			if err != nil {
				return nil, err
			}
			svc = cs
		}
		a, err := agent.New(cfg, svc, o.sender(topology.Agent, send), actor.Deps{Clock: agentClock, Log: o.Log.With(slog.String("function", topology.Agent))},
			append([]agent.Option{agent.WithAlerts(alerts), agent.WithRedelivery(queue.NewRedeliverer(o.SQS, cfg.RequestQueueURL))}, o.AgentOptions...)...)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", step.Name, err)
		}
		s.Agents[step.Name] = a
		s.Bridges = append(s.Bridges, bridge(s.AgentQueues[step.Name], topology.AgentBatchSize, a.Handle))
	}
	return s, nil
}

// codeStep builds the code step st as codestep.Main does, its ledger on
// ledger.
func (o Options) codeStep(ctx context.Context, st workflow.Step, newStep step.New, ledger statestore.LedgerPort, deps actor.Deps) (*codestep.Service, error) {
	env := func(name string) string { return o.StepEnv[name] }
	code, err := newStep(ctx, step.Env{Getenv: env, AWS: o.StepAWS})
	if err != nil {
		return nil, fmt.Errorf("code step %s: %w", st.Name, err)
	}
	if o.WrapStep != nil {
		code = o.WrapStep(st.Name, code)
	}
	opts := append([]codestep.Option{codestep.WithMaxOutputBytes(st.OutputLimit())}, o.CodeStepOptions...)
	svc, err := codestep.New(st.Name, code, ledger, deps, opts...)
	if err != nil {
		return nil, fmt.Errorf("code step %s: %w", st.Name, err)
	}
	return svc, nil
}

func createQueue(ctx context.Context, o Options, name string) (Queue, error) {
	attrs := func(q string) (url, arn string, err error) {
		out, err := o.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(q), Attributes: map[string]string{
			string(sqstypes.QueueAttributeNameVisibilityTimeout): strconv.Itoa(int(o.VisibilityTimeout.Seconds())),
		}})
		if err != nil {
			return "", "", fmt.Errorf("create queue %s: %w", q, err)
		}
		got, err := o.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			return "", "", fmt.Errorf("queue %s arn: %w", q, err)
		}
		return aws.ToString(out.QueueUrl), got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
	}
	dlqURL, dlqARN, err := attrs(name + "-dlq")
	if err != nil {
		return Queue{}, err
	}
	url, arn, err := attrs(name)
	if err != nil {
		return Queue{}, err
	}
	redrive, _ := json.Marshal(map[string]any{"deadLetterTargetArn": dlqARN, "maxReceiveCount": o.MaxReceiveCount})
	if _, err := o.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url),
		Attributes: map[string]string{string(sqstypes.QueueAttributeNameRedrivePolicy): string(redrive)}}); err != nil {
		return Queue{}, fmt.Errorf("redrive policy of %s: %w", name, err)
	}
	return Queue{Name: name, URL: url, ARN: arn, DLQURL: dlqURL}, nil
}

// Undelayed wraps what the Timer sends Deadlines with so that they go out
// at once: SQS delays them in real time, which a run on a fake clock must
// not wait for, so such a run moves its clock past CompleteBy and then
// delivers them (DeadlineBridge).
func Undelayed(s timer.Sender) timer.Sender { return undelayed{s} }

type undelayed struct{ next timer.Sender }

func (u undelayed) SendBatch(ctx context.Context, queueURL string, msgs []queue.Outgoing) error {
	now := make([]queue.Outgoing, len(msgs))
	for i, m := range msgs {
		now[i] = queue.Outgoing{Body: m.Body}
	}
	return u.next.SendBatch(ctx, queueURL, now)
}

// PumpOnce polls every queue once and delivers what it got; it returns how
// many messages were delivered.
func (s *System) PumpOnce(ctx context.Context) (int, error) {
	total := 0
	for _, b := range s.Bridges {
		n, err := b.PollOnce(ctx)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// Settle pumps until a full round over every queue delivers nothing, or
// maxRounds rounds have run. It returns the rounds that delivered messages.
func (s *System) Settle(ctx context.Context, maxRounds int) (int, error) {
	for round := 0; round < maxRounds; round++ {
		n, err := s.PumpOnce(ctx)
		if err != nil {
			return round, err
		}
		if n == 0 {
			return round, nil
		}
	}
	return maxRounds, fmt.Errorf("system: still busy after %d rounds", maxRounds)
}
