package stack

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/topology"
)

// notifierActor is the Notifier's function with its stream's failure
// queue and the records it skipped a minute, for the dashboard.
type notifierActor struct {
	fn       *fn
	failures awssqs.Queue
	skipped  awscloudwatch.IMetric
}

// notifier deploys the Notifier: it publishes each client-visible status
// change, read from the state table's stream, to the order events topic.
func (b *builder) notifier(sh *sharedResources) *notifierActor {
	f := b.actorFunction(Notifier, sh, fnSpec{
		description: "Reads the state table's stream and publishes each change of an order's client status to the order events topic",
		trigger:     byStream,
		timeout:     NotifierTimeout, memory: topology.NotifierMemoryMB,
	}, nil)
	failures := b.failureQueue("NotifierDLQ", "Notifier")
	b.consumeStream(f, sh.state, failures)
	b.functionErrors(sh.alerts, f)
	b.streamAlarms(sh.alerts, f, failures, "clients are not being notified meanwhile",
		"the description of stream records that expired before the Notifier could publish them; those clients missed events")
	return &notifierActor{fn: f, failures: failures, skipped: b.notifierSkipped(sh.alerts, f)}
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

// NotifierSkippedMetric counts the stream records the Notifier skipped as
// poison: each is an event no client received.
const NotifierSkippedMetric = "NotifierSkippedRecords"

// NotifierSkippedMessage begins the msg of the Notifier's log line for a
// stream record it skipped as poison.
const NotifierSkippedMessage = actor.RecordSkipped
