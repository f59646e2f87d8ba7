// Package alert tells operators, over an SNS topic, about orders that need a
// person: a step failed for good, or a message could not be read at all.
package alert

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/topic"
	"github.com/sasflow/sas/shared/workflow"
)

// Kind tells what went wrong: the workflow's alert kinds, and poison
// messages.
type Kind = workflow.AlertKind

const (
	// KindPermanentFailure: an agent reported a non-transient fault, so
	// retrying the step cannot help.
	KindPermanentFailure = workflow.AlertPermanentFailure
	// KindRetriesExhausted: the Supervisor saw the step time out MaxFailures
	// times and stopped retrying it.
	KindRetriesExhausted = workflow.AlertRetriesExhausted
	// KindPoisonMessage: a message could not be processed at all and was
	// left to the queue's dead-letter queue.
	KindPoisonMessage Kind = "poison-message"
	// KindCompensationFailed: undoing a completed step failed permanently
	// or timed out too often; the order is CompensationFailed and its
	// effects are only partly undone.
	KindCompensationFailed = workflow.AlertCompensationFailed
	// KindDispatchFailed: the Scheduler could not send a step's (or an
	// undo's) request to its agent's queue MaxFailures times: a revoked
	// permission or key, or a deleted queue. The order stopped (its
	// compensation runs, or it is in Error), and every order using that
	// queue will stop the same way until the queue is fixed.
	KindDispatchFailed = workflow.AlertDispatchFailed
	// KindWorkflowMissing: an order is pinned to a workflow version the
	// deployment no longer runs; the Supervisor stopped it.
	KindWorkflowMissing = workflow.AlertWorkflowMissing
	// KindNotUndoable: an order stopped with a step that was applied, or
	// may have been, and has no undo: it waits in Error with nothing
	// undone, or an operator's cancel undid everything else.
	KindNotUndoable = workflow.AlertNotUndoable
	// KindWaiting: a step failed as often as its retry policy allows, and
	// the order waits before the step is tried again. A notice (severity
	// warning): the order goes on by itself.
	KindWaiting = workflow.AlertWaiting
)

// CLI is the operators' command line as an alert spells it out: the API URL
// the deployment passed (OPERATOR_API_URL), or $SAS_API_URL for the operator
// to set.
func CLI(apiURL string) string {
	if apiURL == "" {
		return "SAS_API_URL=<the stack's ApiUrl output> go run ./cmd/sasctl"
	}
	return "go run ./cmd/sasctl --endpoint-url " + apiURL
}

// MaxSubjectLen is the longest Subject returns: SNS wants fewer than 100
// characters.
const MaxSubjectLen = 99

// maxErrorLen caps LastError in the body: an operator reads the start of
// an error anyway, and every text the body quotes is clipped, so an alert
// stays far under SNS's message limit (topic.MaxBatchBytes, 256 KiB)
// whatever it quotes.
const maxErrorLen = 4096

// Alert is one event an operator must act on.
type Alert struct {
	Kind    Kind
	OrderID string
	// Workflow is the version the order is pinned to, when known.
	Workflow  string
	Step      string
	StepIndex int
	// FailureCount of MaxFailures allowed failures of the step so far.
	FailureCount, MaxFailures int
	// Attempt is the order's attempt counter when the alert was raised,
	// and State the record's state then: its confirmation is fenced on
	// both (workflow.Machine.AlertSent).
	Attempt   int
	State     workflow.ProcessState
	LastError string
	At        time.Time
	// MessageID is the SQS message ID of a poison message; it tells apart
	// alerts about poison messages that name no order.
	MessageID string
	// CLI is the operators' command line (see CLI); the body names the exact
	// commands to inspect and resubmit the order. Empty means CLI("").
	CLI string
}

// ID identifies the alert so consumers can drop a re-sent copy: the order
// ID and attempt, or for a poison message the SQS message ID, which a
// redelivery keeps. The not-undoable alert that goes with a
// compensation-failed one of the same attempt (workflow.AlertsOf) has its
// kind in its ID too.
func (a Alert) ID() string {
	switch {
	case a.Kind == KindPoisonMessage && a.MessageID != "":
		return "poison/" + a.MessageID
	case a.Kind == KindNotUndoable && a.State == workflow.CompensationFailed:
		return a.OrderID + "/" + strconv.Itoa(a.Attempt) + "/" + string(a.Kind)
	}
	return a.OrderID + "/" + strconv.Itoa(a.Attempt)
}

