package functions_test

// The deployed artifacts run: each function's bootstrap binary is built as
// `make build` builds it, started under a local Lambda Runtime API
// (internal/testkit/lambdart) with exactly the environment the synthesized
// stack gives that function (infra/stack/testdata/environments.json, which
// the infra tests keep equal to the template), its references mapped to
// resources created on the local engines, and fed the matching sample of
// events/. What sam local invoke would do, without Docker.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sasflow/sas/internal/stepgen"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/internal/testkit/eventsample"
	"github.com/sasflow/sas/internal/testkit/lambdart"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/coldstart"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/remote"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
	"github.com/sasflow/sas/steps"
	shiporder "github.com/sasflow/sas/steps/ship-order"
)

func TestMain(m *testing.M) {
	enginetest.Main(m, func() {
		if binDir != "" {
			_ = os.RemoveAll(binDir)
		}
	})
}

// environmentsFile is every function's environment as the stack
// synthesizes it; see infra/stack/environments_test.go.
const environmentsFile = "../infra/stack/testdata/environments.json"

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// makeBuild reads the flags of the Makefile's build recipe: the environment
// before $(GO) build, and the arguments up to -o.
func makeBuild() (env map[string]string, args []string, err error) {
	b, err := os.ReadFile("../Makefile")
	if err != nil {
		return nil, nil, err
	}
	// Continuation lines join their recipe line, as make joins them.
	for _, line := range strings.Split(strings.ReplaceAll(string(b), "\\\n", " "), "\n") {
		before, after, ok := strings.Cut(line, "$(GO) build ")
		if !ok {
			continue
		}
		env = map[string]string{}
		for _, kv := range strings.Fields(before) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
		words, err := shellWords(after)
		if err != nil {
			return nil, nil, err
		}
		for _, w := range words {
			if w == "-o" {
				return env, args, nil
			}
			args = append(args, w)
		}
		return nil, nil, fmt.Errorf("the Makefile's build recipe has no -o: %q", after)
	}
	return nil, nil, errors.New("the Makefile has no `$(GO) build` recipe")
}

