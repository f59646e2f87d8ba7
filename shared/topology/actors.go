package topology

import (
	"slices"

	"github.com/sasflow/sas/shared/statestore"
)

// The environment variables the actors read, each spelled once: the actors'
// configs read them by these constants, the stack (infra/) sets them by
// them, and docs/configuration.md describes each. The policy's
// (workflow.PolicyVariables) and the admission check's (admission.Variables)
// are spelled in those packages too, which topology imports and so cannot
// be imported by; actors_test.go holds them equal.
const (
	EnvOrdersTable         = "ORDERS_TABLE"
	EnvStateTable          = "STATE_TABLE"
	EnvSchedulerQueueURL   = "SCHEDULER_QUEUE_URL"
	EnvResponseQueueURL    = "RESPONSE_QUEUE_URL"
	EnvAgentQueueURLs      = "AGENT_QUEUE_URLS"
	EnvDeadlineQueueURL    = "DEADLINE_QUEUE_URL"
	EnvAlertTopicARN       = "ALERT_TOPIC_ARN"
	EnvOrderEventsTopicARN = "ORDER_EVENTS_TOPIC_ARN"
	EnvOperatorAPIURL      = "OPERATOR_API_URL"
	EnvOperatorPrincipals  = "OPERATOR_PRINCIPALS"
	EnvMaxReceiveCount     = "MAX_RECEIVE_COUNT"
	EnvBatchLimit          = "BATCH_LIMIT"
	EnvReplySenders        = "REPLY_SENDERS"

	EnvAgentStep        = "AGENT_STEP"
	EnvRequestQueueURL  = "REQUEST_QUEUE_URL"
	EnvRemoteBaseURL    = "REMOTE_BASE_URL"
	EnvRemoteBaseURLs   = "REMOTE_BASE_URLS"
	EnvRemoteTimeout    = "REMOTE_TIMEOUT"
	EnvRetryBase        = "RETRY_BASE"
	EnvRetryMax         = "RETRY_MAX"
	EnvBreakerFailures  = "BREAKER_FAILURES"
	EnvBreakerCooldown  = "BREAKER_COOLDOWN"
	EnvAgentConcurrency = "AGENT_CONCURRENCY"
	EnvSafetyMargin     = "SAFETY_MARGIN"
	EnvLedgerTable      = "LEDGER_TABLE"
	EnvCodeSteps        = "CODE_STEPS"

	EnvAdmissionQueues  = "ADMISSION_QUEUES"
	EnvAdmissionBacklog = "ADMISSION_BACKLOG"
	EnvAdmissionRate    = "ADMISSION_RATE"
	EnvAdmissionRefresh = "ADMISSION_REFRESH"
	EnvAdmissionReserve = "ADMISSION_RESERVE"

	EnvMaxFailures  = "MAX_FAILURES"
	EnvClaimTimeout = "CLAIM_TIMEOUT"
	EnvBackoffBase  = "BACKOFF_BASE"
	EnvBackoffMax   = "BACKOFF_MAX"
	EnvAlertTimeout = "ALERT_TIMEOUT"
	EnvRetention    = "RETENTION"

	EnvTraceSampleRate = "TRACE_SAMPLE_RATE"
)

// The actors, by their folders in functions/.
const (
	Submission = "submission"
	Scheduler  = "scheduler"
	Agent      = "agent"
	// CodeStep is a code step's function, one per code step: the folder
	// functions/steps/<step>, generated from steps/<step> (internal/stepgen).
	CodeStep   = "codestep"
	Supervisor = "supervisor"
	Deadline   = "deadline"
	Timer      = "timer"
	Notifier   = "notifier"
)

// Resource is something deployed that an actor consumes, sends to or reads,
// named by its logical ID in the stack where it has one.
type Resource string

