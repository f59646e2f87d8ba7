package submission

import (
	"maps"
	"slices"
	"time"

	"github.com/sasflow/sas/shared/admission"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

// DefaultMaxBodyBytes caps a POST /orders body. The largest valid order
// (50 lines with 64-character SKUs) is well under 8 KiB.
const DefaultMaxBodyBytes = 64 * 1024

// Config is what the Submission function reads from its environment.
type Config struct {
	// AgentQueues maps the first step of every live workflow version to
	// its Agent's request queue: a new order's first step is claimed in the
	// order's own transaction and dispatched there directly.
	AgentQueues map[string]string
	// SchedulerQueueURL is where an operator's retry or cancel hands an order
	// back to the Scheduler.
	SchedulerQueueURL string
	// OrdersTable and StateTable name the DynamoDB tables; only main uses
	// them, to build the store.
	OrdersTable string
	StateTable  string
	// Workflows is every workflow version the deployment runs: a new order
	// gets the version its request names, or its workflow's current one
	// (workflow.Catalog.ForNew), and an operator's retry or cancel runs the
	// version the order is pinned to.
	Workflows workflow.Catalog
	// ClaimTimeout is how long a new Pending record may wait for a Scheduler
	// before the Supervisor re-sends it.
	ClaimTimeout time.Duration
	// Retention is how long an order is kept once it is terminal
	// (workflow.Policy.Retention): a new order's record may be reopened by
	// an operator for Retention, and its orders item expires twice
	// Retention after its creation (workflow.Machine.OrderExpiresAt).
	Retention time.Duration
	// MaxBodyBytes caps the decoded request body.
	MaxBodyBytes int64
	// Admission is the check that sheds new orders while an Agent queue
	// holds more than its backlog; without queues every order is admitted.
	Admission          admission.Config
	OperatorPrincipals []string
	// AlertTopicARN is the operators' SNS topic, told at once what an
	// operator's cancel leaves applied (WithAlerts); only main uses it,
	// and without it the order's LastError alone says so.
	AlertTopicARN string
	// TraceSampleRate is the share of new orders whose path is recorded
	// as an X-Ray trace, from 0 to 1 (trace.Sample); every order's log
	// lines carry its traceId whatever it is.
	TraceSampleRate float64
}

// maxBodyBytes bounds MaxBodyBytes: a synchronous Lambda invocation's
// payload is at most 6 MiB.
const maxBodyBytes = 6 << 20

// variables names the fields read from the environment, so LoadConfig
// reports a problem under the name the operator sets.
var variables = func() map[string]string {
	v := map[string]string{
		"AgentQueues":        topology.EnvAgentQueueURLs,
		"SchedulerQueueURL":  topology.EnvSchedulerQueueURL,
		"OrdersTable":        topology.EnvOrdersTable,
		"StateTable":         topology.EnvStateTable,
		"ClaimTimeout":       topology.EnvClaimTimeout,
		"Retention":          topology.EnvRetention,
		"OperatorPrincipals": topology.EnvOperatorPrincipals,
		"AlertTopicARN":      topology.EnvAlertTopicARN,
		"TraceSampleRate":    topology.EnvTraceSampleRate,
	}
	maps.Copy(v, admission.Variables)
	return v
}()

// LoadConfig reads the configuration through getenv and reports every
// problem at once, named by its variable:
//
//	AGENT_QUEUE_URLS       required, step=url pairs separated by commas: the Agent queue of the first step of every live workflow version
//	SCHEDULER_QUEUE_URL    required, absolute http(s) URL of the Scheduler queue
//	ORDERS_TABLE           required, DynamoDB table name
//	STATE_TABLE            required, DynamoDB table name, not ORDERS_TABLE
//	CLAIM_TIMEOUT          optional Go duration within 1s..1h, default the policy's
//	RETENTION              optional Go duration within 24h..87600h (10 years), default 2160h (90 days)
//	ALERT_TOPIC_ARN        optional SNS topic ARN: the operators' topic, told at once what a cancel leaves applied
//	OPERATOR_PRINCIPALS    optional comma-separated ARNs of the IAM roles and users who operate (empty entries ignored); unset: nobody
//
// and the admission check's ADMISSION_* variables (admission.Read).
func LoadConfig(getenv func(string) string) (Config, error) { return loadConfig(getenv, catalog.Read) }

// loadConfig is LoadConfig with the workflow catalog from workflows.
func loadConfig(getenv func(string) string, workflows catalog.Source) (Config, error) {
	// The reader only parses; the bounds are Check's, so a value out of
	// bounds is reported once.
	return config.Load("submission config", getenv, variables, func(r *config.Reader) Config {
		queues, err := topology.ParseAgentQueues(r.String(topology.EnvAgentQueueURLs))
		if err != nil {
			r.Fail(topology.EnvAgentQueueURLs, "AGENT_QUEUE_URLS: %v", err)
		}
		return Config{
			AgentQueues:        queues,
			SchedulerQueueURL:  r.String(topology.EnvSchedulerQueueURL),
			OrdersTable:        r.String(topology.EnvOrdersTable),
			StateTable:         r.String(topology.EnvStateTable),
			Workflows:          workflows(r),
			ClaimTimeout:       r.Duration(topology.EnvClaimTimeout, workflow.DefaultPolicy().ClaimTimeout),
			Retention:          r.Duration(topology.EnvRetention, workflow.DefaultRetention),
			MaxBodyBytes:       DefaultMaxBodyBytes,
			Admission:          admission.Read(r),
			OperatorPrincipals: ParseOperatorPrincipals(r.String(topology.EnvOperatorPrincipals)),
			AlertTopicARN:      r.String(topology.EnvAlertTopicARN),
			TraceSampleRate:    r.Float(topology.EnvTraceSampleRate, trace.DefaultSampleRate),
		}
	})
}

// Validate checks every rule of the configuration and reports every
// problem at once. New calls it, and LoadConfig applies the same rules.
func (c Config) Validate() error { return config.Validate("submission config", c) }

// Check records what breaks the rules in r.
func (c Config) Check(r *config.Rules) {
	if len(c.AgentQueues) == 0 {
		r.Required("AgentQueues", "")
	}
	// Every live version's first step has an Agent to dispatch to.
	for _, d := range c.Workflows.Definitions {
		if len(d.Steps) > 0 && c.AgentQueues[d.Steps[0].Name] == "" {
			r.Problem("AgentQueues", "no agent queue for step %q, the first of workflow %s", d.Steps[0].Name, d.ID())
		}
	}
	for _, step := range slices.Sorted(maps.Keys(c.AgentQueues)) {
		r.URL(r.Name("AgentQueues")+"["+step+"]", c.AgentQueues[step])
	}
	r.URL("SchedulerQueueURL", c.SchedulerQueueURL)
	r.Tables("OrdersTable", c.OrdersTable, "StateTable", c.StateTable)
	r.Add(c.Workflows.Validate())
	if c.AlertTopicARN != "" {
		r.TopicARN("AlertTopicARN", c.AlertTopicARN)
	}
	r.Within("ClaimTimeout", c.ClaimTimeout, time.Second, time.Hour)
	r.Within("Retention", c.Retention, workflow.MinRetention, workflow.MaxRetention)
	// Zero stands for DefaultMaxBodyBytes.
	r.Count("MaxBodyBytes", int(c.MaxBodyBytes), 0, maxBodyBytes)
	c.Admission.Check(r)
	if !trace.ValidRate(c.TraceSampleRate) {
		r.Problem("TraceSampleRate", "%v is not a share from 0 to 1", c.TraceSampleRate)
	}
	// An empty list is allowed: it fails closed (every operator route is
	// refused), and a Config built for a system without operators (a
	// test, a local run) needs no made-up one.
	for _, arn := range c.OperatorPrincipals {
		if _, _, err := operatorARN(arn); err != nil {
			r.Problem("OperatorPrincipals", "%v", err)
		}
	}
}
