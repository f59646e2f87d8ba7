package stack

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/statestore"
)

// ErrorLinesMetric counts the ERROR lines of every function's log group,
// without a dimension, so that all functions add up in one metric.
const ErrorLinesMetric = "ErrorLines"

// BatchItemFailuresMetric counts the records the SQS and stream handlers
// reported as batch item failures, from their actor.BatchItemFailed lines.
const BatchItemFailuresMetric = "BatchItemFailures"

// BatchItemFailuresPeriods: the batch item failures alarm is raised by
// failures in each of this many consecutive one-minute periods.
const BatchItemFailuresPeriods = 3

// ErrorLinesQuery is the CloudWatch Logs Insights query that finds the lines
// ErrorLinesMetric counts, over the functions' log groups.
const ErrorLinesQuery = `filter level = "ERROR" | fields @timestamp, @log, function, msg, error, orderId`

// API5xxPeriod and API5xxThreshold: the API alarms at API5xxThreshold
// server errors within API5xxPeriod.
const (
	API5xxPeriod    = 5 * time.Minute
	API5xxThreshold = 5
)

// maxAlarmMetrics is the most metrics a CloudWatch metric math alarm may use.
const maxAlarmMetrics = 10

// errorLines counts every function's ERROR lines into ErrorLinesMetric and
// raises an alarm on the first. It returns the metric, for the dashboard.
func (b *builder) errorLines(alerts *encryptedTopic, fns []*fn) awscloudwatch.IMetric {
	var groups []string
	for _, f := range fns {
		b.countLines(f, "ErrorLines", "$.level", "ERROR", ErrorLinesMetric)
		groups = append(groups, f.id)
	}
	b.alarm(alerts, "ErrorLogLines", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String(fmt.Sprintf(
			"A function logged an ERROR line (%s counts them across %s). Find them with CloudWatch Logs Insights over the functions' log groups: %s. "+
				"An orderId leads to `sasctl show`; an error without one is the function's own (configuration, permissions, an AWS service).",
			ErrorLinesMetric, strings.Join(groups, ", "), ErrorLinesQuery)),
		Metric:    b.countMetric(ErrorLinesMetric, ""),
		Threshold: jsii.Number(1),
	})
	return b.countMetric(ErrorLinesMetric, "ERROR lines")
}

// countMetric is a per-minute sum of a countLines metric. An alarm's metric
// takes no label: a labelled one is written as metric math.
func (b *builder) countMetric(name, label string) awscloudwatch.Metric {
	props := &awscloudwatch.MetricProps{
		Namespace: jsii.String(MetricNamespace(b.cfg.Stage)), MetricName: jsii.String(name),
		Statistic: jsii.String("Sum"), Period: awscdk.Duration_Minutes(jsii.Number(1)),
	}
	if label != "" {
		props.Label = jsii.String(label)
	}
	return awscloudwatch.NewMetric(props)
}

// countLines counts the JSON log lines of f whose field equals value (a
// trailing * matches any rest) into metric, in the stack's namespace and
// without a dimension, so the lines of several functions add up.
func (b *builder) countLines(f *fn, idSuffix, field, value, metric string) awslogs.MetricFilter {
	return awslogs.NewMetricFilter(b.stack, jsii.String(f.id+idSuffix), &awslogs.MetricFilterProps{
		LogGroup:        f.logGroup,
		FilterPattern:   awslogs.FilterPattern_StringValue(jsii.String(field), jsii.String("="), jsii.String(value)),
		MetricNamespace: jsii.String(MetricNamespace(b.cfg.Stage)),
		MetricName:      jsii.String(metric),
		MetricValue:     jsii.String("1"),
	})
}

