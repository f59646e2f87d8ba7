// Package costrun measures what orders cost: it runs them through the real
// handlers on the local engines, as internal/localstack/wiring wires them,
// with every AWS request of the handlers metered (DynamoDB asked to report
// the capacity each request consumed, indexes included) and every handler
// invocation timed, and returns the totals as a cost.Usage for
// internal/cost to price. The handlers' code is not changed for it: the
// meter is an SDK option of the clients they are given.
package costrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/xray"
	"github.com/aws/smithy-go/middleware"

	"github.com/sasflow/sas/internal/cost"
	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/internal/localstack/apigw"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/localstack/sqsbridge"
	"github.com/sasflow/sas/internal/localstack/streambridge"
	"github.com/sasflow/sas/internal/localstack/wiring"
	"github.com/sasflow/sas/internal/testkit/reqcount"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/remote"
	"github.com/sasflow/sas/shared/segments"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
	"github.com/sasflow/sas/steps"
)

// Scenario is what happens to every order of a run.
type Scenario int

const (
	// Happy: every step succeeds at the first try.
	Happy Scenario = iota
	// Retried: the second step's first reply is lost (its agent died after
	// the remote call), so the Supervisor times the step out and it runs
	// again.
	Retried
	// Compensated: the remote rejects the second step for good, so the
	// order is undone: the second step voided, the first released; no
	// later step runs.
	Compensated
)

func (s Scenario) String() string {
	return [...]string{"happy path", "one retried step", "compensated"}[s]
}

// want is the state every order of a scenario must end in.
func (s Scenario) want() workflow.ProcessState {
	if s == Compensated {
		return workflow.Compensated
	}
	return workflow.Processed
}

// Options configures a run.
type Options struct {
	// DynamoDBURL and AWSURL are the local engines (DynamoDB Local, fauxqs).
	DynamoDBURL, AWSURL string
	Orders              int
	Scenario            Scenario
	// Keyed sends every order with an Idempotency-Key of its own.
	Keyed bool
	// Timeout bounds the run; zero means five minutes plus a second per order.
	Timeout time.Duration
	// Workflow is the definition every order runs; the zero value means the
	// deployed catalog's current default workflow (shared/catalog), whose
	// code steps run in process around the ledger, as deployed.
	Workflow workflow.Definition
}

// Body is the order every run submits: a small, typical one.
const Body = `{"customerId":"c-1","currency":"EUR","clientId":"cost-client","items":[{"sku":"A-1","quantity":1,"unitPriceCents":100}]}`

