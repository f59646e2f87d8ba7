package submission

import (
	"regexp"
	"time"

	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/workflow"
)

// DefaultMaxBodyBytes caps a POST /orders body. The largest valid order
// (50 lines with 64-character SKUs) is well under 8 KiB.
const DefaultMaxBodyBytes = 64 * 1024

// Config is what the Submission function reads from its environment.
type Config struct {
	// SchedulerQueueURL is where the first Schedule message of an order goes.
	SchedulerQueueURL string
	// OrdersTable and StateTable name the DynamoDB tables; only main uses
	// them, to build the store.
	OrdersTable string
	StateTable  string
	// Workflow is the definition every new order runs.
	Workflow workflow.Definition
	// ClaimTimeout is how long a new Pending record may wait for a Scheduler
	// before the Supervisor re-sends it.
	ClaimTimeout time.Duration
	// MaxBodyBytes caps the decoded request body.
	MaxBodyBytes int64
}

// DynamoDB's rule for table names.
var tableName = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)

// LoadConfig reads the configuration through getenv and reports every
// problem at once:
//
//	SCHEDULER_QUEUE_URL  required, absolute http(s) URL of the Scheduler queue
//	ORDERS_TABLE         required, DynamoDB table name
//	STATE_TABLE          required, DynamoDB table name
//	CLAIM_TIMEOUT        optional Go duration within 1s..1h, default the policy's
func LoadConfig(getenv func(string) string) (Config, error) {
	r := config.NewReader(getenv)
	cfg := Config{
		SchedulerQueueURL: r.URL("SCHEDULER_QUEUE_URL"),
		OrdersTable:       r.String("ORDERS_TABLE"),
		StateTable:        r.String("STATE_TABLE"),
		Workflow:          workflow.Default(),
		ClaimTimeout:      r.Duration("CLAIM_TIMEOUT", workflow.DefaultPolicy().ClaimTimeout, time.Second, time.Hour),
		MaxBodyBytes:      DefaultMaxBodyBytes,
	}
	for name, v := range map[string]string{"ORDERS_TABLE": cfg.OrdersTable, "STATE_TABLE": cfg.StateTable} {
		if v != "" && !tableName.MatchString(v) {
			r.Fail("%s=%q is not a DynamoDB table name", name, v)
		}
	}
	if cfg.OrdersTable != "" && cfg.OrdersTable == cfg.StateTable {
		r.Fail("ORDERS_TABLE and STATE_TABLE must differ, both are %q", cfg.OrdersTable)
	}
	if err := cfg.Workflow.Validate(); err != nil {
		r.Fail("%v", err)
	}
	if err := r.Err(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}
