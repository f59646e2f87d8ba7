// Package localstack runs the whole system on one machine: the real handlers
// of every function wired by package wiring to DynamoDB Local and fauxqs, an
// HTTP server that hands requests to the Submission handler as API Gateway would,
// SQS pollers that behave like Lambda's event source mappings, a ticker that
// fires the Supervisor like the EventBridge rule, and the remote-service
// simulator with fault injection. It is glue for `make demo` and
// `make local`; nothing here is deployed, and the handlers know nothing of
// it.
package localstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sasflow/sas/internal/localstack/draw"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/internal/localstack/apigw"
	"github.com/sasflow/sas/internal/localstack/chaos"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/localstack/sqsbridge"
	"github.com/sasflow/sas/internal/localstack/streambridge"
	"github.com/sasflow/sas/internal/localstack/wiring"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/codestep"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/submission"
	"github.com/sasflow/sas/shared/supervisor"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
	"github.com/sasflow/sas/steps"
)

// Options configures a local stack.
type Options struct {
	// DynamoDBEndpoint is DynamoDB Local; AWSEndpoint serves SQS and SNS
	// (fauxqs).
	DynamoDBEndpoint, AWSEndpoint string
	Region                        string
	// Prefix starts every table, queue and topic name.
	Prefix string
	// APIAddr and RemoteAddr are the loopback addresses of the HTTP API and
	// the remote-service simulator; port 0 picks a free one.
	APIAddr, RemoteAddr string

	// Workflows is every workflow version the stack runs; DemoOptions
	// reads the deployed catalog (shared/catalog), as the stack does.
	Workflows workflow.Catalog
	Policy    workflow.Policy
	// Agent tunes the agents; Step, ResponseQueueURL and RemoteBaseURL are
	// filled in per step.
	Agent agent.Config
	// Faults of the remote service, and Seed of its random draws and of
	// Crash (0: a random seed).
	Faults remotesim.Faults
	Seed   uint64
	// Replicas is how many endpoints the remote service has (0 is one),
	// each an address of its own in front of the one simulator, as
	// regional endpoints share one ledger; every Agent routes over them.
	// The first listens on RemoteAddr.
	Replicas int
	// Crash is the probability that an Agent invocation dies before doing
	// anything, like a Lambda killed at start: its batch comes back after
	// the visibility timeout, by which time the Supervisor has retried.
	Crash float64
	// Visibility of every queue; MaxReceiveCount as deployed.
	Visibility time.Duration
	// PollersPerQueue is how many concurrent invocations each event source
	// mapping runs (the Scheduler's: the stack lets them scale);
	// AgentPollers, when set, is the Agents' instead (the stack's
	// MaximumConcurrency).
	PollersPerQueue, AgentPollers int
	// Capacity, when set, is the capacity model the stack deploys: the
	// Submission's admission check follows it (set AgentPollers to its
	// AgentMaxConcurrency too).
	Capacity *topology.Capacity
	// SuperviseEvery is the Supervisor's schedule.
	SuperviseEvery time.Duration
	// NoFastPath runs the Supervisor's sweep alone, without the Timer and
	// the deadline queue's consumer (the stack always deploys both).
	NoFastPath bool
	// Log receives the handlers' logs (JSON).
	Log *slog.Logger
	// OrderIDs, when set, makes the IDs of new orders instead of random
	// UUIDs (submission.WithOrderIDs): SeededOrderIDs for a demo whose
	// seed replays it, or a test's own.
	OrderIDs func(owner, key string) string

	// Chaos, when set, wraps every handler's store and queue sender to kill
	// invocations between writes and to duplicate or delay messages.
	Chaos *chaos.Injector
	// Schedulers and Supervisors are how many instances run at once (at
	// least one each); the extra ones see clocks skewed by ±Skew.
	Schedulers, Supervisors int
	Skew                    time.Duration
	// AgentLag sets the agents' clocks this far behind: an Agent then works
	// and replies past CompleteBy, a zombie whose reply must be refused.
	AgentLag time.Duration
	// Every OutageEvery, DynamoDB or else SQS and SNS (in turn) become
	// unreachable for OutageFor.
	OutageEvery, OutageFor time.Duration

	// InvokeAll are access keys of clients whose IAM policy allows
	// execute-api:Invoke on the whole API, as a mistaken grant would: the
	// local API lets them call the operator routes too, where the
	// Submission refuses them itself.
	InvokeAll []string
}

// DemoOptions are the local runs' settings: the deployed workflow and
// policy, scaled down so that timeouts, retries and recoveries happen within
// seconds. `make chaos` and the end-to-end tests run them as they are;
// `make demo` adds the capacity model as the stack deploys one
// (WithCapacity, DemoCapacity).
func DemoOptions() Options {
	return DemoOptionsOf(catalog.MustDeployed())
}

