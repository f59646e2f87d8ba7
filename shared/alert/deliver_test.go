package alert

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/workflow"
	"log/slog"
)

type senderFunc func(Alert) error

func (f senderFunc) Publish(_ context.Context, a Alert) error { return f(a) }

type confirmerFunc func(workflow.Change) error

func (f confirmerFunc) Apply(_ context.Context, c workflow.Change) (workflow.State, error) {
	return workflow.State{}, f(c)
}

// A record that owes two alerts about one attempt is confirmed only once
// both went out: a failed second publish leaves it owing both, for the
// Supervisor to send again.
func TestDeliverConfirmsOnlyOnceEveryAlertWentOut(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pair := []Alert{
		{Kind: KindCompensationFailed, OrderID: "o1", Attempt: 7, State: workflow.CompensationFailed},
		{Kind: KindNotUndoable, OrderID: "o1", Attempt: 7, State: workflow.CompensationFailed},
	}
	tests := []struct {
		name        string
		failKind    Kind
		wantSent    []Kind
		wantConfirm bool
	}{
		{"both go out", "", []Kind{KindCompensationFailed, KindNotUndoable}, true},
		{"the first fails", KindCompensationFailed, nil, false},
		{"the second fails", KindNotUndoable, []Kind{KindCompensationFailed}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var sent []Kind
			var confirmed []workflow.Change
			s := senderFunc(func(a Alert) error {
				if a.Kind == tc.failKind {
					return errors.New("throttled")
				}
				sent = append(sent, a.Kind)
				return nil
			})
			c := confirmerFunc(func(ch workflow.Change) error { confirmed = append(confirmed, ch); return nil })
			Deliver(context.Background(), s, c, pair, now, slog.New(slog.DiscardHandler))
			if len(sent) != len(tc.wantSent) {
				t.Fatalf("sent %v, want %v", sent, tc.wantSent)
			}
			for i := range sent {
				if sent[i] != tc.wantSent[i] {
					t.Fatalf("sent %v, want %v", sent, tc.wantSent)
				}
			}
			if got := len(confirmed) == 1; got != tc.wantConfirm || len(confirmed) > 1 {
				t.Fatalf("confirmed %d times, want confirmed %v", len(confirmed), tc.wantConfirm)
			}
			if tc.wantConfirm {
				if f := confirmed[0].Fence; f.Attempt == nil || *f.Attempt != 7 || len(f.In) != 1 || f.In[0] != workflow.CompensationFailed {
					t.Errorf("confirmation fenced on %+v, want attempt 7 in CompensationFailed", f)
				}
			}
		})
	}
}
