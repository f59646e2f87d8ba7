package stack

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"

	"github.com/sasflow/sas/internal/stepgen"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
	"github.com/sasflow/sas/steps"
)

// Config shapes the stack. Values that differ per deployment and have no safe
// default (the remote services' URLs, the operators' e-mail address) are
// CloudFormation parameters instead, so one synthesized template serves every
// account.
type Config struct {
	// Stage names one deployment of the stack in an account and region
	// (dev, prod, ...): it is part of the stack's name, of every physical
	// name the stack sets and of its metric namespace, so several stages
	// live side by side.
	Stage string
	// CodeDir holds one folder per function with its bootstrap binary
	// (make build writes build/<function>/bootstrap).
	CodeDir string
	// Workflows is every workflow version the deployment runs (the
	// functions embed the same file, shared/catalog/workflows.json): one
	// Agent, queue and alarm set per step name across the live versions
	// (workflow.Catalog.Agents).
	Workflows workflow.Catalog
	// CodeSteps are the manifests of the code steps (steps/<step>/step.json,
	// embedded by steps/registry.go), by step name: a step of Workflows
	// with one is deployed as its own code's function (functions/steps/<step>)
	// instead of an Agent calling a remote service.
	CodeSteps map[string]stepgen.Manifest
	// SupervisorSchedule is the EventBridge schedule expression.
	SupervisorSchedule string
	// LogRetentionDays must be a value CloudWatch Logs accepts.
	LogRetentionDays int
	// Capacity is the capacity model (what the remote services take) every
	// capacity figure of the stack follows: each Agent's event source
	// mapping's MaximumConcurrency, the API's throttle, the Submission's
	// admission check and the Agent and response queues' age alarms.
	Capacity topology.Capacity
	// MaxReceiveCount is how often a message is received before its queue
	// moves it to the dead-letter queue.
	MaxReceiveCount int
	// QueueAgeAlarm is the age of a queue's oldest message that raises an
	// alarm; it must exceed the longest backoff delay (BACKOFF_MAX, 5m).
	QueueAgeAlarm time.Duration
	// Retention is how long a terminal order is kept before DynamoDB's TTL
	// deletes it (workflow.Policy.Retention): the functions that end or
	// create orders read it as RETENTION.
	Retention time.Duration
	// TraceSampleRate is the share of new orders whose path is recorded
	// as one X-Ray trace (TRACE_SAMPLE_RATE, trace.Sample), from 0 to 1.
	TraceSampleRate float64
}

// Context keys read by FromContext (cdk.json "context" or cdk -c key=value).
const (
	ContextStage              = "sas:stage"
	ContextCodeDir            = "sas:codeDir"
	ContextSupervisorSchedule = "sas:supervisorSchedule"
	ContextLogRetentionDays   = "sas:logRetentionDays"
	// The capacity model's inputs (topology.Capacity): a remote call's
	// typical (p90) latency and how many calls one Agent's remote service
	// takes at once, and the queue wait at which the API sheds new orders.
	ContextRemoteLatency     = "sas:remoteLatency"
	ContextRemoteConcurrency = "sas:remoteConcurrency"
	ContextAdmitWait         = "sas:admitWait"
	ContextMaxReceiveCount   = "sas:maxReceiveCount"
	ContextQueueAgeAlarm     = "sas:queueAgeAlarm"
	// ContextRetention is a Go duration (2160h is 90 days) within
	// workflow.MinRetention..MaxRetention.
	ContextRetention = "sas:retention"
	// ContextTraceSampleRate is the share of orders traced, 0 to 1
	// (Config.TraceSampleRate).
	ContextTraceSampleRate = "sas:traceSampleRate"
)

// DefaultStage is the stage cdk.json and make deploy default to.
const DefaultStage = topology.DefaultStage

// StackNamePrefix is the start of every stage's stack name.
const StackNamePrefix = topology.StackNamePrefix

// StackName is the CloudFormation stack of stage (topology.StackName, which
// the operators' CLI finds a stage's queues by).
func StackName(stage string) string { return topology.StackName(stage) }

// CatalogFile is the workflow catalog the stack deploys and the functions
// embed; a workflow change is made there.
const CatalogFile = "shared/catalog/workflows.json"