// DemoOptionsOf is DemoOptions for the workflow versions of cat, scaled
// down alike.
func DemoOptionsOf(cat workflow.Catalog) Options {
	cat = Scaled(cat, 3*time.Second)
	ag := agent.DefaultConfig()
	ag.RemoteTimeout, ag.RetryBase, ag.RetryMax = 500*time.Millisecond, 20*time.Millisecond, 300*time.Millisecond
	ag.BreakerCooldown = 500 * time.Millisecond
	return Options{
		Region: "us-east-1", APIAddr: "127.0.0.1:0", RemoteAddr: "127.0.0.1:0",
		Workflows: cat,
		Policy: workflow.Policy{
			MaxFailures: 3, ClaimTimeout: 5 * time.Second,
			BackoffBase: 200 * time.Millisecond, BackoffMax: 2 * time.Second, AlertTimeout: 3 * time.Second,
			Retention: workflow.DefaultRetention,
		},
		Agent: ag,
		Faults: remotesim.Faults{
			Transient: 0.10, Permanent: 0.005, Hang: 0.03, ApplyThenFail: 0.03,
			Latency: 0.3, LatencyMin: remotesim.Duration(5 * time.Millisecond), LatencyMax: remotesim.Duration(80 * time.Millisecond),
		},
		Replicas:        2,
		Crash:           0.02,
		Visibility:      5 * time.Second,
		PollersPerQueue: 4,
		SuperviseEvery:  time.Second,
	}
}

// Scaled is cat with every step's budget set to budget and no queue
// allowance (WithCapacity gives one, with the admission check that keeps
// the queues within it; without both, timeouts happen within seconds),
// and every extended wait of a step's retry policy (Retry.Wait) set to
// twice the budget, once at most, so an order that waits comes back within
// a run and takes at most one threshold's worth of attempts longer than
// one that gives up.
func Scaled(cat workflow.Catalog, budget time.Duration) workflow.Catalog {
	out := cat
	out.Definitions = make([]workflow.Definition, len(cat.Definitions))
	for i, d := range cat.Definitions {
		d.Steps = slices.Clone(d.Steps)
		for j := range d.Steps {
			d.Steps[j].Budget, d.Steps[j].Wait = budget, 0
			if r := d.Steps[j].Retry; r != nil && r.Wait > 0 {
				short := *r
				short.Wait, short.WaitRounds = 2*budget, min(r.WaitRounds, 1)
				d.Steps[j].Retry = &short
			}
		}
		out.Definitions[i] = d
	}
	return out
}

// DemoCapacity is `make demo`'s capacity model. The local stack is bound
// by the machine (two cores shared by DynamoDB Local, fauxqs and every
// handler), not by the simulator's few milliseconds a call, so the model
// has the fewest calls at once the topology allows, 20 an Agent
// (MaximumConcurrency 2), each taking 500 ms: 40 orders a second, shedding
// past one second of queued work (40 requests an Agent queue). Under it,
// on a loaded machine, no request of a 300-order demo waited in its
// Agent's queue past its allowance (CauseQueue).
func DemoCapacity() topology.Capacity {
	return topology.Capacity{RemoteLatency: 500 * time.Millisecond, RemoteConcurrency: 20, AdmitWait: time.Second}
}

// QueueAllowance is the Wait allowance of a step under the capacity model
// c: as many times c's AdmitWait as the deployed steps' (workflow.DefaultWait)
// is of the deployed model's (topology.DefaultCapacity), so a burst the
// admission check sees late still leaves every Agent its whole Budget.
func QueueAllowance(c topology.Capacity) time.Duration {
	return c.AdmitWait * (workflow.DefaultWait / topology.DefaultCapacity().AdmitWait)
}

// SchedulerPollers is how many invocations at once each of the Scheduler's
// event source mappings runs under WithCapacity. The stack caps only the
// Agents' (MaximumConcurrency); the Scheduler's scale with their queues.
// Locally a fixed number has to stand for that, and the Scheduler works a
// batch one record after another: on a loaded 2-core machine, 300-order
// demos with the 4 of DemoOptions saw the replies wait for it past their
// steps' leases (p50 22, 12 and 21 s; in two runs of three, over 90% of
// the retries a reply's wait), with 16 few did (p50 1.7, 1.5 and 2.9 s).
const SchedulerPollers = 16

