package stack_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/infra/stack"
	"github.com/sasflow/sas/internal/cost"
	"github.com/sasflow/sas/internal/stepgen"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/submission"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// Synthesizing starts a Node.js process and takes seconds, so TestMain does
// it once: the default stack (with cdk-nag applied, as the app does), a
// variant with other context values and a code step granted more, and a
// canary stack that breaks the rules on purpose.
var (
	tmpl       *template // the default stack
	variant    *template // built with variantCfg
	nagErrors  []string  // cdk-nag errors of the default stack
	nagWarns   []string
	canaryErr  []string  // cdk-nag errors of the canary stack
	canaryTmpl *template // the canary stack
	variantNag []string  // cdk-nag errors and warnings of the variant
	cfg        stack.Config
)

// The variant's capacity model: 70 calls at once of 200 ms, so 7 Agent
// invocations, 350 orders a second, an API rate of 438 and a burst of 350.
var variantContext = map[string]string{
	stack.ContextSupervisorSchedule: "rate(5 minutes)",
	stack.ContextRemoteLatency:      "200ms",
	stack.ContextRemoteConcurrency:  "70",
	stack.ContextLogRetentionDays:   "90",
	stack.ContextMaxReceiveCount:    "3",
	stack.ContextRetention:          "720h",
	stack.ContextTraceSampleRate:    "0.25",
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The template does not depend on what the binaries do, so tests deploy
	// small stand-ins; make synth packages the real ones.
	codeDir, err := os.MkdirTemp("", "sas-infra-code")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(codeDir)
	for _, f := range append(stack.Functions(), stack.DefaultConfig().CodeStepFolders()...) {
		if err := os.MkdirAll(filepath.Join(codeDir, f), 0o755); err != nil {
			panic(err)
		}
		if err := os.WriteFile(filepath.Join(codeDir, f, "bootstrap"), []byte("#!/bin/sh\necho "+f+"\n"), 0o755); err != nil {
			panic(err)
		}
	}
	cfg = stack.DefaultConfig()
	cfg.CodeDir = codeDir
	vcfg, err := stack.FromContext(func(k string) string { return variantContext[k] })
	if err != nil {
		panic(err)
	}
	vcfg.CodeDir = codeDir
	// The variant deploys ship-order with more of what a manifest may
	// grant (TestCodeStepGrantsAreTheManifestsOnly).
	vcfg.CodeSteps = map[string]stepgen.Manifest{"ship-order": grantsManifest}

	outdir, err := os.MkdirTemp("", "sas-infra-out")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(outdir)
	app := awscdk.NewApp(&awscdk.AppProps{
		Outdir: jsii.String(outdir),
		// As the CLI does, so tests can find resources by construct path.
		Context: &map[string]any{"aws:cdk:enable-path-metadata": true},
	})
	main := stack.New(app, "Main", cfg, nil)
	other := stack.New(app, "Variant", vcfg, nil)
	canary := awscdk.NewStack(app, jsii.String("NagCanary"), nil)
	// Unencrypted, plain-HTTP, no DLQ: cdk-nag must object.
	awssqs.NewQueue(canary, jsii.String("Careless"), &awssqs.QueueProps{Encryption: awssqs.QueueEncryption_UNENCRYPTED})
	// A role granted a * path and a ? path, neither suppressed: cdk-nag
	// must object to the first (IAM5); it does not read ? (see
	// TestNagMissesWhatTheStacksOwnCheckCatches).
	wide := awsiam.NewRole(canary, jsii.String("Wide"), &awsiam.RoleProps{AssumedBy: awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil)})
	wide.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("s3:GetObject"), Resources: jsii.Strings(canaryStar, canaryQuestion),
	}))
	stack.Check(app)

	tmpl = templateOf(main)
	variant = templateOf(other)
	canaryTmpl = templateOf(canary)
	nagErrors = messages(assertions.Annotations_FromStack(main).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("(AwsSolutions|Serverless)-.*"))))
	nagWarns = messages(assertions.Annotations_FromStack(main).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("(AwsSolutions|Serverless)-.*"))))
	variantNag = append(messages(assertions.Annotations_FromStack(other).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("(AwsSolutions|Serverless)-.*")))),
		messages(assertions.Annotations_FromStack(other).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("(AwsSolutions|Serverless)-.*"))))...)
	canaryErr = messages(assertions.Annotations_FromStack(canary).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("(AwsSolutions|Serverless)-.*"))))
	return m.Run()
}

//lint:ignore SA1019 assertions.Annotations returns this type; its replacement has no Go binding
func messages(found *[]*cxapi.SynthesisMessage) []string {
	var out []string
	for _, m := range *found {
		//lint:ignore SA1019 the fields of the type above
		out = append(out, fmt.Sprintf("%v (at %s)", m.Entry.Data, *m.Id))
	}
	return out
}

// template is a synthesized CloudFormation template as plain Go values, so
// tests can sweep it without more round trips to Node.js.
type template struct {
	Metadata   map[string]any
	Parameters map[string]map[string]any
	Conditions map[string]any
	Resources  map[string]resource
	Outputs    map[string]map[string]any
}

type resource struct {
	Type                string
	Properties          map[string]any
	DependsOn           any
	Condition           string
	DeletionPolicy      string
	UpdateReplacePolicy string
	Metadata            map[string]any
}

func templateOf(s awscdk.Stack) *template {
	raw := assertions.Template_FromStack(s, nil).ToJSON()
	b, err := json.Marshal(raw)
	if err != nil {
		panic(err)
	}
	var t template
	if err := json.Unmarshal(b, &t); err != nil {
		panic(err)
	}
	return &t
}