// Run runs o.Orders orders of o.Scenario and returns what they used.
func Run(ctx context.Context, o Options) (cost.Usage, error) {
	if o.Orders < 1 {
		return cost.Usage{}, errors.New("costrun: at least one order")
	}
	if len(o.Workflow.Steps) == 0 {
		def, err := catalog.MustDeployed().ForNew("")
		if err != nil {
			return cost.Usage{}, fmt.Errorf("costrun: the current workflow: %w", err)
		}
		o.Workflow = def
	}
	if len(o.Workflow.Steps) < 2 {
		return cost.Usage{}, errors.New("costrun: the scenarios need a workflow of at least two steps")
	}
	ctx, cancel := context.WithTimeout(ctx, cmpOr(o.Timeout, 5*time.Minute+time.Duration(o.Orders)*time.Second))
	defer cancel()
	r, err := newRig(ctx, o)
	if err != nil {
		return cost.Usage{}, err
	}
	defer r.close()
	if err := r.submit(ctx); err != nil {
		return cost.Usage{}, err
	}
	if err := r.finish(ctx); err != nil {
		return cost.Usage{}, err
	}
	if err := r.checkTraces(); err != nil {
		return cost.Usage{}, err
	}
	return r.usage(), nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// rig is one run's wired system and what measures it.
type rig struct {
	o   Options
	sys *wiring.System
	sim *remotesim.Sim
	// reader reads the records with a client the meter does not count.
	reader *statestore.Store
	srv    *httptest.Server
	clk    *clock.Fake
	meter  reqcount.Meter
	logs   logBytes
	fns    functions
	calls  atomic.Int64
	// stepCalls are the remote calls by the step their path names.
	stepCalls sync.Map
	ids       []string
	// xray receives the segments of the orders, every one of which is
	// recorded (the model prices them at the deployment's sample rate).
	xray    *xraySink
	xraySrv *httptest.Server
	tracer  *segments.Sender
	// lost remembers the orders whose reply the Retried scenario dropped.
	lostMu sync.Mutex
	lost   map[string]bool
}

func newRig(ctx context.Context, o Options) (*rig, error) {
	r := &rig{o: o, sim: remotesim.New(), lost: map[string]bool{}, xray: &xraySink{}}
	r.xraySrv = httptest.NewServer(r.xray)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.calls.Add(1)
		r.countCall(req.URL.Path)
		r.sim.ServeHTTP(w, req)
	}))
	// The fake clock stands still while messages flow, so no budget runs
	// out by accident; the Retried scenario moves it past CompleteBy.
	r.clk = clock.NewFake(time.Now())
	prefix := "cost-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	r.meter.Table = func(name string) string { return strings.TrimPrefix(name, prefix+"-") }
	creds := credentials.NewStaticCredentialsProvider("local", "local", "")
	cfg := func(endpoint string, metered bool) aws.Config {
		c := aws.Config{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(endpoint)}
		if metered {
			c.APIOptions = []func(*middleware.Stack) error{r.meter.Add}
		}
		return c
	}
	policy := workflow.DefaultPolicy()
	// SQS delays whole seconds: the retry's backoff is real time here.
	policy.BackoffBase, policy.BackoffMax = time.Second, time.Second
	log := slog.New(slog.NewJSONHandler(&r.logs, nil))
	r.tracer = segments.New(xray.NewFromConfig(cfg(r.xraySrv.URL, true)), log)
	// The code steps' buckets are made unmetered; their requests (S3) are
	// metered like the handlers'.
	stepEnv, err := localstack.CodeStepEnv(ctx, cfg(o.AWSURL, false), prefix, "us-east-1")
	if err != nil {
		r.close()
		return nil, err
	}
	sys, err := wiring.Build(ctx, wiring.Options{
		TraceSampleRate: 1,
		DynamoDB:        dynamodb.NewFromConfig(cfg(o.DynamoDBURL, true)),
		SQS:             sqs.NewFromConfig(cfg(o.AWSURL, true)),
		// Lambda's pollers are not the handlers: the cost model derives
		// their receives and deletes from the records delivered.
		PollSQS: sqs.NewFromConfig(cfg(o.AWSURL, false)),
		SNS:     sns.NewFromConfig(cfg(o.AWSURL, true)),
		// Lambda reads the stream for free.
		Streams: dynamodbstreams.NewFromConfig(cfg(o.DynamoDBURL, false), streambridge.ForDynamoDBLocal),
		Prefix:  prefix, Region: "us-east-1",
		Workflows: workflow.Single(o.Workflow), Policy: policy, RemoteBaseURL: r.srv.URL, Agent: agent.DefaultConfig(),
		CodeSteps: steps.All, StepEnv: stepEnv, StepAWS: cfg(o.AWSURL, true),
		MaxReceiveCount: 5, VisibilityTimeout: 30 * time.Second,
		Clock: r.clk, Log: log,
		WrapSender: r.wrapSender,
		// A Deadline is sent when its phase starts and arrives when its
		// CompleteBy passes. The run holds them back instead: sent without
		// delay and delivered once the orders moved on (finish).
		WrapDeadlines: wiring.Undelayed,
	})
	if err != nil {
		r.close()
		return nil, err
	}
	r.sys = sys
	r.reader = statestore.New(dynamodb.NewFromConfig(cfg(o.DynamoDBURL, false)), sys.Tables)
	r.timeHandlers()
	if o.Scenario == Compensated {
		r.sim.RejectStep(o.Workflow.Steps[1].Name)
	}
	return r, nil
}

func (r *rig) close() {
	r.srv.Close()
	r.xraySrv.Close()
	r.sim.Close()
}