// WithCapacity is o with the capacity model c in force as the stack
// deploys one: the Submission sheds new orders past c's backlog (429 with
// Retry-After), each Agent runs c's MaximumConcurrency invocations, the
// Scheduler SchedulerPollers, and every step may wait QueueAllowance(c) in
// its queue without costing its Budget (Step.Wait, CompleteBy). Every
// queue's visibility timeout then outlasts the longest lease by two
// seconds, as the deployed one outlasts an Agent's function timeout: a
// killed Agent's request comes back only after the Supervisor has retried
// it. Apply it after the workflows are final (Scaled).
func WithCapacity(o Options, c topology.Capacity) Options {
	o.Capacity, o.AgentPollers = &c, c.AgentMaxConcurrency()
	o.PollersPerQueue = max(o.PollersPerQueue, SchedulerPollers)
	wait := QueueAllowance(c)
	cat := o.Workflows
	cat.Definitions = make([]workflow.Definition, len(o.Workflows.Definitions))
	for i, d := range o.Workflows.Definitions {
		d.Steps = slices.Clone(d.Steps)
		for j := range d.Steps {
			d.Steps[j].Wait = wait
		}
		cat.Definitions[i] = d
	}
	o.Workflows = cat
	for _, a := range cat.Agents() {
		o.Visibility = max(o.Visibility, a.Lease()+2*time.Second)
	}
	return o
}

// Validate reports what keeps o from starting.
func (o Options) Validate() error {
	var errs []error
	if o.DynamoDBEndpoint == "" || o.AWSEndpoint == "" {
		errs = append(errs, errors.New("both engine endpoints are required (scripts/engines.sh run -- ... sets them)"))
	}
	for _, a := range []string{o.APIAddr, o.RemoteAddr} {
		if err := remotesim.Loopback(a); err != nil {
			errs = append(errs, err)
		}
	}
	// Above one half most orders would never finish; 1, every Agent
	// invocation killed, is `make recovery`'s setting (nothing finishes,
	// every step is recovered).
	if o.Crash < 0 || (o.Crash > 0.5 && o.Crash != 1) {
		errs = append(errs, fmt.Errorf("crash probability %v must be within 0..0.5, or 1", o.Crash))
	}
	if o.Replicas < 0 || o.Replicas > agent.MaxReplicas {
		errs = append(errs, fmt.Errorf("%d replicas of the remote: at most %d", o.Replicas, agent.MaxReplicas))
	}
	if o.OutageEvery > 0 && (o.OutageFor <= 0 || o.OutageFor >= o.OutageEvery) {
		errs = append(errs, fmt.Errorf("an outage of %v every %v: it must be shorter than the period", o.OutageFor, o.OutageEvery))
	}
	if o.Capacity != nil {
		errs = append(errs, o.Capacity.Validate())
		for _, d := range o.Workflows.Definitions {
			errs = append(errs, o.Capacity.CheckWorkflow(d))
		}
	}
	if o.Visibility < time.Second || o.PollersPerQueue < 1 || o.AgentPollers < 0 || o.SuperviseEvery <= 0 {
		errs = append(errs, fmt.Errorf("visibility %v (>=1s), pollers %d (>=1) and supervisor period %v (>0) out of range",
			o.Visibility, o.PollersPerQueue, o.SuperviseEvery))
	}
	errs = append(errs, o.Workflows.Validate(), o.Policy.Validate(), o.Faults.Validate())
	return errors.Join(errs...)
}

// Stack is a running local wiring.
type Stack struct {
	Sys *wiring.System
	Sim *remotesim.Sim
	// CodeEffects counts the code steps' effects, as Sim counts the
	// remote's.
	CodeEffects *CodeEffects
	// Replicas are the remote service's endpoints, all in front of Sim.
	Replicas []*remotesim.Replica
	// APIURL and RemoteURL are the base URLs of the HTTP API and the
	// simulator (its first replica); RemoteURLs every replica's.
	APIURL, RemoteURL string
	RemoteURLs        []string
	// AlertWatchURL is a queue subscribed to the alert topic, as an
	// operator's e-mail would be.
	AlertWatchURL string
	// EventsWatchURL is DemoClientID's private queue: subscribed to the
	// order-events topic with a filter policy on its client ID.
	EventsWatchURL string
	SQS            *sqs.Client
	DynamoDB       *dynamodb.Client
	// Direct reads the state store without the outage proxy, for checks.
	Direct *statestore.Store

	crashes   atomic.Int64
	policy    workflow.Policy
	workflows workflow.Catalog
	chaos     *chaos.Injector
	// claims records each claim's request as the Agents' event source
	// mappings hand it over, and its reply as sent; outageMarks the engine
	// outages; agentLag the Agents' clocks' lag: what the attribution of
	// retries reads (Cause).
	claims      claims
	outageMu    sync.Mutex
	outageMarks []mark
	agentLag    bool

	ddbProxy, awsProxy *outageProxy
	outageCount        atomic.Int64
	outageStop         sync.Once
	outageCancel       context.CancelFunc

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	servers []*http.Server
	log     *slog.Logger

	// callers is who signs with a credential (Options.caller), before
	// Recreate; incarnations counts, by principal (a user's ARN, a
	// role's), how often Recreate deleted a local user or role and created
	// it anew.
	callers        func(apigw.Credential) apigw.Caller
	incarnationsMu sync.Mutex
	incarnations   map[string]int
}