// DefaultConfig is the configuration cdk.json documents, with the deployed
// workflow catalog. An invalid catalog file leaves Workflows empty, which
// Validate refuses; FromContext reports the file's own problems.
func DefaultConfig() Config {
	workflows, _ := catalog.Deployed()
	codeSteps, _ := CodeSteps()
	return Config{
		Stage:              DefaultStage,
		CodeDir:            "build",
		Workflows:          workflows,
		CodeSteps:          codeSteps,
		SupervisorSchedule: topology.SupervisorSchedule,
		LogRetentionDays:   30,
		Capacity:           topology.DefaultCapacity(),
		MaxReceiveCount:    topology.MaxReceiveCount,
		QueueAgeAlarm:      10 * time.Minute,
		Retention:          workflow.DefaultRetention,
		TraceSampleRate:    trace.DefaultSampleRate,
	}
}

// FromContext overrides the defaults with the context values lookup finds
// (lookup returns "" for an unset key), reporting every bad value at once.
func FromContext(lookup func(key string) string) (Config, error) {
	c := DefaultConfig()
	var errs []error
	str := func(key string, dst *string) {
		if v := lookup(key); v != "" {
			*dst = v
		}
	}
	integer := func(key string, dst *int) {
		if v := lookup(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q is not an integer", key, v))
				return
			}
			*dst = n
		}
	}
	dur := func(key string, dst *time.Duration) {
		if v := lookup(key); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q is not a Go duration", key, v))
				return
			}
			*dst = d
		}
	}
	// The catalog is a file, not a context value: report why it does not
	// parse (with any bad context value) rather than Validate's "no
	// definitions".
	if _, err := catalog.Deployed(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", CatalogFile, err))
	}
	if _, err := CodeSteps(); err != nil {
		errs = append(errs, err)
	}
	str(ContextStage, &c.Stage)
	str(ContextCodeDir, &c.CodeDir)
	str(ContextSupervisorSchedule, &c.SupervisorSchedule)
	integer(ContextLogRetentionDays, &c.LogRetentionDays)
	dur(ContextRemoteLatency, &c.Capacity.RemoteLatency)
	integer(ContextRemoteConcurrency, &c.Capacity.RemoteConcurrency)
	dur(ContextAdmitWait, &c.Capacity.AdmitWait)
	integer(ContextMaxReceiveCount, &c.MaxReceiveCount)
	dur(ContextQueueAgeAlarm, &c.QueueAgeAlarm)
	dur(ContextRetention, &c.Retention)
	if v := lookup(ContextTraceSampleRate); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not a number", ContextTraceSampleRate, v))
		}
		c.TraceSampleRate = r
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("stack config: %w", err)
	}
	return c, c.Validate()
}

