package stack

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/shared/submission"
	"github.com/sasflow/sas/shared/workflow"
)

// MetricNamespace holds the order-flow metrics the log metric filters make
// for stage: each stage's metrics apart.
func MetricNamespace(stage string) string { return StackNamePrefix + "/" + stage }

// TransitionMetric counts workflow.Transition log lines, with the transition
// as its one dimension.
const TransitionMetric = "Transitions"

// TransitionDimension is the dimension of TransitionMetric.
const TransitionDimension = "Transition"

// ShedMetric counts the orders the Submission's admission check shed (429
// with Retry-After), from its "order shed" log lines.
const ShedMetric = "OrdersShed"

// ShedMessage is the msg of the Submission's log line for a shed order.
const ShedMessage = submission.OrderShed

// Shedding raises its alarm when orders were shed in each of
// ShedAlarmPeriods consecutive periods of ShedAlarmPeriod.
const (
	ShedAlarmPeriod  = 5 * time.Minute
	ShedAlarmPeriods = 3
)

// alarm sends an alarm to the operators' topic on alarm and on OK. Unless
// props says otherwise, one breaching period raises it; no data is no
// problem.
func (b *builder) alarm(alerts *encryptedTopic, id string, props *awscloudwatch.AlarmProps) {
	if props.TreatMissingData == "" {
		props.TreatMissingData = awscloudwatch.TreatMissingData_NOT_BREACHING
	}
	if props.ComparisonOperator == "" {
		props.ComparisonOperator = awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD
	}
	if props.EvaluationPeriods == nil {
		props.EvaluationPeriods = jsii.Number(1)
	}
	action := awscloudwatchactions.NewSnsAction(alerts.topic)
	a := awscloudwatch.NewAlarm(b.stack, jsii.String(id), props)
	a.AddAlarmAction(action)
	a.AddOkAction(action)
}

// dlqAlarm raises an alarm on the first message in dlq; queueID names what
// it is the dead-letter queue of, and why describes how a message gets there.
// A work queue's DLQ (redrivable) is read and redriven with sasctl dlq, which
// finds it by the stage and queueID.
func (b *builder) dlqAlarm(alerts *encryptedTopic, queueID string, dlq awssqs.Queue, why string, redrivable bool) {
	runbook := "Inspect it in the console, fix the cause, then redrive it."
	if redrivable {
		runbook = fmt.Sprintf("See it decoded (order, step, attempt, why) with `sasctl dlq list --stage %[1]s --queue %[2]s`, fix the cause, then `sasctl dlq redrive --stage %[1]s --queue %[2]s`.", b.cfg.Stage, queueID)
	}
	b.alarm(alerts, queueID+"DLQNotEmpty", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String(fmt.Sprintf("A message reached the dead-letter queue of %s: %s. %s", queueID, why, runbook)),
		Metric:           dlq.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(1)), Statistic: jsii.String("Maximum")}),
		Threshold:        jsii.Number(1),
	})
}

// IteratorAgeAlarm is the age of the newest stream record a stream consumer
// has read past which an alarm goes off: far above the notifier's normal
// delay of a second or so, far below the stream's 24 h retention.
const IteratorAgeAlarm = time.Minute

// streamAlarms watches a consumer of the state table's stream: falling
// behind it (a poison record blocks its shard while Lambda retries it), and
// records it gave up on. lag says what falling behind costs, lost what the
// records given up on are.
func (b *builder) streamAlarms(alerts *encryptedTopic, consumer *fn, failures awssqs.Queue, lag, lost string) {
	b.alarm(alerts, consumer.id+"IteratorAge", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String(fmt.Sprintf("The %s function is more than %v behind the state table's stream: a record keeps failing (it is retried until it expires after 24 h) or the function is throttled. Read its log group; %s.", consumer.id, IteratorAgeAlarm, lag)),
		Metric: consumer.fn.Metric(jsii.String("IteratorAge"), &awscloudwatch.MetricOptions{
			Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Maximum"),
		}),
		// IteratorAge is in milliseconds.
		Threshold:          jsii.Number(float64(IteratorAgeAlarm.Milliseconds())),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
	})
	// Lambda's on-failure records describe a stream batch; they are not
	// messages to redrive.
	b.dlqAlarm(alerts, consumer.id, failures, lost, false)
}

