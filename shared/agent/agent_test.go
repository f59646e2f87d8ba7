package agent_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/step"
)

func TestPermanentClassification(t *testing.T) {
	t.Parallel()
	base := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain error is transient", base, false},
		{"permanent", step.Permanent(base), true},
		{"wrapped permanent", fmt.Errorf("ctx: %w", step.Permanent(base)), true},
		{"reject", step.Reject("out_of_stock", "none left"), true},
		{"breaker open is transient", &agent.OpenError{Endpoint: "x"}, false},
		{"remote error alone is transient", &agent.RemoteError{Status: 503}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := step.IsPermanent(tt.err); got != tt.want {
				t.Errorf("IsPermanent(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestFaultOf(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 2000)
	tests := []struct {
		name     string
		err      error
		wantCode string
		wantMsg  string
	}{
		{"nil", nil, agent.CodePermanent, ""},
		{"plain", step.Permanent(errors.New("bad input")), agent.CodePermanent, "permanent: bad input"},
		{"reject", step.Reject("out_of_stock", "none left"), "out_of_stock", "none left"},
		{"wrapped reject", fmt.Errorf("step: %w", step.Reject("card_declined", "declined")), "card_declined", "declined"},
		{"remote", step.Permanent(&agent.RemoteError{Status: 422, Code: "rejected", Message: "no"}), "rejected", "no"},
		{"blank code falls back", step.Reject("  ", "why"), agent.CodePermanent, "why"},
		{"invalid utf8 repaired", step.Reject("c\xff", "m\xfe"), "c\uFFFD", "m\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := agent.FaultOf(tt.err)
			if f.Code != tt.wantCode || f.Message != tt.wantMsg {
				t.Errorf("FaultOf = %+v, want {%s %s}", f, tt.wantCode, tt.wantMsg)
			}
		})
	}
	t.Run("bounded", func(t *testing.T) {
		t.Parallel()
		f := agent.FaultOf(step.Reject(long, long))
		if len(f.Code) > 64 || len(f.Message) > 1024 || !utf8.ValidString(f.Code) || !utf8.ValidString(f.Message) {
			t.Errorf("FaultOf not bounded: code %d bytes, message %d bytes", len(f.Code), len(f.Message))
		}
	})
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    error
		want   time.Duration
		wantOK bool
	}{
		{"plain", errors.New("x"), 0, false},
		{"open breaker", fmt.Errorf("try: %w", &agent.OpenError{Wait: 3 * time.Second}), 3 * time.Second, true},
		{"open breaker with probe in flight", &agent.OpenError{}, 0, false},
		{"remote Retry-After", &agent.RemoteError{Status: 429, Wait: time.Second}, time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := agent.RetryAfter(tt.err)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("RetryAfter = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