// Subject returns a one-line summary for the SNS Subject and e-mail subject
// lines: printable ASCII only and at most MaxSubjectLen characters, whatever
// the order ID, step name or kind hold.
func (a Alert) Subject() string {
	order := clip(subjectText(a.OrderID), 36)
	if order == "" {
		order = "(unknown)"
	}
	step := clip(subjectText(a.Step), 32)
	if step == "" {
		step = "step " + strconv.Itoa(a.StepIndex)
	}
	var s string
	switch a.Kind {
	case KindRetriesExhausted:
		s = fmt.Sprintf("Order %s failed: %s timed out %d times", order, step, a.FailureCount)
	case KindPermanentFailure:
		s = fmt.Sprintf("Order %s failed: %s failed permanently", order, step)
	case KindCompensationFailed:
		s = fmt.Sprintf("Order %s: undoing %s failed; act now", order, step)
	case KindDispatchFailed:
		s = fmt.Sprintf("Order %s stopped: %s could not be sent to its agent", order, step)
	case KindWorkflowMissing:
		s = fmt.Sprintf("Order %s stopped: workflow %s is not deployed", order, clip(subjectText(a.Workflow), 30))
	case KindNotUndoable:
		s = fmt.Sprintf("Order %s stopped at %s: an effect without undo may remain", order, step)
	case KindWaiting:
		s = fmt.Sprintf("Order %s waits: %s failed %d times; retried later", order, step, a.MaxFailures)
	case KindPoisonMessage:
		if a.OrderID == "" {
			s = "Poison message set aside"
			if id := clip(subjectText(a.MessageID), 40); id != "" {
				s += ": " + id
			}
		} else {
			s = fmt.Sprintf("Order %s: poison message set aside", order)
		}
	default:
		s = fmt.Sprintf("Order %s: %s alert", order, clip(subjectText(string(a.Kind)), 24))
	}
	return clip(s, MaxSubjectLen)
}

// subjectText maps s to printable ASCII: whitespace becomes a space and
// anything else outside ' '..'~' becomes '?'.
func subjectText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= ' ' && r <= '~':
			b.WriteRune(r)
		case unicode.IsSpace(r):
			b.WriteByte(' ')
		default:
			b.WriteByte('?')
		}
	}
	return strings.TrimSpace(b.String())
}

// clip shortens ASCII s to n bytes, marking the cut with "...".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.TrimRight(s[:n-3], " ") + "..."
}

// Body returns the plain-text message: what happened, the facts, and what
// the operator should do next.
func (a Alert) Body() string {
	order := bodyText(a.OrderID, 256)
	if order == "" {
		order = "(unknown)"
	}
	step := fmt.Sprintf("%q (index %d)", bodyText(a.Step, 256), a.StepIndex)
	if a.Step == "" {
		step = fmt.Sprintf("index %d", a.StepIndex)
	}
	lastErr := bodyText(a.LastError, maxErrorLen)
	if lastErr == "" {
		lastErr = "(none recorded)"
	}
	when := "(unknown)"
	if !a.At.IsZero() {
		when = a.At.UTC().Format(time.RFC3339)
	}

	var b strings.Builder
	a.writeHeadline(&b, order, step)
	b.WriteString("\n")
	field := func(name, value string) { fmt.Fprintf(&b, "%-12s %s\n", name+":", value) }
	field("Order", order)
	if a.Workflow != "" {
		field("Workflow", bodyText(a.Workflow, 64))
	}
	field("Step", step)
	if a.Kind == KindWaiting {
		// The count starts again for the step's next attempts.
		field("Failures", fmt.Sprintf("%d of %d allowed, before this wait", a.MaxFailures, a.MaxFailures))
	} else {
		field("Failures", fmt.Sprintf("%d of %d allowed", a.FailureCount, a.MaxFailures))
	}
	field("Attempt", strconv.Itoa(a.Attempt))
	if a.MessageID != "" {
		field("Message ID", bodyText(a.MessageID, 256))
	}
	field("Last error", strings.ReplaceAll(lastErr, "\n", "\n"+strings.Repeat(" ", 13)))
	field("When", when)
	field("Alert ID", bodyText(a.ID(), 512)+" (a repeat of this ID is the same alert)")
	a.writeNextSteps(&b, order, step)
	return b.String()
}

