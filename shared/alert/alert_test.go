package alert

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sasflow/sas/shared/topic"
	"github.com/sasflow/sas/shared/workflow"
)

var at = time.Date(2026, 11, 22, 9, 41, 5, 0, time.UTC)

func exhausted() Alert {
	return Alert{
		Kind: KindRetriesExhausted, OrderID: "1a2b", Step: "charge-payment", StepIndex: 2,
		FailureCount: 3, MaxFailures: 3, Attempt: 4, LastError: "agent did not reply within 30s", At: at,
	}
}

// checkSubject asserts the SNS rules on a subject.
func checkSubject(t *testing.T, s string) {
	t.Helper()
	if s == "" || len(s) > MaxSubjectLen {
		t.Errorf("subject %q has %d characters, want 1..%d", s, len(s), MaxSubjectLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			t.Errorf("subject %q has byte %#x at %d, want printable ASCII", s, s[i], i)
			break
		}
	}
	if s != strings.TrimSpace(s) {
		t.Errorf("subject %q starts or ends with space", s)
	}
}

func TestSubject(t *testing.T) {
	long := strings.Repeat("x", 300)
	tests := []struct {
		name   string
		change func(*Alert)
		want   string // exact, or "" to check only the rules
	}{
		{"retries exhausted", func(*Alert) {}, "Order 1a2b failed: charge-payment timed out 3 times"},
		{"permanent failure", func(a *Alert) { a.Kind = KindPermanentFailure }, "Order 1a2b failed: charge-payment failed permanently"},
		{"poison with order", func(a *Alert) { a.Kind = KindPoisonMessage }, "Order 1a2b: poison message set aside"},
		{"poison without order", func(a *Alert) { a.Kind, a.OrderID, a.MessageID = KindPoisonMessage, "", "m-1" }, "Poison message set aside: m-1"},
		{"unknown kind", func(a *Alert) { a.Kind = "weird\nkind" }, "Order 1a2b: weird kind alert"},
		{"no order, no step", func(a *Alert) { a.OrderID, a.Step = "", "" }, "Order (unknown) failed: step 2 timed out 3 times"},
		{
			"uuid order", func(a *Alert) { a.OrderID = "123e4567-e89b-12d3-a456-426614174000" },
			"Order 123e4567-e89b-12d3-a456-426614174000 failed: charge-payment timed out 3 times",
		},
		{"long order", func(a *Alert) { a.OrderID = long }, "Order " + strings.Repeat("x", 33) + "... failed: charge-payment timed out 3 times"},
		{"long everything", func(a *Alert) { a.OrderID, a.Step, a.FailureCount = long, long, -1<<62 }, ""},
		{"line breaks and tabs", func(a *Alert) { a.OrderID, a.Step = "a\r\nb", "\tpay\n" }, "Order a  b failed: pay timed out 3 times"},
		{"non-ASCII", func(a *Alert) { a.OrderID, a.Step = "ordré…", "支払い" }, "Order ordr?? failed: ??? timed out 3 times"},
		{"control and invalid UTF-8", func(a *Alert) { a.OrderID, a.Step = "\x00\x1b[31m\xff", "\x7f" }, ""},
		{"only spaces", func(a *Alert) { a.Kind, a.OrderID, a.MessageID = KindPoisonMessage, "", "   " }, "Poison message set aside"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := exhausted()
			tc.change(&a)
			got := a.Subject()
			checkSubject(t, got)
			if tc.want != "" && got != tc.want {
				t.Errorf("Subject() = %q, want %q", got, tc.want)
			}
		})
	}
}

func FuzzSubject(f *testing.F) {
	f.Add("retries-exhausted", "1a2b", "charge-payment", "", 2, 3)
	f.Add("poison-message", "", "", "\xff\x00 id", 0, 0)
	f.Add("permanent-failure", strings.Repeat("é", 200), "\n\t", "", -1, -1<<63)
	f.Fuzz(func(t *testing.T, kind, orderID, step, messageID string, stepIndex, failures int) {
		a := Alert{Kind: Kind(kind), OrderID: orderID, Step: step, MessageID: messageID, StepIndex: stepIndex, FailureCount: failures}
		checkSubject(t, a.Subject())
		if b := a.Body(); !utf8.ValidString(b) {
			t.Errorf("Body() is not valid UTF-8: %q", b)
		}
	})
}