// submit posts every order to the Submission handler, as API Gateway would.
func (r *rig) submit(ctx context.Context) error {
	r.meter.Reset()
	for i := range r.o.Orders {
		req := events.APIGatewayV2HTTPRequest{RawPath: "/orders", RouteKey: "POST /orders",
			Headers: map[string]string{"content-type": "application/json"}, Body: Body}
		if r.o.Keyed {
			req.Headers["idempotency-key"] = "cost-key-" + strconv.Itoa(i)
		}
		req.RequestContext.HTTP.Method = "POST"
		req.RequestContext.RequestID = "cost-" + strconv.Itoa(i)
		req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: apigw.LocalUser(apigw.Credential{AccessKeyID: "cost"})}
		var resp events.APIGatewayV2HTTPResponse
		// Timed inside, sent outside, as traced does.
		submit := segments.Wrap(r.tracer, time.Now, func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			var resp events.APIGatewayV2HTTPResponse
			err := r.fns.time("submission", 1, func() error {
				var err error
				resp, err = r.sys.Submission.Handle(ctx, req)
				return err
			})
			return resp, err
		})
		resp, err := submit(ctx, req)
		if err != nil || resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("submit: %d %s %v", resp.StatusCode, resp.Body, err)
		}
		r.ids = append(r.ids, strings.TrimPrefix(resp.Headers["Location"], "/orders/"))
	}
	return nil
}

// finish moves every order to its end: messages and stream records are
// delivered until nothing moves; in the Retried scenario the clock then
// passes the lost replies' CompleteBy and the Supervisor's fast path gets
// the Deadlines, which recover those steps. Last, every Deadline left is
// delivered, as each would arrive at its CompleteBy after its phase ended.
func (r *rig) finish(ctx context.Context) error {
	expired := false
	for {
		if err := r.drain(ctx); err != nil {
			return err
		}
		left, err := r.unfinished(ctx)
		if err != nil {
			return err
		}
		if left == 0 {
			return r.drainDeadlines(ctx)
		}
		// The clock passes the lost replies' CompleteBy only once every
		// order left has lost its reply: a round that delivered nothing
		// does not prove no request is still on its way (a receive may
		// miss a message, as SQS's short polls may), and a request that
		// reached its Agent after the clock moved would find its
		// deadline passed and send no reply to lose.
		if r.o.Scenario == Retried && !expired && r.lostCount() == left {
			r.clk.Advance(r.o.Workflow.Steps[1].Lease() + time.Second)
			expired = true
		}
		if expired {
			// Every round: a Deadline the Timer sent late (its stream
			// record came after the last drain) or one that came back
			// after a failed recovery is due too.
			if err := r.drainDeadlines(ctx); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d orders not %s (%s): %w", left, len(r.ids), r.o.Scenario.want(), r.states(), ctx.Err())
		case <-time.After(200 * time.Millisecond):
			// A hand-back waits out its backoff in SQS.
		}
	}
}

// drain delivers queue messages and stream records until a round of both
// delivers nothing.
func (r *rig) drain(ctx context.Context) error {
	for {
		n, err := r.sys.PumpOnce(ctx)
		if err != nil && !errors.Is(err, sqsbridge.ErrBatchFailed) {
			return err
		}
		m, err := r.sys.Stream.PollOnce(ctx)
		if err != nil {
			return fmt.Errorf("stream: %w", err)
		}
		k, err := r.sys.TimerStream.PollOnce(ctx)
		if err != nil {
			return fmt.Errorf("timer stream: %w", err)
		}
		if n+m+k == 0 {
			return nil
		}
	}
}

// drainDeadlines delivers Deadlines until a poll delivers none.
func (r *rig) drainDeadlines(ctx context.Context) error {
	for {
		n, err := r.sys.DeadlineBridge.PollOnce(ctx)
		if err != nil && !errors.Is(err, sqsbridge.ErrBatchFailed) {
			return fmt.Errorf("deadlines: %w", err)
		}
		if n == 0 {
			return nil
		}
	}
}

// unfinished counts the orders not yet in the scenario's final state.
func (r *rig) unfinished(ctx context.Context) (int, error) {
	left := 0
	for _, id := range r.ids {
		st, err := r.reader.GetState(ctx, id)
		if err != nil {
			return 0, err
		}
		if st.ProcessState != r.o.Scenario.want() {
			left++
		}
	}
	return left, nil
}

