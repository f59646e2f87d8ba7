// Package localrun runs the whole system on one machine: the real handlers of
// every function wired by shared/system to DynamoDB Local and fauxqs, an HTTP
// server that hands requests to the Submission handler as API Gateway would,
// SQS pollers that behave like Lambda's event source mappings, a ticker that
// fires the Supervisor like the EventBridge rule, and the remote-service
// simulator with fault injection. It is glue for `make demo` and
// `make local`; nothing here is deployed, and the handlers know nothing of
// it.
package localrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/apigw"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/remotesim"
	"github.com/sasflow/sas/shared/sqsbridge"
	"github.com/sasflow/sas/shared/system"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
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

	Workflow workflow.Definition
	Policy   workflow.Policy
	// Agent tunes the agents; Step, ResponseQueueURL and RemoteBaseURL are
	// filled in per step.
	Agent agent.Config
	// Faults of the remote service, and Seed of its random draws and of
	// Crash (0: a random seed).
	Faults remotesim.Faults
	Seed   uint64
	// Crash is the probability that an Agent invocation dies before doing
	// anything, like a Lambda killed at start: its batch comes back after
	// the visibility timeout, by which time the Supervisor has retried.
	Crash float64
	// Visibility of every queue; MaxReceiveCount as deployed.
	Visibility time.Duration
	// PollersPerQueue is how many concurrent invocations each event source
	// mapping runs.
	PollersPerQueue int
	// SuperviseEvery is the Supervisor's schedule.
	SuperviseEvery time.Duration
	// Log receives the handlers' logs (JSON).
	Log *slog.Logger
}

// DemoOptions are the settings of `make demo`: the deployed workflow and
// policy, scaled down so that timeouts, retries and recoveries happen within
// seconds.
func DemoOptions() Options {
	def := workflow.Default()
	for i := range def.Steps {
		def.Steps[i].Budget = 3 * time.Second
	}
	ag, err := agent.LoadConfig(func(k string) string {
		return map[string]string{"AGENT_STEP": "x", "RESPONSE_QUEUE_URL": "http://x", "REMOTE_BASE_URL": "http://x"}[k]
	})
	if err != nil {
		panic(err)
	}
	ag.RemoteTimeout, ag.RetryBase, ag.RetryMax = 500*time.Millisecond, 20*time.Millisecond, 300*time.Millisecond
	ag.BreakerCooldown = 500 * time.Millisecond
	return Options{
		Region: "us-east-1", APIAddr: "127.0.0.1:0", RemoteAddr: "127.0.0.1:0",
		Workflow: def,
		Policy: workflow.Policy{
			MaxFailures: 3, ClaimTimeout: 5 * time.Second,
			BackoffBase: 200 * time.Millisecond, BackoffMax: 2 * time.Second, AlertTimeout: 3 * time.Second,
		},
		Agent: ag,
		Faults: remotesim.Faults{
			Transient: 0.10, Permanent: 0.005, Hang: 0.03, ApplyThenFail: 0.03,
			Latency: 0.3, LatencyMin: remotesim.Duration(5 * time.Millisecond), LatencyMax: remotesim.Duration(80 * time.Millisecond),
		},
		Crash:           0.02,
		Visibility:      5 * time.Second,
		PollersPerQueue: 4,
		SuperviseEvery:  time.Second,
	}
}

// Validate reports what keeps o from starting.
func (o Options) Validate() error {
	var errs []error
	if o.DynamoDBEndpoint == "" || o.AWSEndpoint == "" {
		errs = append(errs, errors.New("both engine endpoints are required (scripts/engines.sh run -- ... sets them)"))
	}
	for _, a := range []string{o.APIAddr, o.RemoteAddr} {
		if err := loopback(a); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Crash < 0 || o.Crash > 0.5 {
		errs = append(errs, fmt.Errorf("crash probability %v must be within 0..0.5", o.Crash))
	}
	if o.Visibility < time.Second || o.PollersPerQueue < 1 || o.SuperviseEvery <= 0 {
		errs = append(errs, fmt.Errorf("visibility %v (>=1s), pollers %d (>=1) and supervisor period %v (>0) out of range",
			o.Visibility, o.PollersPerQueue, o.SuperviseEvery))
	}
	errs = append(errs, o.Workflow.Validate(), o.Policy.Validate(), o.Faults.Validate())
	return errors.Join(errs...)
}

// loopback refuses to serve beyond this machine: the local API has no
// authorizer.
func loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("address %q: the local stack serves on loopback only", addr)
	}
	return nil
}