// shellWords splits s as the shell would, for the plain and single-quoted
// words a build recipe uses.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in, quoted := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			quoted = !quoted
			in = true
		case (r == ' ' || r == '\t' || r == '\n') && !quoted:
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unbalanced quote in %q", s)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// bootstraps builds every function once per test binary, into a temporary
// folder: binary(t, "agent") is functions/agent's bootstrap.
//
// The stack ships linux/arm64 binaries and this machine may be another
// architecture, so the test builds each function itself with exactly the
// Makefile's flags (CGO_ENABLED=0, -tags lambda.norpc -trimpath
// -ldflags='-s -w', read from the recipe) but the host's GOOS and GOARCH.
func binary(t *testing.T, function string) string {
	t.Helper()
	buildOnce.Do(func() {
		env, args, err := makeBuild()
		if err != nil {
			buildErr = err
			return
		}
		if env["GOOS"] != "linux" || env["GOARCH"] != "arm64" || env["CGO_ENABLED"] != "0" {
			buildErr = fmt.Errorf("the Makefile builds with %v, the stack deploys static linux/arm64 binaries", env)
			return
		}
		if !containsSeq(args, "-tags", "lambda.norpc") {
			// Without it aws-lambda-go links its go1.x RPC mode, which
			// provided.al2023 never uses.
			buildErr = fmt.Errorf("the Makefile builds with %q, without -tags lambda.norpc", args)
			return
		}
		binDir, err = os.MkdirTemp("", "sas-bootstrap")
		if err != nil {
			buildErr = err
			return
		}
		// One `go build` for every function: with -o a folder, each main
		// package is written there under its folder's name.
		cmd := exec.Command("go", append(append([]string{"build"}, args...), "-o", binDir+string(filepath.Separator), "./functions/...")...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+env["CGO_ENABLED"], "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("%s: %v\n%s", cmd, err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build the functions: %v", buildErr)
	}
	return filepath.Join(binDir, function)
}

func containsSeq(l []string, a, b string) bool {
	for i := 0; i+1 < len(l); i++ {
		if l[i] == a && l[i+1] == b {
			return true
		}
	}
	return false
}

// environments reads environmentsFile: function (construct ID) to variable
// to value, a string or a CloudFormation expression.
func environments(t *testing.T) map[string]map[string]any {
	t.Helper()
	b, err := os.ReadFile(environmentsFile)
	if err != nil {
		t.Fatal(err)
	}
	var envs map[string]map[string]any
	if err := json.Unmarshal(b, &envs); err != nil {
		t.Fatalf("%s: %v", environmentsFile, err)
	}
	return envs
}

// system is one local copy of what the stack's functions reference, named
// by the construct IDs environments.json keeps: tables, queues, topics, the
// remote service's base URL parameters and the API's endpoint.
type system struct {
	refs   map[string]string
	tables statestore.Tables
	store  *statestore.Store
	queues map[string]enginetest.Queue
	// events is a queue subscribed to the order-events topic.
	events enginetest.Queue
	sqs    *sqs.Client
	dynamo string
	aws    string
}

// codeSteps are the code steps' manifests, by step name: each runs as its
// own function, StepShipOrder from functions/steps/ship-order.
var codeSteps = func() map[string]stepgen.Manifest {
	out := map[string]stepgen.Manifest{}
	for name, b := range steps.Manifests {
		m, err := stepgen.Parse(name, b)
		if err != nil {
			panic(err)
		}
		out[name] = m
	}
	return out
}()

// queueIDs are the queues the stack's environments reference.
var queueIDs = []string{"SchedulerQueue", "ResponseQueue", "DeadlineQueue"}

func newSystem(t *testing.T, remoteURL string) *system {
	t.Helper()
	ctx := context.Background()
	s := &system{refs: map[string]string{}, queues: map[string]enginetest.Queue{}, sqs: enginetest.SQS(t)}
	s.dynamo, s.aws = enginetest.Endpoints(t)
	prefix := enginetest.UniqueName(t, "boot")
	ddb := enginetest.DynamoDB(t)
	s.tables = statestore.Tables{Orders: prefix + "-orders", State: prefix + "-state"}
	if err := statestore.CreateTables(ctx, ddb, s.tables); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{s.tables.Orders, s.tables.State} {
			_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	})
	s.store = statestore.New(ddb, s.tables)
	s.refs["OrdersTable"], s.refs["StateTable"] = s.tables.Orders, s.tables.State
	ids := append([]string(nil), queueIDs...)
	// The binaries embed the deployed catalog: one Agent queue per step of
	// its versions, as the stack makes them, and a remote per step that is
	// not a code step.
	for _, step := range catalog.MustDeployed().AgentNames() {
		ids = append(ids, pascal(step)+"Queue")
		if _, code := codeSteps[step]; !code {
			s.refs[pascal(step)+"RemoteBaseUrl"] = remoteURL
		}
	}
	// The code steps' ledger, keyed as the stack declares it, and each code
	// step's parameters: ShipOrderBucket names a bucket of the local S3.
	s.refs["LedgerTable"] = prefix + "-ledger"
	if _, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(s.refs["LedgerTable"]),
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: ddbtypes.KeyTypeHash}},
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(s.refs["LedgerTable"])})
	})
	s3c := enginetest.S3(t)
	for _, m := range codeSteps {
		for param := range m.Parameters {
			// S3 bucket names: lower case, digits and -, at most 63.
			bucket := strings.ToLower(strings.ReplaceAll(prefix+"-"+param, "_", "-"))
			bucket = strings.TrimRight(bucket[:min(len(bucket), 63)], "-")
			if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
				t.Fatal(err)
			}
			s.refs[param] = bucket
		}
	}
	for _, id := range ids {
		q := enginetest.CreateQueue(t, s.sqs, prefix+"-"+strings.ToLower(id), enginetest.QueueOptions{})
		s.queues[id] = q
		s.refs[id] = q.URL
	}
	snsc := enginetest.SNS(t)
	alerts, err := snsc.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(prefix + "-alerts")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = snsc.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: alerts.TopicArn})
	})
	s.refs["AlertTopic"] = aws.ToString(alerts.TopicArn)
	s.refs["OrderEventsTopic"], s.events = enginetest.CreateTopicToQueue(t, snsc, s.sqs, prefix+"-order-events")
	// Only the alerts' CLI commands name the API; nothing calls it.
	s.refs["OrdersApi.ApiEndpoint"] = "https://ordersapi.execute-api.us-east-1.amazonaws.com"
	// The Submission's operators: the stack's role, and the deploy-time
	// parameter's principals (none by default).
	s.refs["OrderOperatorRole.Arn"] = "arn:aws:iam::000000000000:role/OrderOperatorRole"
	s.refs["OperatorPrincipalArns"] = ""
	return s
}