// sumOf is a metric math expression adding up metrics, a missing value
// counting as zero. Its metrics' IDs begin with prefix (a lowercase letter
// first), so that several sums can share a graph.
func sumOf(prefix, label string, period awscdk.Duration, metrics []awscloudwatch.IMetric) awscloudwatch.MathExpression {
	using := map[string]awscloudwatch.IMetric{}
	ids := make([]string, len(metrics))
	for i, m := range metrics {
		ids[i] = prefix + strconv.Itoa(i)
		using[ids[i]] = m
	}
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression:   jsii.String("SUM(FILL([" + strings.Join(ids, ", ") + "], 0))"),
		UsingMetrics: &using,
		Label:        jsii.String(label),
		Period:       period,
	})
}

// lambdaThrottles raises an alarm on any throttle of any function, summed
// with metric math (a metric math alarm takes at most ten metrics, so a
// workflow of more than five steps gets one alarm per ten functions).
func (b *builder) lambdaThrottles(alerts *encryptedTopic, fns []*fn, agents []*fn) {
	five := awscdk.Duration_Minutes(jsii.Number(5))
	var agentIDs []string
	for _, a := range agents {
		agentIDs = append(agentIDs, a.id)
	}
	for i := 0; i < len(fns); i += maxAlarmMetrics {
		group := fns[i:min(i+maxAlarmMetrics, len(fns))]
		var metrics []awscloudwatch.IMetric
		var ids []string
		for _, f := range group {
			metrics = append(metrics, f.fn.MetricThrottles(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}))
			ids = append(ids, f.id)
		}
		id := "FunctionThrottles"
		if i > 0 {
			id += strconv.Itoa(i/maxAlarmMetrics + 1)
		}
		b.alarm(alerts, id, &awscloudwatch.AlarmProps{
			AlarmDescription: jsii.String(fmt.Sprintf(
				"Lambda throttled an invocation of %s within 5 minutes (the sum of their Throttles): the dashboard's \"Function throttles\" names the function. "+
					"Throttles come from the account's concurrency (Service Quotas: Lambda concurrent executions, shared with everything else in the account and region), "+
					"a function's reserved concurrency if one was set, or, for %s, their event source mappings' MaximumConcurrency (%s=%d), which holds messages back rather than throttling. "+
					"Raise the account quota or free concurrency elsewhere; queued work waits and drains, API requests get 5xx (see Api5xx).",
				strings.Join(ids, ", "), strings.Join(agentIDs, ", "), ContextRemoteConcurrency, b.cfg.Capacity.RemoteConcurrency)),
			Metric:    sumOf("m", "throttles", five, metrics),
			Threshold: jsii.Number(1),
		})
	}
}

