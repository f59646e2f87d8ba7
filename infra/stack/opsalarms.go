package stack

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
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

// NotifierSkippedMetric counts the stream records the Notifier skipped as
// poison: each is an event no client received.
const NotifierSkippedMetric = "NotifierSkippedRecords"

// NotifierSkippedMessage begins the msg of the Notifier's log line for a
// stream record it skipped as poison.
const NotifierSkippedMessage = actor.RecordSkipped

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

// SupervisorHeartbeatPeriods is how many periods without a Supervisor
// invocation raise the heartbeat alarm.
const SupervisorHeartbeatPeriods = 2

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

// notifierSkipped counts the stream records the Notifier skipped as poison
// and raises an alarm on the first: a client missed an event.
func (b *builder) notifierSkipped(alerts *encryptedTopic, notifier *fn) awscloudwatch.IMetric {
	filter := b.countLines(notifier, "SkippedRecords", "$.msg", NotifierSkippedMessage+"*", NotifierSkippedMetric)
	metric := func(label *string) awscloudwatch.Metric {
		return filter.Metric(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(1)), Statistic: jsii.String("Sum"), Label: label})
	}
	b.alarm(alerts, "NotifierSkippedRecordsAlarm", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String(fmt.Sprintf(
			"The %s skipped a state table stream record it could not read or turn into an event (\"%s\" in its log group, with the sequenceNumber): that order's client missed an event. "+
				"Read the line's error; the order's current status is still right (`sasctl show`), so tell the client or have it re-read the order, and fix the writer or the Notifier.",
			notifier.id, NotifierSkippedMessage)),
		Metric:    metric(nil),
		Threshold: jsii.Number(1),
	})
	return metric(jsii.String("Notifier skipped records"))
}

// api5xx raises an alarm on the HTTP API's server errors. A count, not a
// rate: at a trickle one failed request of two is a 50% rate, and at full
// load a rate hides hundreds of failed submissions. API5xxThreshold in
// API5xxPeriod lets an isolated 5xx (a cold start past the integration
// timeout, one Lambda throttle), which SDK clients retry, pass, and fires on
// anything that keeps failing.
func (b *builder) api5xx(alerts *encryptedTopic, stage awsapigatewayv2.HttpStage, submission *fn) awscloudwatch.IMetric {
	b.alarm(alerts, "Api5xx", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String(fmt.Sprintf(
			"The orders API answered %d or more 5xx within %v: clients' requests failed. The %s function's ERROR lines carry the requestId (and its errors alarm may be up too); "+
				"a 5xx without one is the integration: the function throttled (see FunctionThrottles) or timed out. The API's access log group has each request's status and integration error.",
			API5xxThreshold, API5xxPeriod, submission.id)),
		Metric:    stage.MetricServerError(&awscloudwatch.MetricOptions{Period: duration(API5xxPeriod), Statistic: jsii.String("Sum")}),
		Threshold: jsii.Number(API5xxThreshold),
	})
	return stage.MetricServerError(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(1)), Statistic: jsii.String("Sum"), Label: jsii.String("API 5xx")})
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

// scheduleInterval is the interval of an EventBridge rate(...) expression;
// false for a cron(...) expression.
func scheduleInterval(expr string) (time.Duration, bool) {
	m := regexp.MustCompile(`^rate\((\d+) (minute|hour|day)s?\)$`).FindStringSubmatch(expr)
	if m == nil {
		return 0, false
	}
	n, _ := strconv.Atoi(m[1])
	unit := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}[m[2]]
	return time.Duration(n) * unit, true
}

// supervisorHeartbeat raises an alarm when the Supervisor has not run for
// SupervisorHeartbeatPeriods periods of five minutes (or of its schedule's
// interval, when that is longer). Missing data is breaching: a disabled
// rule, a deleted invoke permission or a deleted function emit nothing at
// all. A cron(...) schedule has no fixed interval and gets no heartbeat.
func (b *builder) supervisorHeartbeat(alerts *encryptedTopic, supervisor *fn) {
	every, ok := scheduleInterval(b.cfg.SupervisorSchedule)
	if !ok {
		return
	}
	period := max(5*time.Minute, every)
	b.alarm(alerts, "SupervisorHeartbeat", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String(fmt.Sprintf(
			"The %s function was not invoked for %v (%s): orders whose step lease expired are not recovered except by the fast path. "+
				"Check its EventBridge rule is enabled with the function as target, the function's resource policy lets events.amazonaws.com invoke it, and its throttles; redeploy the stack to restore them.",
			supervisor.id, SupervisorHeartbeatPeriods*period, b.cfg.SupervisorSchedule)),
		Metric:             supervisor.fn.MetricInvocations(&awscloudwatch.MetricOptions{Period: duration(period), Statistic: jsii.String("Sum")}),
		Threshold:          jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(SupervisorHeartbeatPeriods),
		DatapointsToAlarm:  jsii.Number(SupervisorHeartbeatPeriods),
		TreatMissingData:   awscloudwatch.TreatMissingData_BREACHING,
	})
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
