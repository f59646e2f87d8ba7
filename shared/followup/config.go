package followup

import (
	"maps"

	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// Config is what the Scheduler and the Supervisor both read, and read alike:
// where the records are, where hand-backs and alerts go, the operators' API,
// and the workflow with its policy. Each one's Config embeds it, so the two
// cannot drift.
type Config struct {
	OrdersTable       string
	StateTable        string
	SchedulerQueueURL string
	// AlertTopicARN is the operators' SNS topic.
	AlertTopicARN string
	// OperatorAPIURL is the HTTP API the operators' CLI talks to, named in
	// alerts' ready-to-run commands; optional.
	OperatorAPIURL string
	// Workflows is every workflow version the deployment runs; each order
	// is handled by the version it is pinned to (Machine).
	Workflows workflow.Catalog
	Policy    workflow.Policy
}

// Variables names Config's fields, and the policy's, by the environment
// variables Load reads them from.
func Variables() map[string]string {
	names := map[string]string{
		"OrdersTable":       topology.EnvOrdersTable,
		"StateTable":        topology.EnvStateTable,
		"SchedulerQueueURL": topology.EnvSchedulerQueueURL,
		"AlertTopicARN":     topology.EnvAlertTopicARN,
		"OperatorAPIURL":    topology.EnvOperatorAPIURL,
	}
	maps.Copy(names, workflow.PolicyVariables)
	return names
}

// Load reads ORDERS_TABLE, STATE_TABLE, SCHEDULER_QUEUE_URL, ALERT_TOPIC_ARN,
// the optional OPERATOR_API_URL and the policy variables of
// workflow.LoadPolicy; it only parses, Check holds the rules. The workflows
// are the deployed catalog (shared/catalog), the same in every function.
func Load(r *config.Reader, workflows catalog.Source) Config {
	return Config{
		OrdersTable:       r.String(topology.EnvOrdersTable),
		StateTable:        r.String(topology.EnvStateTable),
		SchedulerQueueURL: r.String(topology.EnvSchedulerQueueURL),
		AlertTopicARN:     r.String(topology.EnvAlertTopicARN),
		OperatorAPIURL:    r.String(topology.EnvOperatorAPIURL),
		Workflows:         workflows(r),
		Policy:            workflow.LoadPolicy(r),
	}
}

// Check records what breaks Config's rules, the workflow's and the policy's.
func (c Config) Check(r *config.Rules) {
	r.Tables("OrdersTable", c.OrdersTable, "StateTable", c.StateTable)
	r.URL("SchedulerQueueURL", c.SchedulerQueueURL)
	r.TopicARN("AlertTopicARN", c.AlertTopicARN)
	if c.OperatorAPIURL != "" {
		r.URL("OperatorAPIURL", c.OperatorAPIURL)
	}
	r.Add(c.Workflows.Validate())
	c.Policy.Check(r)
}

// Machine is the state machine of the workflow version id (an order's
// pinned one) under the policy; workflow.ErrUnknownWorkflow when the
// deployment does not run it.
func (c Config) Machine(id string) (workflow.Machine, error) {
	return c.Workflows.Machine(id, c.Policy)
}

// Actions are the follow-ups of the changes an actor commits through
// confirm, sending hand-backs with send and alerts with alerts.
func (c Config) Actions(send Sender, alerts alert.Sender, confirm alert.Confirmer) Actions {
	return Actions{Send: send, SchedulerQueueURL: c.SchedulerQueueURL, Alerts: alerts, Confirm: confirm,
		MaxFailures: c.Policy.MaxFailures, CLI: alert.CLI(c.OperatorAPIURL)}
}
