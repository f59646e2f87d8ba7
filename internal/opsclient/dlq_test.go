package opsclient

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sasflow/sas/internal/dlq"
	"github.com/sasflow/sas/shared/message"
)

var update = flag.Bool("update", false, "rewrite the golden terminal outputs in testdata")

// checkGolden compares got with testdata/name; -update rewrites it.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestDLQUsageErrors(t *testing.T) {
	t.Parallel()
	noConfig := Env{LoadAWSConfig: func(context.Context, string) (aws.Config, error) { return aws.Config{}, nil }}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no action", []string{"dlq"}, "dlq needs an action"},
		{"unknown action", []string{"dlq", "purge"}, `unknown dlq action "purge"`},
		{"redrive without a queue", []string{"dlq", "redrive"}, "dlq redrive needs --queue"},
		{"tasks without a queue", []string{"dlq", "tasks"}, "dlq tasks needs --queue"},
		{"stage and prefix", []string{"dlq", "list", "--stage", "dev", "--prefix", "x-"}, "exclude each other"},
		{"bad stage", []string{"dlq", "list", "--stage", "Dev"}, `--stage "Dev" is no stage name`},
		{"too many peeks", []string{"dlq", "list", "--max", "101"}, "--max 101 outside 0..100"},
		{"too fast", []string{"dlq", "redrive", "--queue", "q", "--max-per-second", "501"}, "--max-per-second 501 outside 1..500"},
		{"unknown method", []string{"dlq", "redrive", "--queue", "q", "--method", "fast"}, `--method "fast" is none of auto, task, copy`},
		{"arguments", []string{"dlq", "list", "extra"}, `takes no arguments`},
		{"plain http", []string{"dlq", "list", "--sqs-endpoint-url", "http://sqs.example.com"}, "refusing plain http to sqs.example.com"},
		{"no region", []string{"dlq", "list"}, "no region for SQS"},
		{"a flag of another action", []string{"dlq", "list", "--method", "copy"}, "flag provided but not defined: -method"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, noConfig, nil, tc.args...)
			if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant %q", r.code, r.stderr, tc.want)
			}
		})
	}
	r := runCLI(t, noConfig, nil, "dlq", "--help")
	if r.code != ExitOK || !strings.Contains(r.stdout, "dlq redrive --queue NAME") {
		t.Fatalf("dlq --help = %d\n%s", r.code, r.stdout)
	}
}

func TestWriteDLQs(t *testing.T) {
	t.Parallel()
	sent := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	reports := []queueReport{
		{ID: "ChargePaymentQueue", Source: "SchedulerAgentSupervisor-dev-ChargePaymentQueue", DLQ: "SchedulerAgentSupervisor-dev-ChargePaymentQueueDLQ5E3C-x1y2", MaxReceiveCount: 5},
		{ID: "ResponseQueue", Source: "SchedulerAgentSupervisor-dev-ResponseQueue", DLQ: "SchedulerAgentSupervisor-dev-ResponseQueueDLQ9A1B-a1b2", MaxReceiveCount: 5, Depth: 2,
			Messages: []dlq.Message{
				{ID: "5b0c-reply", SentAt: sent, ReceiveCount: 6, SourceARN: "arn:aws:sqs:eu-west-1:111122223333:SchedulerAgentSupervisor-dev-ResponseQueue",
					Body: dlq.Body{Kind: message.KindAgentReply, OrderID: "3f2c1a9e-7b4d-4e21-9c3a-5d8e6f7a8b90", Step: "charge-payment", StepIndex: 1, Attempt: 2, Outcome: message.Failed, FaultCode: "declined"}},
				{ID: "77aa-poison", SentAt: sent.Add(time.Minute), ReceiveCount: 6, Body: dlq.Body{Poison: "poison message: unknown version 2\x1b[31m"}},
			}},
		{ID: "SchedulerQueue", Source: "SchedulerAgentSupervisor-dev-SchedulerQueue", DLQ: "SchedulerAgentSupervisor-dev-SchedulerQueueDLQ77C1-c3d4", MaxReceiveCount: 5, Depth: 1,
			Messages: []dlq.Message{{ID: "91ee-schedule", SentAt: sent, ReceiveCount: 7,
				Body: dlq.Body{Kind: message.KindSchedule, OrderID: "3f2c1a9e-7b4d-4e21-9c3a-5d8e6f7a8b90", StepIndex: 0, Reason: "submitted"}}}},
	}
	var b bytes.Buffer
	if err := writeDLQs(&b, "stage dev", reports, dlqHint{prefix: "sasctl", flags: "--stage dev"}); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "dlq-list.txt", b.String())
	b.Reset()
	if err := writeDLQs(&b, "prefix x-", nil, dlqHint{prefix: "sasctl"}); err != nil || b.String() != "No dead-letter queues found for prefix x-.\n" {
		t.Fatalf("no queues: %q, %v", b.String(), err)
	}
}