func pascal(s string) string {
	var b strings.Builder
	for _, p := range strings.Split(s, "-") {
		b.WriteString(strings.ToUpper(p[:1]) + p[1:])
	}
	return b.String()
}

// resolve turns an environment value of environments.json into the local
// value: a string as it is, a Ref or Fn::GetAtt to what s created for that
// construct, an Fn::Join of those. Anything else fails the test, so a
// variable naming a resource the test does not create is noticed.
func (s *system) resolve(t *testing.T, v any) string {
	t.Helper()
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		if len(v) != 1 {
			break
		}
		if id, ok := v["Ref"].(string); ok {
			if local, ok := s.refs[id]; ok {
				return local
			}
			t.Fatalf("environments.json references %s, which the bootstrap test does not create locally", id)
		}
		if att, ok := v["Fn::GetAtt"].([]any); ok && len(att) == 2 {
			id := fmt.Sprint(att[0], ".", att[1])
			if att[1] == "RoleId" {
				// A role's unique ID, which SQS stamps on what it sends
				// (SenderId): an Agent's is its replies' in the samples
				// (sampleSenders); the others' are fauxqs's, which
				// stamps every message with one ID, whoever sent it.
				if local, ok := sampleSenders(t)[id]; ok {
					return local
				}
				return "000000000000"
			}
			if local, ok := s.refs[id]; ok {
				return local
			}
			t.Fatalf("environments.json references %s, which the bootstrap test does not create locally", id)
		}
		if j, ok := v["Fn::Join"].([]any); ok && len(j) == 2 {
			sep, _ := j[0].(string)
			parts, _ := j[1].([]any)
			var out []string
			for _, p := range parts {
				out = append(out, s.resolve(t, p))
			}
			return strings.Join(out, sep)
		}
	}
	t.Fatalf("environments.json: cannot resolve %v", v)
	return ""
}

// env is function's environment as the stack gives it, resolved locally,
// plus what Lambda itself provides (region, credentials) and the endpoint
// overrides that point the AWS SDK at the local engines: the standard
// AWS_ENDPOINT_URL_<SERVICE> variables, which aws-sdk-go-v2's
// config.LoadDefaultConfig (coldstart.Load) reads and every client built
// from that configuration uses. Nothing of the test process's environment
// is passed on, so a developer's AWS profile can never reach the binary.
func (s *system) env(t *testing.T, function string) map[string]string {
	t.Helper()
	vars, ok := environments(t)[function]
	if !ok {
		t.Fatalf("%s has no function %s", environmentsFile, function)
	}
	env := map[string]string{}
	for k, v := range vars {
		env[k] = s.resolve(t, v)
	}
	// Every variable the descriptor says the stack sets for the actor is
	// there, and names something this test created locally; a code step's
	// manifest adds its own.
	want := topology.Describe(actorOf(function)).DeployedEnv()
	if m, ok := codeSteps[stepOf(function)]; ok && actorOf(function) == topology.CodeStep {
		for k := range m.Environment {
			want = append(want, k)
		}
	}
	for _, name := range want {
		if env[name] == "" {
			t.Fatalf("%s: %s, which the stack sets for the %s, resolves to nothing locally", function, name, actorOf(function))
		}
	}
	if len(env) != len(want) {
		t.Fatalf("%s sets %d variables for %s, the descriptor %d (%v)", environmentsFile, len(env), function, len(want), want)
	}
	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_REGION":                  enginetest.Region,
		"AWS_DEFAULT_REGION":          enginetest.Region,
		"AWS_ACCESS_KEY_ID":           "enginetest",
		"AWS_SECRET_ACCESS_KEY":       "enginetest",
		"AWS_ENDPOINT_URL_DYNAMODB":   s.dynamo,
		"AWS_ENDPOINT_URL_SQS":        s.aws,
		"AWS_ENDPOINT_URL_SNS":        s.aws,
		"AWS_CONFIG_FILE":             none,
		"AWS_SHARED_CREDENTIALS_FILE": none,
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		if _, clash := env[k]; clash {
			t.Fatalf("the stack sets %s, which Lambda reserves", k)
		}
		env[k] = v
	}
	// A code step's own AWS calls (S3, for ship-order) go to fauxqs too,
	// through the endpoint every client without one of its own takes; the
	// steps address a configuration with an endpoint path-style.
	if actorOf(function) == topology.CodeStep {
		env["AWS_ENDPOINT_URL"] = s.aws
	}
	return env
}

