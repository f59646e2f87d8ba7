package stack

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// workQueue is a queue with its dead-letter queue.
type workQueue struct {
	id   string
	main awssqs.Queue
	dlq  awssqs.Queue
	// delayed is the longest delay its messages are sent with: its age
	// alarm waits that much longer.
	delayed time.Duration
}

type queueSet struct {
	scheduler *workQueue
	responses *workQueue
	// agents maps each step to its Agent's request queue.
	agents map[string]*workQueue
	// deadlines carries the Timer's Deadlines to the Supervisor's fast
	// path.
	deadlines *workQueue
}

// all lists the queues in a stable order.
func (q queueSet) all(steps []string) []*workQueue {
	out := []*workQueue{q.scheduler, q.responses}
	for _, s := range steps {
		out = append(out, q.agents[s])
	}
	return append(out, q.deadlines)
}

// queues declares every work queue, each by its owner (scheduler.go,
// agent.go, supervisor.go), before any function: the actors send to each
// other's. Each visibility timeout is six times the timeout of the
// function that consumes it.
func (b *builder) queues() queueSet {
	qs := queueSet{agents: map[string]*workQueue{}}
	qs.scheduler, qs.responses = b.schedulerQueues()
	// One per step name across the live versions.
	for _, s := range b.cfg.Workflows.Agents() {
		qs.agents[s.Name] = b.agentQueue(s)
	}
	qs.deadlines = b.deadlineQueue()
	return qs
}

// QueueName is the physical name of the work queue id (SchedulerQueue,
// ReserveInventoryQueue, ...) in the stack named stackName
// (topology.QueueName, which the operators' CLI finds the queues by).
func QueueName(stackName, id string) string { return topology.QueueName(stackName, id) }

// maxMessageSize is every queue's MaximumMessageSize: SQS's limit, 1 MiB,
// which the code's bounds count on (workflow.MaxMessageBytes). It is also
// the default of a queue created today, but set all the same, so that a
// queue that kept the old default of 256 KiB is raised with the stack,
// and a dead-letter queue takes whatever its main queue took.
var maxMessageSize = jsii.Number(float64(workflow.MaxMessageBytes))

// Redrive permissions of a dead-letter queue (its RedriveAllowPolicy).
const (
	RedriveByQueue = "byQueue"
	RedriveDenyAll = "denyAll"
)

func (b *builder) workQueue(id string, consumerTimeout time.Duration) *workQueue {
	// The main queue has a name of its own so that its DLQ can name it in
	// its RedriveAllowPolicy: a Ref to the main queue there would be a
	// cycle, since the main queue's RedrivePolicy refers to the DLQ.
	name := QueueName(*b.stack.StackName(), id)
	mainARN := b.stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String("sqs"), Resource: jsii.String(name)})
	dlq := awssqs.NewQueue(b.stack, jsii.String(id+"DLQ"), &awssqs.QueueProps{
		Encryption:          awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:          jsii.Bool(true),
		RetentionPeriod:     duration(topology.DLQRetention),
		MaxMessageSizeBytes: maxMessageSize,
	})
	suppress(dlq, nagDLQRedrive, dlqIsTheEnd, false)
	// Only its own main queue may use it as a dead-letter queue.
	dlq.Node().DefaultChild().(awssqs.CfnQueue).SetRedriveAllowPolicy(map[string]any{
		"redrivePermission": RedriveByQueue,
		"sourceQueueArns":   []*string{mainARN},
	})
	main := awssqs.NewQueue(b.stack, jsii.String(id), &awssqs.QueueProps{
		QueueName:           jsii.String(name),
		Encryption:          awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:          jsii.Bool(true),
		VisibilityTimeout:   duration(topology.Visibility(consumerTimeout)),
		RetentionPeriod:     duration(topology.QueueRetention),
		MaxMessageSizeBytes: maxMessageSize,
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           dlq,
			MaxReceiveCount: jsii.Number(float64(b.cfg.MaxReceiveCount)),
		},
	})
	return &workQueue{id: id, main: main, dlq: dlq}
}

// encryptedTopic is an SNS topic encrypted with its own customer managed key.
type encryptedTopic struct {
	topic awssns.Topic
	key   awskms.Key
	// viaSNS is SNS's endpoint in the stack's region, the kms:ViaService
	// of the requests SNS makes to the key for a publisher.
	viaSNS *string
}

// viaSNS is the kms:ViaService value of the requests SNS makes to KMS in
// the stack's region.
func (b *builder) viaSNS() *string {
	return jsii.String("sns." + *b.stack.Region() + "." + *b.stack.UrlSuffix())
}

func (b *builder) topicKey(id, description string) awskms.Key {
	return awskms.NewKey(b.stack, jsii.String(id), &awskms.KeyProps{
		Description:       jsii.String(description),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     awscdk.RemovalPolicy_DESTROY,
		PendingWindow:     awscdk.Duration_Days(jsii.Number(7)),
	})
}