// states counts the orders by state, to say where a run that timed out
// stopped.
func (r *rig) states() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := map[workflow.ProcessState]int{}
	example := ""
	for _, id := range r.ids {
		st, err := r.reader.GetState(ctx, id)
		if err != nil {
			return "states unknown: " + err.Error()
		}
		n[st.ProcessState]++
		if example == "" && st.ProcessState != r.o.Scenario.want() {
			example = fmt.Sprintf("; %s at step %d (%s) attempt %d, in flight %v, CompleteBy %v after the run's clock",
				id, st.StepIndex, st.Step, st.Attempt, st.InFlight, st.CompleteBy.Sub(r.clk.Now()))
		}
	}
	return fmt.Sprint(n) + example
}

// wrapSender drops, in the Retried scenario, the first reply of each
// order's second step: its agent died after calling the remote.
func (r *rig) wrapSender(role string, s wiring.Sender) wiring.Sender {
	if r.o.Scenario != Retried || role != "agent" {
		return s
	}
	return senderFunc(func(ctx context.Context, queueURL, body string, delay time.Duration) error {
		if m, err := message.DecodeAgentReply(body); err == nil && m.StepIndex == 1 && !m.Action.Undo() {
			r.lostMu.Lock()
			first := !r.lost[m.OrderID]
			r.lost[m.OrderID] = true
			r.lostMu.Unlock()
			if first {
				return nil
			}
		}
		return s.Send(ctx, queueURL, body, delay)
	})
}

// lostCount is how many orders have lost their reply.
func (r *rig) lostCount() int {
	r.lostMu.Lock()
	defer r.lostMu.Unlock()
	return len(r.lost)
}

type senderFunc func(ctx context.Context, queueURL, body string, delay time.Duration) error

func (f senderFunc) Send(ctx context.Context, queueURL, body string, delay time.Duration) error {
	return f(ctx, queueURL, body, delay)
}

// checkTraces holds the run's recorded orders to what X-Ray must show: each
// order one trace, its segments one path.
func (r *rig) checkTraces() error {
	_, traces := r.xray.snapshot()
	if len(traces) != len(r.ids) {
		return fmt.Errorf("%d orders recorded as %d traces, want one each", len(r.ids), len(traces))
	}
	var errs []error
	for id := range traces {
		errs = append(errs, traces.Check(id))
	}
	return errors.Join(errs...)
}

// usage is what the run used, for internal/cost.
func (r *rig) usage() cost.Usage {
	m := r.meter.Snapshot()
	u := cost.Usage{
		Scenario: r.o.Scenario.String(), Orders: r.o.Orders, APIRequests: r.o.Orders,
		Requests: m.Requests, Billed: m.Billed, Entries: m.Entries, WRU: m.WRU, RRU: m.RRU,
		RemoteCalls: int(r.calls.Load()),
	}
	u.LogBytes, u.WarnLogBytes = r.logs.snapshot()
	u.Records, u.Invocations, u.HandlerTime = r.fns.snapshot()
	u.TransactionIndexWRU = m.TransactionIndexWRU
	requests, traces := r.xray.snapshot()
	u.Tracing = cost.Tracing{RecordedOrders: r.o.Orders, Traces: len(traces), Requests: requests}
	for _, segs := range traces {
		u.Tracing.Segments += len(segs)
	}
	tagged := r.meter.SnapshotTags()
	records, took := r.fns.stepSnapshot()
	for _, st := range r.o.Workflow.Steps {
		m := tagged[st.Name]
		_, code := steps.All[st.Name]
		calls, _ := r.stepCalls.Load(st.Name)
		n, _ := calls.(*atomic.Int64)
		su := cost.StepUsage{Name: st.Name, Code: code, Records: records[st.Name], HandlerTime: took[st.Name],
			Requests: m.Requests, Billed: m.Billed, Entries: m.Entries, WRU: m.WRU, RRU: m.RRU, TransactionIndexWRU: m.TransactionIndexWRU}
		if n != nil {
			su.RemoteCalls = int(n.Load())
		}
		u.Steps = append(u.Steps, su)
	}
	return u
}

// countCall counts a remote call by the step its path names
// (remote.StepPath, remote.CompensatePath).
func (r *rig) countCall(path string) {
	rest, ok := strings.CutPrefix(path, remote.StepPath(""))
	if !ok {
		return
	}
	name, _, _ := strings.Cut(rest, "/")
	if name, err := url.PathUnescape(name); err == nil {
		n, _ := r.stepCalls.LoadOrStore(name, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
}