// Stack is a running local system.
type Stack struct {
	Sys *system.System
	Sim *remotesim.Sim
	// APIURL and RemoteURL are the base URLs of the HTTP API and the
	// simulator.
	APIURL, RemoteURL string
	// AlertWatchURL is a queue subscribed to the alert topic, as an
	// operator's e-mail would be.
	AlertWatchURL string
	SQS           *sqs.Client
	DynamoDB      *dynamodb.Client

	crashes atomic.Int64
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	servers []*http.Server
	log     *slog.Logger
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
	cfg := aws.Config{Region: o.Region, Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}
	s := &Stack{
		DynamoDB: dynamodb.NewFromConfig(cfg, func(c *dynamodb.Options) { c.BaseEndpoint = aws.String(o.DynamoDBEndpoint) }),
		SQS:      sqs.NewFromConfig(cfg, func(c *sqs.Options) { c.BaseEndpoint = aws.String(o.AWSEndpoint) }),
		log:      o.Log,
	}
	snsc := sns.NewFromConfig(cfg, func(c *sns.Options) { c.BaseEndpoint = aws.String(o.AWSEndpoint) })
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	fail := func(err error) (*Stack, error) {
		s.Close()
		return nil, fmt.Errorf("localrun: %w", err)
	}

	s.Sim = remotesim.New(remotesim.WithSeed(seed))
	if err := s.Sim.SetFaults(o.Faults); err != nil {
		return fail(err)
	}
	var err error
	if s.RemoteURL, err = s.serve(o.RemoteAddr, s.Sim); err != nil {
		return fail(fmt.Errorf("remote simulator: %w", err))
	}

	s.Sys, err = system.Build(ctx, system.Options{
		DynamoDB: s.DynamoDB, SQS: s.SQS, SNS: snsc,
		Prefix: o.Prefix, Region: o.Region,
		Workflow: o.Workflow, Policy: o.Policy, RemoteBaseURL: s.RemoteURL, Agent: o.Agent,
		MaxReceiveCount: topology.MaxReceiveCount, VisibilityTimeout: o.Visibility,
		Clock: clock.System{}, Log: o.Log,
	})
	if err != nil {
		return fail(err)
	}
	if s.AlertWatchURL, err = watchTopic(ctx, s.SQS, snsc, s.Sys.AlertTopicARN, o.Prefix+"-alert-watch"); err != nil {
		return fail(err)
	}

	gw, err := apigw.New(routes(), s.Sys.Submission.Handle, apigw.WithLogger(o.Log))
	if err != nil {
		return fail(err)
	}
	if s.APIURL, err = s.serve(o.APIAddr, gw); err != nil {
		return fail(fmt.Errorf("http api: %w", err))
	}

	// Event source mappings: the first two bridges feed the Scheduler, the
	// rest one Agent each.
	rng := rand.New(rand.NewPCG(seed, seed>>1|1))
	var rngMu sync.Mutex
	for i, b := range s.Sys.Bridges {
		for range o.PollersPerQueue {
			p := *b
			p.WaitTime = time.Second
			p.OnError = func(err error) { o.Log.Debug("event source mapping", "queue", p.QueueURL, "error", err) }
			if i >= 2 && o.Crash > 0 {
				p.Handler = s.crashing(b.Handler, o.Crash, func() float64 { rngMu.Lock(); defer rngMu.Unlock(); return rng.Float64() })
			}
			s.wg.Go(func() { _ = p.Run(runCtx) })
		}
	}
	s.wg.Go(func() { s.supervise(runCtx, o.SuperviseEvery) })
	return s, nil
}

// routes are the API's routes, as the stack declares them.
func routes() []apigw.Route {
	return []apigw.Route{{Method: "POST", Path: "/orders"}, {Method: "GET", Path: "/orders/{id}"}}
}

var errCrash = errors.New("localrun: simulated crash of the Agent invocation")

func (s *Stack) crashing(h sqsbridge.Handler, p float64, draw func() float64) sqsbridge.Handler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		if draw() < p {
			s.crashes.Add(1)
			return events.SQSEventResponse{}, errCrash
		}
		return h(ctx, ev)
	}
}

// supervise fires the Supervisor like the EventBridge rule.
func (s *Stack) supervise(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			ev := events.EventBridgeEvent{
				Version: "0", ID: fmt.Sprintf("local-%d", now.UnixNano()), DetailType: "Scheduled Event",
				Source: "aws.events", AccountID: "000000000000", Time: now.UTC(), Region: "us-east-1",
				Resources: []string{"arn:aws:events:us-east-1:000000000000:rule/local-supervisor"}, Detail: []byte("{}"),
			}
			if err := s.Sys.Supervisor.Handle(ctx, ev); err != nil && ctx.Err() == nil {
				s.log.Warn("supervisor run failed", "error", err)
			}
		}
	}
}

// serve starts an HTTP server on addr and returns its base URL.
func (s *Stack) serve(addr string, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	s.servers = append(s.servers, srv)
	s.wg.Go(func() { _ = srv.Serve(ln) })
	return "http://" + ln.Addr().String(), nil
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
	s.wg.Wait()
}

// watchTopic subscribes a new queue to topic and returns the queue's URL.
func watchTopic(ctx context.Context, q *sqs.Client, n *sns.Client, topic, name string) (string, error) {
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("create %s: %w", name, err)
	}
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", fmt.Errorf("arn of %s: %w", name, err)
	}
	if _, err := n.Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(topic), Protocol: aws.String("sqs"),
		Endpoint: aws.String(attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)])}); err != nil {
		return "", fmt.Errorf("subscribe %s to the alerts: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}