// ofType returns the logical IDs of every resource of type typ, sorted.
func (t *template) ofType(typ string) []string {
	var ids []string
	for id, r := range t.Resources {
		if r.Type == typ {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// byPath finds the resource the construct at path (under the stack) made.
func (t *template) byPath(tb testing.TB, typ, path string) (string, resource) {
	tb.Helper()
	for id, r := range t.Resources {
		if p, _ := r.Metadata["aws:cdk:path"].(string); r.Type == typ && strings.HasSuffix(p, "/"+path) {
			return id, r
		}
	}
	tb.Fatalf("no %s at %s", typ, path)
	return "", resource{}
}

// ref is the logical ID a {"Ref": id} or {"Fn::GetAtt": [id, attr]} names.
func ref(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if r, ok := m["Ref"].(string); ok {
		return r
	}
	if ga, ok := m["Fn::GetAtt"].([]any); ok && len(ga) == 2 {
		return ga[0].(string)
	}
	return ""
}

// get walks a path of map keys.
func get(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// list returns v as a list, wrapping a single value (IAM allows both).
func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// resolver turns intrinsic functions into the concrete values AWS would
// produce, so environment variables can be fed to the functions' own config
// loaders.
type resolver struct {
	t *template
	// params maps a parameter to its deploy-time value.
	params map[string]string
}

func (r resolver) resolve(tb testing.TB, v any) string {
	tb.Helper()
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		if j, ok := v["Fn::Join"].([]any); ok {
			var parts []string
			for _, p := range j[1].([]any) {
				parts = append(parts, r.resolve(tb, p))
			}
			return strings.Join(parts, j[0].(string))
		}
		id := ref(v)
		if p, ok := r.params[id]; ok {
			return p
		}
		if p, ok := pseudoParams[id]; ok {
			return p
		}
		res, ok := r.t.Resources[id]
		if !ok {
			tb.Fatalf("reference to unknown %s", toJSON(v))
		}
		_, isAtt := v["Fn::GetAtt"]
		switch {
		case res.Type == "AWS::SQS::Queue" && !isAtt:
			return "https://sqs.eu-west-1.amazonaws.com/111122223333/" + id
		case res.Type == "AWS::DynamoDB::Table" && !isAtt:
			return id
		case res.Type == "AWS::SNS::Topic" && !isAtt:
			return "arn:aws:sns:eu-west-1:111122223333:" + id
		case res.Type == "AWS::ApiGatewayV2::Api" && !isAtt:
			// The API ID.
			return id
		case res.Type == "AWS::ApiGatewayV2::Api" && get(v, "Fn::GetAtt").([]any)[1] == "ApiEndpoint":
			return "https://" + id + ".execute-api.eu-west-1.amazonaws.com"
		case res.Type == "AWS::IAM::Role" && get(v, "Fn::GetAtt").([]any)[1] == "Arn":
			return "arn:aws:iam::111122223333:role/" + id
		case res.Type == "AWS::IAM::Role" && get(v, "Fn::GetAtt").([]any)[1] == "RoleId":
			// A role's unique ID: AROA and upper-case letters and digits.
			return "AROA" + strings.ToUpper(id)
		case isAtt:
			return "arn:aws:x:eu-west-1:111122223333:" + id
		}
	}
	tb.Fatalf("cannot resolve %s", toJSON(v))
	return ""
}

// pseudoParams are the values AWS gives the pseudo parameters in the
// resolver's account and region.
var pseudoParams = map[string]string{
	"AWS::Region": "eu-west-1", "AWS::AccountId": "111122223333", "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com",
}

func TestEveryFunctionFolderIsDeployed(t *testing.T) {
	entries, err := os.ReadDir("../../functions")
	if err != nil {
		t.Fatal(err)
	}
	var folders []string
	for _, e := range entries {
		// functions/steps holds the code steps' functions, checked below.
		if e.IsDir() && e.Name() != "steps" {
			folders = append(folders, e.Name())
		}
	}
	want := stack.Functions()
	slices.Sort(want)
	if !slices.Equal(folders, want) {
		t.Fatalf("functions/ has %v, the stack deploys %v", folders, want)
	}
	steps, err := os.ReadDir("../../functions/steps")
	if err != nil {
		t.Fatal(err)
	}
	var codeSteps []string
	for _, e := range steps {
		codeSteps = append(codeSteps, "steps/"+e.Name())
	}
	if want := cfg.CodeStepFolders(); !slices.Equal(codeSteps, want) {
		t.Fatalf("functions/steps has %v, the stack deploys the code steps %v", codeSteps, want)
	}
	// One function per folder, the Agent once per step that is not a code
	// step, and one per code step.
	if got, want := len(tmpl.ofType("AWS::Lambda::Function")), len(stack.Functions())-1+len(cfg.Workflows.Agents()); got != want {
		t.Fatalf("%d functions, want %d", got, want)
	}
}

func TestFunctionsAreArmBootstrapsWithOwnLogGroups(t *testing.T) {
	logGroups := map[string]string{}
	for _, id := range tmpl.ofType("AWS::Lambda::Function") {
		p := tmpl.Resources[id].Properties
		if p["Runtime"] != "provided.al2023" || toJSON(p["Architectures"]) != `["arm64"]` || p["Handler"] != "bootstrap" {
			t.Errorf("%s: runtime %v, architectures %v, handler %v", id, p["Runtime"], p["Architectures"], p["Handler"])
		}
		if mem, _ := p["MemorySize"].(float64); mem < 128 || mem > 1024 {
			t.Errorf("%s: memory %v", id, p["MemorySize"])
		}
		if to, _ := p["Timeout"].(float64); to < 5 || to > 900 {
			t.Errorf("%s: timeout %v", id, p["Timeout"])
		}
		lg := ref(get(p, "LoggingConfig", "LogGroup"))
		if lg == "" || get(p, "LoggingConfig", "LogFormat") != "JSON" {
			t.Errorf("%s: logging %s", id, toJSON(p["LoggingConfig"]))
			continue
		}
		if other, dup := logGroups[lg]; dup {
			t.Errorf("%s and %s share log group %s", id, other, lg)
		}
		logGroups[lg] = id
		// INFO keeps Lambda's platform.start and platform.report lines (the
		// REPORT line's duration and max memory used, to size memory from
		// data); WARN dropped them.
		if get(p, "LoggingConfig", "SystemLogLevel") != "INFO" || get(p, "LoggingConfig", "ApplicationLogLevel") != "INFO" {
			t.Errorf("%s: system log level %v, application log level %v; want INFO, INFO", id,
				get(p, "LoggingConfig", "SystemLogLevel"), get(p, "LoggingConfig", "ApplicationLogLevel"))
		}
		if days := tmpl.Resources[lg].Properties["RetentionInDays"]; days != float64(cfg.LogRetentionDays) {
			t.Errorf("%s: retention %v days, want %d", lg, days, cfg.LogRetentionDays)
		}
	}
	// Another context value, another retention.
	for _, id := range variant.ofType("AWS::Logs::LogGroup") {
		if days := variant.Resources[id].Properties["RetentionInDays"]; days != float64(90) {
			t.Errorf("variant %s: retention %v", id, days)
		}
	}
}

// deployParams are the values an operator passes to cdk deploy.
func deployParams(t *template) map[string]string {
	p := map[string]string{}
	for id, param := range t.Parameters {
		if strings.HasSuffix(id, "RemoteBaseUrl") {
			// Two replicas, as the Agent reads them (REMOTE_BASE_URLS).
			p[id] = "https://eu.remote.example.com/" + strings.ToLower(id) + ",https://us.remote.example.com/" + strings.ToLower(id)
		} else if d, ok := param["Default"].(string); ok {
			p[id] = d
		} else {
			// A code step's parameter (ShipOrderBucket), which has no
			// default.
			p[id] = "value-of-" + strings.ToLower(id)
		}
	}
	return p
}

func TestRemoteURLParametersTakeHTTPSOnly(t *testing.T) {
	n := 0
	for id, param := range tmpl.Parameters {
		if !strings.HasSuffix(id, "RemoteBaseUrl") {
			continue
		}
		n++
		pattern, _ := param["AllowedPattern"].(string)
		if pattern != stack.RemoteURLPattern || !strings.HasPrefix(pattern, "^https://") {
			t.Errorf("%s: AllowedPattern %q", id, pattern)
		}
		if d, _ := param["ConstraintDescription"].(string); !strings.Contains(d, "https://") {
			t.Errorf("%s: ConstraintDescription %q", id, d)
		}
		re := regexp.MustCompile(pattern)
		for url, ok := range map[string]bool{
			"https://inventory.example.com":         true,
			"https://payments.example.com:8443/api": true,
			// The replicas of a service.
			"https://eu.inventory.example.com,https://us.inventory.example.com/api": true,
			"https://a1.example.com,https://a2.example.com,https://a3.example.com,https://a4.example.com," +
				"https://a5.example.com,https://a6.example.com,https://a7.example.com,https://a8.example.com": true,
			"https://a1.example.com,https://a2.example.com,https://a3.example.com,https://a4.example.com," +
				"https://a5.example.com,https://a6.example.com,https://a7.example.com,https://a8.example.com,https://a9.example.com": false,
			"https://a.example.com,":                       false,
			"https://a.example.com,,https://b.example.com": false,
			"https://a.example.com, https://b.example.com": false,
			"https://a.example.com,http://b.example.com":   false,
			"http://inventory.example.com":                 false,
			"HTTP://inventory.example.com":                 false,
			"https://x.example.com/?a=1":                   false,
			"https://x.example.com/#f":                     false,
			"inventory.example.com":                        false,
			"":                                             false,
		} {
			if re.MatchString(url) != ok {
				t.Errorf("%s: %q accepted %v, want %v", id, url, !ok, ok)
			}
		}
	}
	// A code step calls no remote service.
	if want := len(cfg.Workflows.Agents()) - len(cfg.CodeSteps); n != want {
		t.Errorf("%d remote URL parameters for %d steps, %d of them code steps", n, len(cfg.Workflows.Agents()), len(cfg.CodeSteps))
	}
}

func TestFunctionEnvironmentsSatisfyTheirConfigLoaders(t *testing.T) {
	r := resolver{t: tmpl, params: deployParams(tmpl)}
	for _, tc := range loaders {
		t.Run(tc.path, func(t *testing.T) {
			_, fn := tmpl.byPath(t, "AWS::Lambda::Function", tc.path+"/Resource")
			vars, _ := get(fn.Properties, "Environment", "Variables").(map[string]any)
			env := map[string]string{}
			for k, v := range vars {
				env[k] = r.resolve(t, v)
			}
			read := map[string]bool{}
			got, err := tc.load(func(k string) string { read[k] = true; return env[k] })
			if err != nil {
				t.Fatalf("the function would not start: %v\nenv %v", err, env)
			}
			// No variable is left unread: each names something the
			// function uses.
			for k := range env {
				if !read[k] {
					t.Errorf("variable %s is set but not read", k)
				}
			}
			for k, want := range tc.points {
				if got := ref(vars[k]); !strings.HasPrefix(got, want) {
					t.Errorf("%s refers to %q, want the %s resource", k, got, want)
				}
			}
			if tc.check != nil {
				tc.check(t, got, vars)
			}
		})
	}
}

func TestTablesMatchTheStateStoreSchema(t *testing.T) {
	for _, tc := range tableSchemas(t) {
		_, table := tmpl.byPath(t, "AWS::DynamoDB::Table", tc.path+"/Resource")
		p := table.Properties
		if p["BillingMode"] != "PAY_PER_REQUEST" {
			t.Errorf("%s: billing %v", tc.path, p["BillingMode"])
		}
		if get(p, "PointInTimeRecoverySpecification", "PointInTimeRecoveryEnabled") != true {
			t.Errorf("%s: no point-in-time recovery", tc.path)
		}
		if p["DeletionProtectionEnabled"] != true || table.DeletionPolicy != "Retain" || table.UpdateReplacePolicy != "Retain" {
			t.Errorf("%s: deletion protection %v, policies %s/%s", tc.path, p["DeletionProtectionEnabled"], table.DeletionPolicy, table.UpdateReplacePolicy)
		}
		for _, k := range []string{"KeySchema", "AttributeDefinitions", "GlobalSecondaryIndexes", "StreamSpecification"} {
			if got, want := canonical(p[k]), canonical(tc.want[k]); got != want {
				t.Errorf("%s: %s\n got %s\nwant %s", tc.path, k, got, want)
			}
		}
	}
	// What the functions rely on is there, so the comparison above cannot
	// pass by both sides losing it: the Notifier reads the state stream,
	// the Supervisor and the API query the two indexes of the state table,
	// and the API the orders table's.
	_, state := tmpl.byPath(t, "AWS::DynamoDB::Table", "StateTable/Resource")
	if got := get(state.Properties, "StreamSpecification", "StreamViewType"); got != string(statestore.StateStreamView) {
		t.Errorf("state table stream view %v, want %s", got, statestore.StateStreamView)
	}
	var indexes []string
	for _, g := range list(state.Properties["GlobalSecondaryIndexes"]) {
		indexes = append(indexes, fmt.Sprint(get(g, "IndexName")))
	}
	sort.Strings(indexes)
	if want := []string{statestore.ByStateIndex, statestore.InFlightIndex}; !slices.Equal(indexes, want) {
		t.Errorf("state table indexes %v, want %v", indexes, want)
	}
	_, orders := tmpl.byPath(t, "AWS::DynamoDB::Table", "OrdersTable/Resource")
	indexes = nil
	for _, g := range list(orders.Properties["GlobalSecondaryIndexes"]) {
		indexes = append(indexes, fmt.Sprint(get(g, "IndexName")))
	}
	if want := []string{statestore.ByOwnerIndex}; !slices.Equal(indexes, want) {
		t.Errorf("orders table indexes %v, want %v", indexes, want)
	}
	if orders.Properties["StreamSpecification"] != nil {
		t.Errorf("orders table has a stream %s that nothing reads", toJSON(orders.Properties["StreamSpecification"]))
	}
	// Both tables expire items on the attribute the store writes and reads
	// (statestore.TimeToLiveInputs, what the local engines' tables get).
	for name, table := range map[string]resource{"orders": orders, "state": state} {
		if got := toJSON(table.Properties["TimeToLiveSpecification"]); got != `{"AttributeName":"`+statestore.ExpiresAtAttr+`","Enabled":true}` {
			t.Errorf("%s table TTL %s, want enabled on %s", name, got, statestore.ExpiresAtAttr)
		}
	}
	// The listings' indexes are sharded and keys only, with text sort keys
	// ("<ms>#<OrderID>"): an index that copied attributes, or was keyed by
	// the state or the owner alone, would bring back the index writes and
	// hot partitions the sharding removed.
	listingIndex(t, state, statestore.ByStateIndex, statestore.ByStateKeyAttr, statestore.ByStateSortAttr)
	listingIndex(t, orders, statestore.ByOwnerIndex, statestore.OwnerShardAttr, statestore.OwnerSortAttr)
}

// listingIndex checks that table declares index as a listing: partition
// key hash and sort key sort, both strings, keys only.
func listingIndex(t *testing.T, table resource, index, hash, sort string) {
	t.Helper()
	types := map[string]any{}
	for _, a := range list(table.Properties["AttributeDefinitions"]) {
		types[fmt.Sprint(get(a, "AttributeName"))] = get(a, "AttributeType")
	}
	for _, g := range list(table.Properties["GlobalSecondaryIndexes"]) {
		if get(g, "IndexName") != index {
			continue
		}
		want := []any{map[string]any{"AttributeName": hash, "KeyType": "HASH"}, map[string]any{"AttributeName": sort, "KeyType": "RANGE"}}
		if canonical(get(g, "KeySchema")) != canonical(want) || types[hash] != "S" || types[sort] != "S" {
			t.Errorf("index %s keyed %s (types %v), want %s and %s, both strings", index, toJSON(get(g, "KeySchema")), types, hash, sort)
		}
		if p := get(g, "Projection"); get(p, "ProjectionType") != "KEYS_ONLY" || get(p, "NonKeyAttributes") != nil {
			t.Errorf("index %s projects %s, want its keys only", index, toJSON(p))
		}
		return
	}
	t.Errorf("no index %s", index)
}

// deadLetterQueues are the queues some queue's redrive policy names.
func (t *template) deadLetterQueues() map[string]bool {
	out := map[string]bool{}
	for _, id := range t.ofType("AWS::SQS::Queue") {
		if d := ref(get(t.Resources[id].Properties, "RedrivePolicy", "deadLetterTargetArn")); d != "" {
			out[d] = true
		}
	}
	return out
}

// failureDestinations are the queues event source mappings send the
// batches they give up on to.
func (t *template) failureDestinations() map[string]bool {
	out := map[string]bool{}
	for _, id := range t.ofType("AWS::Lambda::EventSourceMapping") {
		if d := ref(get(t.Resources[id].Properties, "DestinationConfig", "OnFailure", "Destination")); d != "" {
			out[d] = true
		}
	}
	return out
}

func TestQueuesHaveDLQsEncryptionAndTLSOnly(t *testing.T) {
	queues := tmpl.ofType("AWS::SQS::Queue")
	// Scheduler, responses, one per step and the deadlines, each with a
	// DLQ; and the Notifier's and the Timer's failure destinations.
	if want := 2*(3+len(cfg.Workflows.Agents())) + 2; len(queues) != want {
		t.Fatalf("%d queues, want %d", len(queues), want)
	}
	dlqs := map[string]bool{}
	mains := 0
	for _, id := range queues {
		p := tmpl.Resources[id].Properties
		if p["SqsManagedSseEnabled"] != true {
			t.Errorf("%s: not encrypted at rest", id)
		}
		// SQS's 1 MiB, which the payload bounds count on, on dead-letter
		// queues too: a redriven message must fit.
		if p["MaximumMessageSize"] != float64(workflow.MaxMessageBytes) || workflow.MaxMessageBytes != 1<<20 {
			t.Errorf("%s: MaximumMessageSize %v, want %d", id, p["MaximumMessageSize"], 1<<20)
		}
		if rp, ok := p["RedrivePolicy"]; ok {
			mains++
			dlq := ref(get(rp, "deadLetterTargetArn"))
			if get(rp, "maxReceiveCount") != float64(cfg.MaxReceiveCount) || !strings.Contains(dlq, "DLQ") {
				t.Errorf("%s: redrive %s", id, toJSON(rp))
			}
			dlqs[dlq] = true
		}
	}
	if len(dlqs) != mains {
		t.Errorf("%d distinct DLQs for %d queues", len(dlqs), mains)
	}
	// Each DLQ lets exactly its main queue redrive into it, named by ARN
	// (a Ref would be a cycle); the failure destinations let none.
	sources := map[string][]string{}
	for _, id := range queues {
		p := tmpl.Resources[id].Properties
		if rp, ok := p["RedrivePolicy"]; ok {
			name, _ := p["QueueName"].(string)
			if want := stack.QueueName("Main", id[:len(id)-8]); name != want {
				t.Errorf("%s: QueueName %v, want %s", id, p["QueueName"], want)
			}
			dlq := ref(get(rp, "deadLetterTargetArn"))
			sources[dlq] = append(sources[dlq], "arn:aws:sqs:eu-west-1:111122223333:"+name)
		}
	}
	r := resolver{t: tmpl}
	for _, id := range queues {
		allow := tmpl.Resources[id].Properties["RedriveAllowPolicy"]
		if _, isMain := tmpl.Resources[id].Properties["RedrivePolicy"]; isMain {
			if allow != nil {
				t.Errorf("%s is no DLQ but has RedriveAllowPolicy %s", id, toJSON(allow))
			}
			continue
		}
		if allow == nil {
			t.Errorf("%s: no RedriveAllowPolicy", id)
			continue
		}
		want, isDLQ := sources[id]
		if !isDLQ {
			if toJSON(allow) != `{"redrivePermission":"denyAll"}` {
				t.Errorf("failure destination %s: RedriveAllowPolicy %s, want denyAll", id, toJSON(allow))
			}
			continue
		}
		var got []string
		for _, arn := range list(get(allow, "sourceQueueArns")) {
			got = append(got, r.resolve(t, arn))
		}
		if get(allow, "redrivePermission") != stack.RedriveByQueue || !slices.Equal(got, want) || len(get(allow, "sourceQueueArns").([]any)) != len(want) {
			t.Errorf("DLQ %s: RedriveAllowPolicy %s (sources %v), want byQueue %v", id, toJSON(allow), got, want)
		}
	}
	if cycle := tmpl.dependencyCycle(); cycle != nil {
		t.Errorf("dependency cycle %v", cycle)
	}
	failures := tmpl.failureDestinations()
	if len(failures) != 2 {
		t.Errorf("failure destinations %v, want the Notifier's and the Timer's", failures)
	}
	for id := range failures {
		dlqs[id] = true
	}
	for _, id := range queues {
		p := tmpl.Resources[id].Properties
		_, hasRedrive := p["RedrivePolicy"]
		switch {
		case !hasRedrive && !dlqs[id]:
			t.Errorf("%s has no dead-letter queue and is none", id)
		case dlqs[id] && p["MessageRetentionPeriod"] != float64(14*24*3600):
			t.Errorf("DLQ %s keeps messages %vs, want 14 days", id, p["MessageRetentionPeriod"])
		}
	}
	// Every queue denies requests that do not use TLS.
	denied := map[string]bool{}
	for _, id := range tmpl.ofType("AWS::SQS::QueuePolicy") {
		p := tmpl.Resources[id].Properties
		for _, s := range list(get(p, "PolicyDocument", "Statement")) {
			if get(s, "Effect") == "Deny" && get(s, "Condition", "Bool", "aws:SecureTransport") == "false" {
				for _, q := range list(p["Queues"]) {
					denied[ref(q)] = true
				}
			}
		}
	}
	for _, id := range queues {
		if !denied[id] {
			t.Errorf("%s accepts plain HTTP", id)
		}
	}
}

// tmplID is the logical ID of the default stack's queue at path.
func tmplID(t *testing.T, path string) string {
	t.Helper()
	id, _ := tmpl.byPath(t, "AWS::SQS::Queue", path+"/Resource")
	return id
}

// isQueue reports whether v names an SQS queue of t.
func (t *template) isQueue(v any) bool {
	return t.Resources[ref(v)].Type == "AWS::SQS::Queue"
}

func TestEventSourcesReportBatchItemFailuresAndFitTheQueues(t *testing.T) {
	var queueMappings []string
	for _, id := range tmpl.ofType("AWS::Lambda::EventSourceMapping") {
		if tmpl.isQueue(tmpl.Resources[id].Properties["EventSourceArn"]) {
			queueMappings = append(queueMappings, id)
		}
	}
	// The Scheduler's two, one per Agent, and the fast path's.
	if want := 3 + len(cfg.Workflows.Agents()); len(queueMappings) != want {
		t.Fatalf("%d queue event source mappings, want %d", len(queueMappings), want)
	}
	for _, tmplAndWant := range []struct {
		t              *template
		maxConcurrency float64
	}{{tmpl, float64(cfg.Capacity.AgentMaxConcurrency())}, {variant, 7}} {
		tp := tmplAndWant.t
		for _, id := range tp.ofType("AWS::Lambda::EventSourceMapping") {
			p := tp.Resources[id].Properties
			if toJSON(p["FunctionResponseTypes"]) != `["ReportBatchItemFailures"]` {
				t.Errorf("%s: response types %v", id, p["FunctionResponseTypes"])
			}
			if !tp.isQueue(p["EventSourceArn"]) {
				continue // the stream: TestNotifierReadsTheStateStream
			}
			fn := tp.Resources[ref(p["FunctionName"])]
			queue := tp.Resources[ref(p["EventSourceArn"])]
			if b, _ := p["BatchSize"].(float64); b < 1 || b > 10 {
				t.Errorf("%s: batch size %v", id, p["BatchSize"])
			}
			timeout, _ := fn.Properties["Timeout"].(float64)
			visibility, _ := queue.Properties["VisibilityTimeout"].(float64)
			if visibility < 6*timeout {
				t.Errorf("%s: visibility timeout %vs under six times the function timeout %vs", id, visibility, timeout)
			}
			isAgent := fn.Properties["Environment"] != nil && get(fn.Properties, "Environment", "Variables", topology.EnvAgentStep) != nil
			mc := get(p, "ScalingConfig", "MaximumConcurrency")
			switch {
			case isAgent && mc != tmplAndWant.maxConcurrency:
				t.Errorf("%s: agent maximum concurrency %v, want %v", id, mc, tmplAndWant.maxConcurrency)
			case !isAgent && mc != nil:
				t.Errorf("%s: the Scheduler or the fast path is capped at %v", id, mc)
			}
		}
	}
}

// TestStreamConsumersReadTheStateStream: the Notifier and the Timer each
// read the state table's stream with their own mapping and failure
// destination; neither consumes a queue.
func TestStreamConsumersReadTheStateStream(t *testing.T) {
	stateID, _ := tmpl.byPath(t, "AWS::DynamoDB::Table", "StateTable/Resource")
	want := map[string]string{} // function → its failure destination
	for _, name := range []string{"Notifier", "Timer"} {
		fnID, _ := tmpl.byPath(t, "AWS::Lambda::Function", name+"/Resource")
		dlqID, _ := tmpl.byPath(t, "AWS::SQS::Queue", name+"DLQ/Resource")
		want[fnID] = dlqID
	}
	seen := map[string]bool{}
	for _, id := range tmpl.ofType("AWS::Lambda::EventSourceMapping") {
		p := tmpl.Resources[id].Properties
		fnID := ref(p["FunctionName"])
		dlqID, isConsumer := want[fnID]
		if tmpl.isQueue(p["EventSourceArn"]) {
			if isConsumer {
				t.Errorf("%s: a stream consumer consumes a queue", id)
			}
			continue
		}
		if !isConsumer || toJSON(p["EventSourceArn"]) != toJSON(map[string]any{"Fn::GetAtt": []any{stateID, "StreamArn"}}) {
			t.Errorf("%s: %s reads %s, want the Notifier or the Timer on the state table's stream", id, toJSON(p["FunctionName"]), toJSON(p["EventSourceArn"]))
			continue
		}
		if seen[fnID] {
			t.Errorf("%s: a second mapping for %s", id, fnID)
		}
		seen[fnID] = true
		for k, want := range map[string]any{
			"StartingPosition": "TRIM_HORIZON",
			"BatchSize":        float64(stack.StreamBatchSize),
			// The handler reports the first failed record itself.
			"BisectBatchOnFunctionError": false,
			// Until the record leaves the stream.
			"MaximumRetryAttempts":      float64(-1),
			"ParallelizationFactor":     float64(1),
			"MaximumRecordAgeInSeconds": nil,
			"ScalingConfig":             nil,
		} {
			if got := p[k]; got != want {
				t.Errorf("%s: %s = %v, want %v", id, k, got, want)
			}
		}
		if d := ref(get(p, "DestinationConfig", "OnFailure", "Destination")); d != dlqID {
			t.Errorf("%s: on failure to %q, want %s", id, d, dlqID)
		}
		// A TTL deletion's REMOVE, which both ignore, invokes neither.
		if got := toJSON(get(p, "FilterCriteria")); got != `{"Filters":[{"Pattern":"{\"eventName\":[\"INSERT\",\"MODIFY\"]}"}]}` {
			t.Errorf("%s: filter %s, want INSERT and MODIFY only", id, got)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("stream consumers %v, want the Notifier and the Timer", seen)
	}
}

func TestAPIRoutesNeedIAMAndTheStageThrottlesAndLogs(t *testing.T) {
	routes := map[string]string{}
	for _, id := range tmpl.ofType("AWS::ApiGatewayV2::Route") {
		p := tmpl.Resources[id].Properties
		routes[p["RouteKey"].(string)] = fmt.Sprint(p["AuthorizationType"])
	}
	want := map[string]string{}
	for _, r := range []string{"POST /orders", "GET /orders", "GET /orders/{id}", "GET /ops/orders", "GET /ops/orders/{id}", "GET /ops/workflows", "POST /orders/{id}/retry", "POST /orders/{id}/cancel", "$default"} {
		want[r] = "AWS_IAM"
	}
	if toJSON(routes) != toJSON(want) {
		t.Fatalf("routes %v, want %v", routes, want)
	}
	// Every route reaches the Submission function through the one
	// integration.
	integID, integ := tmpl.byPath(t, "AWS::ApiGatewayV2::Integration", "SubmissionIntegration/Resource")
	if uri := toJSON(integ.Properties["IntegrationUri"]); !strings.Contains(uri, "Submission") {
		t.Errorf("integration goes to %s", uri)
	}
	for _, id := range tmpl.ofType("AWS::ApiGatewayV2::Route") {
		if target := toJSON(tmpl.Resources[id].Properties["Target"]); !strings.Contains(target, `{"Ref":"`+integID+`"}`) {
			t.Errorf("route %s targets %s", id, target)
		}
	}
	stages := tmpl.ofType("AWS::ApiGatewayV2::Stage")
	if len(stages) != 1 {
		t.Fatalf("%d stages", len(stages))
	}
	p := tmpl.Resources[stages[0]].Properties
	if p["StageName"] != "$default" || p["AutoDeploy"] != true {
		t.Errorf("stage %v autodeploy %v", p["StageName"], p["AutoDeploy"])
	}
	// The capacity model's throttle on POST /orders, its own route
	// setting; the stage's default (reads, operator routes) at least as
	// high. The variant's model gives other figures.
	for _, tc := range []struct {
		t           *template
		rate, burst float64
	}{{tmpl, 625, 500}, {variant, 438, 350}} {
		stage := tc.t.Resources[tc.t.ofType("AWS::ApiGatewayV2::Stage")[0]]
		sp := stage.Properties
		submit := get(sp, "RouteSettings", "POST /orders")
		if get(submit, "ThrottlingRateLimit") != tc.rate || get(submit, "ThrottlingBurstLimit") != tc.burst || len(sp["RouteSettings"].(map[string]any)) != 1 {
			t.Errorf("route throttling %s, want POST /orders at %v/s, burst %v", toJSON(sp["RouteSettings"]), tc.rate, tc.burst)
		}
		if rate, _ := get(sp, "DefaultRouteSettings", "ThrottlingRateLimit").(float64); rate < tc.rate {
			t.Errorf("default throttling %s below the orders' %v/s", toJSON(sp["DefaultRouteSettings"]), tc.rate)
		}
		if burst, _ := get(sp, "DefaultRouteSettings", "ThrottlingBurstLimit").(float64); burst < tc.burst {
			t.Errorf("default throttling %s below the orders' burst %v", toJSON(sp["DefaultRouteSettings"]), tc.burst)
		}
		// API Gateway refuses route settings for a route it does not
		// have yet.
		var submitRoute string
		for _, id := range tc.t.ofType("AWS::ApiGatewayV2::Route") {
			if tc.t.Resources[id].Properties["RouteKey"] == "POST /orders" {
				submitRoute = id
			}
		}
		if !slices.ContainsFunc(list(stage.DependsOn), func(d any) bool { return d == submitRoute }) {
			t.Errorf("the stage depends on %v, not on the POST /orders route %s", stage.DependsOn, submitRoute)
		}
	}
	if got := cfg.Capacity.APIRateLimit(); got != 625 {
		t.Errorf("the default model's API rate is %v, the test expects 625", got)
	}
	dest := ref(get(p, "AccessLogSettings", "DestinationArn"))
	if tmpl.Resources[dest].Type != "AWS::Logs::LogGroup" {
		t.Fatalf("access logs go to %q", dest)
	}
	// Under /aws/vendedlogs/, so the group adds nothing to the account's
	// CloudWatch Logs resource policy.
	if name := tmpl.Resources[dest].Properties["LogGroupName"]; name != "/aws/vendedlogs/apigateway/Main-OrdersApi-access" || name != stack.AccessLogGroupName("Main") {
		t.Errorf("access log group name %v", name)
	}
	var format map[string]string
	if err := json.Unmarshal([]byte(get(p, "AccessLogSettings", "Format").(string)), &format); err != nil || format["requestId"] != "$context.requestId" {
		t.Errorf("access log format %v: %v", get(p, "AccessLogSettings", "Format"), err)
	}
	// The client policy allows every method and path of the stage (the
	// catch-all's requests) and denies the operator routes; the operator
	// policy allows everything. Both are outputs.
	apiID, _ := tmpl.byPath(t, "AWS::ApiGatewayV2::Api", "OrdersApi/Resource")
	everything := []string{"* /*"}
	for _, tc := range []struct {
		path, output string
		allow, deny  []string
	}{
		{"OrderClientPolicy", "ClientPolicyArn", everything, []string{"GET /ops/orders", "GET /ops/orders/*", "GET /ops/workflows", "POST /orders/*/retry", "POST /orders/*/cancel"}},
		{"OrderOperatorPolicy", "OperatorPolicyArn", everything, nil},
	} {
		id, policy := tmpl.byPath(t, "AWS::IAM::ManagedPolicy", tc.path+"/Resource")
		got := map[string][]string{}
		for _, stmt := range list(get(policy.Properties, "PolicyDocument", "Statement")) {
			effect, _ := get(stmt, "Effect").(string)
			if toJSON(get(stmt, "Action")) != `"execute-api:Invoke"` || len(got[effect]) > 0 {
				t.Errorf("%s: statement %s", tc.path, toJSON(stmt))
				continue
			}
			for _, res := range list(get(stmt, "Resource")) {
				// arn:<partition>:execute-api:<region>:<account>:<api>/$default/METHOD/path
				parts, _ := get(res, "Fn::Join").([]any)
				if len(parts) != 2 {
					t.Errorf("%s: resource %s", tc.path, toJSON(res))
					continue
				}
				elems := list(parts[1])
				tail, _ := elems[len(elems)-1].(string)
				method, route, ok := strings.Cut(strings.TrimPrefix(tail, "/$default/"), "/")
				if !ok || ref(elems[len(elems)-2]) != apiID || !strings.HasPrefix(tail, "/$default/") {
					t.Errorf("%s: resource %s", tc.path, toJSON(res))
					continue
				}
				got[effect] = append(got[effect], method+" /"+route)
			}
			slices.Sort(got[effect])
		}
		if want := slices.Sorted(slices.Values(tc.allow)); !slices.Equal(got["Allow"], want) {
			t.Errorf("%s allows %v, want %v", tc.path, got["Allow"], want)
		}
		if want := slices.Sorted(slices.Values(tc.deny)); !slices.Equal(got["Deny"], want) {
			t.Errorf("%s denies %v, want %v", tc.path, got["Deny"], want)
		}
		if out := ref(tmpl.Outputs[tc.output]["Value"]); out != id {
			t.Errorf("output %s is %q, want %s", tc.output, out, id)
		}
	}
}

func TestSupervisorRunsOnTheConfiguredSchedule(t *testing.T) {
	for _, tc := range []struct {
		t    *template
		want string
	}{{tmpl, "rate(1 minute)"}, {variant, "rate(5 minutes)"}} {
		rules := tc.t.ofType("AWS::Events::Rule")
		if len(rules) != 1 {
			t.Fatalf("%d rules", len(rules))
		}
		p := tc.t.Resources[rules[0]].Properties
		targets := list(p["Targets"])
		if p["ScheduleExpression"] != tc.want || len(targets) != 1 {
			t.Fatalf("schedule %v targets %v", p["ScheduleExpression"], len(targets))
		}
		target := ref(get(targets[0], "Arn"))
		if !strings.HasPrefix(target, "Supervisor") || tc.t.Resources[target].Type != "AWS::Lambda::Function" {
			t.Errorf("rule runs %s", target)
		}
		// EventBridge may invoke it: a permission names the rule.
		allowed := false
		for _, id := range tc.t.ofType("AWS::Lambda::Permission") {
			pp := tc.t.Resources[id].Properties
			if ref(pp["FunctionName"]) == target && pp["Principal"] == "events.amazonaws.com" && ref(pp["SourceArn"]) == rules[0] {
				allowed = true
			}
		}
		if !allowed {
			t.Error("EventBridge may not invoke the Supervisor")
		}
	}
}

// topicPolicy returns the statements of the policies of topic.
func (t *template) topicPolicy(topic string) []any {
	var stmts []any
	for _, id := range t.ofType("AWS::SNS::TopicPolicy") {
		p := t.Resources[id].Properties
		if slices.ContainsFunc(list(p["Topics"]), func(v any) bool { return ref(v) == topic }) {
			stmts = append(stmts, list(get(p, "PolicyDocument", "Statement"))...)
		}
	}
	return stmts
}

// topicKey is the topic's own customer managed key, with rotation on.
func (t *template) topicKey(tb testing.TB, topic string) string {
	tb.Helper()
	key := ref(t.Resources[topic].Properties["KmsMasterKeyId"])
	if t.Resources[key].Type != "AWS::KMS::Key" || t.Resources[key].Properties["EnableKeyRotation"] != true {
		tb.Fatalf("%s: key %q", topic, key)
	}
	return key
}

func TestAlertTopicIsEncryptedTLSOnlyWithOptionalEmail(t *testing.T) {
	if topics := tmpl.ofType("AWS::SNS::Topic"); len(topics) != 2 {
		t.Fatalf("topics %v, want the alert and the order events topic", topics)
	}
	topic, _ := tmpl.byPath(t, "AWS::SNS::Topic", "AlertTopic/Resource")
	key := tmpl.topicKey(t, topic)
	var tlsOnly, alarmsMayPublish bool
	for _, s := range tmpl.topicPolicy(topic) {
		if get(s, "Effect") == "Deny" && get(s, "Condition", "Bool", "aws:SecureTransport") == "false" {
			tlsOnly = true
		}
		if get(s, "Effect") == "Allow" && get(s, "Principal", "Service") == "cloudwatch.amazonaws.com" {
			alarmsMayPublish = true
		}
	}
	if !tlsOnly || !alarmsMayPublish {
		t.Errorf("topic policy: TLS only %v, CloudWatch may publish %v", tlsOnly, alarmsMayPublish)
	}
	// The key lets CloudWatch encrypt alarm notifications for the topic.
	keyAllowsAlarms := false
	for _, s := range list(get(tmpl.Resources[key].Properties, "KeyPolicy", "Statement")) {
		if get(s, "Principal", "Service") == "cloudwatch.amazonaws.com" && get(s, "Effect") == "Allow" {
			keyAllowsAlarms = true
		}
	}
	if !keyAllowsAlarms {
		t.Error("CloudWatch alarms cannot use the topic key")
	}
	subs := tmpl.ofType("AWS::SNS::Subscription")
	if len(subs) != 1 {
		t.Fatalf("%d subscriptions", len(subs))
	}
	sub := tmpl.Resources[subs[0]]
	if sub.Properties["Protocol"] != "email" || ref(sub.Properties["Endpoint"]) != "AlertEmail" || sub.Condition == "" {
		t.Errorf("subscription %s condition %q", toJSON(sub.Properties), sub.Condition)
	}
	if d, ok := tmpl.Parameters["AlertEmail"]["Default"]; !ok || d != "" {
		t.Errorf("AlertEmail default %v: deploying without it must work", d)
	}
}

func TestOrderEventsTopicIsEncryptedTLSOnlyWithoutSubscriptions(t *testing.T) {
	topic, _ := tmpl.byPath(t, "AWS::SNS::Topic", "OrderEventsTopic/Resource")
	alerts, _ := tmpl.byPath(t, "AWS::SNS::Topic", "AlertTopic/Resource")
	if key := tmpl.topicKey(t, topic); key == tmpl.topicKey(t, alerts) {
		t.Errorf("the order events topic shares the alert key %s", key)
	}
	// TLS only, and nothing but the TLS rule: publishing is the Notifier
	// role's IAM grant, subscribing an operator's.
	stmts := tmpl.topicPolicy(topic)
	if len(stmts) != 1 || get(stmts[0], "Effect") != "Deny" || get(stmts[0], "Condition", "Bool", "aws:SecureTransport") != "false" {
		t.Errorf("topic policy %s", toJSON(stmts))
	}
	// Clients subscribe their own queues.
	for _, id := range tmpl.ofType("AWS::SNS::Subscription") {
		if ref(tmpl.Resources[id].Properties["TopicArn"]) == topic {
			t.Errorf("the stack subscribes %s", id)
		}
	}
	if out := ref(tmpl.Outputs["OrderEventsTopicArn"]["Value"]); out != topic {
		t.Errorf("output OrderEventsTopicArn is %q, want %s", out, topic)
	}
}

func TestAlarmsCoverDLQsQueueAgeAndFunctionErrors(t *testing.T) {
	topic, _ := tmpl.byPath(t, "AWS::SNS::Topic", "AlertTopic/Resource")
	deadlineQueue, _ := tmpl.byPath(t, "AWS::SQS::Queue", "DeadlineQueue/Resource")
	type key struct{ metric, dim string }
	alarms := map[key]resource{}
	for _, id := range tmpl.ofType("AWS::CloudWatch::Alarm") {
		a := tmpl.Resources[id]
		actions := list(a.Properties["AlarmActions"])
		if len(actions) != 1 || ref(actions[0]) != topic {
			t.Errorf("%s: actions %s", id, toJSON(actions))
		}
		if desc, _ := a.Properties["AlarmDescription"].(string); len(desc) < 40 {
			t.Errorf("%s: an operator needs a description, got %q", id, desc)
		}
		for _, d := range list(a.Properties["Dimensions"]) {
			alarms[key{a.Properties["MetricName"].(string), ref(get(d, "Value"))}] = a
		}
	}
	// Each work queue alarms at its own age: the schedule queue (retries
	// wait there up to the backoff) at sas:queueAgeAlarm, the deadline
	// queue 15 minutes later, the Agent queues at their step's Wait
	// allowance, the response queue at the shortest of those.
	wantAge := map[string]time.Duration{
		tmplID(t, "SchedulerQueue"): cfg.QueueAgeAlarm,
		// Deadlines are sent delayed until their CompleteBy.
		deadlineQueue:              cfg.QueueAgeAlarm + queue.MaxDelay,
		tmplID(t, "ResponseQueue"): topology.ResponseQueueAgeAlarm(cfg.Workflows),
	}
	for _, st := range cfg.Workflows.Agents() {
		wantAge[tmplID(t, pascalStep(st.Name)+"Queue")] = topology.AgentQueueAgeAlarm(st)
	}
	for _, id := range tmpl.ofType("AWS::SQS::Queue") {
		if _, isMain := tmpl.Resources[id].Properties["RedrivePolicy"]; isMain {
			a, ok := alarms[key{"ApproximateAgeOfOldestMessage", id}]
			want, known := wantAge[id]
			if !known || !ok || a.Properties["Threshold"] != want.Seconds() || a.Properties["Statistic"] != "Maximum" {
				t.Errorf("%s: age alarm %s, want at %v", id, toJSON(a.Properties), want)
			}
			delete(wantAge, id)
			// Its DLQ's runbook names the commands that read and redrive
			// it, with the queue ID sasctl finds it by.
			name, _ := tmpl.Resources[id].Properties["QueueName"].(string)
			qid, ok := topology.QueueID("Main", name)
			dlq := ref(get(tmpl.Resources[id].Properties["RedrivePolicy"], "deadLetterTargetArn"))
			desc, _ := alarms[key{"ApproximateNumberOfMessagesVisible", dlq}].Properties["AlarmDescription"].(string)
			for _, w := range []string{"sasctl dlq list --stage " + cfg.Stage + " --queue " + qid + "`", "sasctl dlq redrive --stage " + cfg.Stage + " --queue " + qid + "`"} {
				if !ok || !strings.Contains(desc, w) {
					t.Errorf("%s: DLQ alarm runbook %q does not say %q", id, desc, w)
				}
			}
			continue
		}
		a, ok := alarms[key{"ApproximateNumberOfMessagesVisible", id}]
		if !ok || a.Properties["Threshold"] != float64(1) || a.Properties["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
			t.Errorf("DLQ %s: alarm %s", id, toJSON(a.Properties))
		}
	}
	if len(wantAge) > 0 {
		t.Errorf("no work queue at %v", wantAge)
	}
	// The defaults: the Agent and response queues alarm at the default
	// steps' 35 s lease, far below the retry queues' 10 minutes.
	for _, st := range cfg.Workflows.Agents() {
		if got := topology.AgentQueueAgeAlarm(st); got != workflow.DefaultWait+st.Budget {
			t.Errorf("step %s alarms at %v, want its lease %v", st.Name, got, workflow.DefaultWait+st.Budget)
		}
	}
	// An Agent queue's runbook says what the age means and what to change.
	for _, st := range cfg.Workflows.Agents() {
		id := tmplID(t, pascalStep(st.Name)+"Queue")
		desc, _ := alarms[key{"ApproximateAgeOfOldestMessage", id}].Properties["AlarmDescription"].(string)
		fn := "Agent" + pascalStep(st.Name)
		if _, code := cfg.CodeSteps[st.Name]; code {
			fn = "Step" + pascalStep(st.Name)
		}
		for _, w := range []string{"budget", "RemoteLatency", "sas:remoteConcurrency", "sas:remoteLatency", fn + "'s errors and duration"} {
			if !strings.Contains(desc, w) {
				t.Errorf("%s: age alarm runbook %q does not mention %q", id, desc, w)
			}
		}
	}
	for _, id := range tmpl.ofType("AWS::Lambda::Function") {
		if a, ok := alarms[key{"Errors", id}]; !ok || a.Properties["Threshold"] != float64(1) {
			t.Errorf("function %s: errors alarm %s", id, toJSON(a.Properties))
		}
	}
	// Orders shed in each of three five-minute periods: the alarm counts
	// the Submission's shed lines; no data is nothing shed.
	shed := 0
	for _, id := range tmpl.ofType("AWS::CloudWatch::Alarm") {
		p := tmpl.Resources[id].Properties
		if p["MetricName"] != stack.ShedMetric {
			continue
		}
		shed++
		desc, _ := p["AlarmDescription"].(string)
		if p["Namespace"] != stack.MetricNamespace(cfg.Stage) || p["Statistic"] != "Sum" || p["Period"] != float64(300) ||
			p["EvaluationPeriods"] != float64(3) || p["DatapointsToAlarm"] != float64(3) ||
			p["Threshold"] != float64(0) || p["ComparisonOperator"] != "GreaterThanThreshold" || p["TreatMissingData"] != "notBreaching" ||
			!strings.Contains(desc, "429 with Retry-After") || !strings.Contains(desc, "sas:remoteConcurrency") || !strings.Contains(desc, "latency") {
			t.Errorf("%s: shed alarm %s", id, toJSON(p))
		}
	}
	if shed != 1 {
		t.Errorf("%d shed alarms, want 1", shed)
	}
	// A stream consumer falling behind its stream: IteratorAge is in
	// milliseconds, its worst value over five minutes.
	for _, name := range []string{"Notifier", "Timer"} {
		consumer, _ := tmpl.byPath(t, "AWS::Lambda::Function", name+"/Resource")
		a, ok := alarms[key{"IteratorAge", consumer}]
		if !ok || a.Properties["Threshold"] != float64(60000) || a.Properties["ComparisonOperator"] != "GreaterThanThreshold" ||
			a.Properties["Statistic"] != "Maximum" || a.Properties["Period"] != float64(300) || a.Properties["Namespace"] != "AWS/Lambda" {
			t.Errorf("%s iterator age alarm %s", name, toJSON(a.Properties))
		}
	}
}

func TestDashboardShowsTheFlowOfOrdersThroughStates(t *testing.T) {
	dashboards := tmpl.ofType("AWS::CloudWatch::Dashboard")
	if len(dashboards) != 1 {
		t.Fatalf("%d dashboards", len(dashboards))
	}
	// The body is a Fn::Join of JSON text around the region and the
	// resources' names.
	var body strings.Builder
	shown := map[string]bool{}
	for _, part := range list(get(tmpl.Resources[dashboards[0]].Properties["DashboardBody"], "Fn::Join")) {
		for _, p := range list(part) {
			if s, ok := p.(string); ok {
				body.WriteString(s)
			} else if id := ref(p); id != "" {
				shown[id] = true
			}
		}
	}
	// Every function, every queue, and the Notifier's stream progress and
	// published events.
	for _, typ := range []string{"AWS::Lambda::Function", "AWS::SQS::Queue"} {
		for _, id := range tmpl.ofType(typ) {
			if !shown[id] {
				t.Errorf("dashboard does not show %s", id)
			}
		}
	}
	events, _ := tmpl.byPath(t, "AWS::SNS::Topic", "OrderEventsTopic/Resource")
	if !shown[events] || !strings.Contains(body.String(), `"IteratorAge"`) || !strings.Contains(body.String(), `"NumberOfMessagesPublished"`) {
		t.Errorf("dashboard does not show the Notifier's iterator age and the published events")
	}
	for _, tr := range transitions() {
		if !strings.Contains(body.String(), fmt.Sprintf(`[%q,%q,%q,%q,`, stack.MetricNamespace(cfg.Stage), stack.TransitionMetric, stack.TransitionDimension, tr)) {
			t.Errorf("dashboard does not show transition %q", tr)
		}
	}
	// The orders shed, counted from the Submission's "order shed" lines,
	// and the Agent queues against the backlog past which it sheds.
	if !strings.Contains(body.String(), fmt.Sprintf(`[%q,%q`, stack.MetricNamespace(cfg.Stage), stack.ShedMetric)) ||
		!strings.Contains(body.String(), fmt.Sprintf(`"value":%d`, cfg.Capacity.Backlog())) {
		t.Errorf("dashboard does not show the orders shed and the admission backlog")
	}
	submissionLogs, _ := tmpl.byPath(t, "AWS::Logs::LogGroup", "SubmissionLogs/Resource")
	shedFilters := 0
	// The transitions come from the logs of the functions that commit
	// them.
	var sources []string
	for _, id := range tmpl.ofType("AWS::Logs::MetricFilter") {
		p := tmpl.Resources[id].Properties
		m := list(p["MetricTransformations"])[0]
		if get(m, "MetricName") == stack.ShedMetric {
			shedFilters++
			if get(m, "MetricNamespace") != stack.MetricNamespace(cfg.Stage) || get(m, "MetricValue") != "1" || get(m, "Dimensions") != nil ||
				p["FilterPattern"] != `{ $.msg = "order shed" }` || ref(p["LogGroupName"]) != submissionLogs {
				t.Errorf("%s: %s", id, toJSON(p))
			}
			continue
		}
		if n := get(m, "MetricName"); n == stack.ErrorLinesMetric || n == stack.NotifierSkippedMetric || n == stack.BatchItemFailuresMetric {
			continue // TestOperationalAlarms checks these
		}
		if get(m, "MetricNamespace") != stack.MetricNamespace(cfg.Stage) || get(m, "MetricName") != stack.TransitionMetric ||
			toJSON(get(m, "Dimensions")) != fmt.Sprintf(`[{"Key":"%s","Value":"$.transition"}]`, stack.TransitionDimension) ||
			p["FilterPattern"] != `{ $.transition = "*" }` {
			t.Errorf("%s: %s", id, toJSON(p))
		}
		sources = append(sources, ref(p["LogGroupName"]))
	}
	sort.Strings(sources)
	want := []string{}
	for _, path := range []string{"SubmissionLogs", "SchedulerLogs", "SupervisorLogs", "DeadlineLogs"} {
		id, _ := tmpl.byPath(t, "AWS::Logs::LogGroup", path+"/Resource")
		want = append(want, id)
	}
	sort.Strings(want)
	if !slices.Equal(sources, want) {
		t.Errorf("metric filters on %v, want %v", sources, want)
	}
	if shedFilters != 1 {
		t.Errorf("%d shed metric filters, want the Submission's one", shedFilters)
	}
}

// wildcard matches an IAM action or literal resource containing a wildcard.
var wildcard = regexp.MustCompile(`[*?]`)

// wildcardGrants are what the Allow statements of the policy document doc
// grant beyond exact actions on exact resources: wildcard actions (* or
// ?), NotAction or NotResource, and literal wildcards in a resource that
// allowResource does not admit (X-Ray's actions, which take no resource,
// name "*").
func wildcardGrants(doc any, allowResource func(string) bool) []string {
	var out []string
	for _, s := range list(get(doc, "Statement")) {
		if get(s, "Effect") != "Allow" {
			continue
		}
		for _, a := range list(get(s, "Action")) {
			if wildcard.MatchString(fmt.Sprint(a)) {
				out = append(out, fmt.Sprintf("wildcard action %v", a))
			}
		}
		if get(s, "NotAction") != nil || get(s, "NotResource") != nil {
			out = append(out, "NotAction/NotResource "+toJSON(s))
		}
		if xrayOnly(s) && toJSON(get(s, "Resource")) == `"*"` {
			continue // X-Ray's actions take no resource
		}
		for _, r := range list(get(s, "Resource")) {
			// A literal string is checked; Fn::GetAtt and Ref name one
			// resource; a Join is checked for literal wildcards.
			if lit := toJSON(r); wildcard.MatchString(lit) && !allowResource(lit) {
				out = append(out, "wildcard resource "+lit)
			}
		}
	}
	return out
}

func TestIAMGrantsExactActionsOnExactResources(t *testing.T) {
	check := func(where string, doc any, allowResource func(string) bool) {
		for _, problem := range wildcardGrants(doc, allowResource) {
			t.Errorf("%s: %s", where, problem)
		}
	}
	none := func(string) bool { return false }
	// A code step's statement may end in a wildcard under a literal path
	// (stepgen's rule): in its own role's policy, on that path alone.
	paths := codeStepPaths(t)
	for _, typ := range []string{"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"} {
		for _, id := range tmpl.ofType(typ) {
			allowed := none
			if typ == "AWS::IAM::Policy" {
				roles := list(tmpl.Resources[id].Properties["Roles"])
				allowed = func(s string) bool {
					for _, r := range roles {
						for _, tail := range paths[ref(r)] {
							if strings.HasSuffix(s, tail) {
								return true
							}
						}
					}
					return false
				}
			}
			if typ == "AWS::IAM::ManagedPolicy" {
				// The API's $default stage, every method and path of it:
				// the catch-all route's requests.
				allowed = func(s string) bool { return strings.HasSuffix(s, `/$default/*/*"]]}`) }
			}
			check(id, tmpl.Resources[id].Properties["PolicyDocument"], allowed)
		}
	}
	// The functions' roles have no managed or inline policies; the
	// operators' role has the operator policy and nothing else.
	operatorRole, _ := tmpl.byPath(t, "AWS::IAM::Role", "OrderOperatorRole/Resource")
	operatorPolicy, _ := tmpl.byPath(t, "AWS::IAM::ManagedPolicy", "OrderOperatorPolicy/Resource")
	for _, id := range tmpl.ofType("AWS::IAM::Role") {
		p := tmpl.Resources[id].Properties
		managed := list(p["ManagedPolicyArns"])
		if id == operatorRole && len(managed) == 1 && ref(managed[0]) == operatorPolicy && p["Policies"] == nil {
			continue
		}
		if p["ManagedPolicyArns"] != nil || p["Policies"] != nil {
			t.Errorf("%s: managed or inline policies %s", id, toJSON(p))
		}
	}
	// Resource policies: key policies name the key as "*" (AWS's rule), and
	// no Allow is open to anyone.
	for _, id := range tmpl.ofType("AWS::KMS::Key") {
		for _, s := range list(get(tmpl.Resources[id].Properties, "KeyPolicy", "Statement")) {
			if get(s, "Principal") == "*" || get(s, "Principal", "AWS") == "*" {
				t.Errorf("%s: key open to anyone %s", id, toJSON(s))
			}
			if p := toJSON(get(s, "Principal")); !strings.Contains(p, ":root") {
				for _, a := range list(get(s, "Action")) {
					if wildcard.MatchString(fmt.Sprint(a)) {
						t.Errorf("%s: wildcard action %v for %s", id, a, p)
					}
				}
			}
		}
	}
	for _, typ := range []string{"AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy"} {
		for _, id := range tmpl.ofType(typ) {
			for _, s := range list(get(tmpl.Resources[id].Properties, "PolicyDocument", "Statement")) {
				if get(s, "Effect") == "Allow" && (get(s, "Principal") == "*" || get(s, "Principal", "AWS") == "*") {
					t.Errorf("%s: allows anyone %s", id, toJSON(s))
				}
			}
		}
	}
}

// codeStepPaths maps each code step's role to the ends of its manifest's
// wildcard resources as the template writes them (the last literal of a
// Join: "/shipments/*"]]}).
func codeStepPaths(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for name, m := range cfg.CodeSteps {
		role, _ := tmpl.byPath(t, "AWS::IAM::Role", "Step"+pascalStep(name)+"Role/Resource")
		for _, st := range m.Statements {
			for _, r := range st.Resources {
				if parts := stepgen.Parts(r); strings.Contains(r, "*") {
					out[role] = append(out[role], toJSON(parts[len(parts)-1].Literal)+"]]}")
				}
			}
		}
	}
	return out
}

// xrayOnly reports whether the statement grants only the X-Ray actions
// Lambda's tracing adds, xray:PutTraceSegments (which the functions send
// the recorded orders' segments with) and xray:PutTelemetryRecords.
func xrayOnly(s any) bool {
	actions := list(get(s, "Action"))
	for _, a := range actions {
		if a != "xray:PutTraceSegments" && a != "xray:PutTelemetryRecords" {
			return false
		}
	}
	return len(actions) > 0
}

// TestTracingIsTheFunctionsOwn: Lambda records nothing (PassThrough, with
// the cdk-nag suppression that says why), every function may send
// segments, and both topics pass a recorded order's trace on.
func TestTracingIsTheFunctionsOwn(t *testing.T) {
	fns := tmpl.ofType("AWS::Lambda::Function")
	if len(fns) == 0 {
		t.Fatal("no functions")
	}
	for _, id := range fns {
		p := tmpl.Resources[id]
		if mode := get(p.Properties, "TracingConfig", "Mode"); mode != "PassThrough" {
			t.Errorf("%s: TracingConfig.Mode %v, want PassThrough", id, mode)
		}
		suppressed := false
		for _, s := range list(get(p.Metadata, "cdk_nag", "rules_to_suppress")) {
			if get(s, "id") == "Serverless-LambdaTracing" {
				suppressed = true
			}
		}
		if !suppressed {
			t.Errorf("%s: Serverless-LambdaTracing not suppressed", id)
		}
	}
	topics := tmpl.ofType("AWS::SNS::Topic")
	if len(topics) != 2 {
		t.Errorf("%d topics, want the alert and order-events topics", len(topics))
	}
	for _, id := range topics {
		if mode := tmpl.Resources[id].Properties["TracingConfig"]; mode != "Active" {
			t.Errorf("%s: TracingConfig %v, want Active", id, mode)
		}
	}
}

// TestTraceSampleRateReachesTheSubmission: sas:traceSampleRate is the
// Submission's TRACE_SAMPLE_RATE, and only the Submission samples.
func TestTraceSampleRateReachesTheSubmission(t *testing.T) {
	for name, c := range map[string]struct {
		tmpl *template
		want string
	}{"default": {tmpl, "0.01"}, "variant": {variant, "0.25"}} {
		found := 0
		for _, id := range c.tmpl.ofType("AWS::Lambda::Function") {
			v, ok := get(c.tmpl.Resources[id].Properties, "Environment", "Variables").(map[string]any)[topology.EnvTraceSampleRate]
			if !ok {
				continue
			}
			found++
			if v != c.want {
				t.Errorf("%s: %s %s = %v, want %s", name, id, topology.EnvTraceSampleRate, v, c.want)
			}
		}
		if found != 1 {
			t.Errorf("%s: %d functions read %s, want the Submission alone", name, found, topology.EnvTraceSampleRate)
		}
	}
}

func TestEachRoleHasExactlyTheActionsItsHandlerUses(t *testing.T) {
	for path, want := range roleActions {
		t.Run(path, func(t *testing.T) {
			if g, w := toJSON(tmpl.grants(t, path)), toJSON(want); g != w {
				t.Errorf("actions\n got %s\nwant %s", g, w)
			}
		})
	}
}

// grants are the actions the role at path (its construct path) has, each
// with its resources as resourceName writes them, sorted.
func (tm *template) grants(t *testing.T, path string) map[string][]string {
	t.Helper()
	roleID, _ := tm.byPath(t, "AWS::IAM::Role", path+"/Resource")
	got := map[string][]string{}
	for _, id := range tm.ofType("AWS::IAM::Policy") {
		p := tm.Resources[id].Properties
		if !slices.ContainsFunc(list(p["Roles"]), func(r any) bool { return ref(r) == roleID }) {
			continue
		}
		for _, s := range list(get(p, "PolicyDocument", "Statement")) {
			// A condition is part of the grant: " if <operator>
			// <key>=<value>", resolved, sorted.
			var conds []string
			if c, ok := get(s, "Condition").(map[string]any); ok {
				for op, kv := range c {
					for k, v := range kv.(map[string]any) {
						conds = append(conds, fmt.Sprintf(" if %s %s=%s", op, k, resolver{t: tm}.resolve(t, v)))
					}
				}
				sort.Strings(conds)
			}
			for _, a := range list(get(s, "Action")) {
				for _, r := range list(get(s, "Resource")) {
					got[a.(string)] = append(got[a.(string)], resourceName(r)+strings.Join(conds, ""))
				}
			}
		}
	}
	for a := range got {
		sort.Strings(got[a])
	}
	return got
}

// resourceName shortens a resource reference to its construct: the logical
// ID without the hash, plus any attribute other than Arn (StateTable.StreamArn)
// and any literal suffix.
func resourceName(r any) string {
	hash := regexp.MustCompile(`[0-9A-F]{8}$`)
	if id := ref(r); id != "" {
		name := hash.ReplaceAllString(id, "")
		if ga, ok := get(r, "Fn::GetAtt").([]any); ok && ga[1] != "Arn" {
			name += "." + fmt.Sprint(ga[1])
		}
		return name
	}
	if j, ok := get(r, "Fn::Join").([]any); ok {
		var parts []string
		for _, p := range j[1].([]any) {
			if s, ok := p.(string); ok {
				parts = append(parts, s)
			} else {
				parts = append(parts, resourceName(p))
			}
		}
		return strings.Join(parts, "")
	}
	return toJSON(r)
}

func TestNagFindsNothingUnsuppressed(t *testing.T) {
	if len(nagErrors) > 0 {
		t.Errorf("cdk-nag errors:\n%s", strings.Join(nagErrors, "\n"))
	}
	if len(nagWarns) > 0 {
		t.Errorf("cdk-nag warnings:\n%s", strings.Join(nagWarns, "\n"))
	}
	// Both packs run at all: the canary's careless queue and its role's
	// unsuppressed wildcard are caught.
	for _, rule := range []string{"AwsSolutions-SQS4", "AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy", "AwsSolutions-IAM5"} {
		if !slices.ContainsFunc(canaryErr, func(m string) bool { return strings.HasPrefix(m, rule) }) {
			t.Errorf("cdk-nag missed %s on the canary's queue: %v", rule, canaryErr)
		}
	}
}

func TestEverySuppressionHasAReason(t *testing.T) {
	n := 0
	where := map[string]map[string]any{"the stack": tmpl.Metadata}
	for id, r := range tmpl.Resources {
		where[id] = r.Metadata
	}
	failures := tmpl.failureDestinations()
	// The Serverless rules name no findings, so each suppression covers
	// its rule on one resource; each is allowed only where the design
	// makes the finding moot.
	dlqs := tmpl.deadLetterQueues()
	for id := range failures {
		dlqs[id] = true
	}
	sqsMapping := func(id string) bool {
		arn := get(tmpl.Resources[id].Properties, "EventSourceArn")
		return tmpl.Resources[id].Type == "AWS::Lambda::EventSourceMapping" && tmpl.Resources[ref(arn)].Type == "AWS::SQS::Queue"
	}
	serverless := map[string]func(id string) bool{
		"Serverless-SQSRedrivePolicy":                    func(id string) bool { return dlqs[id] },
		"Serverless-LambdaDLQ":                           func(id string) bool { return tmpl.Resources[id].Type == "AWS::Lambda::Function" },
		"Serverless-LambdaEventSourceMappingDestination": sqsMapping,
		"Serverless-LambdaAsyncFailureDestination":       func(id string) bool { return tmpl.Resources[id].Type == "AWS::Lambda::EventInvokeConfig" },
		"Serverless-EventBusDLQ":                         func(id string) bool { return tmpl.Resources[id].Type == "AWS::Events::Rule" },
		"Serverless-LambdaTracing": func(id string) bool {
			return tmpl.Resources[id].Type == "AWS::Lambda::Function" && get(tmpl.Resources[id].Properties, "TracingConfig", "Mode") == "PassThrough"
		},
		"Serverless-SNSRedrivePolicy": func(id string) bool {
			return tmpl.Resources[id].Type == "AWS::SNS::Subscription" && tmpl.Resources[id].Properties["Protocol"] == "email"
		},
	}
	for id, md := range where {
		for _, s := range list(get(md, "cdk_nag", "rules_to_suppress")) {
			n++
			if reason, _ := get(s, "reason").(string); len(reason) < 60 {
				t.Errorf("%s: suppression of %v has too thin a reason %q", id, get(s, "id"), reason)
			}
			switch {
			// SQS3 makes one finding per queue with no finding ID, so
			// it cannot be named; it may be suppressed only on a queue
			// that is an event source mapping's failure destination,
			// a dead-letter queue cdk-nag does not recognize.
			case get(s, "id") == "AwsSolutions-SQS3":
				if !failures[id] || get(s, "applies_to") != nil {
					t.Errorf("%s: SQS3 suppressed on a queue that is no failure destination, or with applies_to %v", id, get(s, "applies_to"))
				}
			case serverless[fmt.Sprint(get(s, "id"))] != nil:
				if !serverless[fmt.Sprint(get(s, "id"))](id) || get(s, "applies_to") != nil {
					t.Errorf("%s: %v suppressed where the design does not make it moot, or with applies_to", id, get(s, "id"))
				}
			case get(s, "applies_to") == nil:
				t.Errorf("%s: suppression of %v covers every finding of the rule, not named ones", id, get(s, "id"))
			}
		}
	}
	if n == 0 {
		t.Error("no suppressions found: the test would not notice a thin reason")
	}
}

func TestOperatorAPIURLReachesTheAlertersWithoutACycle(t *testing.T) {
	// The Scheduler and the Supervisor (and its fast path) name the API in
	// their alerts; the
	// Submission function backs the API and must not depend on it.
	var got []string
	for _, id := range tmpl.ofType("AWS::Lambda::Function") {
		p := tmpl.Resources[id].Properties
		v := get(p, "Environment", "Variables", topology.EnvOperatorAPIURL)
		if v == nil {
			continue
		}
		got = append(got, resourceName(map[string]any{"Ref": id}))
		if toJSON(v) != toJSON(tmpl.Outputs["ApiUrl"]["Value"]) {
			t.Errorf("%s: OPERATOR_API_URL %s, want the ApiUrl output %s", id, toJSON(v), toJSON(tmpl.Outputs["ApiUrl"]["Value"]))
		}
	}
	sort.Strings(got)
	if want := []string{"Deadline", "Scheduler", "Supervisor"}; !slices.Equal(got, want) {
		t.Errorf("OPERATOR_API_URL set on %v, want %v", got, want)
	}
	if cycle := tmpl.dependencyCycle(); cycle != nil {
		t.Errorf("CloudFormation would refuse the template: dependency cycle %v", cycle)
	}
}

// dependencyCycle returns resources that depend on each other in a circle
// (Ref, Fn::GetAtt, Fn::Sub and DependsOn), or nil.
func (t *template) dependencyCycle() []string {
	deps := map[string][]string{}
	for id, r := range t.Resources {
		seen := map[string]bool{}
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				if d := ref(v); d != "" {
					seen[d] = true
				}
				if sub, ok := v["Fn::Sub"]; ok {
					text, _ := list(sub)[0].(string)
					for _, m := range regexp.MustCompile(`\$\{([^}.!]+)`).FindAllStringSubmatch(text, -1) {
						seen[m[1]] = true
					}
				}
				for _, x := range v {
					walk(x)
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			}
		}
		walk(r.Properties)
		for _, d := range list(r.DependsOn) {
			seen[fmt.Sprint(d)] = true
		}
		for d := range seen {
			if _, ok := t.Resources[d]; ok {
				deps[id] = append(deps[id], d)
			}
		}
	}
	const (
		unvisited = iota
		active
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(id string) []string
	visit = func(id string) []string {
		state[id] = active
		stack = append(stack, id)
		for _, d := range deps[id] {
			switch state[d] {
			case active:
				return append(slices.Clone(stack[slices.Index(stack, d):]), d)
			case unvisited:
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[id] = done
		return nil
	}
	ids := make([]string, 0, len(t.Resources))
	for id := range t.Resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if state[id] == unvisited {
			if c := visit(id); c != nil {
				return c
			}
		}
	}
	return nil
}

func TestDependencyCycleFindsACycle(t *testing.T) {
	r := func(props map[string]any, dependsOn ...any) resource {
		return resource{Type: "AWS::X::Y", Properties: props, DependsOn: dependsOn}
	}
	cyclic := &template{Resources: map[string]resource{
		"A": r(map[string]any{"B": map[string]any{"Ref": "B"}}),
		"B": r(map[string]any{"C": map[string]any{"Fn::GetAtt": []any{"C", "Arn"}}}),
		"C": r(nil, "A"),
		"D": r(map[string]any{"A": map[string]any{"Ref": "A"}}),
	}}
	if c := cyclic.dependencyCycle(); len(c) != 4 || c[0] != c[3] {
		t.Errorf("cycle %v, want A, B, C around", c)
	}
	acyclic := &template{Resources: map[string]resource{
		"A": r(map[string]any{"B": map[string]any{"Fn::Sub": []any{"${B.Arn}/x"}}}),
		"B": r(map[string]any{"Region": map[string]any{"Ref": "AWS::Region"}}),
	}}
	if c := acyclic.dependencyCycle(); c != nil {
		t.Errorf("cycle %v in an acyclic template", c)
	}
	subCycle := &template{Resources: map[string]resource{
		"A": r(map[string]any{"B": map[string]any{"Fn::Sub": "${B}"}}),
		"B": r(nil, "A"),
	}}
	if c := subCycle.dependencyCycle(); c == nil {
		t.Error("missed a cycle through Fn::Sub")
	}
}

// TestCostModelCountsTheStacksAlarms: the fixed monthly costs `make cost`
// prints count the alarms and the idle pollers the stack deploys, so an
// alarm or a mapping added here without the cost model fails.
func TestCostModelCountsTheStacksAlarms(t *testing.T) {
	f := cost.DefaultFixed()
	// CloudWatch prices each metric an alarm evaluates: a metric math
	// alarm's every metric, a plain alarm's one.
	metrics := 0
	for _, id := range tmpl.ofType("AWS::CloudWatch::Alarm") {
		p := tmpl.Resources[id].Properties
		if p["MetricName"] != nil {
			metrics++
		}
		for _, m := range list(p["Metrics"]) {
			if get(m, "MetricStat") != nil {
				metrics++
			}
		}
	}
	if metrics != f.AlarmMetrics {
		t.Errorf("the stack's alarms evaluate %d metrics, internal/cost.DefaultFixed prices %d", metrics, f.AlarmMetrics)
	}
	// Each SQS mapping polls with MaximumConcurrency pollers when capped,
	// else Lambda's minimum of 2.
	pollers := 0
	for _, id := range tmpl.ofType("AWS::Lambda::EventSourceMapping") {
		p := tmpl.Resources[id].Properties
		if _, stream := p["StartingPosition"]; stream {
			continue
		}
		n := 2
		if sc, ok := p["ScalingConfig"].(map[string]any); ok {
			if mc, ok := sc["MaximumConcurrency"].(float64); ok {
				n = int(mc)
			}
		}
		pollers += n
	}
	priced := 0
	for _, n := range f.IdlePollers {
		priced += n
	}
	if pollers != priced {
		t.Errorf("the stack's SQS mappings idle with %d pollers, internal/cost.DefaultFixed prices %d", pollers, priced)
	}
}

// TestOperationalAlarms: the alarms beyond the queues and the functions'
// errors, each on its metric, threshold, comparison and missing-data
// treatment, with a runbook.
func TestOperationalAlarms(t *testing.T) {
	alarm := func(path string) map[string]any {
		t.Helper()
		_, a := tmpl.byPath(t, "AWS::CloudWatch::Alarm", path+"/Resource")
		if len(list(a.Properties["OKActions"])) != 1 {
			t.Errorf("%s: OK actions %s", path, toJSON(a.Properties["OKActions"]))
		}
		return a.Properties
	}
	check := func(name string, p map[string]any, threshold float64, cmp, missing string, period float64, runbook ...string) {
		t.Helper()
		if p["Threshold"] != threshold || p["ComparisonOperator"] != cmp || p["TreatMissingData"] != missing {
			t.Errorf("%s: threshold %v %v, missing %v; want %v %s %s", name, p["ComparisonOperator"], p["Threshold"], p["TreatMissingData"], threshold, cmp, missing)
		}
		if p["Period"] != nil && p["Period"] != period {
			t.Errorf("%s: period %v, want %v", name, p["Period"], period)
		}
		desc, _ := p["AlarmDescription"].(string)
		for _, w := range runbook {
			if !strings.Contains(desc, w) {
				t.Errorf("%s: runbook %q does not mention %q", name, desc, w)
			}
		}
	}
	// mathOf is a metric math alarm's expression and its metrics'
	// (namespace, name, first dimension's value) by id.
	mathOf := func(name string, p map[string]any) (string, []string) {
		t.Helper()
		expr := ""
		var ms []string
		for _, m := range list(p["Metrics"]) {
			if e, ok := get(m, "Expression").(string); ok {
				expr = e
				if get(m, "Period") != nil && get(m, "Period") != p["Period"] {
					t.Errorf("%s: expression period %v", name, get(m, "Period"))
				}
				continue
			}
			st := get(m, "MetricStat")
			if get(st, "Stat") != "Sum" {
				t.Errorf("%s: %s is not a sum", name, toJSON(m))
			}
			dims := list(get(st, "Metric", "Dimensions"))
			// The resource the metric is of, then any literal
			// dimension (an index's name).
			dim, more := "", ""
			for _, d := range dims {
				if r := ref(get(d, "Value")); r != "" {
					dim = r
				} else {
					more += " " + fmt.Sprint(get(d, "Name")) + "=" + fmt.Sprint(get(d, "Value"))
				}
			}
			dim += more
			ms = append(ms, get(st, "Metric", "Namespace").(string)+" "+get(st, "Metric", "MetricName").(string)+" "+dim)
		}
		sort.Strings(ms)
		return expr, ms
	}
	const ge, lt = "GreaterThanOrEqualToThreshold", "LessThanThreshold"
	ns := stack.MetricNamespace(cfg.Stage)

	// 1. Every function's ERROR lines, into one metric without a dimension.
	errs := alarm("ErrorLogLines")
	if errs["Namespace"] != ns || errs["MetricName"] != stack.ErrorLinesMetric || errs["Statistic"] != "Sum" || errs["Dimensions"] != nil {
		t.Errorf("ErrorLogLines: %s", toJSON(errs))
	}
	check("ErrorLogLines", errs, 1, ge, "notBreaching", 60, stack.ErrorLinesQuery, "Logs Insights")
	var errGroups, fnGroups, batchGroups []string
	notifierLogs, _ := tmpl.byPath(t, "AWS::Logs::LogGroup", "NotifierLogs/Resource")
	skipped := 0
	for _, id := range tmpl.ofType("AWS::Logs::MetricFilter") {
		p := tmpl.Resources[id].Properties
		m := list(p["MetricTransformations"])[0]
		switch get(m, "MetricName") {
		case stack.ErrorLinesMetric:
			if p["FilterPattern"] != `{ $.level = "ERROR" }` || get(m, "MetricNamespace") != ns || get(m, "MetricValue") != "1" || get(m, "Dimensions") != nil {
				t.Errorf("%s: %s", id, toJSON(p))
			}
			errGroups = append(errGroups, ref(p["LogGroupName"]))
		case stack.BatchItemFailuresMetric:
			if p["FilterPattern"] != `{ $.msg = "`+actor.BatchItemFailed+`" }` || get(m, "MetricNamespace") != ns || get(m, "MetricValue") != "1" || get(m, "Dimensions") != nil {
				t.Errorf("%s: %s", id, toJSON(p))
			}
			batchGroups = append(batchGroups, ref(p["LogGroupName"]))
		case stack.NotifierSkippedMetric:
			skipped++
			if p["FilterPattern"] != `{ $.msg = "poison stream record skipped*" }` || get(m, "MetricNamespace") != ns || get(m, "MetricValue") != "1" ||
				ref(p["LogGroupName"]) != notifierLogs {
				t.Errorf("%s: %s", id, toJSON(p))
			}
		}
	}
	for _, id := range tmpl.ofType("AWS::Lambda::Function") {
		fnGroups = append(fnGroups, ref(get(tmpl.Resources[id].Properties, "LoggingConfig", "LogGroup")))
	}
	sort.Strings(errGroups)
	sort.Strings(fnGroups)
	if !slices.Equal(errGroups, fnGroups) {
		t.Errorf("ERROR line filters on %v, want every function's log group %v", errGroups, fnGroups)
	}

	// 2. Batch item failures in each of three consecutive minutes.
	sort.Strings(batchGroups)
	if !slices.Equal(batchGroups, fnGroups) {
		t.Errorf("batch item failure filters on %v, want every function's log group %v", batchGroups, fnGroups)
	}
	bif := alarm("BatchItemFailuresSustained")
	if bif["Namespace"] != ns || bif["MetricName"] != stack.BatchItemFailuresMetric || bif["Statistic"] != "Sum" || bif["Dimensions"] != nil ||
		bif["EvaluationPeriods"] != float64(3) || bif["DatapointsToAlarm"] != float64(3) {
		t.Errorf("BatchItemFailuresSustained: %s", toJSON(bif))
	}
	check("BatchItemFailuresSustained", bif, 1, ge, "notBreaching", 60, actor.BatchItemFailed, "Logs Insights", "dead-letter queue")

	// 3. The Notifier's skipped records.
	if skipped != 1 {
		t.Errorf("%d Notifier skipped-record filters, want 1", skipped)
	}
	sk := alarm("NotifierSkippedRecordsAlarm")
	if sk["Namespace"] != ns || sk["MetricName"] != stack.NotifierSkippedMetric || sk["Statistic"] != "Sum" {
		t.Errorf("NotifierSkippedRecordsAlarm: %s", toJSON(sk))
	}
	check("NotifierSkippedRecordsAlarm", sk, 1, ge, "notBreaching", 60, "missed an event", stack.NotifierSkippedMessage)

	// 4. The API's server errors, on its $default stage.
	apiID, _ := tmpl.byPath(t, "AWS::ApiGatewayV2::Api", "OrdersApi/Resource")
	api := alarm("Api5xx")
	dims := map[string]any{}
	for _, d := range list(api["Dimensions"]) {
		dims[get(d, "Name").(string)] = get(d, "Value")
	}
	if api["Namespace"] != "AWS/ApiGateway" || api["MetricName"] != "5xx" || api["Statistic"] != "Sum" ||
		ref(dims["ApiId"]) != apiID || dims["Stage"] != "$default" || len(dims) != 2 {
		t.Errorf("Api5xx: %s", toJSON(api))
	}
	check("Api5xx", api, stack.API5xxThreshold, ge, "notBreaching", stack.API5xxPeriod.Seconds(), "requestId", "access log")

	// 5. Every function's throttles, added up.
	thr := alarm("FunctionThrottles")
	check("FunctionThrottles", thr, 1, ge, "notBreaching", 300, "account", "reserved concurrency", "MaximumConcurrency")
	expr, ms := mathOf("FunctionThrottles", thr)
	var want []string
	for _, id := range tmpl.ofType("AWS::Lambda::Function") {
		want = append(want, "AWS/Lambda Throttles "+id)
	}
	if !strings.HasPrefix(expr, "SUM(FILL([") || !slices.Equal(ms, want) {
		t.Errorf("FunctionThrottles: %s over %v, want the sum over %v", expr, ms, want)
	}
	for _, m := range list(thr["Metrics"]) {
		if p := get(m, "MetricStat", "Period"); p != nil && p != float64(300) {
			t.Errorf("FunctionThrottles: %s", toJSON(m))
		}
	}

	// 6. Each table's read and write throttle events, and its indexes',
	// added up: one alarm per table.
	for _, table := range []struct {
		id      string
		indexes []string
	}{
		{"OrdersTable", []string{statestore.ByOwnerIndex}},
		{"StateTable", []string{statestore.InFlightIndex, statestore.ByStateIndex}},
	} {
		name := table.id + "Throttles"
		tbl := alarm(name)
		check(name, tbl, 1, ge, "notBreaching", 60, "on-demand", "twice its previous peak", "warm throughput", "quota", "hot partition")
		expr, ms := mathOf(name, tbl)
		id, _ := tmpl.byPath(t, "AWS::DynamoDB::Table", table.id+"/Resource")
		want := []string{}
		for _, m := range []string{"ReadThrottleEvents", "WriteThrottleEvents"} {
			want = append(want, "AWS/DynamoDB "+m+" "+id)
			for _, ix := range table.indexes {
				want = append(want, "AWS/DynamoDB "+m+" "+id+" GlobalSecondaryIndexName="+ix)
			}
		}
		sort.Strings(want)
		sort.Strings(ms)
		if !strings.HasPrefix(expr, "SUM(FILL([") || !slices.Equal(ms, want) {
			t.Errorf("%s: %s over %v, want the sum over %v", name, expr, ms, want)
		}
	}

	// 7. The Supervisor's heartbeat: no invocation in two five-minute
	// periods, and no data at all is as bad.
	supervisor, _ := tmpl.byPath(t, "AWS::Lambda::Function", "Supervisor/Resource")
	hb := alarm("SupervisorHeartbeat")
	if hb["Namespace"] != "AWS/Lambda" || hb["MetricName"] != "Invocations" || hb["Statistic"] != "Sum" ||
		ref(get(list(hb["Dimensions"])[0], "Value")) != supervisor || hb["EvaluationPeriods"] != float64(2) || hb["DatapointsToAlarm"] != float64(2) {
		t.Errorf("SupervisorHeartbeat: %s", toJSON(hb))
	}
	check("SupervisorHeartbeat", hb, 1, lt, "breaching", 300, "EventBridge rule", "resource policy")
}

// TestRetentionReachesEveryFunctionThatEndsOrCreatesOrders: sas:retention
// is RETENTION in the environment of the functions whose writes end an
// order (Scheduler, Supervisor, Deadline, and Submission's cancel) or
// create one (Submission), and of the code steps, whose ledger entries
// expire with it, and of no other.
func TestRetentionReachesEveryFunctionThatEndsOrCreatesOrders(t *testing.T) {
	// A code step's ledger entries get their order's TTL from the Timer,
	// which copies it from the record: neither reads the retention.
	want := map[string]bool{"Submission": true, "Scheduler": true, "Supervisor": true, "Deadline": true}
	for name, tm := range map[string]struct {
		t     *template
		value string
	}{"main": {tmpl, "2160h0m0s"}, "variant": {variant, "720h0m0s"}} {
		seen := 0
		for _, id := range tm.t.ofType("AWS::Lambda::Function") {
			got := get(tm.t.Resources[id].Properties, "Environment", "Variables", topology.EnvRetention)
			base := ""
			for fn := range want {
				if strings.HasPrefix(id, fn) {
					base = fn
				}
			}
			switch {
			case base != "" && got != tm.value:
				t.Errorf("%s %s: RETENTION %v, want %s", name, id, got, tm.value)
			case base == "" && got != nil:
				t.Errorf("%s %s: RETENTION %v, which it does not read", name, id, got)
			case base != "":
				seen++
			}
		}
		if seen != len(want) {
			t.Errorf("%s: RETENTION in %d functions, want %d", name, seen, len(want))
		}
	}
}

// TestOperatorRoutesAreRefusedByTheHandlerToo (the stack's part): the stack
// names who operates. Its OrderOperatorRole, which principals of the
// deploying account may assume when their own policies let them, carries
// the operator policy and is an output; the OperatorPrincipalArns parameter
// (empty by default, IAM role and user ARNs only) lists more; and the
// Submission gets both in OPERATOR_PRINCIPALS, which its LoadConfig takes.
func TestOperatorRoutesAreRefusedByTheHandlerToo(t *testing.T) {
	roleID, role := tmpl.byPath(t, "AWS::IAM::Role", "OrderOperatorRole/Resource")
	policyID, _ := tmpl.byPath(t, "AWS::IAM::ManagedPolicy", "OrderOperatorPolicy/Resource")
	stmts := list(get(role.Properties, "AssumeRolePolicyDocument", "Statement"))
	trusted := toJSON(get(stmts[0], "Principal", "AWS"))
	if len(stmts) != 1 || get(stmts[0], "Effect") != "Allow" || toJSON(get(stmts[0], "Action")) != `"sts:AssumeRole"` ||
		trusted != `{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},":iam::",{"Ref":"AWS::AccountId"},":root"]]}` {
		t.Errorf("the operator role's trust: %s", toJSON(stmts))
	}
	if managed := list(role.Properties["ManagedPolicyArns"]); len(managed) != 1 || ref(managed[0]) != policyID {
		t.Errorf("the operator role's policies: %s", toJSON(role.Properties["ManagedPolicyArns"]))
	}
	if out := get(tmpl.Outputs["OperatorRoleArn"], "Value", "Fn::GetAtt"); toJSON(out) != `["`+roleID+`","Arn"]` {
		t.Errorf("output OperatorRoleArn %s", toJSON(tmpl.Outputs["OperatorRoleArn"]))
	}

	param := tmpl.Parameters[stack.OperatorPrincipalsParameter]
	if param["Type"] != "String" || param["Default"] != "" || param["AllowedPattern"] != stack.OperatorPrincipalsPattern {
		t.Errorf("parameter %s: %s", stack.OperatorPrincipalsParameter, toJSON(param))
	}
	// CloudFormation's patterns are Java's; these constructs mean the same
	// in Go's.
	re := regexp.MustCompile(stack.OperatorPrincipalsPattern)
	for value, ok := range map[string]bool{
		"":                                      true,
		"arn:aws:iam::111122223333:role/oncall": true,
		"arn:aws:iam::111122223333:role/team/ops/oncall,arn:aws:iam::111122223333:user/bob": true,
		"arn:aws-us-gov:iam::111122223333:user/a.b@c+d=e_f-g":                               true,
		"arn:aws:iam::111122223333:role/oncall,":                                            false,
		"arn:aws:iam::111122223333:role/oncall, arn:aws:iam::111122223333:user/bob":         false,
		"arn:aws:sts::111122223333:assumed-role/oncall/alice":                               false,
		"arn:aws:iam::111122223333:root":                                                    false,
		"arn:aws:iam::111122223333:group/ops":                                               false,
		"arn:aws:iam::11112222333:role/oncall":                                              false,
		"arn:aws:iam::111122223333:role/" + strings.Repeat("n", 65):                         false,
		"oncall": false,
	} {
		if re.MatchString(value) != ok {
			t.Errorf("%s %q: accepted %v, want %v", stack.OperatorPrincipalsParameter, value, !ok, ok)
		}
	}

	_, fn := tmpl.byPath(t, "AWS::Lambda::Function", "Submission/Resource")
	v := get(fn.Properties, "Environment", "Variables", topology.EnvOperatorPrincipals)
	if toJSON(v) != `{"Fn::Join":[",",[{"Fn::GetAtt":["`+roleID+`","Arn"]},{"Ref":"`+stack.OperatorPrincipalsParameter+`"}]]}` {
		t.Fatalf("OPERATOR_PRINCIPALS = %s", toJSON(v))
	}
	for listed, want := range map[string]int{"": 1, "arn:aws:iam::111122223333:role/team/oncall,arn:aws:iam::111122223333:user/bob": 3} {
		params := deployParams(tmpl)
		params[stack.OperatorPrincipalsParameter] = listed
		r := resolver{t: tmpl, params: params}
		vars := get(fn.Properties, "Environment", "Variables").(map[string]any)
		cfg, err := submission.LoadConfig(func(k string) string {
			if x, ok := vars[k]; ok {
				return r.resolve(t, x)
			}
			return ""
		})
		if err != nil || len(cfg.OperatorPrincipals) != want || cfg.OperatorPrincipals[0] != "arn:aws:iam::111122223333:role/"+roleID {
			t.Errorf("with %q listed, the Submission's operators are %q, %v", listed, cfg.OperatorPrincipals, err)
		}
	}
}
