package stack

import (
	"fmt"
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/shared/topology"
)

// submissionActor is the Submission's function with its API and what the
// common alarms and the dashboard show of it.
type submissionActor struct {
	fn  *fn
	api *orderAPI
	// shed counts the orders the admission check shed.
	shed awslogs.MetricFilter
	// api5xx is the API's server errors a minute.
	api5xx awscloudwatch.IMetric
}

// submission deploys the orders API's function (api.go: the HTTP API, its
// routes, policies and operator role) with its grants (topology's
// descriptor: it writes the order and its state record in one transaction,
// reads, lists, retries and cancels them, dispatches a new order's first
// step and sends Schedule messages) and its alarms. It adds the API's URL
// to sh.env, for the actors that name it in their alerts.
//
// A new order may start on any live version (the current one, or one its
// submission names), so it gets the queue of every version's first step,
// as step=url pairs like the Scheduler's.
func (b *builder) submission(sh *sharedResources) *submissionActor {
	// Its admission check reads the depth of every Agent's request queue
	// (GetQueueAttributes) and sheds new orders while any holds more than
	// the capacity model's backlog.
	var admissionURLs []string
	for _, name := range b.cfg.Workflows.AgentNames() {
		admissionURLs = append(admissionURLs, *sh.queues.agents[name].main.QueueUrl())
	}
	adm := b.cfg.Capacity.Admission(admissionURLs)
	// It refuses the operator routes to anyone but the operators, whom the
	// API's operator role and a deploy-time parameter name; the variable is
	// set once the role exists.
	f := b.actorFunction(Submission, sh, fnSpec{
		description: "The orders API: validates and writes new orders and dispatches their first step, reads and lists them, retries and cancels them",
		trigger:     byAPI,
		timeout:     topology.SubmissionTimeout, memory: topology.SubmissionMemoryMB,
	}, map[string]*string{
		topology.EnvAgentQueueURLs: queueURLs(sh.queues, b.cfg.Workflows.FirstSteps()),
		// The URLs are tokens until deploy time: CloudFormation joins them.
		topology.EnvAdmissionQueues:  awscdk.Fn_Join(jsii.String(","), jsii.Strings(adm.Queues...)),
		topology.EnvAdmissionBacklog: jsii.String(fmt.Sprint(adm.Backlog)),
		topology.EnvAdmissionRate:    jsii.String(fmt.Sprint(adm.Rate)),
		topology.EnvAdmissionRefresh: jsii.String(adm.Refresh.String()),
		topology.EnvAdmissionReserve: jsii.String(fmt.Sprint(adm.Reserve)),
		topology.EnvTraceSampleRate:  jsii.String(strconv.FormatFloat(b.cfg.TraceSampleRate, 'g', -1, 64)),
	}, topology.EnvOperatorPrincipals)

	// The Scheduler and the Supervisor name the API's URL in their alerts'
	// ready-to-run operator commands. They depend on the API resource, and
	// nothing of the API depends on them, so this adds no cycle. The
	// Submission, which backs the API, does not read the URL.
	api := b.api(f)
	sh.env[topology.EnvOperatorAPIURL] = api.api.ApiEndpoint()
	// The role depends on the API (its policy names the API's routes), not
	// on the function: no cycle.
	f.fn.AddEnvironment(jsii.String(topology.EnvOperatorPrincipals), b.operatorPrincipals(api.operatorRole), nil)

	b.functionErrors(sh.alerts, f)
	return &submissionActor{fn: f, api: api, shed: b.shedding(sh.alerts, f), api5xx: b.api5xx(sh.alerts, api.stage, f)}
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

// shedding counts the "order shed" lines of the Submission's log group into
// ShedMetric, and raises an alarm while orders keep being shed. It returns
// the metric, for the dashboard.
func (b *builder) shedding(alerts *encryptedTopic, sub *fn) awslogs.MetricFilter {
	filter := b.countLines(sub, "OrdersShed", "$.msg", ShedMessage, ShedMetric)
	c := b.cfg.Capacity
	// Shedding a burst for a while is the admission check at work, not an
	// incident. Shedding is bursty under overload, too: clients wait out
	// Retry-After (1..60 s) and come back together, so a quiet minute does
	// not mean the overload is over. Orders shed in each of three
	// consecutive five-minute periods is demand above the model's
	// capacity for a quarter of an hour; no data (nothing shed) is no
	// problem.
	b.alarm(alerts, "OrdersShedSustained", &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String(fmt.Sprintf(
			"New orders have been shed for %v (some in each of %d consecutive %v periods): clients get 429 with Retry-After and nothing is written for them. "+
				"The Agents are at the capacity model's limit (%.0f orders a second: %s=%d calls at once, %s=%v each): an Agent queue holds more than %s=%v of work (%d requests). "+
				"Raise %s if the remote service takes more calls at once, or investigate its latency (the Agents' duration, the Agent queues' age alarms). The Submission's \"%s\" log lines name the fullest queue.",
			ShedAlarmPeriods*ShedAlarmPeriod, ShedAlarmPeriods, ShedAlarmPeriod, c.OrdersPerSecond(),
			ContextRemoteConcurrency, c.RemoteConcurrency, ContextRemoteLatency, c.RemoteLatency, ContextAdmitWait, c.AdmitWait, c.Backlog(),
			ContextRemoteConcurrency, ShedMessage)),
		Metric:             filter.Metric(&awscloudwatch.MetricOptions{Period: duration(ShedAlarmPeriod), Statistic: jsii.String("Sum")}),
		Threshold:          jsii.Number(0),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(ShedAlarmPeriods),
		DatapointsToAlarm:  jsii.Number(ShedAlarmPeriods),
	})
	return filter
}
