package lambdart_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sasflow/sas/internal/testkit/lambdart"
	"github.com/sasflow/sas/shared/coldstart"
)

// runtimeVar makes the test binary itself the function under test: with it
// set, TestMain runs the runtime it names instead of the tests.
const runtimeVar = "LAMBDART_TEST_RUNTIME"

func TestMain(m *testing.M) {
	switch os.Getenv(runtimeVar) {
	case "":
		os.Exit(m.Run())
	case "echo":
		lambda.Start(echo)
	case "exit":
		os.Exit(3)
	case "init-error":
		coldstart.Check(slog.New(slog.DiscardHandler), "bad configuration", errors.New("QUEUE_URL is required"))
	}
}

type echoed struct {
	In        json.RawMessage `json:"in"`
	RequestID string          `json:"requestId"`
	ARN       string          `json:"arn"`
	Left      time.Duration   `json:"left"`
	Name      string          `json:"name"`
}

func echo(ctx context.Context, in json.RawMessage) (echoed, error) {
	switch string(in) {
	case `"fail"`:
		return echoed{}, errors.New("asked to fail")
	case `"hang"`:
		<-ctx.Done()
		time.Sleep(2 * time.Second)
		return echoed{}, ctx.Err()
	}
	lc, _ := lambdacontext.FromContext(ctx)
	deadline, _ := ctx.Deadline()
	return echoed{In: in, RequestID: lc.AwsRequestID, ARN: lc.InvokedFunctionArn,
		Left: time.Until(deadline), Name: lambdacontext.FunctionName}, nil
}

func start(t *testing.T, runtime string, timeout time.Duration) *lambdart.Function {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return lambdart.Start(t, exe, "fn-"+runtime, timeout, map[string]string{runtimeVar: runtime})
}

func TestInvocationsGetTheirEventsAndHeaders(t *testing.T) {
	t.Parallel()
	f := start(t, "echo", 30*time.Second)
	ids := map[string]bool{}
	for _, in := range []string{`{"n":1}`, `{"n":2}`} {
		res, err := f.Invoke(context.Background(), []byte(in))
		if err != nil || res.Error != nil {
			t.Fatalf("invoke %s: %v %v", in, err, res.Error)
		}
		var got echoed
		if err := json.Unmarshal(res.Response, &got); err != nil {
			t.Fatal(err)
		}
		if string(got.In) != in || got.RequestID != res.RequestID || ids[got.RequestID] {
			t.Errorf("got %+v for %s (request %s)", got, in, res.RequestID)
		}
		ids[got.RequestID] = true
		if got.ARN != "arn:aws:lambda:us-east-1:000000000000:function:fn-echo" || got.Name != "fn-echo" {
			t.Errorf("function ARN %q, name %q", got.ARN, got.Name)
		}
		if got.Left <= 25*time.Second || got.Left > 30*time.Second {
			t.Errorf("deadline %v away, want the 30 s timeout", got.Left)
		}
	}
}

func TestAnErrorAnswerIsRecorded(t *testing.T) {
	t.Parallel()
	f := start(t, "echo", 30*time.Second)
	res, err := f.Invoke(context.Background(), []byte(`"fail"`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Message != "asked to fail" || res.Error.Type == "" || res.Response != nil {
		t.Fatalf("result %+v, error %+v", res, res.Error)
	}
	// The function goes on serving.
	if res, err := f.Invoke(context.Background(), []byte(`{}`)); err != nil || res.Error != nil {
		t.Fatalf("after an error: %v %v", err, res.Error)
	}
}

func TestInitErrorIsReportedAndTheProcessExits(t *testing.T) {
	t.Parallel()
	f := start(t, "init-error", 30*time.Second)
	_, err := f.Invoke(context.Background(), []byte(`{}`))
	var ie *lambdart.InitError
	if !errors.As(err, &ie) || ie.Report == nil || ie.Exit == nil {
		t.Fatalf("invoke: %v, want an init error report and an exit", err)
	}
	if ie.Report.Type != coldstart.InitErrorType || ie.Report.Message != "bad configuration: QUEUE_URL is required" {
		t.Errorf("report %+v", ie.Report)
	}
	if len(f.InitErrors()) != 1 {
		t.Errorf("init errors %v", f.InitErrors())
	}
}

func TestAnExitBeforeTheFirstPollIsAnInitError(t *testing.T) {
	t.Parallel()
	f := start(t, "exit", 30*time.Second)
	_, err := f.Invoke(context.Background(), []byte(`{}`))
	var ie *lambdart.InitError
	if !errors.As(err, &ie) || ie.Report != nil || ie.Exit == nil || !strings.Contains(ie.Exit.Error(), "exit status 3") {
		t.Fatalf("invoke: %v, want Runtime.ExitError with status 3", err)
	}
}

func TestAnInvocationPastItsTimeoutFails(t *testing.T) {
	t.Parallel()
	f := start(t, "echo", 500*time.Millisecond)
	began := time.Now()
	_, err := f.Invoke(context.Background(), []byte(`"hang"`))
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("invoke: %v, want a timeout", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("timed out after %v", d)
	}
}