// The resources the actors use.
const (
	OrdersTable Resource = "OrdersTable"
	StateTable  Resource = "StateTable"
	// LedgerTable is the code steps' idempotency ledger.
	LedgerTable      Resource = "LedgerTable"
	StateStream      Resource = "StateTable.Stream"
	SchedulerQueue   Resource = "SchedulerQueue"
	ResponseQueue    Resource = "ResponseQueue"
	DeadlineQueue    Resource = "DeadlineQueue"
	AlertTopic       Resource = "AlertTopic"
	OrderEventsTopic Resource = "OrderEventsTopic"
	// OwnRequestQueue is an Agent's own request queue (ReserveInventoryQueue, ...).
	OwnRequestQueue Resource = "RequestQueue"
	// AgentQueues is every Agent's request queue.
	AgentQueues Resource = "AgentQueues"
	// FirstStepQueues is the request queue of every live version's first step.
	FirstStepQueues Resource = "FirstStepQueues"
	OrdersAPI       Resource = "OrdersApi"
	Schedule        Resource = "SupervisorSchedule"
	// RemoteService is an Agent's remote service (its REMOTE_BASE_URLS).
	RemoteService Resource = "RemoteService"
)

// Index is the global secondary index name of table t.
func Index(t Resource, name string) Resource { return t + "/index/" + Resource(name) }

// Access is one IAM statement of an actor's role: actions on resources.
type Access struct {
	Actions []string
	On      []Resource
	// OwnKeys limits the statement to the items whose partition key is
	// the function's step name and "#" (LeadingKeys), so one step's
	// function cannot touch another step's items in a shared table.
	OwnKeys bool
}

// Actor describes one deployed function: what invokes it, what it may do
// and what it reads from its environment.
type Actor struct {
	// Name is its functions/ folder.
	Name string
	// Consumes is what invokes it: queues (event source mappings), the
	// state table's stream, the API, the schedule.
	Consumes []Resource
	// Access is its role's statements, in the order the stack grants them
	// (besides its logs, tracing and event sources).
	Access []Access
	// Env is every variable its LoadConfig reads.
	Env []string
}

// deployed are the variables the stack sets, for every actor that reads
// them; the others keep their defaults unless an operator sets them.
var deployed = []string{
	EnvOrdersTable, EnvStateTable, EnvSchedulerQueueURL, EnvResponseQueueURL, EnvAgentQueueURLs,
	EnvDeadlineQueueURL, EnvAlertTopicARN, EnvOrderEventsTopicARN, EnvOperatorAPIURL,
	EnvOperatorPrincipals, EnvMaxReceiveCount, EnvReplySenders, EnvAgentStep, EnvRequestQueueURL, EnvRemoteBaseURLs, EnvLedgerTable, EnvCodeSteps,
	EnvAdmissionQueues, EnvAdmissionBacklog, EnvAdmissionRate, EnvAdmissionRefresh, EnvAdmissionReserve, EnvRetention,
	EnvTraceSampleRate,
}

// Deployed reports whether the stack sets the variable name.
func Deployed(name string) bool { return slices.Contains(deployed, name) }

// PolicyEnv are the workflow policy's variables (workflow.LoadPolicy), which
// the Scheduler and the Supervisor (and its fast path) read alike.
var PolicyEnv = []string{EnvMaxFailures, EnvClaimTimeout, EnvBackoffBase, EnvBackoffMax, EnvAlertTimeout, EnvRetention}

// AdmissionEnv are the admission check's variables (admission.Read).
var AdmissionEnv = []string{EnvAdmissionQueues, EnvAdmissionBacklog, EnvAdmissionRate, EnvAdmissionRefresh, EnvAdmissionReserve}

// FollowupEnv are followup.Load's variables, which the Scheduler and the
// Supervisor read alike, the policy's among them.
var FollowupEnv = append([]string{EnvOrdersTable, EnvStateTable, EnvSchedulerQueueURL, EnvAlertTopicARN, EnvOperatorAPIURL}, PolicyEnv...)

// Actions of the actors' statements.
const (
	getItem      = "dynamodb:GetItem"
	putItem      = "dynamodb:PutItem"
	updateItem   = "dynamodb:UpdateItem"
	deleteItem   = "dynamodb:DeleteItem"
	batchGetItem = "dynamodb:BatchGetItem"
	query        = "dynamodb:Query"
	// SendMessage also authorizes SendMessageBatch.
	SendMessage = "sqs:SendMessage"
	// Publish also authorizes PublishBatch; the stack adds the topic key's
	// grant through SNS.
	Publish = "sns:Publish"
)

