package wiring_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/localstack/wiring"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/remote"
	"github.com/sasflow/sas/shared/workflow"
)

// posted records the bodies of the remote calls, by path.
type posted struct {
	mu     sync.Mutex
	bodies map[string][][]byte
}

func (p *posted) add(path string, body []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bodies == nil {
		p.bodies = map[string][][]byte{}
	}
	p.bodies[path] = append(p.bodies[path], body)
}

func (p *posted) to(path string) [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bodies[path]
}

// answering serves the simulator (which applies the effect once per key),
// except that a successful call of step answers output, and records every
// call's body in calls.
func answering(step, output string, calls *posted) func(*remotesim.Sim) http.Handler {
	return func(sim *remotesim.Sim) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			calls.add(r.URL.Path, body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			rec := httptest.NewRecorder()
			sim.ServeHTTP(rec, r)
			if r.URL.Path == remote.StepPath(step) && rec.Code == http.StatusOK {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, output)
				return
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		})
	}
}

// sentTo records the messages a role's handler sends, then sends them.
type sentTo struct {
	next wiring.Sender
	mu   sync.Mutex
	sent []string
}

func (s *sentTo) Send(ctx context.Context, queueURL, body string, delay time.Duration) error {
	s.mu.Lock()
	s.sent = append(s.sent, body)
	s.mu.Unlock()
	return s.next.Send(ctx, queueURL, body, delay)
}

// requests are the agent requests for step among the messages sent.
func (s *sentTo) requests(t *testing.T, step string) []message.AgentRequest {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []message.AgentRequest
	for _, body := range s.sent {
		if k, err := message.Peek(body); err != nil || k != message.KindAgentRequest {
			continue
		}
		m, err := message.DecodeAgentRequest(body)
		if err != nil {
			t.Fatalf("sent an invalid agent request %s: %v", body, err)
		}
		if m.Step == step {
			out = append(out, m)
		}
	}
	return out
}

// filledOutput is a JSON object of exactly size bytes whose one string is
// text repeated, padded with x.
func filledOutput(text string, size int) string {
	const open, closing = `{"receipt":"`, `"}`
	n := size - len(open) - len(closing)
	fill := strings.Repeat(text, n/len(text))
	return open + fill + strings.Repeat("x", n-len(fill)) + closing
}

// TestAnOutputsSizeIsTheSameNumberEverywhere: a step's output is measured
// against its limit as the bytes the remote sent, and those are the bytes
// the reply carries, the Scheduler measures again, the record keeps and the
// next step's request (the queue message and the remote call) carries.
// Markup (<, >, &) and U+2028/U+2029 are not escaped on the way, which
// would make an output at its limit six times as long by the Scheduler's
// count; multi-byte UTF-8 counts in bytes everywhere.
func TestAnOutputsSizeIsTheSameNumberEverywhere(t *testing.T) {
	t.Parallel()
	const limit = 6 << 10
	def := workflow.Reference()
	def.Steps[0].MaxOutputBytes = limit
	first, next := def.Steps[0].Name, def.Steps[1].Name
	for _, tc := range []struct {
		name, text string
		size       int
	}{
		{"markup at the limit", `<b class='x'>&amp;</b>`, limit},
		{"markup one byte over", `<b class='x'>&amp;</b>`, limit + 1},
		// Two- and three-byte characters only: fauxqs (1.9.2) refuses a
		// message with a character over U+FFFF, which SQS takes (see
		// shared/jsonwire); the agent's and the Scheduler's own tests
		// send four-byte ones.
		{"multi-byte UTF-8 at the limit", "é€ü\u2028\u2029", limit},
		{"multi-byte UTF-8 one byte over", "é€ü\u2028\u2029", limit + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			output := filledOutput(tc.text, tc.size)
			if len(output) != tc.size || !json.Valid([]byte(output)) {
				t.Fatalf("the test's output has %d bytes, want %d of JSON", len(output), tc.size)
			}
			calls := &posted{}
			scheduler := &sentTo{}
			e := newEnv(t, envOptions{workflow: def, remote: answering(first, output, calls), wrapSender: tapScheduler(scheduler)})
			id := e.submit("")
			st := e.runToTerminal(id, 5)
			if e.sim.EffectCount(workflow.IdempotencyKey(id, first)) != 1 {
				t.Fatalf("the remote did not apply %s: the test is broken", first)
			}

			if tc.size > limit {
				// Refused where it enters, by the count the remote's bytes give.
				want := fmt.Sprintf("has %d bytes, over its limit of %d bytes", tc.size, limit)
				if st.ProcessState != workflow.Compensated || !strings.Contains(st.Steps[0].Error, want) || len(st.Steps[0].Output) != 0 {
					t.Fatalf("final %s; want Compensated with %q and no output kept", brief(st), want)
				}
				if n := len(calls.to(remote.StepPath(next))); n != 0 {
					t.Errorf("%s was called %d times after its previous step was refused", next, n)
				}
				e.assertNetZero(id, first, next)
				return
			}

			if st.ProcessState != workflow.Processed {
				t.Fatalf("final %s, want Processed: an output at its limit is committed", brief(st))
			}
			if got := string(st.Steps[0].Output); got != output {
				t.Errorf("the record keeps %d bytes, want the %d the remote sent", len(got), len(output))
			}
			reqs := scheduler.requests(t, next)
			if len(reqs) == 0 {
				t.Fatalf("the Scheduler sent no request for %s", next)
			}
			for _, m := range reqs {
				if got := string(m.Previous[first]); got != output {
					t.Errorf("the queued request for %s carries %d bytes of %s's output, want the %d the remote sent", next, len(got), first, len(output))
				}
			}
			bodies := calls.to(remote.StepPath(next))
			if len(bodies) == 0 {
				t.Fatalf("%s was never called", next)
			}
			for _, b := range bodies {
				var req remote.StepRequest
				if err := json.Unmarshal(b, &req); err != nil {
					t.Fatalf("the call of %s: %v", next, err)
				}
				if got := string(req.Previous[first]); got != output {
					t.Errorf("the call of %s carries %d bytes of %s's output, want the %d the remote sent", next, len(got), first, len(output))
				}
			}
			e.assertEffectsOnce(id, first, next)
		})
	}
}