// writeHeadline writes the body's first line: what happened.
func (a Alert) writeHeadline(b *strings.Builder, order, step string) {
	switch a.Kind {
	case KindRetriesExhausted:
		fmt.Fprintf(b, "Order %s has failed: step %s timed out %d times, the most allowed is %d, so the Supervisor stopped retrying it.\n",
			order, step, a.FailureCount, a.MaxFailures)
	case KindPermanentFailure:
		fmt.Fprintf(b, "Order %s has failed: the agent for step %s reported a permanent fault, which retrying cannot fix.\n", order, step)
	case KindPoisonMessage:
		fmt.Fprintf(b, "A message for order %s could not be processed at all; it was left to the queue's dead-letter queue.\n", order)
	case KindCompensationFailed:
		fmt.Fprintf(b, "Order %s stopped, and undoing its step %s failed (%d of %d allowed failures): the order's effects are only partly undone (state CompensationFailed).\n",
			order, step, a.FailureCount, a.MaxFailures)
	case KindDispatchFailed:
		fmt.Fprintf(b, "Order %s stopped: the Scheduler could not send the request of step %s to its agent's queue %d times, the most allowed is %d. The order undoes what it may have done (state CompensationPending, then Compensated) or waits in Error. Every order that reaches this step's queue will fail the same way until it is fixed.\n",
			order, step, a.FailureCount, a.MaxFailures)
	case KindWorkflowMissing:
		fmt.Fprintf(b, "Order %s stopped at step %s: it is pinned to workflow version %s, which this deployment no longer runs (it was removed from shared/catalog/workflows.json while orders were still open on it).\n",
			order, step, bodyText(a.Workflow, 64))
	case KindNotUndoable:
		fmt.Fprintf(b, "Order %s stopped at step %s, and a step that was applied, or may have been, has no undo (the last error names it): the order cannot be undone whole. If it was cancelled, everything else was undone (state Cancelled); otherwise nothing was undone and it waits in Error for your decision.\n",
			order, step)
		if a.State == workflow.CompensationFailed {
			b.WriteString("It was cancelled, and undoing the rest then failed (state CompensationFailed): a compensation-failed alert of the same attempt says which undo. Once that undo is fixed and retried, the order ends Cancelled; the step without an undo stays applied either way.\n")
		}
	case KindWaiting:
		fmt.Fprintf(b, "Order %s is waiting: step %s failed %d times, as often as its retry policy allows, and the policy says to wait (state Waiting) before the Supervisor hands it back to the Scheduler. Nothing runs, and nothing is spent, while it waits. This is a notice: the order goes on by itself.\n",
			order, step, a.MaxFailures)
	default:
		fmt.Fprintf(b, "Order %s raised a %q alert.\n", order, bodyText(string(a.Kind), 64))
	}
}

