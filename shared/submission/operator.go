package submission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/followup"
	"github.com/sasflow/sas/shared/trace"
	"github.com/sasflow/sas/shared/workflow"
)

// cancelTries bounds how often a cancel re-reads a record that changed under
// it. A Scheduler claiming or advancing the order is no reason to fail the
// cancel, but an order that keeps changing is not worth holding the request
// open for.
const cancelTries = 3

// retryOrder resubmits an order an operator fixed the cause of. It tries
// once: of two operators retrying the same order exactly one must win, so a
// record that changed since it was read is a 409, not a reason to try again.
func (h *Handler) retryOrder(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, a args) events.APIGatewayV2HTTPResponse {
	orderID := a.orderID
	log = log.With(callerAttr(req))
	st, resp, ok := h.readState(ctx, log, req, orderID)
	if !ok {
		return resp
	}
	ctx, log = trace.Join(ctx, log, trace.Stored(st.Trace))
	now := h.clk.Now().UTC()
	mach, err := h.machine(st.Workflow)
	if err != nil {
		return h.reject(ctx, log, req, notDeployedProblem(orderID, err), nil)
	}
	c, err := mach.Resubmit(st, now)
	if err != nil {
		if !errors.Is(err, workflow.ErrConflict) {
			return h.internal(ctx, log, req, fmt.Errorf("plan resubmission of %s: %w", orderID, err))
		}
		return h.reject(ctx, log, req, problem(http.StatusConflict, ProblemConflict, fmt.Sprintf(
			"order %s is %s; only orders in %s, %s or %s can be retried", orderID, st.ProcessState, workflow.Error, workflow.Waiting, workflow.CompensationFailed)), nil)
	}
	written, err := h.store.Apply(ctx, c)
	switch {
	case errors.Is(err, workflow.ErrStale):
		return h.reject(ctx, log, req, changedProblem(orderID), nil)
	case errors.Is(err, workflow.ErrNotFound):
		return h.reject(ctx, log, req, notFoundProblem(orderID), nil)
	case err != nil:
		return h.internal(ctx, log, req, fmt.Errorf("resubmit %s from %s: %w", orderID, st.ProcessState, err))
	}
	h.followUp(ctx, log.With(slog.String("from", string(st.ProcessState))), c, written, now)
	return accepted(orderID, written.ProcessState, false)
}

// cancelOrder stops an order still going forward, or closes one in Error,
// undoing whatever may have been applied. Repeating a cancel that already
// took effect answers 202 again, so a client may retry it safely.
func (h *Handler) cancelOrder(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, a args) events.APIGatewayV2HTTPResponse {
	orderID := a.orderID
	log = log.With(callerAttr(req))
	for try := 1; ; try++ {
		st, resp, ok := h.readState(ctx, log, req, orderID)
		if !ok {
			return resp
		}
		if try == 1 {
			ctx, log = trace.Join(ctx, log, trace.Stored(st.Trace))
		}
		if !workflow.CanCancel(st) {
			if st.Cancelled {
				log.InfoContext(ctx, "order already cancelled", slog.String("state", string(st.ProcessState)))
				return accepted(orderID, st.ProcessState, false)
			}
			return h.reject(ctx, log, req, problem(http.StatusConflict, ProblemConflict, fmt.Sprintf(
				"order %s is %s; only orders in %s, %s, %s or %s can be cancelled", orderID, st.ProcessState, workflow.Pending, workflow.Processing, workflow.Waiting, workflow.Error)), nil)
		}

		now := h.clk.Now().UTC()
		mach, err := h.machine(st.Workflow)
		if err != nil {
			return h.reject(ctx, log, req, notDeployedProblem(orderID, err), nil)
		}
		c, err := mach.Cancel(st, now, now.Add(h.cfg.ClaimTimeout))
		if err != nil {
			return h.internal(ctx, log, req, fmt.Errorf("plan the cancel of %s: %w", orderID, err))
		}
		written, err := h.store.Apply(ctx, c)
		switch {
		case errors.Is(err, workflow.ErrStale) && try < cancelTries:
			log.DebugContext(ctx, "order changed while cancelling; reading it again", slog.Int("try", try))
			continue
		case errors.Is(err, workflow.ErrStale):
			return h.reject(ctx, log, req, problem(http.StatusConflict, ProblemConflict, fmt.Sprintf(
				"order %s kept changing while it was being cancelled; try again", orderID)), nil)
		case errors.Is(err, workflow.ErrNotFound):
			return h.reject(ctx, log, req, notFoundProblem(orderID), nil)
		case err != nil:
			return h.internal(ctx, log, req, fmt.Errorf("cancel %s in %s at step %d: %w", orderID, st.ProcessState, st.StepIndex, err))
		}
		h.followUp(ctx, log.With(slog.String("from", string(st.ProcessState))), c, written, now)
		return accepted(orderID, written.ProcessState, false)
	}
}