// alertTopic is the operators' topic.
func (b *builder) alertTopic(email *string) *encryptedTopic {
	// A customer managed key, because CloudWatch alarms cannot publish to a
	// topic encrypted with the AWS managed SNS key.
	key := b.topicKey("AlertTopicKey", "Encrypts the operator alert topic")
	cloudwatch := awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublish"),
		Principals: &[]awsiam.IPrincipal{cloudwatch},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey"),
		// In a key policy the resource is the key itself, written "*".
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": b.stack.Account()}},
	}), nil)
	topic := awssns.NewTopic(b.stack, jsii.String("AlertTopic"), &awssns.TopicProps{
		DisplayName: jsii.String("Scheduler Agent Supervisor alerts (" + b.cfg.Stage + ")"),
		MasterKey:   key,
		EnforceSSL:  jsii.Bool(true),
		// The publisher's trace (X-Amzn-Trace-Id) goes on to the topic's
		// subscribers, and SNS records its own segment when it is sampled.
		TracingConfig: awssns.TracingConfig_ACTIVE,
	})
	topic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublish"),
		Principals: &[]awsiam.IPrincipal{cloudwatch},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  &[]*string{topic.TopicArn()},
		Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": b.stack.Account()}},
	}))
	hasEmail := awscdk.NewCfnCondition(b.stack, jsii.String("HasAlertEmail"), &awscdk.CfnConditionProps{
		Expression: awscdk.Fn_ConditionNot(awscdk.Fn_ConditionEquals(email, jsii.String(""))),
	})
	sub := awssns.NewCfnSubscription(b.stack, jsii.String("AlertEmailSubscription"), &awssns.CfnSubscriptionProps{
		TopicArn: topic.TopicArn(),
		Protocol: jsii.String("email"),
		Endpoint: email,
	})
	sub.CfnOptions().SetCondition(hasEmail)
	suppress(sub, nagSubscriptionDLQ, "An email subscription has no consumer to retry: SNS hands the alert to its mail system, "+
		"and a failed delivery could only be alerted on this same topic. Every alarm's state stays in CloudWatch; "+
		"subscribe a paging tool (an HTTPS endpoint or a queue with its own DLQ) for delivery you can monitor.", false)
	return &encryptedTopic{topic: topic, key: key, viaSNS: b.viaSNS()}
}

// orderEventsTopic carries the clients' order status events. Clients
// subscribe their own queues with a filter policy on the clientId message
// attribute, so the stack creates no subscriptions. It has its own key: the
// alert key's policy lets CloudWatch use it, which client data does not need.
func (b *builder) orderEventsTopic() *encryptedTopic {
	key := b.topicKey("OrderEventsTopicKey", "Encrypts the order events topic")
	topic := awssns.NewTopic(b.stack, jsii.String("OrderEventsTopic"), &awssns.TopicProps{
		DisplayName: jsii.String("Scheduler Agent Supervisor order events (" + b.cfg.Stage + ")"),
		MasterKey:   key,
		EnforceSSL:  jsii.Bool(true),
		// The publisher's trace (X-Amzn-Trace-Id) goes on to the topic's
		// subscribers, and SNS records its own segment when it is sampled.
		TracingConfig: awssns.TracingConfig_ACTIVE,
	})
	return &encryptedTopic{topic: topic, key: key, viaSNS: b.viaSNS()}
}

// allowPublish lets role publish to the topic: sns:Publish authorizes both
// Publish and PublishBatch (the Notifier's), and SNS needs the two KMS
// actions to encrypt a message for an encrypted topic. It calls KMS with
// the publisher's credentials, so the key grant holds only for requests
// that come through SNS (kms:ViaService): the role cannot use the key
// directly.
func (e *encryptedTopic) allowPublish(role awsiam.IRole) {
	allow(role, []string{"sns:Publish"}, e.topic.TopicArn())
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey"),
		Resources:  &[]*string{e.key.KeyArn()},
		Conditions: &map[string]any{"StringEquals": map[string]any{"kms:ViaService": e.viaSNS}},
	}))
}

// failureQueue is where an event source mapping sends the records it gives
// up on; consumer names its function. No queue redrives into it, which
// cdk-nag's SQS3 cannot see: it knows queue and function DLQs, not event
// source mapping destinations.
func (b *builder) failureQueue(id, consumer string) awssqs.Queue {
	q := awssqs.NewQueue(b.stack, jsii.String(id), &awssqs.QueueProps{
		Encryption:          awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:          jsii.Bool(true),
		RetentionPeriod:     duration(topology.DLQRetention),
		MaxMessageSizeBytes: maxMessageSize,
	})
	// Lambda writes to it as a destination, which is no redrive: no queue
	// may use it as a dead-letter queue.
	q.Node().DefaultChild().(awssqs.CfnQueue).SetRedriveAllowPolicy(map[string]any{"redrivePermission": RedriveDenyAll})
	// SQS3 is not granular (one finding per queue, no finding ID), so the
	// suppression cannot name a finding with appliesTo.
	cdknag.NagSuppressions_AddResourceSuppressions(q, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-SQS3"),
		Reason: jsii.String("This queue is itself a dead-letter queue: the on-failure destination of the " + consumer + "'s " +
			"DynamoDB stream event source mapping, which cdk-nag does not recognize as a DLQ."),
	}}, jsii.Bool(false))
	suppress(q, nagDLQRedrive, dlqIsTheEnd, false)
	return q
}
