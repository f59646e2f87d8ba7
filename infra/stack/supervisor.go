package stack

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/shared/queue"
	"github.com/sasflow/sas/shared/topology"
)

// supervisor deploys the Supervisor's sweep with its grants (topology's
// descriptor: it queries the in-flight index, keys only, reads those
// records to see their deadlines, recovers expired ones with conditional
// UpdateItem, moving an alerted or long-open order's orders item TTL in
// the same transaction, re-sends steps to the Scheduler and alerts), the
// schedule that runs it and its alarms. Its fast path is the Timer
// (timer.go) and the Deadline function (deadline, below).
func (b *builder) supervisor(sh *sharedResources) *fn {
	f := b.actorFunction(Supervisor, sh, fnSpec{
		description: "Runs on a schedule: finds state records whose CompleteBy passed, retries them or marks them Error and alerts",
		trigger:     bySchedule,
		timeout:     topology.SupervisorTimeout, memory: topology.SupervisorMemoryMB,
		// A failed run is redone by the next tick; Lambda's own async
		// retries would only overlap it.
		asyncRetries: jsii.Number(0),
	}, nil)
	rule := awsevents.NewRule(b.stack, jsii.String("SupervisorSchedule"), &awsevents.RuleProps{
		Description: jsii.String("Runs the Supervisor"),
		Schedule:    awsevents.Schedule_Expression(jsii.String(b.cfg.SupervisorSchedule)),
	})
	rule.AddTarget(awseventstargets.NewLambdaFunction(f.fn, &awseventstargets.LambdaFunctionProps{
		RetryAttempts: jsii.Number(0),
		MaxEventAge:   awscdk.Duration_Minutes(jsii.Number(1)),
	}))
	suppress(rule, nagScheduleDLQ, deadLetterReasons[bySchedule], false)
	suppress(f.fn.Node().FindChild(jsii.String("EventInvokeConfig")), nagAsyncFailures, deadLetterReasons[bySchedule], false)
	b.functionErrors(sh.alerts, f)
	b.supervisorHeartbeat(sh.alerts, f)
	return f
}

// deadlineQueue declares the queue that carries the Timer's Deadlines to
// the Supervisor's fast path, each delayed up to queue.MaxDelay.
func (b *builder) deadlineQueue() *workQueue {
	q := b.workQueue("DeadlineQueue", topology.DeadlineTimeout)
	q.delayed = queue.MaxDelay
	return q
}

// deadline deploys the Supervisor's fast path: it consumes the Deadlines
// the Timer armed, reads the record (GetItem) and recovers it as the sweep
// would (conditional UpdateItem, a hand-back to the Scheduler, alerts).
func (b *builder) deadline(sh *sharedResources) *fn {
	f := b.actorFunction(Deadline, sh, fnSpec{
		description: "The Supervisor's fast path: recovers a state record the moment its CompleteBy passes, from the Deadlines the Timer armed",
		trigger:     byQueue,
		timeout:     topology.DeadlineTimeout, memory: topology.DeadlineMemoryMB,
	}, nil)
	b.consume(f, sh.queues.deadlines, topology.DeadlineBatchSize, 0)
	// The queue holds Deadlines delayed until CompleteBy, so it alarms
	// that much past sas:queueAgeAlarm.
	dl := sh.queues.deadlines
	age := b.cfg.QueueAgeAlarm + dl.delayed
	b.queueAlarms(sh.alerts, dl, age, fmt.Sprintf(
		"The oldest Deadline on %s is older than %v (Deadlines wait there up to %v, until their CompleteBy, by design): the Deadline function is failing, throttled or disabled, "+
			"so the Supervisor's fast path recovers nothing; the sweep still does, on its schedule. Check the Deadline function's errors and throttles and fix the cause.",
		dl.id, age, dl.delayed))
	b.functionErrors(sh.alerts, f)
	return f
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

// SupervisorHeartbeatPeriods is how many periods without a Supervisor
// invocation raise the heartbeat alarm.
const SupervisorHeartbeatPeriods = 2
