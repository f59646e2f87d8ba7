package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/step"
)

// sized is a JSON object of exactly size bytes whose one string is text
// repeated, padded with x.
func sized(text string, size int) string {
	const open, closing = `{"receipt":"`, `"}`
	n := size - len(open) - len(closing)
	fill := strings.Repeat(text, n/len(text))
	return open + fill + strings.Repeat("x", n-len(fill)) + closing
}

// TestAgentMeasuresTheOutputAsItTravels: the agent checks a step's output
// against its limit at the size it has in the reply and in every later
// message (compacted, nothing HTML-escaped, U+FFFE and U+FFFF escaped, which
// SQS does not carry), and the reply carries exactly those bytes.
func TestAgentMeasuresTheOutputAsItTravels(t *testing.T) {
	t.Parallel()
	const limit = 6 << 10
	for _, tc := range []struct {
		name string
		out  string
		// want is the reply's output; empty for a failure with wantCode.
		want, wantCode string
	}{
		{name: "markup at the limit", out: sized(`<b>&amp;</b>`, limit), want: sized(`<b>&amp;</b>`, limit)},
		{name: "markup one byte over", out: sized(`<b>&amp;</b>`, limit+1), wantCode: agent.CodeOutputTooLarge},
		{name: "four-byte UTF-8 and U+2028 at the limit", out: sized("😀é\u2028", limit), want: sized("😀é\u2028", limit)},
		{name: "four-byte UTF-8 one byte over", out: sized("😀é\u2028", limit+1), wantCode: agent.CodeOutputTooLarge},
		{name: "space the reply does not carry does not count", out: " " + sized("<>", limit) + "\n", want: sized("<>", limit)},
		// U+FFFF is three bytes as sent and six as carried: these two
		// are under the limit as sent.
		{name: "U+FFFF escaped reaches the limit", out: `{"a":"` + "\uFFFF" + strings.Repeat("x", limit-14) + `"}`,
			want: `{"a":"\uffff` + strings.Repeat("x", limit-14) + `"}`},
		{name: "U+FFFF escaped goes over", out: `{"a":"` + "\uFFFF" + strings.Repeat("x", limit-13) + `"}`, wantCode: agent.CodeOutputTooLarge},
		{name: "not UTF-8", out: "{\"a\":\"\xff\"}", wantCode: agent.CodeInvalidOutput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.MaxOutputBytes = limit
			hs := newHarness(t, cfg, step.Func(func(context.Context, agent.Request) (json.RawMessage, error) {
				return json.RawMessage(tc.out), nil
			}))
			if resp := hs.handle(t, record("m1", message.Encode(agentRequest("order-1", t0)))); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("failures %v", failedIDs(resp))
			}
			r := hs.out.replies()
			if len(r) != 1 {
				t.Fatalf("%d replies, want 1", len(r))
			}
			if tc.wantCode != "" {
				if r[0].Outcome != message.Failed || r[0].Fault.Code != tc.wantCode || !r[0].Fault.Uncertain || len(r[0].Output) != 0 {
					t.Fatalf("reply %+v, want an uncertain failure %s without output", r[0], tc.wantCode)
				}
				if tc.wantCode == agent.CodeOutputTooLarge && !strings.Contains(r[0].Fault.Message, fmt.Sprintf("over its limit of %d bytes", limit)) {
					t.Errorf("fault %q does not name the limit", r[0].Fault.Message)
				}
				return
			}
			if len(tc.want) != limit {
				t.Fatalf("the test's output has %d bytes, want %d", len(tc.want), limit)
			}
			if r[0].Outcome != message.Succeeded || string(r[0].Output) != tc.want {
				t.Fatalf("reply %s with %d bytes of output, want Succeeded with the %d bytes %.80s…", r[0].Outcome, len(r[0].Output), len(tc.want), tc.want)
			}
		})
	}
}
