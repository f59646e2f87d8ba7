package submission

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/internal/testkit/golden"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// The views the server writes, for fixed records, must be the golden
// documents of shared/api byte for byte: a client reads those documents
// with the same types, so this ties what is written to what is read.

// goldenAt is the instant every golden document is built around. The
// records below carry it in another zone, because the views convert to UTC.
var goldenAt = time.Date(2026, 11, 22, 9, 41, 5, 120_000_000, time.UTC)

func goldenTime(minutes int) *time.Time {
	t := goldenAt.Add(time.Duration(minutes) * time.Minute).In(time.FixedZone("CET", 3600))
	return &t
}

// goldenState is a record with every member the views show set, so each
// member's tag is pinned; the values need not make a plausible order.
func goldenState() workflow.State {
	return workflow.State{
		OrderID:      "9b2f0c1e-5d7a-4c3b-8e6f-0a1b2c3d4e5f",
		Workflow:     "order-v1",
		StepIndex:    1,
		Step:         "charge-payment",
		ProcessState: workflow.CompensationFailed,
		LockedBy:     "scheduler-invocation-1", // never shown
		CompleteBy:   *goldenTime(2),
		FailureCount: 2, WaitRound: 1,
		Attempt:      7,
		LastError:    goldenUndoRefusal,
		AlertPending: true, // never shown
		Requeues:     1,    // never shown
		ClientID:     "shop-web",
		Owner:        "arn:aws:sts::111122223333:assumed-role/shop-checkout/session-1",
		OwnerID:      "AROAZ3EXAMPLEROLE0001",
		Trace:        "Root=1-6740510d-5d9f3a2b1c4e8f7a6b5c4d3e;Parent=53995c3f42cd8ad8;Sampled=1",
		EventSeq:     5,
		Cancelled:    true,
		Resubmits:    1,
		Input:        json.RawMessage(`{"orderId":"never-shown"}`),
		CreatedAt:    *goldenTime(-10),
		UpdatedAt:    *goldenTime(0),
		// The retention after it ended, in whole seconds.
		ExpiresAt: goldenTime(0).Add(workflow.DefaultRetention).Truncate(time.Second),
		OpenUntil: goldenTime(-10).Add(workflow.DefaultRetention), // never shown
		Steps: []workflow.StepRecord{
			{Name: "reserve-inventory", State: workflow.StepSucceeded, Attempts: 1, StartedAt: goldenTime(-9), FinishedAt: goldenTime(-8),
				Output: json.RawMessage(`{"reservation": "r-1"}`), Compensation: workflow.StepSucceeded, CompensationAttempts: 1,
				CompensatedAt: goldenTime(-1), CompensationOutput: json.RawMessage(`{"undone":true}`)},
			goldenStep(),
		},
	}
}

// The texts the Scheduler writes for a refused step and a refused undo
// (scheduler.FailureMessage): the operators' documents show them, the
// clients' the reasons workflow.ReasonOf reads from them.
var (
	goldenRefusal     = workflow.RejectionMessage("card-declined", "the issuer declined the card", true)
	goldenUndoRefusal = workflow.UndoRejectedPrefix + workflow.RejectionMessage("refund-window-closed", "the refund window has closed", false)
)

// goldenStep is a step record with every member set: api's
// step-history.json.
func goldenStep() workflow.StepRecord {
	return workflow.StepRecord{
		Name: "charge-payment", State: workflow.StepFailed, Attempts: 3, Failures: 2,
		StartedAt: goldenTime(-8), FinishedAt: goldenTime(-5), Error: goldenRefusal,
		Output: json.RawMessage(`{"authorization":"a-1"}`), Compensation: workflow.StepFailed,
		CompensationAttempts: 4, CompensationFailures: 3, CompensatedAt: goldenTime(-2),
		CompensationOutput: json.RawMessage(`{"refund":"pending"}`), CompensationError: goldenUndoRefusal,
	}
}

// apiTestdata holds shared/api's golden documents.
const apiTestdata = "../api/testdata"

func marshalView(t *testing.T, v any) []byte {
	t.Helper()
	// As respond writes it: jsonwire, without HTML escaping.
	return golden.Marshal(t, v)
}

var discardLog = slog.New(slog.DiscardHandler)

// The operators' GET /ops/orders/{id}, which shows the owner and the
// failure texts.
func TestOrderGolden(t *testing.T) {
	t.Parallel()
	golden.Equal(t, apiTestdata+"/order.json", marshalView(t, newStatus(goldenState(), true, discardLog)))
}

// A client's GET /orders/{id}: the reasons, without the owner and the
// failure texts.
func TestClientOrderGolden(t *testing.T) {
	t.Parallel()
	golden.Equal(t, apiTestdata+"/client-order.json", marshalView(t, newStatus(goldenState(), false, discardLog)))
}

func TestStepHistoryGolden(t *testing.T) {
	t.Parallel()
	st := workflow.State{Steps: []workflow.StepRecord{goldenStep()}}
	golden.Equal(t, apiTestdata+"/step-history.json", marshalView(t, newStatus(st, true, discardLog).Steps[0]))
}

func goldenPage() statestore.Page {
	return statestore.Page{States: []workflow.State{goldenState()}, Next: "eyJrIjoiOWIyZjBjMWUifQ"}
}

// An order of the operators' listing, and of a client's.
func TestOrderSummaryGolden(t *testing.T) {
	t.Parallel()
	q := ListQuery{State: workflow.CompensationFailed, Limit: 1}
	golden.Equal(t, apiTestdata+"/order-summary.json", marshalView(t, listBody(goldenPage(), q, "/ops/orders", true, discardLog).Orders[0]))
	golden.Equal(t, apiTestdata+"/client-order-summary.json", marshalView(t, listBody(goldenPage(), ListQuery{Limit: 1}, "/orders", false, discardLog).Orders[0]))
}

func TestPageGolden(t *testing.T) {
	t.Parallel()
	q := ListQuery{State: workflow.CompensationFailed, Limit: 1}
	golden.Equal(t, apiTestdata+"/page.json", marshalView(t, listBody(goldenPage(), q, "/ops/orders", true, discardLog)))
}

func TestAcceptedGolden(t *testing.T) {
	t.Parallel()
	golden.Equal(t, apiTestdata+"/accepted.json", []byte(accepted(goldenState().OrderID, workflow.CompensationPending, false).Body))
}

func TestProblemGolden(t *testing.T) {
	t.Parallel()
	req := events.APIGatewayV2HTTPRequest{RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: "Yp3kZhT2IAMEb0Q="}}
	p := problem(http.StatusUnprocessableEntity, ProblemValidation, "the order has invalid fields",
		FieldError{Field: "items[0].quantity", Detail: "must be 1..1000"})
	golden.Equal(t, apiTestdata+"/problem.json", []byte((&Handler{}).fail(req, p, nil).Body))
}

// The operators' GET /ops/workflows after a rollout of order-v2, counted
// to its bound.
func TestWorkflowsGolden(t *testing.T) {
	t.Parallel()
	v2 := workflow.Reference()
	v2.Version = 2
	cat := workflow.Catalog{Definitions: []workflow.Definition{workflow.Reference(), v2}, Current: map[string]int{"order": 2}, Default: "order"}
	count := statestore.OpenCount{Versions: map[string]statestore.VersionCount{"order-v1": {InFlight: 3, NeedsOperator: 1}}, Truncated: true}
	body := workflowsBody(cat, count)
	golden.Equal(t, apiTestdata+"/workflows.json", marshalView(t, body))
	golden.Equal(t, apiTestdata+"/workflow-version.json", marshalView(t, body.Workflows[0]))
}