// start runs functions/<folder>'s bootstrap as the stack's function id.
func (s *system) start(t *testing.T, folder, id string, env map[string]string) *lambdart.Function {
	t.Helper()
	return lambdart.Start(t, binary(t, folder), id, 30*time.Second, env)
}

// invoke hands payload to f and decodes its response into out; an error
// answer or an init failure fails the test.
func invoke(t *testing.T, f *lambdart.Function, payload []byte, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := f.Invoke(ctx, payload)
	if err != nil {
		t.Fatalf("invoke %s: %v\noutput:\n%s", f.Name, err, f.Output())
	}
	if res.Error != nil {
		t.Fatalf("%s answered an error: %v (%s)", f.Name, res.Error, res.Error.Body)
	}
	if out != nil {
		if err := json.Unmarshal(res.Response, out); err != nil {
			t.Fatalf("%s response %s: %v", f.Name, res.Response, err)
		}
	}
}

// sampleSenders are the role IDs of the Agents whose replies
// scheduler-agent-reply.json holds, by the stack's "<Role>.RoleId": the
// role part of each reply's SenderId, so the Scheduler takes the sample's
// replies as its Agents' own.
func sampleSenders(t *testing.T) map[string]string {
	t.Helper()
	var ev events.SQSEvent
	if err := json.Unmarshal(sample(t, "scheduler-agent-reply.json"), &ev); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range ev.Records {
		m, err := message.DecodeAgentReply(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		id, _, _ := strings.Cut(r.Attributes["SenderId"], ":")
		out["Agent"+pascal(m.Step)+"Role.RoleId"] = id
	}
	return out
}

func sample(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(eventsample.Dir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// receive takes want messages off the queue id.
func (s *system) receive(t *testing.T, id string, want int) []string {
	t.Helper()
	var bodies []string
	for _, m := range enginetest.ReceiveAll(context.Background(), t, s.sqs, s.refs[id], want, 10*time.Second) {
		bodies = append(bodies, aws.ToString(m.Body))
	}
	return bodies
}

func noFailures(t *testing.T, what string, resp events.SQSEventResponse) {
	t.Helper()
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%s: batch item failures %+v", what, resp.BatchItemFailures)
	}
}

func TestEnvironmentsNameEveryFunction(t *testing.T) {
	// Every folder runs as at least one function of the stack; the Agent
	// once per step.
	envs := environments(t)
	var ids []string
	for id := range envs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, folder := range []string{"submission", "scheduler", "supervisor", "notifier", "timer", "deadline"} {
		if _, ok := envs[pascal(folder)]; !ok {
			t.Errorf("%s has no %s among %v", environmentsFile, pascal(folder), ids)
		}
	}
	for _, step := range catalog.MustDeployed().AgentNames() {
		id := "Agent" + pascal(step)
		if _, code := codeSteps[step]; code {
			id = "Step" + pascal(step)
		}
		if _, ok := envs[id]; !ok {
			t.Errorf("%s has no %s among %v", environmentsFile, id, ids)
		}
	}
}

// The sample POST /orders creates the order (202), writes its two records,
// and sends the first step straight to its Agent; the sample GET of that
// order, on the same process, reads it back.
func TestBootstrapSubmission(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "http://remote.invalid")
	f := s.start(t, "submission", "Submission", s.env(t, "Submission"))

	var resp events.APIGatewayV2HTTPResponse
	invoke(t, f, sample(t, "submission-post-order.json"), &resp)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /orders: status %d, body %s", resp.StatusCode, resp.Body)
	}
	var accepted struct {
		OrderID string `json:"orderId"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &accepted); err != nil || accepted.OrderID == "" {
		t.Fatalf("POST /orders body %s: %v", resp.Body, err)
	}
	ctx := context.Background()
	o, err := s.store.GetOrder(ctx, accepted.OrderID)
	if err != nil {
		t.Fatalf("order %s not in %s: %v", accepted.OrderID, s.tables.Orders, err)
	}
	if o.Owner == "" || o.TotalCents == 0 {
		t.Errorf("order %+v", o)
	}
	if _, err := s.store.GetState(ctx, accepted.OrderID); err != nil {
		t.Fatalf("state of %s not in %s: %v", accepted.OrderID, s.tables.State, err)
	}
	// A new order runs the default workflow's current version.
	def, err := catalog.MustDeployed().ForNew("")
	if err != nil {
		t.Fatal(err)
	}
	first := pascal(def.Steps[0].Name) + "Queue"
	req, err := message.DecodeAgentRequest(s.receive(t, first, 1)[0])
	if err != nil || req.OrderID != accepted.OrderID || req.StepIndex != 0 {
		t.Fatalf("%s got %+v (%v), want the first step of %s", first, req, err, accepted.OrderID)
	}

	var get events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(sample(t, "submission-get-order.json"), &get); err != nil {
		t.Fatal(err)
	}
	sampleID := get.PathParameters["id"]
	get.PathParameters["id"] = accepted.OrderID
	get.RawPath = strings.ReplaceAll(get.RawPath, sampleID, accepted.OrderID)
	get.RequestContext.HTTP.Path = strings.ReplaceAll(get.RequestContext.HTTP.Path, sampleID, accepted.OrderID)
	resp = events.APIGatewayV2HTTPResponse{}
	invoke(t, f, mustJSON(t, get), &resp)
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, accepted.OrderID) {
		t.Fatalf("GET /orders/%s: status %d, body %s", accepted.OrderID, resp.StatusCode, resp.Body)
	}
}

// seed creates an order with id, its record in the state Pending as a
// Submission writes it before the Scheduler claims its first step.
func (s *system) seed(t *testing.T, id string) workflow.State {
	t.Helper()
	return s.seedAt(t, id, time.Now())
}

// seedAt seeds as seed does, as if at now.
func (s *system) seedAt(t *testing.T, id string, now time.Time) workflow.State {
	t.Helper()
	input := json.RawMessage(`{"orderId":"` + id + `","customerId":"customer-42","currency":"EUR","items":[{"sku":"BOOK-0451","quantity":2,"unitPriceCents":1999}],"totalCents":3998}`)
	st := workflow.NewState(id, workflow.Reference(), input, now, now.Add(time.Minute))
	o := workflow.Order{OrderID: id, CustomerID: "customer-42", Currency: "EUR",
		Items: []workflow.Item{{SKU: "BOOK-0451", Quantity: 2, UnitPriceCents: 1999}}, TotalCents: 3998}
	if err := s.store.CreateOrder(context.Background(), o, st); err != nil {
		t.Fatalf("seed %s: %v", id, err)
	}
	return st
}

// The sample schedule batch: its first order is waiting for its first step,
// which the Scheduler claims and dispatches to that step's Agent; its
// second order is unknown here, a message the Scheduler drops.
func TestBootstrapScheduler(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "http://remote.invalid")
	raw := sample(t, "scheduler-schedule.json")
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	m, err := message.DecodeSchedule(ev.Records[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	s.seed(t, m.OrderID)
	f := s.start(t, "scheduler", "Scheduler", s.env(t, "Scheduler"))
	var resp events.SQSEventResponse
	invoke(t, f, raw, &resp)
	noFailures(t, "schedule", resp)

	st, err := s.store.GetState(context.Background(), m.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	if st.ProcessState != workflow.Processing || st.StepIndex != m.StepIndex || st.Attempt != 1 {
		t.Errorf("after the schedule the record is %s at step %d attempt %d, want Processing at %d attempt 1", st.ProcessState, st.StepIndex, st.Attempt, m.StepIndex)
	}
	q := pascal(workflow.Reference().Steps[m.StepIndex].Name) + "Queue"
	req, err := message.DecodeAgentRequest(s.receive(t, q, 1)[0])
	if err != nil || req.OrderID != m.OrderID || req.Attempt != 1 {
		t.Fatalf("%s got %+v (%v), want attempt 1 of %s", q, req, err, m.OrderID)
	}

	// The sample agent-reply batch, on the same process: its first reply is
	// the success of that attempt, so the Scheduler commits the step and
	// claims and dispatches the next; its second is for an order unknown
	// here, dropped.
	raw = sample(t, "scheduler-agent-reply.json")
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	reply, err := message.DecodeAgentReply(ev.Records[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	if reply.OrderID != m.OrderID || reply.StepIndex != m.StepIndex || reply.Attempt != 1 || reply.Outcome != message.Succeeded {
		t.Fatalf("scheduler-agent-reply.json's first reply %+v no longer answers scheduler-schedule.json's first schedule", reply)
	}
	resp = events.SQSEventResponse{}
	invoke(t, f, raw, &resp)
	noFailures(t, "agent reply", resp)
	if st, err = s.store.GetState(context.Background(), m.OrderID); err != nil {
		t.Fatal(err)
	}
	next := workflow.Reference().Steps[m.StepIndex+1].Name
	if st.ProcessState != workflow.Processing || st.StepIndex != m.StepIndex+1 || st.Step != next || st.Steps[m.StepIndex].State != workflow.StepSucceeded {
		t.Errorf("after the reply the record is %s at step %d (%s), step %d %s; want Processing at %d (%s) with step %d succeeded",
			st.ProcessState, st.StepIndex, st.Step, m.StepIndex, st.Steps[m.StepIndex].State, m.StepIndex+1, next, m.StepIndex)
	}
	q = pascal(next) + "Queue"
	req, err = message.DecodeAgentRequest(s.receive(t, q, 1)[0])
	if err != nil || req.OrderID != m.OrderID || req.Step != next || string(req.Previous[reply.Step]) != string(reply.Output) {
		t.Fatalf("%s got %+v (%v), want step %s of %s with the reply's output", q, req, err, next, m.OrderID)
	}
}

// The sample agent-request, for the step it names, against a local stub of
// the remote service: the Agent posts the step under the request's
// idempotency key and replies on the response queue.
func TestBootstrapAgent(t *testing.T) {
	t.Parallel()
	raw := sample(t, "agent-request.json")
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	req, err := message.DecodeAgentRequest(ev.Records[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	// The binary runs on the real clock: the sample's completeBy (in 2025)
	// is moved to a minute from now, or the Agent would rightly refuse a
	// request whose time is up.
	req.CompleteBy = time.Now().Add(time.Minute).UTC()
	ev.Records[0].Body = string(message.Encode(req))

	type call struct{ path, key string }
	calls := make(chan call, 10)
	remoteSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		calls <- call{r.URL.Path, r.Header.Get("Idempotency-Key")}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"chargeId":"ch-3f9a2c71","amountCents":4248,"currency":"EUR"}`))
	}))
	t.Cleanup(remoteSrv.Close)

	s := newSystem(t, remoteSrv.URL)
	id := "Agent" + pascal(req.Step)
	f := s.start(t, "agent", id, s.env(t, id))
	var resp events.SQSEventResponse
	invoke(t, f, mustJSON(t, ev), &resp)
	noFailures(t, "agent request", resp)

	select {
	case c := <-calls:
		if c.path != remote.StepPath(req.Step) || c.key != req.IdempotencyKey {
			t.Errorf("remote called at %s with key %q, want %s with %q", c.path, c.key, remote.StepPath(req.Step), req.IdempotencyKey)
		}
	default:
		t.Fatal("the Agent never called the remote service")
	}
	reply, err := message.DecodeAgentReply(s.receive(t, "ResponseQueue", 1)[0])
	if err != nil {
		t.Fatal(err)
	}
	if reply.OrderID != req.OrderID || reply.Step != req.Step || reply.Attempt != req.Attempt || reply.Outcome != message.Succeeded {
		t.Errorf("reply %+v, want %s of %s attempt %d succeeded", reply, req.Step, req.OrderID, req.Attempt)
	}
}