// tableThrottles raises an alarm on any throttled read or write of either
// table or of their indexes: an index's throttles are reported under its
// own dimension, and a throttled index write throttles the table write
// that carries it. Each table's metrics are one alarm (a metric math alarm
// takes at most ten). It returns each alarm's sum, for the dashboard.
func (b *builder) tableThrottles(alerts *encryptedTopic, tables ...awsdynamodb.Table) []awscloudwatch.IMetric {
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	indexes := map[string][]string{}
	for _, in := range statestore.CreateTableInputs(statestore.Tables{Orders: "OrdersTable", State: "StateTable"}) {
		for _, g := range in.GlobalSecondaryIndexes {
			indexes[*in.TableName] = append(indexes[*in.TableName], *g.IndexName)
		}
	}
	var sums []awscloudwatch.IMetric
	for _, t := range tables {
		id := *t.Node().Id()
		var metrics []awscloudwatch.IMetric
		for _, m := range []string{"ReadThrottleEvents", "WriteThrottleEvents"} {
			metrics = append(metrics, t.Metric(jsii.String(m), &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Sum")}))
			for _, ix := range indexes[id] {
				metrics = append(metrics, t.Metric(jsii.String(m), &awscloudwatch.MetricOptions{
					Period: minute, Statistic: jsii.String("Sum"),
					DimensionsMap: &map[string]*string{"TableName": t.TableName(), "GlobalSecondaryIndexName": jsii.String(ix)},
				}))
			}
		}
		if len(metrics) > maxAlarmMetrics {
			panic(fmt.Sprintf("stack: %s has %d throttle metrics, more than an alarm takes", id, len(metrics)))
		}
		what := id
		if len(indexes[id]) > 0 {
			what += " and its indexes " + strings.Join(indexes[id], ", ")
		}
		sum := sumOf(strings.ToLower(id[:1])+id[1:], id+" throttle events", minute, metrics)
		b.alarm(alerts, id+"Throttles", &awscloudwatch.AlarmProps{
			AlarmDescription: jsii.String(fmt.Sprintf(
				"DynamoDB throttled reads or writes of %s (the sum of their ReadThrottleEvents and WriteThrottleEvents in a minute). "+
					"The tables are on-demand: one throttles when traffic passes twice its previous peak within 30 minutes, or the table's throughput quota; "+
					"an index throttles on a hot partition of its key (the listings and the in-flight index are sharded to avoid that). "+
					"Throttled calls are retried by the SDK and then by the queues; if it persists, pre-warm the table (warm throughput) for the expected peak or raise the table quota in Service Quotas.",
				what)),
			Metric:    sum,
			Threshold: jsii.Number(1),
		})
		sums = append(sums, sum)
	}
	return sums
}

// batchItemFailures counts every function's actor.BatchItemFailed lines
// (only the SQS and stream handlers log them) into BatchItemFailuresMetric,
// and raises an alarm when records fail in each of
// BatchItemFailuresPeriods consecutive minutes. A redelivered record that
// then succeeds is normal during a DynamoDB or SQS blip of a minute or so,
// and a burst of them is one batch, so neither a count of one nor a count
// in one period would do: failures minute after minute are a dependency
// down or a bug on every record. A record that keeps failing on its own is
// the dead-letter queue alarms' and the IteratorAge alarms' to catch.
func (b *builder) batchItemFailures(alerts *encryptedTopic, fns []*fn) awscloudwatch.IMetric {
	for _, f := range fns {
		b.countLines(f, "BatchItemFailures", "$.msg", actor.BatchItemFailed, BatchItemFailuresMetric)
	}
	b.alarm(alerts, "BatchItemFailuresSustained", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String(fmt.Sprintf(
			"Queue or stream records were reported as batch item failures (redelivered) in each of %d consecutive minutes: a dependency (DynamoDB, SQS, SNS) is failing or a bug fails every record. "+
				"Find the lines with CloudWatch Logs Insights over the functions' log groups: filter msg = \"%s\" | stats count() by @log, reason, error. "+
				"Each carries the messageId or sequenceNumber; fix the cause and the records are retried by themselves (those past their receive limit are in a dead-letter queue).",
			BatchItemFailuresPeriods, actor.BatchItemFailed)),
		Metric:            b.countMetric(BatchItemFailuresMetric, ""),
		Threshold:         jsii.Number(1),
		EvaluationPeriods: jsii.Number(BatchItemFailuresPeriods),
		DatapointsToAlarm: jsii.Number(BatchItemFailuresPeriods),
	})
	return b.countMetric(BatchItemFailuresMetric, "batch item failures")
}

// queueAlarms watches a work queue: a message in its dead-letter queue, and
// its oldest message older than age, with runbook as that alarm's
// description. Each queue's owner says how old is too old.
func (b *builder) queueAlarms(alerts *encryptedTopic, q *workQueue, age time.Duration, runbook string) {
	b.dlqAlarm(alerts, q.id, q.dlq, fmt.Sprintf("a poison message or a failure that outlived %d receives", b.cfg.MaxReceiveCount), true)
	b.alarm(alerts, q.id+"OldestMessage", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String(runbook),
		Metric:           q.main.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(1)), Statistic: jsii.String("Maximum")}),
		Threshold:        jsii.Number(age.Seconds()),
	})
}

// functionErrors raises an alarm on any failed invocation of f.
func (b *builder) functionErrors(alerts *encryptedTopic, f *fn) {
	b.alarm(alerts, f.id+"Errors", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String(fmt.Sprintf("The %s function failed invocations: read its log group for the error.", f.id)),
		Metric:           f.fn.MetricErrors(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum")}),
		Threshold:        jsii.Number(1),
	})
}