func access(on Resource, actions ...string) Access {
	return Access{Actions: actions, On: []Resource{on}}
}

// actors in the order the stack deploys them.
var actors = []Actor{{
	// Writes the order and its record in one transaction, reads them back,
	// lists them, retries and cancels (a transaction needs each action's
	// permission), dispatches a new order's first step, sends Schedule
	// messages, alerts on a cancel that leaves a step applied, and reads
	// the Agent queues' depth for admission.
	Name:     Submission,
	Consumes: []Resource{OrdersAPI},
	Access: []Access{
		access(OrdersTable, putItem, getItem, updateItem),
		access(StateTable, putItem, getItem, updateItem, batchGetItem),
		{Actions: []string{query}, On: []Resource{
			Index(StateTable, statestore.ByStateIndex), Index(StateTable, statestore.InFlightIndex), Index(OrdersTable, statestore.ByOwnerIndex),
		}},
		access(FirstStepQueues, SendMessage),
		access(SchedulerQueue, SendMessage),
		access(AlertTopic, Publish),
		access(AgentQueues, "sqs:GetQueueAttributes"),
	},
	Env: append([]string{
		EnvAgentQueueURLs, EnvSchedulerQueueURL, EnvOrdersTable, EnvStateTable, EnvClaimTimeout, EnvRetention,
		EnvOperatorPrincipals, EnvAlertTopicARN, EnvTraceSampleRate,
	}, AdmissionEnv...),
}, {
	// Claims, commits and fails records conditionally, reads one before a
	// permanent failure, keeps an alerted order's orders item, dispatches
	// to the Agents and hands failed dispatches back to its own queue.
	Name:     Scheduler,
	Consumes: []Resource{SchedulerQueue, ResponseQueue},
	Access: []Access{
		access(StateTable, updateItem, getItem),
		access(OrdersTable, updateItem),
		access(AgentQueues, SendMessage),
		access(SchedulerQueue, SendMessage),
		access(AlertTopic, Publish),
	},
	Env: append(slices.Clone(FollowupEnv), EnvResponseQueueURL, EnvAgentQueueURLs, EnvMaxReceiveCount, EnvReplySenders),
}, {
	// One per step: calls its remote service and replies to the Scheduler.
	Name:     Agent,
	Consumes: []Resource{OwnRequestQueue},
	Access: []Access{
		access(ResponseQueue, SendMessage),
		access(AlertTopic, Publish),
	},
	Env: []string{
		EnvAgentStep, EnvResponseQueueURL, EnvRemoteBaseURLs, EnvRemoteBaseURL, EnvRemoteTimeout, EnvRetryBase, EnvRetryMax,
		EnvBreakerFailures, EnvBreakerCooldown, EnvAgentConcurrency, EnvSafetyMargin, EnvAlertTopicARN,
		EnvMaxReceiveCount, EnvRequestQueueURL,
	},
}, {
	// One per code step: runs the step with its idempotency ledger behind
	// the Agent's handler, and replies to the Scheduler. The ledger's
	// statement is limited to the step's own keys. Its undo writes the
	// effect's entry and its own in one TransactWriteItems, which IAM
	// authorizes through the actions of the writes inside it: "Permissions
	// for Put, Update, Delete, and Get actions are governed by the
	// permissions used for the underlying PutItem, UpdateItem, DeleteItem,
	// and GetItem operations" ("Using IAM with DynamoDB transactions",
	// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html);
	// there is no dynamodb:TransactWriteItems action to grant. A
	// ConditionCheck in the transaction would need
	// dynamodb:ConditionCheckItem as well; the ledger uses none.
	Name:     CodeStep,
	Consumes: []Resource{OwnRequestQueue},
	Access: []Access{
		access(ResponseQueue, SendMessage),
		access(AlertTopic, Publish),
		// The adapter never puts: it claims and finishes an entry by
		// UpdateItem and releases it by DeleteItem.
		{Actions: []string{getItem, updateItem, deleteItem}, On: []Resource{LedgerTable}, OwnKeys: true},
	},
	Env: []string{
		EnvAgentStep, EnvResponseQueueURL, EnvLedgerTable, EnvRemoteTimeout, EnvRetryBase, EnvRetryMax,
		EnvBreakerFailures, EnvBreakerCooldown, EnvAgentConcurrency, EnvSafetyMargin, EnvAlertTopicARN,
		EnvMaxReceiveCount, EnvRequestQueueURL,
	},
}, {
	// Queries the in-flight index (keys only), reads those records,
	// recovers the expired ones conditionally (moving the orders item's TTL
	// with them), hands steps back to the Scheduler and alerts.
	Name:     Supervisor,
	Consumes: []Resource{Schedule},
	Access: []Access{
		{Actions: []string{query}, On: []Resource{Index(StateTable, statestore.InFlightIndex)}},
		access(StateTable, updateItem, batchGetItem),
		access(OrdersTable, updateItem),
		access(SchedulerQueue, SendMessage),
		access(AlertTopic, Publish),
	},
	Env: append(slices.Clone(FollowupEnv), EnvBatchLimit),
}, {
	// The Supervisor's fast path: reads a record when its Deadline (from
	// the Timer) comes due and recovers it as the sweep would.
	Name:     Deadline,
	Consumes: []Resource{DeadlineQueue},
	Access: []Access{
		access(StateTable, getItem, updateItem),
		access(OrdersTable, updateItem),
		access(SchedulerQueue, SendMessage),
		access(AlertTopic, Publish),
	},
	Env: append(slices.Clone(FollowupEnv), EnvBatchLimit, EnvDeadlineQueueURL),
}, {
	// Reads the state table's stream and sends each new phase of a watched
	// record a Deadline, delayed until its CompleteBy; when an order ends
	// for good, gives its code steps' ledger entries its record's TTL.
	Name:     Timer,
	Consumes: []Resource{StateStream},
	Access:   []Access{access(DeadlineQueue, SendMessage), access(LedgerTable, updateItem)},
	Env:      []string{EnvDeadlineQueueURL, EnvCodeSteps, EnvLedgerTable},
}, {
	// Publishes each client-visible status change from the stream.
	Name:     Notifier,
	Consumes: []Resource{StateStream},
	Access:   []Access{access(OrderEventsTopic, Publish)},
	Env:      []string{EnvOrderEventsTopicARN},
}}