// transitionFilters turns the transition log lines of f into TransitionMetric.
func (b *builder) transitionFilters(f *fn) {
	awslogs.NewMetricFilter(b.stack, jsii.String(f.id+"Transitions"), &awslogs.MetricFilterProps{
		LogGroup:        f.logGroup,
		FilterPattern:   awslogs.FilterPattern_Exists(jsii.String("$." + workflow.TransitionKey)),
		MetricNamespace: jsii.String(MetricNamespace(b.cfg.Stage)),
		MetricName:      jsii.String(TransitionMetric),
		MetricValue:     jsii.String("1"),
		Dimensions:      &map[string]*string{TransitionDimension: jsii.String("$." + workflow.TransitionKey)},
	})
}

// transitionLabels name the transitions on the dashboard, with the state an
// order reaches where the name alone does not say.
var transitionLabels = map[workflow.Transition]string{
	workflow.TransitionAccepted:           "accepted (Pending)",
	workflow.TransitionClaimed:            "claimed (Processing)",
	workflow.TransitionStepCompleted:      "step completed",
	workflow.TransitionProcessed:          "Processed",
	workflow.TransitionFailed:             "Error: permanent fault",
	workflow.TransitionGaveUp:             "Error: retries exhausted",
	workflow.TransitionRetried:            "retried after timeout",
	workflow.TransitionRequeued:           "requeued unclaimed",
	workflow.TransitionStaleReply:         "stale reply refused",
	workflow.TransitionCompensating:       "compensation started",
	workflow.TransitionUndone:             "step undone",
	workflow.TransitionCompensated:        "Compensated",
	workflow.TransitionCompensationFailed: "CompensationFailed",
	workflow.TransitionCancelled:          "cancelled",
	workflow.TransitionResubmitted:        "resubmitted",
	workflow.TransitionStranded:           "Error: workflow version not deployed",
	workflow.TransitionWaiting:            "Waiting: extended wait",
}

// transitionMetrics counts each of ts per minute, labelled from
// transitionLabels; a transition without a label stops the synth.
func (b *builder) transitionMetrics(ts ...workflow.Transition) []awscloudwatch.IMetric {
	out := make([]awscloudwatch.IMetric, len(ts))
	for i, t := range ts {
		label, ok := transitionLabels[t]
		if !ok {
			panic(fmt.Sprintf("the dashboard has no label for transition %q", t))
		}
		out[i] = awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:     jsii.String(MetricNamespace(b.cfg.Stage)),
			MetricName:    jsii.String(TransitionMetric),
			DimensionsMap: &map[string]*string{TransitionDimension: jsii.String(string(t))},
			Statistic:     jsii.String("Sum"),
			Period:        awscdk.Duration_Minutes(jsii.Number(1)),
			Label:         jsii.String(label),
		})
	}
	return out
}

// failureView is a stream consumer's failure destination, for the
// dashboard's dead-letter graph.
type failureView struct {
	fn    *fn
	queue awssqs.Queue
}

// notifierView is what the dashboard shows of the Notifier besides the
// function metrics every function has.
type notifierView struct {
	fn       *fn
	failures awssqs.Queue
	events   *encryptedTopic
}