// Recreate deletes the local user or role that signs with accessKeyID and
// creates it anew under the same name, as IAM would: from then on its
// requests, and those of every session of the role, carry the same ARN
// and a new unique ID (apigw.Recreated), so the Submission takes it for
// another client than the one it was. A Cognito identity has no user or
// role of its own and stays as it is.
func (s *Stack) Recreate(accessKeyID string) {
	iam := s.callers(apigw.Credential{AccessKeyID: accessKeyID}).IAM
	s.incarnationsMu.Lock()
	defer s.incarnationsMu.Unlock()
	if s.incarnations == nil {
		s.incarnations = map[string]int{}
	}
	s.incarnations[principalOf(iam.UserARN)]++
}

// recreated is who signs with a credential (callers), with the identity of
// its user's or role's current incarnation (Recreate).
func (s *Stack) recreated(c apigw.Credential) apigw.Caller {
	who := s.callers(c)
	s.incarnationsMu.Lock()
	n := s.incarnations[principalOf(who.IAM.UserARN)]
	s.incarnationsMu.Unlock()
	who.IAM = apigw.Recreated(who.IAM, n)
	return who
}

// principalOf is the principal an identity's ARN is of: a user's ARN is
// its own, a role session's the role's (its ARN without the session).
func principalOf(userArn string) string {
	if i := strings.Index(userArn, ":assumed-role/"); i >= 0 {
		if j := strings.LastIndexByte(userArn, '/'); j > i+len(":assumed-role/") {
			return userArn[:j]
		}
	}
	return userArn
}

// Crashes counts the Agent invocations killed so far.
func (s *Stack) Crashes() int64 { return s.crashes.Load() }

