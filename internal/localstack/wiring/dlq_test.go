package wiring_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/internal/localstack/sqsbridge"
	"github.com/sasflow/sas/internal/localstack/wiring"
	"github.com/sasflow/sas/internal/opsclient"
	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/workflow"
)

// outageStore fails the Scheduler's commits of Agent replies while down is
// set, as a DynamoDB that throttles or is unreachable would.
type outageStore struct {
	wiring.Store
	down *atomic.Bool
}

func (s outageStore) Apply(ctx context.Context, c workflow.Change) (workflow.State, error) {
	if c.CommitsReply() && s.down.Load() {
		return workflow.State{}, fmt.Errorf("%s %s: %w", c.Transition, c.OrderID, &types.ProvisionedThroughputExceededException{Message: aws.String("Rate of requests exceeds the allowed throughput")})
	}
	return s.Store.Apply(ctx, c)
}

// sasctlDLQ runs `sasctl dlq ...` against the test engine's SQS, as an
// operator would with --sqs-endpoint-url and no AWS credentials.
func sasctlDLQ(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	_, endpoint := enginetest.Endpoints(t)
	var out, errOut bytes.Buffer
	code = opsclient.Run(context.Background(), append([]string{"dlq"}, append(args, "--sqs-endpoint-url", endpoint)...), opsclient.Env{
		Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errOut,
		// Not the machine's credential chain, whoever runs the test.
		LoadAWSConfig: func(context.Context, string) (aws.Config, error) {
			return aws.Config{Region: enginetest.Region, Credentials: credentials.NewStaticCredentialsProvider("enginetest", "enginetest", "")}, nil
		},
	})
	return out.String(), errOut.String(), code
}

// depth reads a queue's visible and in-flight message counts.
func (e *env) depth(url string) (visible, inFlight int) {
	e.t.Helper()
	out, err := e.sqs.GetQueueAttributes(e.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		e.t.Fatal(err)
	}
	visible, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, inFlight
}