// The sample agent-request, turned into a request for the code step
// ship-order, against the local S3 and ledger: the step's function writes
// the shipment, replies the step's success, and a redelivery of the same
// request is answered from the ledger with the same output.
func TestBootstrapCodeStep(t *testing.T) {
	t.Parallel()
	raw := sample(t, "agent-request.json")
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	req, err := message.DecodeAgentRequest(ev.Records[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	def, err := catalog.MustDeployed().ForNew("")
	if err != nil {
		t.Fatal(err)
	}
	idx := slices.IndexFunc(def.Steps, func(st workflow.Step) bool { return st.Name == shiporder.Name })
	if idx < 0 {
		t.Fatalf("%s has no step %s", def.ID(), shiporder.Name)
	}
	req.Workflow, req.Step, req.StepIndex, req.Attempt = def.ID(), shiporder.Name, idx, 1
	req.IdempotencyKey = req.OrderID + "/" + shiporder.Name
	req.CompleteBy = time.Now().Add(time.Minute).UTC()
	req.Previous[shiporder.PaymentStep] = json.RawMessage(`{"chargeId":"ch-3f9a2c71","amountCents":4248,"currency":"EUR"}`)
	ev.Records[0].Body = string(message.Encode(req))

	s := newSystem(t, "http://remote.invalid")
	id := "Step" + pascal(shiporder.Name)
	f := s.start(t, folderOf(id), id, s.env(t, id))
	var outputs []string
	for range 2 {
		var resp events.SQSEventResponse
		invoke(t, f, mustJSON(t, ev), &resp)
		noFailures(t, "code step request", resp)
		reply, err := message.DecodeAgentReply(s.receive(t, "ResponseQueue", 1)[0])
		if err != nil {
			t.Fatal(err)
		}
		if reply.OrderID != req.OrderID || reply.Step != req.Step || reply.Outcome != message.Succeeded {
			t.Fatalf("reply %+v, want %s of %s succeeded", reply, req.Step, req.OrderID)
		}
		outputs = append(outputs, string(reply.Output))
	}
	if outputs[0] != outputs[1] || !strings.Contains(outputs[0], shiporder.TrackingNumber(req.IdempotencyKey)) {
		t.Errorf("outputs %q, want one output twice with the key's tracking number", outputs)
	}
	obj, err := enginetest.S3(t).GetObject(context.Background(), &s3.GetObjectInput{
		Bucket: aws.String(s.refs["ShipOrderBucket"]), Key: aws.String(shiporder.Key(req.OrderID)),
	})
	if err != nil {
		t.Fatalf("the shipment of %s is not in the bucket: %v", req.OrderID, err)
	}
	defer obj.Body.Close()
	body, _ := io.ReadAll(obj.Body)
	if !strings.Contains(string(body), `"chargeId":"ch-3f9a2c71"`) {
		t.Errorf("shipment %s", body)
	}
}

// The sample scheduled event, with one order whose first step was never
// claimed in time: the sweep hands it back to the Scheduler.
func TestBootstrapSupervisor(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "http://remote.invalid")
	id := "5a1f0c8e-0000-4000-8000-000000000042"
	s.seedAt(t, id, time.Now().Add(-5*time.Minute))
	f := s.start(t, "supervisor", "Supervisor", s.env(t, "Supervisor"))
	invoke(t, f, sample(t, "supervisor-scheduled.json"), nil)
	sched, err := message.DecodeSchedule(s.receive(t, "SchedulerQueue", 1)[0])
	if err != nil || sched.OrderID != id || sched.StepIndex != 0 {
		t.Fatalf("scheduler queue got %+v (%v), want step 0 of %s", sched, err, id)
	}
}

// The sample stream event (an order moving to its second step) is
// published to the order-events topic.
func TestBootstrapNotifier(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "http://remote.invalid")
	f := s.start(t, "notifier", "Notifier", s.env(t, "Notifier"))
	var resp events.DynamoDBEventResponse
	invoke(t, f, sample(t, "notifier-stream.json"), &resp)
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %+v", resp.BatchItemFailures)
	}
	msgs := enginetest.ReceiveAll(context.Background(), t, s.sqs, s.events.URL, 1, 10*time.Second)
	n := enginetest.DecodeNotification(t, aws.ToString(msgs[0].Body))
	var ev struct {
		OrderID string `json:"orderId"`
		Step    string `json:"step"`
	}
	if err := json.Unmarshal([]byte(n.Message), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.OrderID != "0d9c3f5e-7b1a-4c2d-9e8f-6a5b4c3d2e1f" || ev.Step != "charge-payment" {
		t.Errorf("published %s", n.Message)
	}
}