// Start creates the tables, queues and topic and starts every part. Close
// stops them; the tables and queues stay in the engines.
func Start(ctx context.Context, o Options) (*Stack, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("localrun: %w", err)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Prefix == "" {
		o.Prefix = "sas-local-" + time.Now().UTC().Format("150405")
	}
	seed := o.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	s := &Stack{log: o.Log, policy: o.Policy, workflows: o.Workflows, chaos: o.Chaos, callers: o.caller, agentLag: o.AgentLag > 0}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	fail := func(err error) (*Stack, error) {
		s.Close()
		return nil, fmt.Errorf("localrun: %w", err)
	}
	// The handlers reach the engines through proxies that can cut them
	// off; the demo's own reads go direct.
	ddbURL, awsURL := o.DynamoDBEndpoint, o.AWSEndpoint
	if o.OutageEvery > 0 {
		for _, t := range []struct {
			url   *string
			proxy **outageProxy
		}{{&ddbURL, &s.ddbProxy}, {&awsURL, &s.awsProxy}} {
			p, err := newOutageProxy(strings.TrimPrefix(*t.url, "http://"))
			if err != nil {
				return fail(err)
			}
			*t.proxy, *t.url = p, "http://"+p.addr()
		}
	}
	cfg := aws.Config{Region: o.Region, Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}
	s.DynamoDB = dynamodb.NewFromConfig(cfg, func(c *dynamodb.Options) { c.BaseEndpoint = aws.String(o.DynamoDBEndpoint) })
	s.SQS = sqs.NewFromConfig(cfg, func(c *sqs.Options) { c.BaseEndpoint = aws.String(o.AWSEndpoint) })
	handlerDDB := dynamodb.NewFromConfig(cfg, func(c *dynamodb.Options) {
		c.BaseEndpoint = aws.String(ddbURL)
		if o.Chaos != nil {
			// State writes whose answers are lost on the way back.
			c.HTTPClient = &http.Client{Transport: o.Chaos.Transport(http.DefaultTransport.(*http.Transport).Clone())}
		}
	})
	handlerSQS := sqs.NewFromConfig(cfg, func(c *sqs.Options) { c.BaseEndpoint = aws.String(awsURL) })
	snsc := sns.NewFromConfig(cfg, func(c *sns.Options) { c.BaseEndpoint = aws.String(awsURL) })
	streams := dynamodbstreams.NewFromConfig(cfg, func(c *dynamodbstreams.Options) { c.BaseEndpoint = aws.String(ddbURL) },
		streambridge.ForDynamoDBLocal)

	s.Sim = remotesim.New(remotesim.WithSeed(seed))
	if err := s.Sim.SetFaults(o.Faults); err != nil {
		return fail(err)
	}
	var err error
	for i := range max(o.Replicas, 1) {
		addr := o.RemoteAddr
		if i > 0 {
			host, _, _ := net.SplitHostPort(o.RemoteAddr)
			addr = net.JoinHostPort(host, "0")
		}
		r, err := remotesim.StartReplica(s.Sim, addr)
		if err != nil {
			return fail(fmt.Errorf("remote simulator: %w", err))
		}
		s.Replicas = append(s.Replicas, r)
		s.RemoteURLs = append(s.RemoteURLs, r.URL())
	}
	s.RemoteURL = s.RemoteURLs[0]
	remoteURLs := s.RemoteURLs
	if len(remoteURLs) == 1 {
		remoteURLs = nil
	}

	// The API's address is known before the handlers are built, so alerts
	// print CLI commands that work against this stack.
	apiLn, err := net.Listen("tcp", o.APIAddr)
	if err != nil {
		return fail(fmt.Errorf("http api: %w", err))
	}
	sysOpts := wiring.Options{
		OperatorAPIURL: "http://" + apiLn.Addr().String(),
		DynamoDB:       handlerDDB, SQS: handlerSQS, SNS: snsc, Streams: streams,
		Prefix: o.Prefix, Region: o.Region,
		Workflows: o.Workflows, Policy: o.Policy, RemoteBaseURL: s.RemoteURL, RemoteBaseURLs: remoteURLs, Agent: o.Agent,
		MaxReceiveCount: topology.MaxReceiveCount, VisibilityTimeout: o.Visibility,
		Clock: clock.System{}, Log: o.Log, Capacity: o.Capacity, OrderIDs: o.OrderIDs,
		// The stack's operators are its role's sessions (and whoever the
		// deployment lists); here, the role's one local session.
		OperatorPrincipals: []string{apigw.LocalRoleARN(OperatorRole)},
	}
	// The code steps run in process, as deployed; their resources are
	// made here (CodeStepEnv).
	stepAWS := cfg.Copy()
	stepAWS.BaseEndpoint = aws.String(awsURL)
	stepEnv, err := CodeStepEnv(ctx, stepAWS, o.Prefix, o.Region)
	if err != nil {
		return fail(err)
	}
	sysOpts.CodeSteps, sysOpts.StepEnv, sysOpts.StepAWS = steps.All, stepEnv, stepAWS
	s.CodeEffects = NewCodeEffects()
	sysOpts.WrapStep = s.CodeEffects.Wrap
	if o.Chaos != nil {
		sysOpts.CodeStepOptions = []codestep.Option{codestep.WithFaults(o.Chaos.CodeFaults())}
	}
	if o.AgentLag > 0 {
		lag := &clock.Offset{}
		lag.Advance(-o.AgentLag)
		sysOpts.AgentClock = lag
	}
	// The Agents' replies are noted as sent (Stack.claims), under chaos's
	// faults: a reply chaos kills was never sent.
	sysOpts.WrapSender = func(role string, snd wiring.Sender) wiring.Sender {
		if role == topology.Agent {
			snd = replySender{next: snd, claims: &s.claims}
		}
		if o.Chaos != nil {
			snd = o.Chaos.Sender(role, snd)
		}
		return snd
	}
	if o.Chaos != nil {
		sysOpts.WrapStore, sysOpts.WrapEvents = o.Chaos.Store, o.Chaos.Events
		sysOpts.WrapDeadlines = o.Chaos.Deadlines
	}
	s.Sys, err = wiring.Build(ctx, sysOpts)
	if err != nil {
		return fail(err)
	}
	s.Direct = statestore.New(s.DynamoDB, s.Sys.Tables)
	if s.AlertWatchURL, err = watchTopic(ctx, s.SQS, snsc, s.Sys.AlertTopicARN, o.Prefix+"-alert-watch", nil); err != nil {
		return fail(err)
	}
	if s.EventsWatchURL, err = watchTopic(ctx, s.SQS, snsc, s.Sys.OrderEventsTopicARN, o.Prefix+"-events-"+DemoClientID, map[string]string{
		"FilterPolicy": `{"clientId":["` + DemoClientID + `"]}`, "RawMessageDelivery": "true",
	}); err != nil {
		return fail(err)
	}

	// Every route is IAM-authorized, as in the stack: a caller signs with
	// SigV4, its access key names it (see apigw.WithIAMAuthorization), and
	// the stack's client or operator policy says what it may invoke.
	gw, err := apigw.New(routes(), s.Sys.Submission.Handle, apigw.WithLogger(o.Log), apigw.WithIAMAuthorization(),
		apigw.WithCallers(s.recreated))
	if err != nil {
		return fail(err)
	}
	s.APIURL = s.serveOn(apiLn, gw)

	// Event source mappings: the first two bridges feed the Scheduler, the
	// rest one Agent each. Extra Schedulers take turns with the first.
	schedulers := []sqsbridge.Handler{s.Sys.Scheduler.Handle}
	for i := 1; i < o.Schedulers; i++ {
		schedulers = append(schedulers, s.Sys.NewScheduler(skewed(i, o.Skew)).Handle)
	}
	for i, b := range s.Sys.Bridges {
		pollers := o.PollersPerQueue
		if i >= 2 && o.AgentPollers > 0 {
			pollers = o.AgentPollers
		}
		for j := range pollers {
			p := *b
			p.WaitTime = time.Second
			// Warn: a receive or delete that failed leaves its batch to the
			// visibility timeout, which shows as a step late by minutes.
			p.OnError = func(err error) {
				o.Log.Warn("event source mapping", slog.String("queue", p.QueueURL), slog.Any("error", err))
			}
			if i < 2 {
				p.Handler = schedulers[j%len(schedulers)]
			} else {
				p.Handler = s.agent(b.Handler, o.Crash, seed)
			}
			s.wg.Go(func() { _ = p.Run(runCtx) })
		}
	}
	// The stream's event source mapping: one poller, as Lambda reads a shard
	// with one invocation at a time.
	s.Sys.Stream.OnError = func(err error) { o.Log.Debug("stream event source mapping", slog.Any("error", err)) }
	s.wg.Go(func() { _ = s.Sys.Stream.Run(runCtx) })
	// The Supervisor's fast path: the Timer on the same stream, and the
	// deadline queue's event source mapping.
	if !o.NoFastPath {
		s.Sys.TimerStream.OnError = func(err error) { o.Log.Debug("timer stream event source mapping", slog.Any("error", err)) }
		s.wg.Go(func() { _ = s.Sys.TimerStream.Run(runCtx) })
		p := *s.Sys.DeadlineBridge
		p.WaitTime = time.Second
		p.OnError = func(err error) {
			o.Log.Warn("event source mapping", slog.String("queue", p.QueueURL), slog.Any("error", err))
		}
		s.wg.Go(func() { _ = p.Run(runCtx) })
	}
	for i := range max(o.Supervisors, 1) {
		h := s.Sys.Supervisor
		if i > 0 {
			h = s.Sys.NewSupervisor(skewed(i, o.Skew))
		}
		s.wg.Go(func() { s.supervise(runCtx, h, o.SuperviseEvery) })
	}
	if o.Chaos != nil && len(s.Replicas) > 1 {
		s.wg.Go(func() { s.replicaFaults(runCtx, o.Chaos, o.Workflows.AgentNames(), 2*o.Agent.RemoteTimeout) })
	}
	if o.OutageEvery > 0 {
		outCtx, outCancel := context.WithCancel(runCtx)
		s.outageCancel = outCancel
		s.wg.Go(func() { s.outages(outCtx, o.OutageEvery, o.OutageFor) })
	}
	return s, nil
}