// writeNextSteps writes what the operator should do, with the commands to
// paste.
func (a Alert) writeNextSteps(b *strings.Builder, order, step string) {
	cli := a.CLI
	if cli == "" {
		cli = CLI("")
	}
	// The commands are meant to be pasted: only an order ID that is one
	// shell word goes into them.
	id := a.OrderID
	if !shellSafe(id) {
		id = "ORDER_ID"
	}
	b.WriteString("\nWhat to do next:\n")
	switch a.Kind {
	case KindWaiting:
		fmt.Fprintf(b, "1. Nothing, if the fault is expected to heal (a partner's maintenance window): the step is tried again when the wait ends. See when:\n     %s show %s\n", cli, id)
		fmt.Fprintf(b, "2. If the service is back sooner, retry the step now, with a fresh failure count:\n     %s retry %s\n", cli, id)
		fmt.Fprintf(b, "3. If the order should not wait, cancel it; what it did is undone:\n     %s cancel %s\n", cli, id)
	case KindPoisonMessage:
		fmt.Fprintf(b, "1. Read the message from the dead-letter queue and find why it could not be processed (a bug or malformed input).\n")
		fmt.Fprintf(b, "2. Inspect order %s to see whether it is stuck:\n     %s show %s\n", order, cli, id)
		fmt.Fprintf(b, "3. Fix the cause, then resubmit order %s from its failed step, or redrive the message:\n     %s retry %s\n", order, cli, id)
	case KindDispatchFailed:
		fmt.Fprintf(b, "1. Read the last error above: the queue's SendMessage error (AccessDenied: the Scheduler role's sqs:SendMessage or its KMS grant; NonExistentQueue: the queue was deleted).\n")
		fmt.Fprintf(b, "2. Fix the queue or the Scheduler's permissions; its logs (\"dispatch failed\") and the dashboard's gave-up count show whether other orders are affected.\n")
		fmt.Fprintf(b, "3. Follow order %s to its end (Compensated, or Error to retry):\n     %s show %s\n", order, cli, id)
	case KindWorkflowMissing:
		fmt.Fprintf(b, "1. See which versions still have open orders:\n     %s workflows\n", cli)
		fmt.Fprintf(b, "2. Put version %s back into shared/catalog/workflows.json (as it was) and deploy.\n", bodyText(a.Workflow, 64))
		fmt.Fprintf(b, "3. Resubmit order %s; it carries on from step %s on its own version:\n     %s retry %s\n", order, step, cli, id)
	case KindNotUndoable:
		fmt.Fprintf(b, "1. Inspect order %s: its state, its steps and the last error, which names the step without an undo:\n     %s show %s\n", order, cli, id)
		fmt.Fprintf(b, "2. Check at that step's service whether its effect was applied (look it up under the idempotency key %s/<step>).\n", bodyText(a.OrderID, 256))
		fmt.Fprintf(b, "3. In Error: fix the cause and finish the order from the failed step %s (its service replays an effect it applied under the same key), or cancel it to undo the rest:\n     %s retry %s\n     %s cancel %s\n", step, cli, id, cli, id)
		fmt.Fprintf(b, "   Cancelled: undo by hand, at its service, what the step without an undo applied.\n")
	case KindCompensationFailed:
		fmt.Fprintf(b, "1. Inspect order %s: which steps were undone and why the undo of %s failed:\n     %s show %s\n", order, step, cli, id)
		if strings.HasPrefix(a.LastError, workflow.NotUndoablePrefix) {
			b.WriteString("   The last error names a step the order's cancel left applied, which has no undo (a not-undoable alert of the same attempt goes with this one); the undo's own error is in its step's history.\n")
		}
		fmt.Fprintf(b, "2. Fix the cause of the last error above (the agent, the service it calls, or the order's data).\n")
		fmt.Fprintf(b, "3. Resume the compensation from step %s with a fresh failure count:\n     %s retry %s\n", step, cli, id)
	default:
		fmt.Fprintf(b, "1. Inspect order %s: its state, step, attempt and last error:\n     %s show %s\n", order, cli, id)
		fmt.Fprintf(b, "2. Fix the cause of the last error above (the agent, the service it calls, or the order's data).\n")
		fmt.Fprintf(b, "3. Resubmit order %s from the failed step %s:\n     %s retry %s\n", order, step, cli, id)
	}
}

// shellSafe reports whether s can be pasted into a shell command as one word.
func shellSafe(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') {
			return false
		}
	}
	return true
}

// bodyText makes s valid UTF-8 without control characters other than
// newline and tab, at most n bytes long.
func bodyText(s string, n int) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || !unicode.IsControl(r) {
			return r
		}
		return '?'
	}, s)
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	cut := n - len(" [truncated]")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + " [truncated]"
}

// Publisher sends alerts to one SNS topic.
type Publisher struct{ topic topic.Topic }

// NewPublisher returns a Publisher to the topic.
func NewPublisher(c topic.Client, topicARN string) *Publisher {
	return &Publisher{topic: topic.Topic{Client: c, ARN: topicARN}}
}

// Publish sends the alert with message attributes kind, severity ("error"
// for what a person must act on, "warning" for a notice such as a waiting
// order; workflow.AlertKind.Severity), orderId (when known) and alertId,
// so subscribers can filter and de-duplicate: a pager's subscription
// takes severity "error" only with a filter policy.
func (p *Publisher) Publish(ctx context.Context, a Alert) error {
	kind := string(a.Kind)
	if kind == "" {
		kind = "unknown"
	}
	attrs := map[string]string{"kind": kind, "severity": string(a.Kind.Severity()), "alertId": a.ID()}
	// SNS rejects an empty attribute value.
	if a.OrderID != "" {
		attrs["orderId"] = a.OrderID
	}
	err := p.topic.Publish(ctx, topic.Message{Subject: a.Subject(), Body: a.Body(), Strings: attrs})
	if err != nil {
		return fmt.Errorf("publish %s alert %s to %s: %w", a.Kind, a.ID(), p.topic.ARN, err)
	}
	return nil
}