func TestBody(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Alert)
		want   []string
		not    []string
	}{
		{
			name:   "retries exhausted",
			change: func(*Alert) {},
			want: []string{
				"Order 1a2b has failed: step \"charge-payment\" (index 2) timed out 3 times, the most allowed is 3",
				"Failures:    3 of 3 allowed", "Attempt:     4", "Last error:  agent did not reply within 30s",
				"When:        2026-11-22T09:41:05Z", "Alert ID:    1a2b/4",
				"Inspect order 1a2b", "go run ./cmd/sasctl show 1a2b\n", "Fix the cause", "Resubmit order 1a2b from the failed step \"charge-payment\" (index 2)",
			},
		},
		{
			name:   "permanent failure",
			change: func(a *Alert) { a.Kind = KindPermanentFailure },
			want:   []string{"reported a permanent fault", "Resubmit order 1a2b", "go run ./cmd/sasctl retry 1a2b\n"},
		},
		{
			name:   "the deployment's API URL makes the commands ready to run",
			change: func(a *Alert) { a.CLI = CLI("https://abc.execute-api.eu-west-1.amazonaws.com") },
			want: []string{"     go run ./cmd/sasctl --endpoint-url https://abc.execute-api.eu-west-1.amazonaws.com show 1a2b\n",
				"     go run ./cmd/sasctl --endpoint-url https://abc.execute-api.eu-west-1.amazonaws.com retry 1a2b\n"},
			not: []string{"SAS_API_URL"},
		},
		{
			name:   "a compensation that failed says what is undone and how to resume",
			change: func(a *Alert) { a.Kind, a.FailureCount = KindCompensationFailed, 1 },
			want:   []string{"undoing its step \"charge-payment\" (index 2) failed", "CompensationFailed", "Resume the compensation", "sasctl retry 1a2b\n"},
		},
		{
			name:   "an order ID that is not one shell word stays out of the commands",
			change: func(a *Alert) { a.OrderID = "x; rm -rf /" },
			want:   []string{"sasctl show ORDER_ID\n"},
			not:    []string{"sasctl show x;"},
		},
		{
			name:   "poison message",
			change: func(a *Alert) { a.Kind, a.MessageID = KindPoisonMessage, "m-9" },
			want:   []string{"could not be processed", "dead-letter queue", "Message ID:  m-9", "Alert ID:    poison/m-9", "order 1a2b"},
		},
		{
			name:   "multi-line error with control characters",
			change: func(a *Alert) { a.LastError = "first\nsecond\x1b[0m\x00" },
			want:   []string{"Last error:  first\n             second?[0m?"},
			not:    []string{"\x1b", "\x00"},
		},
		{
			name:   "huge error",
			change: func(a *Alert) { a.LastError = strings.Repeat("é", 10000) },
			want:   []string{" [truncated]"},
		},
		{
			name:   "unknowns",
			change: func(a *Alert) { a.OrderID, a.Step, a.LastError, a.At = "", "", "", time.Time{} },
			want:   []string{"Order:       (unknown)", "Step:        index 2", "Last error:  (none recorded)", "When:        (unknown)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := exhausted()
			tc.change(&a)
			got := a.Body()
			for _, s := range tc.want {
				if !strings.Contains(got, s) {
					t.Errorf("Body() lacks %q:\n%s", s, got)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(got, s) {
					t.Errorf("Body() has %q:\n%s", s, got)
				}
			}
			if !utf8.ValidString(got) || len(got) > 8192 {
				t.Errorf("Body() is %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
			}
		})
	}
}

func TestID(t *testing.T) {
	tests := []struct {
		a    Alert
		want string
	}{
		{Alert{Kind: KindRetriesExhausted, OrderID: "o1", Attempt: 3}, "o1/3"},
		{Alert{Kind: KindPermanentFailure, OrderID: "o1", Attempt: 0}, "o1/0"},
		{Alert{Kind: KindPoisonMessage, OrderID: "o1", Attempt: 2, MessageID: "m"}, "poison/m"},
		{Alert{Kind: KindPoisonMessage, OrderID: "o1", Attempt: 2}, "o1/2"},
		{Alert{Kind: KindNotUndoable, OrderID: "o1", Attempt: 4, State: workflow.Cancelled}, "o1/4"},
		// Goes with a compensation-failed alert of the same attempt.
		{Alert{Kind: KindNotUndoable, OrderID: "o1", Attempt: 4, State: workflow.CompensationFailed}, "o1/4/not-undoable"},
		{Alert{Kind: KindCompensationFailed, OrderID: "o1", Attempt: 4, State: workflow.CompensationFailed}, "o1/4"},
	}
	for _, tc := range tests {
		if got := tc.a.ID(); got != tc.want {
			t.Errorf("%+v.ID() = %q, want %q", tc.a, got, tc.want)
		}
	}
}

type publishFunc func(*sns.PublishInput) (*sns.PublishOutput, error)

func (f publishFunc) Publish(_ context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	return f(in)
}

func TestPublish(t *testing.T) {
	const topic = "arn:aws:sns:us-east-1:123456789012:alerts"
	boom := errors.New("boom")
	tests := []struct {
		name      string
		alert     Alert
		err       error
		wantAttrs map[string]string
	}{
		{"order alert", exhausted(), nil, map[string]string{"kind": "retries-exhausted", "severity": "error", "orderId": "1a2b", "alertId": "1a2b/4"}},
		{"no order", Alert{Kind: KindPoisonMessage, MessageID: "m1"}, nil, map[string]string{"kind": "poison-message", "severity": "error", "alertId": "poison/m1"}},
		{"no kind", Alert{OrderID: "o"}, nil, map[string]string{"kind": "unknown", "severity": "error", "orderId": "o", "alertId": "o/0"}},
		// A waiting order is a notice: a subscription that pages filters
		// on severity "error" and is not woken for it.
		{"waiting notice", Alert{Kind: KindWaiting, OrderID: "o", Attempt: 6, MaxFailures: 3}, nil,
			map[string]string{"kind": "waiting", "severity": "warning", "orderId": "o", "alertId": "o/6"}},
		{"client error", exhausted(), boom, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var in *sns.PublishInput
			p := NewPublisher(publishFunc(func(i *sns.PublishInput) (*sns.PublishOutput, error) {
				in = i
				return &sns.PublishOutput{}, tc.err
			}), topic)
			err := p.Publish(context.Background(), tc.alert)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), topic) || !strings.Contains(err.Error(), tc.alert.ID()) {
					t.Fatalf("err = %v, want boom naming topic and alert", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if aws.ToString(in.TopicArn) != topic || aws.ToString(in.Subject) != tc.alert.Subject() || aws.ToString(in.Message) != tc.alert.Body() {
				t.Errorf("input = %+v", in)
			}
			got := map[string]string{}
			for k, v := range in.MessageAttributes {
				if aws.ToString(v.DataType) != "String" {
					t.Errorf("attribute %s has type %q", k, aws.ToString(v.DataType))
				}
				got[k] = aws.ToString(v.StringValue)
			}
			if len(got) != len(tc.wantAttrs) {
				t.Errorf("attributes = %v, want %v", got, tc.wantAttrs)
			}
			for k, v := range tc.wantAttrs {
				if got[k] != v {
					t.Errorf("attribute %s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// TestAlertFitsAnSNSMessage: the texts an alert quotes can come from a
// message of up to SQS's 1 MiB (an error quoting a body, a step or workflow
// name); the alert clips each, so what it publishes stays within SNS's
// 256 KiB, and far under it. The order ID (a valid one, or none) and the
// SQS message ID (SQS's own) are short by the time an alert names them;
// both go into attributes as they are, to match and de-duplicate on.
func TestAlertFitsAnSNSMessage(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("é", workflow.MaxMessageBytes/2)
	var in *sns.PublishInput
	p := NewPublisher(publishFunc(func(i *sns.PublishInput) (*sns.PublishOutput, error) {
		in = i
		return &sns.PublishOutput{}, nil
	}), "arn:aws:sns:us-east-1:123456789012:alerts")
	for _, kind := range []Kind{KindRetriesExhausted, KindPermanentFailure, KindPoisonMessage, KindCompensationFailed,
		KindDispatchFailed, KindWorkflowMissing, KindNotUndoable, Kind("some-new-kind")} {
		a := Alert{Kind: kind, OrderID: strings.Repeat("a", 64), Workflow: huge, Step: huge, StepIndex: 1 << 30,
			FailureCount: 1 << 30, MaxFailures: 1 << 30, Attempt: 1 << 30, LastError: huge, At: at, MessageID: strings.Repeat("m", 100),
			CLI: CLI("https://abcdefghij.execute-api.eu-west-1.amazonaws.com")}
		if err := p.Publish(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		size := len(aws.ToString(in.Message)) + len(aws.ToString(in.Subject))
		for name, v := range in.MessageAttributes {
			size += len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue))
		}
		if size > topic.MaxBatchBytes || size > 16<<10 {
			t.Errorf("%s: the alert takes %d bytes, over 16 KiB (SNS allows %d)", kind, size, topic.MaxBatchBytes)
		}
	}
}

func BenchmarkSubjectAndBody(b *testing.B) {
	a := exhausted()
	for b.Loop() {
		_ = a.Subject()
		_ = a.Body()
	}
}
