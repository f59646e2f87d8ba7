package stack

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/sasflow/sas/shared/topology"
)

func duration(d time.Duration) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

// fnSpec is what differs between the functions.
type fnSpec struct {
	// id is the construct ID; the folder name by default.
	id           string
	description  string
	timeout      time.Duration
	memory       float64
	env          *map[string]*string
	asyncRetries *float64
	// trigger is how the function is invoked, which decides where a
	// failed invocation's event goes (see deadLetterReasons).
	trigger trigger
}

// trigger is what invokes a function.
type trigger int

const (
	byAPI trigger = iota + 1
	byQueue
	byStream
	bySchedule
)

// deadLetterReasons say, per trigger, why a function needs no dead-letter
// target of its own: Lambda sends only asynchronous events there.
var deadLetterReasons = map[trigger]string{
	byAPI: "Invoked only synchronously, by API Gateway: the caller gets the failure (a 5xx, which the Api5xx alarm counts), " +
		"so there is no asynchronous event to keep.",
	byQueue: "Invoked only by its SQS event source mappings, synchronously: a failed message returns to its queue and, " +
		"after maxReceiveCount receives, moves to that queue's dead-letter queue. A function DLQ would never receive anything.",
	byStream: "Invoked only by its DynamoDB stream event source mapping, synchronously: a batch the mapping gives up on is " +
		"described on the mapping's on-failure queue. A function DLQ would never receive anything.",
	bySchedule: "Invoked asynchronously only by its EventBridge schedule, whose events carry no data: a failed run is redone " +
		"by the next tick, and the SupervisorHeartbeat alarm (missing data breaching) pages when runs stop succeeding. " +
		"A DLQ would hold only stale ticks.",
}

// fn is a deployed function with its own role and log group.
type fn struct {
	id       string
	fn       awslambda.Function
	role     awsiam.Role
	logGroup awslogs.LogGroup
	timeout  time.Duration
	// step is the step an Agent or a code step's function performs.
	step string
}

// function deploys functions/<folder> as an arm64 provided.al2023 bootstrap,
// with a role that starts empty (no managed policies) and its own log group.
func (b *builder) function(folder string, spec fnSpec) *fn {
	id := spec.id
	if id == "" {
		id = pascal(folder)
	} else {
		id = pascal(id)
	}
	logs := awslogs.NewLogGroup(b.stack, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		Retention:     b.cfg.logRetention(),
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	role := awsiam.NewRole(b.stack, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("Least privilege for the " + id + " function"),
	})
	// Lambda names its log streams at run time, so the streams need a
	// wildcard under the function's own log group.
	allow(role, []string{"logs:CreateLogStream", "logs:PutLogEvents"}, logs.LogGroupArn())
	f := awslambda.NewFunction(b.stack, jsii.String(id), &awslambda.FunctionProps{
		Description:  jsii.String(spec.description),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(b.codePath(folder)), nil),
		MemorySize:   jsii.Number(spec.memory),
		Timeout:      duration(spec.timeout),
		Environment:  spec.env,
		Role:         role,
		LogGroup:     logs,
		// The handlers already write JSON (log/slog); JSON format keeps
		// Lambda's own lines JSON too. INFO keeps its platform.start and
		// platform.report events (about 140 and 240 bytes an invocation;
		// platform.runtimeDone, the old END line, is DEBUG), whose
		// maxMemoryUsedMB and billedDurationMs are what memory sizes are
		// tuned from (docs/operating.md). WARN dropped them.
		LoggingFormat:         awslambda.LoggingFormat_JSON,
		SystemLogLevelV2:      awslambda.SystemLogLevel_INFO,
		ApplicationLogLevelV2: awslambda.ApplicationLogLevel_INFO,
		RetryAttempts:         spec.asyncRetries,
		// Lambda records nothing itself: with active tracing it would
		// start a trace for every invocation an SQS message or a stream
		// record triggers, linked to the order's but not in it, sampled by
		// its own rule. The functions record the sampled orders' segments
		// under each order's own trace ID instead (shared/segments).
		Tracing: awslambda.Tracing_PASS_THROUGH,
	})
	// PassThrough tracing still grants xray:PutTraceSegments and
	// PutTelemetryRecords (what the functions send segments with), which
	// X-Ray defines on no resource: the grant can only name "*".
	cdknag.NagSuppressions_AddResourceSuppressions(role, &[]*cdknag.NagPackSuppression{{
		Id:        jsii.String("AwsSolutions-IAM5"),
		Reason:    jsii.String("X-Ray's PutTraceSegments and PutTelemetryRecords take no resource, so the grant Lambda's tracing adds names *."),
		AppliesTo: &[]any{jsii.String("Resource::*")},
	}}, jsii.Bool(true))
	reason, ok := deadLetterReasons[spec.trigger]
	if !ok {
		panic("stack: function " + id + " names no trigger")
	}
	suppress(f, nagLambdaDLQ, reason, false)
	suppress(f, nagLambdaTracing, "Lambda's active tracing would start a trace per invocation, none holding an order's path; "+
		"the functions send the segments of the orders sampled at the Submission ("+ContextTraceSampleRate+") under each order's "+
		"own trace ID instead, and every order's log lines carry its traceId.", false)
	return &fn{id: id, fn: f, role: role, logGroup: logs, timeout: spec.timeout}
}