// skewed is the clock of the i-th extra instance: alternately ahead and
// behind by skew.
func skewed(i int, skew time.Duration) clock.Clock {
	c := &clock.Offset{}
	if i%2 == 1 {
		c.Advance(skew)
	} else {
		c.Advance(-skew)
	}
	return c
}

// outages cuts DynamoDB, then SQS and SNS, in turn.
func (s *Stack) outages(ctx context.Context, every, length time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p, name := s.ddbProxy, "dynamodb"
		if n%2 == 1 {
			p, name = s.awsProxy, "sqs+sns"
		}
		s.outageCount.Add(1)
		s.log.Warn("chaos: engine unreachable", slog.String("engine", name), slog.Duration("for", length))
		now := time.Now()
		s.outageMu.Lock()
		s.outageMarks = append(s.outageMarks, mark{cause: CauseOutage, from: now, to: now.Add(length), phase: phaseRequest})
		s.outageMu.Unlock()
		p.outage(length)
	}
}

// ReplicaFaultPeriod is how long a chaos run's replica fault lasts, and
// how often one may strike (chaos.ReplicaFault's rate of the periods).
const ReplicaFaultPeriod = time.Second

// replicaFaults puts a replica of the remote service at fault for the
// periods chaos.ReplicaFault strikes, one at a time, healing it after:
// down, refusing connections, or slower than slow, the Agents' timeout.
func (s *Stack) replicaFaults(ctx context.Context, in *chaos.Injector, steps []string, slow time.Duration) {
	t := time.NewTicker(ReplicaFaultPeriod)
	defer t.Stop()
	slow = min(slow, remotesim.MaxLatency)
	var struck *remotesim.Replica
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if struck != nil {
			if err := struck.SetFault(remotesim.ReplicaFault{}); err != nil {
				s.log.Warn("chaos: replica not healed", slog.String("replica", struck.URL()), slog.Any("error", err))
			} else {
				s.log.Info(msgReplicaHealed, slog.String("replica", struck.URL()))
			}
			struck = nil
		}
		o, ok := in.ReplicaOutage(n, steps, len(s.Replicas), slow)
		if !ok {
			continue
		}
		struck = s.Replicas[o.Replica]
		s.log.Warn(msgReplicaAtFault, slog.String("replica", struck.URL()), slog.String("fault", o.Fault.String()),
			slog.Duration("for", ReplicaFaultPeriod), slog.Duration("slow", o.Fault.Slow))
		if err := struck.SetFault(o.Fault); err != nil {
			s.log.Warn("chaos: replica fault not set", slog.String("replica", struck.URL()), slog.Any("error", err))
		}
	}
}