// TestOperatorRedrivesADeadLetteredReply: the Scheduler cannot commit an
// Agent's reply (its table throttles) until the reply outlives its
// receives and SQS moves it to the response queue's DLQ; a poison message
// lands in the scheduler queue's. `sasctl dlq list` shows both decoded
// with order, step, attempt and reason, without consuming them; after
// the table recovers, `sasctl dlq redrive` moves the reply back (a copy:
// fauxqs has no message move tasks), the Scheduler commits it, and the
// order completes with its DLQ empty.
func TestOperatorRedrivesADeadLetteredReply(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	down.Store(true)
	e := newEnv(t, envOptions{wrapStore: func(role string, s wiring.Store) wiring.Store {
		if role != "scheduler" {
			return s
		}
		return outageStore{Store: s, down: &down}
	}})
	prefix := strings.TrimSuffix(e.sys.ResponseQueue.Name, "-responses") + "-"
	id := e.submit("")
	e.sendRaw(e.sys.SchedulerQueue.URL, `{"v":99,"kind":"schedule"}`)

	// Pump until both have been received MaxReceiveCount times and the
	// next receive moved them to their DLQs.
	await.Until(t, 30*time.Second, "a reply and a poison message on their DLQs", func() (bool, error) {
		if _, err := e.sys.PumpOnce(e.ctx); err != nil && !errors.Is(err, sqsbridge.ErrBatchFailed) {
			t.Fatal(err)
		}
		replies, _ := e.depth(e.sys.ResponseQueue.DLQURL)
		poison, _ := e.depth(e.sys.SchedulerQueue.DLQURL)
		return replies == 1 && poison == 1, fmt.Errorf("DLQs hold %d replies and %d poison messages; order %s", replies, poison, brief(e.state(id)))
	})
	if st := e.state(id); st.ProcessState != workflow.Processing || st.StepIndex != 0 {
		t.Fatalf("before the redrive: %s", brief(st))
	}

	out, errOut, code := sasctlDLQ(t, "list", "--prefix", prefix)
	if code != 0 {
		t.Fatalf("dlq list = %d\n%s%s", code, out, errOut)
	}
	t.Logf("sasctl dlq list --prefix %s\n%s", prefix, out)
	for _, want := range []string{
		id, "agent.reply", "reserve-inventory", "succeeded", "not processed in 2 receives",
		"poison: no consumer can read it (poison message: unknown version 99)",
		"dlq redrive --queue responses --prefix " + prefix,
		"1 poison: a redrive brings them straight back",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dlq list does not say %q:\n%s", want, out)
		}
	}
	// The same, decoded, in JSON; and the peek consumed nothing.
	out, errOut, code = sasctlDLQ(t, "--json", "list", "--prefix", prefix, "--queue", "responses")
	var listed struct {
		Queues []struct {
			ID, Source      string
			Depth           int
			MaxReceiveCount int
			Messages        []struct {
				ReceiveCount int
				Body         struct {
					Kind, OrderID, Step, Outcome, Poison string
					StepIndex, Attempt                   int
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil || len(listed.Queues) != 1 || len(listed.Queues[0].Messages) != 1 {
		t.Fatalf("dlq list --json = %d (%v)\n%s%s", code, err, out, errOut)
	}
	q := listed.Queues[0]
	m := q.Messages[0]
	if q.ID != "responses" || q.Source != e.sys.ResponseQueue.Name || q.MaxReceiveCount != 2 || m.Body.Kind != "agent.reply" || m.Body.OrderID != id ||
		m.Body.Step != "reserve-inventory" || m.Body.StepIndex != 0 || m.Body.Attempt != 1 || m.Body.Poison != "" || m.ReceiveCount < 3 {
		t.Fatalf("listed %+v", q)
	}
	if visible, inFlight := e.depth(e.sys.ResponseQueue.DLQURL); visible != 1 || inFlight != 0 {
		t.Fatalf("after two peeks the DLQ holds %d visible and %d in flight, want 1 and 0", visible, inFlight)
	}

	// An unknown queue is "not found", naming the ones there are.
	if out, errOut, code = sasctlDLQ(t, "redrive", "--prefix", prefix, "--queue", "nope"); code != opsclient.ExitNotFound || !strings.Contains(errOut, "agent-reserve-inventory") {
		t.Fatalf("redrive of an unknown queue = %d\n%s%s", code, out, errOut)
	}

	// The table is back; the operator redrives the replies.
	down.Store(false)
	out, errOut, code = sasctlDLQ(t, "redrive", "--prefix", prefix, "--queue", "responses")
	if code != 0 || !strings.Contains(out, "Moved 1 message from") || !strings.Contains(errOut, "copying") {
		t.Fatalf("dlq redrive = %d\n%s%s", code, out, errOut)
	}
	e.settle()
	st := e.state(id)
	if st.ProcessState != workflow.Processed || st.Steps[0].Attempts != 1 || st.FailureCount != 0 {
		t.Fatalf("after the redrive: %s", brief(st))
	}
	e.assertEffectsOnce(id, "reserve-inventory", "charge-payment")
	if visible, inFlight := e.depth(e.sys.ResponseQueue.DLQURL); visible != 0 || inFlight != 0 {
		t.Fatalf("the DLQ still holds %d visible and %d in flight", visible, inFlight)
	}
	// The poison was left alone.
	if visible, _ := e.depth(e.sys.SchedulerQueue.DLQURL); visible != 1 {
		t.Fatalf("the scheduler queue's DLQ holds %d, want the poison message", visible)
	}
	if out, errOut, code = sasctlDLQ(t, "tasks", "--prefix", prefix, "--queue", "responses"); code != opsclient.ExitError || !strings.Contains(errOut, "does not support message move tasks") {
		t.Fatalf("dlq tasks on fauxqs = %d\n%s%s", code, out, errOut)
	}
}