// Actors describes every actor, in the order the stack deploys them.
func Actors() []Actor {
	out := make([]Actor, len(actors))
	for i, a := range actors {
		out[i] = a
		out[i].Consumes = slices.Clone(a.Consumes)
		out[i].Access = slices.Clone(a.Access)
		out[i].Env = slices.Clone(a.Env)
	}
	return out
}

// Describe is the actor named name (a functions/ folder); it panics on a
// name that is none, a programming error.
func Describe(name string) Actor {
	for _, a := range Actors() {
		if a.Name == name {
			return a
		}
	}
	panic("topology: no actor " + name)
}

// DeployedEnv is the part of a.Env the stack sets, in a.Env's order.
func (a Actor) DeployedEnv() []string {
	var out []string
	for _, v := range a.Env {
		if Deployed(v) {
			out = append(out, v)
		}
	}
	return out
}

// SendsTo lists the queues and topics a may send or publish to.
func (a Actor) SendsTo() []Resource {
	var out []Resource
	for _, s := range a.Access {
		if slices.Contains(s.Actions, SendMessage) || slices.Contains(s.Actions, Publish) {
			out = append(out, s.On...)
		}
	}
	return out
}

// Tables lists the tables (and indexes) a reads or writes.
func (a Actor) Tables() []Resource {
	var out []Resource
	for _, s := range a.Access {
		for _, act := range s.Actions {
			if len(act) > len("dynamodb:") && act[:len("dynamodb:")] == "dynamodb:" {
				out = append(out, s.On...)
				break
			}
		}
	}
	return out
}

// Readers names the actors that read the variable name, in Actors' order.
func Readers(name string) []string {
	var out []string
	for _, a := range actors {
		if slices.Contains(a.Env, name) {
			out = append(out, a.Name)
		}
	}
	return out
}

// Variables lists every variable some actor reads, each once, in the order
// the actors read them.
func Variables() []string {
	var out []string
	for _, a := range actors {
		for _, v := range a.Env {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}