// outageMarksSoFar returns the engine outages so far, as marks of every
// order.
func (s *Stack) outageMarksSoFar() []mark {
	s.outageMu.Lock()
	defer s.outageMu.Unlock()
	return slices.Clone(s.outageMarks)
}

// StopOutages ends the engine outages, for the final reads.
func (s *Stack) StopOutages() {
	s.outageStop.Do(func() {
		if s.ddbProxy != nil {
			s.outageCancel()
		}
	})
}

// Outages counts the engine outages so far.
func (s *Stack) Outages() int64 { return s.outageCount.Load() }

// caller is who signs with a credential locally, and what the stack's
// policies let it invoke: OperatorAccessKey is a session of OperatorRole
// with the operator policy; an access key of InvokeAll is allowed every
// route; any other is a client with the client policy, an IAM user or, by
// the Cognito convention (apigw.LocalCognitoIdentity), a user of the local
// identity pool, whose roles have the client policy.
func (o Options) caller(c apigw.Credential) apigw.Caller {
	switch {
	case c.AccessKeyID == OperatorAccessKey:
		return apigw.Caller{IAM: apigw.LocalRoleSession(OperatorRole, c), Policy: apigw.Policy(submission.OperatorPolicy())}
	case slices.Contains(o.InvokeAll, c.AccessKeyID):
		return apigw.Caller{IAM: apigw.LocalCaller(c), Policy: apigw.AllowAll}
	}
	return apigw.Caller{IAM: apigw.LocalCaller(c), Policy: apigw.Policy(submission.ClientPolicy())}
}

// routes are the API's routes, as the stack declares them, clients' and
// operators' alike, and its catch-all: which caller may invoke which is the
// policies' business (Options.caller).
func routes() []apigw.Route {
	out := []apigw.Route{apigw.DefaultRoute}
	for _, r := range submission.Routes() {
		out = append(out, apigw.Route{Method: r.Method, Path: r.Path})
	}
	return out
}

var errCrash = errors.New("localrun: simulated crash of the Agent invocation")

// agent is an Agent's handler as its event source mapping invokes it: it
// kills an invocation before it starts with probability crash, decided by
// the seed, the batch's first message and its receive count, so a seed
// kills the same deliveries in a replay; and it notes when each request
// reached an invocation, and whether that one was killed (Stack.claims).
func (s *Stack) agent(h sqsbridge.Handler, crash float64, seed uint64) sqsbridge.Handler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		if len(ev.Records) == 0 {
			return h(ctx, ev)
		}
		r := ev.Records[0]
		n, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
		crashed := crash > 0 && draw.Unit(seed, "crash|"+chaos.MessageOp(r.EventSourceARN, r.Body), uint64(n)) < crash
		now := time.Now()
		for _, r := range ev.Records {
			if req, err := message.DecodeAgentRequest(r.Body); err == nil {
				s.claims.delivered(req, s.budget(req), now, crashed)
			}
		}
		if !crashed {
			return h(ctx, ev)
		}
		s.crashes.Add(1)
		return events.SQSEventResponse{}, errCrash
	}
}

// budget is the Budget of req's step in its order's version.
func (s *Stack) budget(req message.AgentRequest) time.Duration {
	if d, err := s.workflows.Resolve(req.Workflow); err == nil && req.StepIndex < len(d.Steps) {
		return d.Steps[req.StepIndex].Budget
	}
	return s.lease(req.Step)
}

// lease is a step's longest lease of any version (Wait plus Budget).
func (s *Stack) lease(step string) time.Duration {
	for _, a := range s.workflows.Agents() {
		if a.Name == step {
			return a.Lease()
		}
	}
	return 0
}

// supervise fires a Supervisor like the EventBridge rule. A run that dies
// (chaos) is a failed invocation; the next tick runs again.
func (s *Stack) supervise(ctx context.Context, h *supervisor.Handler, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.superviseOnce(ctx, h, now)
		}
	}
}