// consume subscribes f to q's main queue with partial batch responses.
// maxConcurrency 0 leaves the mapping unbounded.
func (b *builder) consume(f *fn, q *workQueue, batchSize int, maxConcurrency int) {
	props := &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(float64(batchSize)),
		ReportBatchItemFailures: jsii.Bool(true),
	}
	if maxConcurrency > 0 {
		props.MaxConcurrency = jsii.Number(float64(maxConcurrency))
	}
	f.fn.AddEventSource(awslambdaeventsources.NewSqsEventSource(q.main, props))
	// The mapping the event source made, under the ID CDK gives it.
	mapping := f.fn.Node().FindChild(jsii.String("SqsEventSource:" + *awscdk.Names_NodeUniqueId(q.main.Node())))
	suppress(mapping, nagMappingFailures, "An SQS event source mapping takes no on-failure destination (Lambda supports one "+
		"for stream and Kafka sources only): the queue's redrive policy moves a message that keeps failing to its "+
		"dead-letter queue, whose depth alarm pages.", false)
}

// Stream consumption: batches as large as a DynamoDB stream mapping
// allows, one batch per shard at a time so a record's events stay in order.
const (
	StreamBatchSize             = topology.StreamBatchSize
	StreamParallelizationFactor = 1
	// StreamRetryAttempts -1 retries a failed record until it expires
	// from the stream (24 h): an event is only given up on when it is gone.
	StreamRetryAttempts = -1
	// StreamInsert and StreamModify are the stream records the readers
	// are invoked for; a REMOVE (a TTL deletion) is filtered out.
	StreamInsert = "INSERT"
	StreamModify = "MODIFY"
)

// consumeStream subscribes f to t's stream from its oldest record, with
// partial batch responses; a batch Lambda gives up on is described on
// failures. It grants f exactly what the mapping needs, instead of the
// DynamoEventSource helper's grants (dynamodb:ListStreams on "*", and
// sqs:GetQueueAttributes and GetQueueUrl on the destination).
func (b *builder) consumeStream(f *fn, t awsdynamodb.Table, failures awssqs.Queue) awslambda.EventSourceMapping {
	allow(f.role, []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"}, t.TableStreamArn())
	allowSend(f.role, failures)
	esm := awslambda.NewEventSourceMapping(b.stack, jsii.String(f.id+"StateStream"), &awslambda.EventSourceMappingProps{
		Target:           f.fn,
		EventSourceArn:   t.TableStreamArn(),
		StartingPosition: awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:        jsii.Number(StreamBatchSize),
		// The handler reports the first record it could not publish, so
		// Lambda retries from there; halving the batch would only repeat
		// the records before it.
		ReportBatchItemFailures: jsii.Bool(true),
		BisectBatchOnError:      jsii.Bool(false),
		RetryAttempts:           jsii.Number(StreamRetryAttempts),
		ParallelizationFactor:   jsii.Number(StreamParallelizationFactor),
		// Both readers ignore a REMOVE, and every terminal order makes one
		// when DynamoDB's TTL deletes its record: filtered out here, those
		// invoke nothing and cost nothing.
		Filters: &[]*map[string]any{awslambda.FilterCriteria_Filter(&map[string]any{
			"eventName": awslambda.FilterRule_Or(jsii.String(StreamInsert), jsii.String(StreamModify)),
		})},
	})
	// Set on the L1 mapping: the L2 onFailure (SqsDlq) would add its broader
	// grant; Lambda needs only sqs:SendMessage on the destination.
	cfn := esm.Node().DefaultChild().(awslambda.CfnEventSourceMapping)
	cfn.SetDestinationConfig(&awslambda.CfnEventSourceMapping_DestinationConfigProperty{
		OnFailure: &awslambda.CfnEventSourceMapping_OnFailureProperty{Destination: failures.QueueArn()},
	})
	return esm
}

// allow grants exact actions on exact resources.
func allow(role awsiam.IRole, actions []string, resources ...*string) {
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	}))
}

// allowOwnKeys grants actions on the items of tables whose partition key
// starts with step and "#". "dynamodb:LeadingKeys: Allows a user to access
// items that have a specific partition key value" (AWS re:Post Knowledge
// Center, "How do I restrict access to specific attributes in a DynamoDB
// table?", https://repost.aws/knowledge-center/dynamodb-table-restrict-attributes;
// "Using IAM policy conditions for fine-grained access control", Amazon
// DynamoDB Developer Guide,
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html),
// and ForAllValues holds only when every key of the request matches. So
// one step's function cannot read or write another step's entries.
func allowOwnKeys(role awsiam.IRole, step string, actions []string, tables ...*string) {
	if step == "" {
		panic("stack: a grant on the step's own keys for a function of no step")
	}
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: &tables,
		Conditions: &map[string]any{
			"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": step + "#*"},
		},
	}))
}