// machine is the state machine of the workflow version id (an order's
// pinned one) as far as the Submission needs it: of the policy, the claim
// timeout and the retention.
func (h *Handler) machine(id string) (workflow.Machine, error) {
	return h.cfg.Workflows.Machine(id, h.policy())
}

func (h *Handler) policy() workflow.Policy {
	return workflow.Policy{ClaimTimeout: h.cfg.ClaimTimeout, Retention: h.cfg.Retention}
}

// notDeployedProblem answers a retry or cancel of an order pinned to a
// workflow version the deployment no longer runs: nothing can move it on
// until the version is deployed again.
func notDeployedProblem(orderID string, err error) Problem {
	return problem(http.StatusConflict, ProblemConflict, fmt.Sprintf(
		"order %s cannot be changed: %v; deploy that version again (shared/catalog/workflows.json), then retry", orderID, err))
}

// followUp logs a committed change, delivers the alert it owes (a cancel
// past a step without an undo) through the record's outbox, and hands its
// order to the Scheduler. A failed send or publish is only logged: the
// record is durable, unclaimed and owes what it owes, so the Supervisor
// re-sends it once its deadline passes.
func (h *Handler) followUp(ctx context.Context, log *slog.Logger, c workflow.Change, st workflow.State, now time.Time) {
	f := followup.Actions{Send: h.sender, SchedulerQueueURL: h.cfg.SchedulerQueueURL, Alerts: h.alerts, Confirm: h.store}
	_ = f.After(ctx, c, st, now, log)
}

// readState reads the record of a route's order: a missing order is the
// client's mistake (404), any other failure ours (500). When ok is false,
// resp is the answer.
func (h *Handler) readState(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, orderID string) (st workflow.State, resp events.APIGatewayV2HTTPResponse, ok bool) {
	st, err := h.store.GetState(ctx, orderID)
	switch {
	case errors.Is(err, workflow.ErrNotFound):
		return st, h.reject(ctx, log, req, notFoundProblem(orderID), nil), false
	case err != nil:
		return st, h.internal(ctx, log, req, fmt.Errorf("read state of order %s: %w", orderID, err)), false
	}
	return st, resp, true
}

func notFoundProblem(orderID string) Problem {
	return problem(http.StatusNotFound, ProblemNotFound, "no order with ID "+orderID)
}

func changedProblem(orderID string) Problem {
	return problem(http.StatusConflict, ProblemConflict, fmt.Sprintf(
		"order %s was changed by another request; read it again", orderID))
}

// callerAttr names the IAM principal behind an operator request, for the
// audit trail; the stack restricts these routes to IAM-signed calls.
func callerAttr(req events.APIGatewayV2HTTPRequest) slog.Attr {
	if a := req.RequestContext.Authorizer; a != nil && a.IAM != nil && a.IAM.UserARN != "" {
		return slog.String("caller", a.IAM.UserARN)
	}
	return slog.Attr{} // an empty Attr is dropped by every slog handler

}
