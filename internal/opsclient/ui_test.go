package opsclient

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sasflow/sas/internal/dlq"
)

// TestUI: `sasctl ui` hands the console the API's client and the queues
// chosen as the dlq commands choose them, a logger and the default idle
// timeout, and refuses to listen off loopback.
func TestUI(t *testing.T) {
	t.Parallel()
	sqsClient := sqs.New(sqs.Options{Region: "us-east-1"})
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		listen string
		scope  dlq.Scope
		noSQS  bool
	}{
		{"the defaults", []string{"ui"}, ExitOK, DefaultListen, dlq.StageScope("dev"), false},
		{"a stage and a port", []string{"ui", "--stage", "prod", "--listen", "127.0.0.1:8765"}, ExitOK, "127.0.0.1:8765", dlq.StageScope("prod"), false},
		{"the local stack's prefix", []string{"ui", "--prefix", "sas-local-1-", "--listen", "localhost:0"}, ExitOK, "localhost:0", dlq.PrefixScope("sas-local-1-"), false},
		{"no queues", []string{"ui", "--no-dlq", "--listen", "[::1]:0"}, ExitOK, "[::1]:0", dlq.Scope{}, true},
		{"every interface", []string{"ui", "--listen", "0.0.0.0:8765"}, ExitUsage, "", dlq.Scope{}, false},
		{"an empty host", []string{"ui", "--listen", ":8765"}, ExitUsage, "", dlq.Scope{}, false},
		{"another machine", []string{"ui", "--listen", "192.0.2.1:8765"}, ExitUsage, "", dlq.Scope{}, false},
		{"no port", []string{"ui", "--listen", "127.0.0.1"}, ExitUsage, "", dlq.Scope{}, false},
		{"a queue", []string{"ui", "--queue", "SchedulerQueue"}, ExitUsage, "", dlq.Scope{}, false},
		{"no-dlq with a stage", []string{"ui", "--no-dlq", "--stage", "dev"}, ExitUsage, "", dlq.Scope{}, false},
		{"an argument", []string{"ui", "now"}, ExitUsage, "", dlq.Scope{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got *UISession
			env := Env{SQSClient: sqsClient, UI: func(_ context.Context, s UISession) error { got = &s; return nil }}
			r := runCLI(t, env, nil, append([]string{"--endpoint-url", "http://127.0.0.1:8080"}, tc.args...)...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", r.code, tc.code, r.stdout, r.stderr)
			}
			if tc.code != ExitOK {
				if got != nil {
					t.Fatal("the console started")
				}
				return
			}
			if got == nil || got.Listen != tc.listen || got.Endpoint != "http://127.0.0.1:8080" || got.Client == nil || got.Client.creds == nil ||
				got.IdleTimeout != DefaultIdleTimeout || got.Log == nil {
				t.Fatalf("session %+v", got)
			}
			if tc.noSQS != (got.SQS == nil) || got.Scope != tc.scope {
				t.Fatalf("queues %v in scope %+v, want scope %+v", got.SQS, got.Scope, tc.scope)
			}
		})
	}
}

// TestUIIdleTimeout: --idle-timeout sets how long a console session lasts
// without a request; it takes Go's durations, and a session needs a
// positive one.
func TestUIIdleTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		arg  string
		code int
		want time.Duration
	}{
		{"10m", ExitOK, 10 * time.Minute},
		{"2h", ExitOK, 2 * time.Hour},
		{"0s", ExitUsage, 0},
		{"-5m", ExitUsage, 0},
		{"30", ExitUsage, 0},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			t.Parallel()
			var got *UISession
			env := Env{UI: func(_ context.Context, s UISession) error { got = &s; return nil }}
			r := runCLI(t, env, nil, "--endpoint-url", "http://127.0.0.1:8080", "ui", "--no-dlq", "--idle-timeout", tc.arg)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", r.code, tc.code, r.stdout, r.stderr)
			}
			if tc.code == ExitOK && (got == nil || got.IdleTimeout != tc.want) {
				t.Fatalf("session %+v, want an idle timeout of %v", got, tc.want)
			}
			if tc.code != ExitOK && got != nil {
				t.Fatal("the console started")
			}
		})
	}
}