func (s *Stack) superviseOnce(ctx context.Context, h *supervisor.Handler, now time.Time) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Warn("supervisor run died", slog.String("panic", fmt.Sprint(p)))
		}
	}()
	ev := events.EventBridgeEvent{
		Version: "0", ID: fmt.Sprintf("local-%d", now.UnixNano()), DetailType: "Scheduled Event",
		Source: "aws.events", AccountID: "000000000000", Time: now.UTC(), Region: "us-east-1",
		Resources: []string{"arn:aws:events:us-east-1:000000000000:rule/local-supervisor"}, Detail: []byte("{}"),
	}
	if err := h.Handle(ctx, ev); err != nil && ctx.Err() == nil {
		s.log.Warn("supervisor run failed", slog.Any("error", err))
	}
}

func (s *Stack) serveOn(ln net.Listener, h http.Handler) string {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	s.servers = append(s.servers, srv)
	s.wg.Go(func() { _ = srv.Serve(ln) })
	return "http://" + ln.Addr().String()
}

// Close stops the pollers, the ticker and the servers.
func (s *Stack) Close() {
	if s.Sim != nil {
		s.Sim.Close() // hanging calls would hold the shutdown up
	}
	if s.cancel != nil {
		s.cancel()
	}
	for _, srv := range s.servers {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = srv.Shutdown(ctx)
		cancel()
	}
	for _, r := range s.Replicas {
		r.Close()
	}
	s.wg.Wait()
	for _, p := range []*outageProxy{s.ddbProxy, s.awsProxy} {
		if p != nil {
			p.close()
		}
	}
}

// DemoClientID is the client ID the demo's orders carry, so their status
// events reach EventsWatchURL.
const DemoClientID = "demo-client"

// watchTopic subscribes a new queue to topic, with the subscription's
// attributes, and returns the queue's URL.
func watchTopic(ctx context.Context, q *sqs.Client, n *sns.Client, topic, name string, attrs map[string]string) (string, error) {
	// A short visibility timeout: a message handed to a receive whose
	// answer never arrived (a long poll cut off as it ended) comes back in
	// seconds instead of 30, well inside the demo's 15 s read window. Seen
	// as "missing" events and alerts published 29 s before the window
	// closed. The checks drop duplicates (by seq, by alertId).
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{
		string(sqstypes.QueueAttributeNameVisibilityTimeout): "2",
	}})
	if err != nil {
		return "", fmt.Errorf("create %s: %w", name, err)
	}
	got, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", fmt.Errorf("arn of %s: %w", name, err)
	}
	if _, err := n.Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(topic), Protocol: aws.String("sqs"),
		Endpoint: aws.String(got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]), Attributes: attrs}); err != nil {
		return "", fmt.Errorf("subscribe %s to %s: %w", name, topic, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// ChaosRates are the default rates of `make chaos`: a few percent of each
// kind of operation is struck.
func ChaosRates() map[chaos.Point]float64 {
	return map[chaos.Point]float64{
		chaos.KillAfterAccept: 0.03, chaos.KillAfterClaim: 0.03, chaos.KillAfterCommit: 0.03,
		chaos.KillBeforeReply: 0.03, chaos.KillAfterRecover: 0.05, chaos.KillAfterPublish: 0.05,
		chaos.DuplicateSend: 0.05, chaos.DelaySend: 0.05,
		chaos.FailDispatch: 0.02, chaos.ThrottleCommit: 0.03, chaos.LoseAnswer: 0.02,
		chaos.ReplicaFault: 0.3, chaos.CrashAfterEffect: 0.05, chaos.CrashAfterLedger: 0.05,
	}
}

// ChaosOptions are DemoOptions with every fault on at once: two Schedulers
// and two Supervisors with clocks 2 s apart, agents lagging 1 s (zombies),
// visibility shorter than a step's budget (a message redelivered while its
// first consumer still works), the engines cut off for 1 s every 7 s, and
// remote answers whose outcome is uncertain. The caller sets Chaos.
func ChaosOptions() Options {
	o := DemoOptions()
	o.Schedulers, o.Supervisors, o.Skew = 2, 2, 2*time.Second
	o.AgentLag = time.Second
	o.Visibility = 2 * time.Second
	o.OutageEvery, o.OutageFor = 7*time.Second, time.Second
	o.Crash = 0.03
	o.Faults.ApplyThenHang = 0.03
	// Answers that do not prove nothing was applied: a 2xx too large or not
	// JSON, a key still in progress after its caller timed out.
	o.Faults.Oversize, o.Faults.Garbage, o.Faults.HangThenApply = 0.005, 0.005, 0.01
	return o
}