// dashboard shows orders flowing through the states (counted from the logs
// of the functions that commit transitions), the Supervisor's recoveries,
// compensations and operator actions, the client notifications, the queues
// and the functions.
func (b *builder) dashboard(queues queueSet, fns, committers []*fn, shed awslogs.MetricFilter, notifier notifierView, failures ...failureView) awscloudwatch.Dashboard {
	for _, f := range committers {
		b.transitionFilters(f)
	}
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &metrics, Width: jsii.Number(12), Height: jsii.Number(6),
		})
	}
	flow := graph("Orders through states (per minute)", b.transitionMetrics(
		workflow.TransitionAccepted, workflow.TransitionClaimed, workflow.TransitionStepCompleted,
		workflow.TransitionProcessed, workflow.TransitionFailed, workflow.TransitionGaveUp, workflow.TransitionStranded)...)
	recoveries := graph("Supervisor recoveries and stale replies (per minute)", b.transitionMetrics(
		workflow.TransitionRetried, workflow.TransitionRequeued, workflow.TransitionWaiting, workflow.TransitionStaleReply)...)
	compensation := graph("Compensation, cancellations and resubmissions (per minute)", b.transitionMetrics(
		workflow.TransitionCompensating, workflow.TransitionUndone, workflow.TransitionCompensated,
		workflow.TransitionCompensationFailed, workflow.TransitionCancelled, workflow.TransitionResubmitted)...)
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	// The Notifier: events published, and how far it is behind the state
	// table's stream (milliseconds, on the right axis).
	notifications := awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
		Title: jsii.String("Client notifications: events published, Notifier iterator age (ms)"),
		Left: &[]awscloudwatch.IMetric{notifier.events.topic.MetricNumberOfMessagesPublished(&awscloudwatch.MetricOptions{
			Period: minute, Statistic: jsii.String("Sum"), Label: jsii.String("events published"),
		})},
		Right: &[]awscloudwatch.IMetric{notifier.fn.fn.Metric(jsii.String("IteratorAge"), &awscloudwatch.MetricOptions{
			Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(notifier.fn.id + " iterator age"),
		})},
		Width: jsii.Number(12), Height: jsii.Number(6),
	})
	var depth, dlqs, age []awscloudwatch.IMetric
	for _, q := range queues.all(b.cfg.Workflows.AgentNames()) {
		depth = append(depth, q.main.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(q.id)}))
		age = append(age, q.main.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(q.id)}))
		dlqs = append(dlqs, q.dlq.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(q.id + " DLQ")}))
	}
	for _, f := range append([]failureView{{fn: notifier.fn, queue: notifier.failures}}, failures...) {
		dlqs = append(dlqs, f.queue.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(f.fn.id + " DLQ")}))
	}
	// Admission: the orders shed, beside the Agent queues' depths against
	// the backlog past which the Submission sheds.
	shedGraph := graph("Orders shed: 429 with Retry-After (per minute)", shed.Metric(&awscloudwatch.MetricOptions{
		Period: minute, Statistic: jsii.String("Sum"), Label: jsii.String("orders shed"),
	}))
	var agentDepth []awscloudwatch.IMetric
	for _, name := range b.cfg.Workflows.AgentNames() {
		q := queues.agents[name]
		agentDepth = append(agentDepth, q.main.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(q.id)}))
	}
	backlog := awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
		Title: jsii.String("Agent queues against the admission backlog (messages waiting)"),
		Left:  &agentDepth,
		LeftAnnotations: &[]*awscloudwatch.HorizontalAnnotation{{
			Value: jsii.Number(float64(b.cfg.Capacity.Backlog())),
			Label: jsii.String(fmt.Sprintf("backlog %d: new orders shed above", b.cfg.Capacity.Backlog())),
		}},
		Width: jsii.Number(12), Height: jsii.Number(6),
	})
	var errs, durations, throttles []awscloudwatch.IMetric
	for _, f := range fns {
		opts := func(stat string) *awscloudwatch.MetricOptions {
			return &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String(stat), Label: jsii.String(f.id)}
		}
		errs = append(errs, f.fn.MetricErrors(opts("Sum")))
		durations = append(durations, f.fn.MetricDuration(opts("p99")))
		throttles = append(throttles, f.fn.MetricThrottles(opts("Sum")))
	}
	dash := awscloudwatch.NewDashboard(b.stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DefaultInterval: awscdk.Duration_Hours(jsii.Number(3)),
	})
	dash.AddWidgets(flow, recoveries)
	dash.AddWidgets(compensation, notifications)
	dash.AddWidgets(shedGraph, backlog)
	dash.AddWidgets(graph("Messages waiting", depth...), graph("Dead-letter queues", dlqs...))
	dash.AddWidgets(graph("Age of oldest message (s)", age...), graph("Function errors", errs...))
	dash.AddWidgets(graph("Function duration p99 (ms)", durations...), graph("Function throttles", throttles...))
	return dash
}