// allowSend lets role send to q; SendMessageBatch needs the same action.
func allowSend(role awsiam.IRole, q awssqs.Queue) {
	allow(role, []string{"sqs:SendMessage"}, q.QueueArn())
}

// actorFunction deploys the function of the actor name (a folder of
// functions/ and an actor of topology's descriptor) with what the
// descriptor says it needs: the environment its config reads (own's values
// over sh's; late ones set once their resource exists) and its grants.
func (b *builder) actorFunction(name string, sh *sharedResources, spec fnSpec, own map[string]*string, late ...string) *fn {
	actor := topology.Describe(name)
	spec.env = environment(actor, sh.env, own, late...)
	f := b.function(name, spec)
	b.grant(f, actor, sh)
	return f
}

// environment is actor's environment as the stack sets it: each variable of
// its DeployedEnv (shared/topology's descriptor) with its value from own,
// or else from common. Those named in late are set once their value
// exists (AddEnvironment). A variable without a value, or a value of own
// the actor does not read, stops the synth: the descriptor and the stack
// disagree.
func environment(actor topology.Actor, common, own map[string]*string, late ...string) *map[string]*string {
	env := map[string]*string{}
	for _, name := range actor.DeployedEnv() {
		if slices.Contains(late, name) {
			continue
		}
		v, ok := own[name]
		if !ok {
			v, ok = common[name]
		}
		if !ok {
			panic(fmt.Sprintf("stack: the %s reads %s, which the stack has no value for", actor.Name, name))
		}
		env[name] = v
	}
	for name := range own {
		if _, ok := env[name]; !ok {
			panic(fmt.Sprintf("stack: the %s does not read %s (topology.Actors)", actor.Name, name))
		}
	}
	return &env
}

// grant gives f's role the statements of actor.Access (shared/topology's
// descriptor), in their order: a publish to a topic with its key's grant
// through SNS (allowPublish), a send queue by queue (allowSend), anything
// else as one statement on its resources.
func (b *builder) grant(f *fn, actor topology.Actor, sh *sharedResources) {
	for _, a := range actor.Access {
		var arns []*string
		for _, r := range a.On {
			arns = append(arns, b.arns(sh, r)...)
		}
		switch {
		case a.OwnKeys:
			allowOwnKeys(f.role, f.step, a.Actions, arns...)
		case slices.Equal(a.Actions, []string{topology.Publish}):
			for _, r := range a.On {
				b.topicOf(sh, r).allowPublish(f.role)
			}
		case slices.Equal(a.Actions, []string{topology.SendMessage}):
			for _, arn := range arns {
				allow(f.role, a.Actions, arn)
			}
		default:
			allow(f.role, a.Actions, arns...)
		}
	}
}

// arns are the ARNs of the descriptor's resource r.
func (b *builder) arns(sh *sharedResources, r topology.Resource) []*string {
	queueARNs := func(steps []string) []*string {
		out := make([]*string, len(steps))
		for i, s := range steps {
			out[i] = sh.queues.agents[s].main.QueueArn()
		}
		return out
	}
	if table, index, ok := strings.Cut(string(r), "/index/"); ok {
		return []*string{jsii.String(*b.arns(sh, topology.Resource(table))[0] + "/index/" + index)}
	}
	switch r {
	case topology.OrdersTable:
		return []*string{sh.orders.TableArn()}
	case topology.StateTable:
		return []*string{sh.state.TableArn()}
	case topology.LedgerTable:
		return []*string{sh.ledger.TableArn()}
	case topology.SchedulerQueue:
		return []*string{sh.queues.scheduler.main.QueueArn()}
	case topology.ResponseQueue:
		return []*string{sh.queues.responses.main.QueueArn()}
	case topology.DeadlineQueue:
		return []*string{sh.queues.deadlines.main.QueueArn()}
	case topology.AgentQueues:
		return queueARNs(b.cfg.Workflows.AgentNames())
	case topology.FirstStepQueues:
		return queueARNs(b.cfg.Workflows.FirstSteps())
	case topology.AlertTopic, topology.OrderEventsTopic:
		return []*string{b.topicOf(sh, r).topic.TopicArn()}
	}
	panic(fmt.Sprintf("stack: no resource %s to grant on", r))
}

// topicOf is the descriptor's topic r.
func (b *builder) topicOf(sh *sharedResources, r topology.Resource) *encryptedTopic {
	switch r {
	case topology.AlertTopic:
		return sh.alerts
	case topology.OrderEventsTopic:
		return sh.events
	}
	panic(fmt.Sprintf("stack: %s is no topic", r))
}