// The same stream sample starts a new phase of a watched record: the Timer
// sends its Deadline to the deadline queue. The Deadline function then takes
// that message as its queue would deliver it, with the record as the sample
// left it in the table: the phase's CompleteBy has passed, so the record is
// recovered (a new write) as the Supervisor's sweep would recover it.
func TestBootstrapTimerAndDeadline(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "http://remote.invalid")
	var stream events.DynamoDBEvent
	if err := json.Unmarshal(sample(t, "notifier-stream.json"), &stream); err != nil {
		t.Fatal(err)
	}
	before, err := statestore.DecodeImage(stream.Records[0].Change.NewImage)
	if err != nil {
		t.Fatal(err)
	}
	if !before.CompleteBy.Before(time.Now()) {
		t.Fatalf("the sample's CompleteBy %v is not past", before.CompleteBy)
	}
	o := workflow.Order{OrderID: before.OrderID, CustomerID: "cust-1842", Currency: "EUR",
		Items: []workflow.Item{{SKU: "SKU-1001", Quantity: 2, UnitPriceCents: 1250}}, TotalCents: 2500}
	if err := s.store.CreateOrder(context.Background(), o, before); err != nil {
		t.Fatal(err)
	}
	tf := s.start(t, "timer", "Timer", s.env(t, "Timer"))
	var resp events.DynamoDBEventResponse
	invoke(t, tf, sample(t, "notifier-stream.json"), &resp)
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("timer: batch item failures %+v", resp.BatchItemFailures)
	}
	body := s.receive(t, "DeadlineQueue", 1)[0]
	d, err := message.DecodeDeadline(body)
	if err != nil || d.OrderID != "0d9c3f5e-7b1a-4c2d-9e8f-6a5b4c3d2e1f" || d.Attempt != 2 {
		t.Fatalf("deadline queue got %s (%v)", body, err)
	}

	df := s.start(t, "deadline", "Deadline", s.env(t, "Deadline"))
	ev := events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: "5e0d9c3f-0000-4000-8000-000000000001", ReceiptHandle: "local", Body: body,
		Attributes:  map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": fmt.Sprint(time.Now().UnixMilli())},
		EventSource: "aws:sqs", EventSourceARN: s.queues["DeadlineQueue"].ARN, AWSRegion: enginetest.Region,
	}}}
	var dresp events.SQSEventResponse
	invoke(t, df, mustJSON(t, ev), &dresp)
	noFailures(t, "deadline", dresp)
	after, err := s.store.GetState(context.Background(), before.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	// The timed-out attempt counts as a failure of the step, retried: the
	// record goes back to Pending for the Scheduler.
	if after.ProcessState != workflow.Pending || after.FailureCount != before.FailureCount+1 {
		t.Errorf("after the Deadline the record is %s with %d failures, want Pending with %d (was %s)",
			after.ProcessState, after.FailureCount, before.FailureCount+1, before.ProcessState)
	}
}