var (
	// EventBridge schedule expressions: rate(1 minute), rate(5 minutes),
	// cron(...). The singular unit goes with 1 only, as EventBridge demands.
	rateExpr = regexp.MustCompile(`^rate\((1 (minute|hour|day)|([2-9]|[1-9][0-9]+) (minutes|hours|days))\)$`)
	cronExpr = regexp.MustCompile(`^cron\(\S+( \S+){5}\)$`)
	// A stage is short enough for every name it goes into (a queue's 80
	// characters, a stack's 128) and valid in all of them.
	stageExpr = regexp.MustCompile(`^[a-z][a-z0-9-]{0,15}$`)
	// CloudWatch Logs' retention periods, by days.
	retentionDays = map[int]awslogs.RetentionDays{
		1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
		7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
		60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 120: awslogs.RetentionDays_FOUR_MONTHS,
		150: awslogs.RetentionDays_FIVE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
		400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS, 731: awslogs.RetentionDays_TWO_YEARS,
		1096: awslogs.RetentionDays_THREE_YEARS, 1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
		2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS, 3288: awslogs.RetentionDays_NINE_YEARS,
		3653: awslogs.RetentionDays_TEN_YEARS,
	}
)

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !stageExpr.MatchString(c.Stage) {
		fail("%s=%q must match %s (a lower-case letter, then up to 15 lower-case letters, digits or hyphens)", ContextStage, c.Stage, stageExpr)
	}
	if c.CodeDir == "" {
		fail("CodeDir is required")
	}
	// The catalog's own check covers each version's rules and what the
	// versions must agree on to share an Agent (its lease, the function
	// timeout, within the 14m a Lambda can use).
	if err := c.Workflows.Validate(); err != nil {
		fail("%s: %w", CatalogFile, err)
	}
	// A code step no live version has would be deployed for nothing.
	names := make([]string, 0, len(c.CodeSteps))
	for name, m := range c.CodeSteps {
		if err := m.Validate(name); err != nil {
			fail("%w", err)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	live := make([]stepgen.CodeStep, len(names))
	for i, n := range names {
		live[i] = stepgen.CodeStep{Name: n}
	}
	if err := stepgen.Live(live, c.Workflows.AgentNames()); err != nil {
		fail("%w", err)
	}
	if !rateExpr.MatchString(c.SupervisorSchedule) && !cronExpr.MatchString(c.SupervisorSchedule) {
		fail("%s=%q is not an EventBridge rate(...) or cron(...) expression", ContextSupervisorSchedule, c.SupervisorSchedule)
	}
	if _, ok := retentionDays[c.LogRetentionDays]; !ok {
		fail("%s=%d is not a CloudWatch Logs retention period (1, 3, 5, 7, 14, 30, 60, 90, ... 3653)", ContextLogRetentionDays, c.LogRetentionDays)
	}
	// The model's own bounds keep every figure it derives within what AWS
	// accepts (a MaximumConcurrency of 2..1000, a burst of at most 5000).
	// Its errors name the model's fields; the prefix names the keys.
	if err := c.Capacity.Validate(); err != nil {
		fail("%s=%v %s=%d %s=%v: %w", ContextRemoteLatency, c.Capacity.RemoteLatency,
			ContextRemoteConcurrency, c.Capacity.RemoteConcurrency, ContextAdmitWait, c.Capacity.AdmitWait, err)
	}
	// Every step's Wait, in every live version, must absorb the
	// admission's wait; a version that runs orders cannot change, so
	// sas:admitWait is what to change (or a new version's waits).
	for _, d := range c.Workflows.Definitions {
		if err := c.Capacity.CheckWorkflow(d); err != nil {
			fail("%s=%v does not fit %s of %s: %w", ContextAdmitWait, c.Capacity.AdmitWait, d.ID(), CatalogFile, err)
		}
	}
	if c.MaxReceiveCount < 1 || c.MaxReceiveCount > 1000 {
		fail("%s=%d must be within 1..1000", ContextMaxReceiveCount, c.MaxReceiveCount)
	}
	// A step the Supervisor re-sends waits up to BackoffMax on the queue
	// by design; only a message older than that means no one consumes it.
	if backoff := workflow.DefaultPolicy().BackoffMax; c.QueueAgeAlarm <= backoff || c.QueueAgeAlarm > 14*24*time.Hour {
		fail("%s=%v must exceed the longest retry delay %v and be at most 14 days", ContextQueueAgeAlarm, c.QueueAgeAlarm, backoff)
	}
	if c.Retention < workflow.MinRetention || c.Retention > workflow.MaxRetention {
		fail("%s=%v must be within %v..%v (a day to ten years)", ContextRetention, c.Retention, workflow.MinRetention, workflow.MaxRetention)
	}
	if !trace.ValidRate(c.TraceSampleRate) {
		fail("%s=%v must be a share from 0 to 1", ContextTraceSampleRate, c.TraceSampleRate)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stack config: %w", err)
	}
	return nil
}

// CodeSteps reads the manifests of the code steps this build embeds
// (steps.Manifests), by step name.
func CodeSteps() (map[string]stepgen.Manifest, error) {
	out := map[string]stepgen.Manifest{}
	var errs []error
	for name, b := range steps.Manifests {
		m, err := stepgen.Parse(name, b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[name] = m
	}
	return out, errors.Join(errs...)
}

// CodeStepNames are the code steps' names, in name order.
func (c Config) CodeStepNames() []string {
	return slices.Sorted(maps.Keys(c.CodeSteps))
}

// CodeStepFolders are the folders of the code steps' functions, relative
// to functions/ and to CodeDir (steps/<step>), in name order.
func (c Config) CodeStepFolders() []string {
	out := make([]string, 0, len(c.CodeSteps))
	for name := range c.CodeSteps {
		out = append(out, "steps/"+name)
	}
	slices.Sort(out)
	return out
}

// logRetention is the validated LogRetentionDays as CDK's enum.
func (c Config) logRetention() awslogs.RetentionDays { return retentionDays[c.LogRetentionDays] }