// TestAnOutputOver256KiBTravels: SQS carries messages of up to 1 MiB, so an
// output of 300 KiB, within its step's limit in a definition Validate
// accepts (the record's worst case fits a DynamoDB item), goes through the
// Agent's reply, the Scheduler's commit, the record, and the next step's
// request and call, each over 256 KiB.
func TestAnOutputOver256KiBTravels(t *testing.T) {
	t.Parallel()
	const size = 300 << 10
	def := workflow.Reference()
	def.Steps[0].MaxOutputBytes, def.Steps[0].Compensable = size, false
	if err := def.Validate(); err != nil {
		t.Fatalf("the test's definition is refused: %v", err)
	}
	first, next := def.Steps[0].Name, def.Steps[1].Name
	output := filledOutput("receipt ", size)
	calls := &posted{}
	scheduler := &sentTo{}
	e := newEnv(t, envOptions{workflow: def, remote: answering(first, output, calls), wrapSender: tapScheduler(scheduler)})
	id := e.submit("")
	st := e.runToTerminal(id, 5)
	if st.ProcessState != workflow.Processed || string(st.Steps[0].Output) != output {
		t.Fatalf("final %s with %d bytes of %s's output, want Processed with the %d the remote sent", brief(st), len(st.Steps[0].Output), first, size)
	}
	reqs := scheduler.requests(t, next)
	if len(reqs) == 0 {
		t.Fatalf("the Scheduler sent no request for %s", next)
	}
	for _, m := range reqs {
		if body := message.Encode(m); len(body) <= 256<<10 || string(m.Previous[first]) != output {
			t.Errorf("the request for %s has %d bytes, carrying %d of %s's output; want over 256 KiB with all %d", next, len(body), len(m.Previous[first]), first, size)
		}
	}
	for _, b := range calls.to(remote.StepPath(next)) {
		var req remote.StepRequest
		if err := json.Unmarshal(b, &req); err != nil || string(req.Previous[first]) != output {
			t.Errorf("the call of %s carries %d bytes of %s's output (%v), want %d", next, len(req.Previous[first]), first, err, size)
		}
	}
	e.assertEffectsOnce(id, first, next)
}

// TestEveryLocalQueueTakesAnSQSMessage: the local stack's queues, and their
// dead-letter queues, take messages of up to SQS's 1 MiB, as the deployed
// ones do (the stack sets MaximumMessageSize; the local stack leaves the
// engine's default, which must be as large).
func TestEveryLocalQueueTakesAnSQSMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	queues := []wiring.Queue{e.sys.SchedulerQueue, e.sys.ResponseQueue, e.sys.DeadlineQueue}
	for _, q := range e.sys.AgentQueues {
		queues = append(queues, q)
	}
	for _, q := range queues {
		for _, url := range []string{q.URL, q.DLQURL} {
			out, err := e.sqs.GetQueueAttributes(e.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
				AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameMaximumMessageSize}})
			if err != nil {
				t.Fatal(err)
			}
			if n, err := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameMaximumMessageSize)]); err != nil || n < workflow.MaxMessageBytes {
				t.Errorf("%s: MaximumMessageSize %q, want at least %d", url, out.Attributes[string(sqstypes.QueueAttributeNameMaximumMessageSize)], workflow.MaxMessageBytes)
			}
		}
	}
}

// tapScheduler puts tap in front of the Scheduler's sender, to see what it
// sends.
func tapScheduler(tap *sentTo) func(role string, s wiring.Sender) wiring.Sender {
	return func(role string, s wiring.Sender) wiring.Sender {
		if role != "scheduler" {
			return s
		}
		tap.next = s
		return tap
	}
}