// actorOf is the actor of the stack's function id.
func actorOf(id string) string {
	switch {
	case strings.HasPrefix(id, "Agent"):
		return topology.Agent
	case strings.HasPrefix(id, "Step"):
		return topology.CodeStep
	}
	return strings.ToLower(id)
}

// folderOf is the binary of the stack's function id: its functions/
// folder, or for a code step its step's name (functions/steps/<step>).
func folderOf(id string) string {
	if actorOf(id) == topology.CodeStep {
		return stepOf(id)
	}
	return actorOf(id)
}

// stepOf is the code step of the function id (StepShipOrder: ship-order),
// "" if it is none.
func stepOf(id string) string {
	for name := range codeSteps {
		if id == "Step"+pascal(name) {
			return name
		}
	}
	return ""
}

// requiredVariables are, per function, a variable its configuration cannot
// do without.
var requiredVariables = map[string]string{
	"Submission": topology.EnvOrdersTable,
	"Scheduler":  topology.EnvAgentQueueURLs,
	"Supervisor": topology.EnvStateTable,
	"Notifier":   topology.EnvOrderEventsTopicARN,
	"Timer":      topology.EnvDeadlineQueueURL,
	"Deadline":   topology.EnvDeadlineQueueURL,
}

// A function whose environment lacks a required variable does not start:
// it reports the variable through the Runtime API's /init/error and exits,
// and the invocation gets the init error, as Lambda would give it.
func TestBootstrapMissingVariableIsAnInitError(t *testing.T) {
	t.Parallel()
	s := newSystem(t, "http://remote.invalid")
	cases := map[string]string{}
	for k, v := range requiredVariables {
		cases[k] = v
	}
	for _, st := range workflow.Reference().Steps {
		cases["Agent"+pascal(st.Name)] = topology.EnvResponseQueueURL
	}
	for name := range codeSteps {
		cases["Step"+pascal(name)] = topology.EnvLedgerTable
	}
	for id, variable := range cases {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			env := s.env(t, id)
			if _, ok := env[variable]; !ok {
				t.Fatalf("the stack does not set %s for %s", variable, id)
			}
			delete(env, variable)
			f := s.start(t, folderOf(id), id, env)
			_, err := f.Invoke(context.Background(), []byte(`{}`))
			var ie *lambdart.InitError
			if !errors.As(err, &ie) {
				t.Fatalf("invoke without %s: %v, want an init error", variable, err)
			}
			if ie.Report == nil || ie.Report.Type != coldstart.InitErrorType || !strings.Contains(ie.Report.Message, variable) {
				t.Fatalf("init error %v, want a %s report naming %s", ie, coldstart.InitErrorType, variable)
			}
			if ie.Exit == nil {
				t.Errorf("the process did not exit after its init error")
			}
		})
	}
}
