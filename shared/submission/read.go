package submission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

// getOwnOrder answers a client's GET /orders/{id}: one of the caller's own
// orders.
func (h *Handler) getOwnOrder(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, a args) events.APIGatewayV2HTTPResponse {
	return h.getOrder(ctx, log, req, a.orderID, &a.owner)
}

// getAnyOrder answers the operators' GET /ops/orders/{id}: any caller's
// order, with its owner and its failures' causes.
func (h *Handler) getAnyOrder(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, a args) events.APIGatewayV2HTTPResponse {
	return h.getOrder(ctx, log, req, a.orderID, nil)
}

// getOrder answers GET /orders/{id} for owner, or GET /ops/orders/{id} when
// owner is nil (the operators' route, which shows any order and its owner).
// The record is owner's when it matches on owner's key (Owner.Key). Another
// owner's order is answered exactly as a missing one, so a client cannot
// even learn that an ID exists: another caller's, and as well one of a
// principal that had the caller's ARN before it, whose unique ID is not the
// caller's.
func (h *Handler) getOrder(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, orderID string, owner *Owner) events.APIGatewayV2HTTPResponse {
	st, resp, ok := h.readState(ctx, log, req, orderID)
	if !ok {
		return resp
	}
	ctx, log = trace.Join(ctx, log, trace.Stored(st.Trace))
	if owner != nil {
		if st.OwnerKey() == "" || st.OwnerKey() != owner.Key() {
			log.InfoContext(ctx, "order of another caller asked for; answered as missing", slog.String("caller", owner.Name), slog.String("callerId", owner.ID))
			return h.reject(ctx, log, req, notFoundProblem(orderID), nil)
		}
		return respond(http.StatusOK, contentTypeJSON, newStatus(st, false, log), nil)
	}
	if st.OwnerID != "" {
		// The record keeps only the owner's unique ID; its ARN, which
		// operators read, is the order's.
		o, err := h.store.GetOrder(ctx, orderID)
		switch {
		case errors.Is(err, workflow.ErrNotFound):
			log.WarnContext(ctx, "the order of a state record is missing; its owner is shown by its unique ID only")
		case err != nil:
			return h.internal(ctx, log, req, fmt.Errorf("read the owner of order %s: %w", orderID, err))
		case o.OwnerID == st.OwnerID:
			st.Owner = o.Owner
		}
	}
	return respond(http.StatusOK, contentTypeJSON, newStatus(st, true, log), nil)
}

// newStatus is what GET /orders/{id} shows of a state record (api.Order),
// and GET /ops/orders/{id} with operator. It leaves out LockedBy (an
// internal Scheduler invocation ID, meaningless to clients), AlertPending,
// Requeues and Input (the order as submitted, which the client has and the
// status view need not echo). A failure is shown to everyone as its
// workflow.Reason, a code and our own words; its whole cause (LastError and
// the steps' errors), which may quote what AWS answered (a queue URL, an
// account ID, a role's ARN) or what a remote service wrote, the owner and
// the trace ID (the key of the order's log lines) only to operators.
func newStatus(st workflow.State, operator bool, log *slog.Logger) api.Order {
	reason := workflow.ReasonOf(st)
	s := api.Order{
		OrderID:      st.OrderID,
		Workflow:     st.Workflow,
		State:        st.ProcessState,
		Status:       workflow.StatusOf(st),
		Priority:     st.Priority.Or(),
		Step:         st.Step,
		StepIndex:    st.StepIndex,
		FailureCount: st.FailureCount,
		WaitRound:    st.WaitRound,
		Attempt:      st.Attempt,
		CompleteBy:   st.CompleteBy.UTC(),
		Reason:       reason.Code,
		ReasonText:   reason.Text,
		ClientID:     st.ClientID,
		EventSeq:     st.EventSeq,
		Cancelled:    st.Cancelled,
		Resubmits:    st.Resubmits,
		CreatedAt:    st.CreatedAt.UTC(),
		UpdatedAt:    st.UpdatedAt.UTC(),
		ExpiresAt:    utcPtr(&st.ExpiresAt),
		Steps:        make([]api.StepHistory, len(st.Steps)),
	}
	if operator {
		s.Owner, s.OwnerID, s.LastError, s.TraceID = st.Owner, st.OwnerID, st.LastError, trace.Stored(st.Trace).Root
	}
	for i, r := range st.Steps {
		step, undo := workflow.StepReasons(r)
		h := api.StepHistory{
			Name:                   r.Name,
			State:                  r.State,
			Attempts:               r.Attempts,
			Failures:               r.Failures,
			StartedAt:              utcPtr(r.StartedAt),
			FinishedAt:             utcPtr(r.FinishedAt),
			Reason:                 step.Code,
			ReasonText:             step.Text,
			Output:                 validJSON(r.Output, r.Name, "output", log),
			Compensation:           r.Compensation,
			CompensationAttempts:   r.CompensationAttempts,
			CompensationFailures:   r.CompensationFailures,
			CompensatedAt:          utcPtr(r.CompensatedAt),
			CompensationOutput:     validJSON(r.CompensationOutput, r.Name, "compensationOutput", log),
			CompensationReason:     undo.Code,
			CompensationReasonText: undo.Text,
		}
		if operator {
			h.Error, h.CompensationError = r.Error, r.CompensationError
		}
		s.Steps[i] = h
	}
	return s
}

// validJSON returns an Agent's output, or nil if it is not JSON: outputs are
// stored as they came, and one bad output must not turn the whole status
// into a 500.
func validJSON(out json.RawMessage, step, member string, log *slog.Logger) json.RawMessage {
	if len(out) == 0 || json.Valid(out) {
		return out
	}
	log.Warn("step "+member+" is not valid JSON; omitted", slog.String("step", step))
	return nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
