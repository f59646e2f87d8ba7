package opsclient

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sasflow/sas/shared/api"
)

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the CLI in-process with env as its whole environment.
func runCLI(t *testing.T, env Env, vars map[string]string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	env.Getenv = func(k string) string { return vars[k] }
	env.Stdout, env.Stderr = &out, &errOut
	if env.LoadAWSConfig == nil {
		// A machine without AWS configuration: no credentials, no region.
		// The fake API is on loopback, so the CLI signs as LocalAccessKey.
		env.LoadAWSConfig = func(context.Context, string) (aws.Config, error) { return aws.Config{}, nil }
	}
	code := Run(context.Background(), args, env)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

type cliCase struct {
	name       string
	args       []string
	code       int
	stdout     []string // substrings, in this order
	stderr     []string
	notStdout  []string
	requests   int // requests the fake API must have served; -1 for any
	lastMethod string
	lastPath   string
}

func (tc cliCase) check(t *testing.T, r result, f *fakeAPI) {
	t.Helper()
	if r.code != tc.code {
		t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, r.stdout, r.stderr)
	}
	containsInOrder(t, "stdout", r.stdout, tc.stdout)
	containsInOrder(t, "stderr", r.stderr, tc.stderr)
	for _, s := range tc.notStdout {
		if strings.Contains(r.stdout, s) {
			t.Errorf("stdout contains %q:\n%s", s, r.stdout)
		}
	}
	reqs := f.recorded()
	if tc.requests >= 0 && len(reqs) != tc.requests {
		t.Errorf("%d requests served, want %d", len(reqs), tc.requests)
	}
	if tc.lastPath != "" && len(reqs) > 0 {
		last := reqs[len(reqs)-1]
		if last.Method != tc.lastMethod || last.URL.Path != tc.lastPath {
			t.Errorf("last request %s %s, want %s %s", last.Method, last.URL.Path, tc.lastMethod, tc.lastPath)
		}
	}
	if tc.code == ExitOK && r.stderr != "" {
		t.Errorf("stderr on success: %s", r.stderr)
	}
	if tc.code != ExitOK && tc.code != ExitUsage && r.stdout != "" {
		t.Errorf("stdout on failure: %s", r.stdout)
	}
}

func containsInOrder(t *testing.T, name, got string, want []string) {
	t.Helper()
	rest := got
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Errorf("%s lacks %q (in order):\n%s", name, w, got)
			return
		}
		rest = rest[i+len(w):]
	}
}

func runCases(t *testing.T, cases []cliCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, 5)
			srv := f.server()
			r := runCLI(t, Env{}, map[string]string{"SAS_API_URL": srv.URL}, tc.args...)
			tc.check(t, r, f)
		})
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	runCases(t, []cliCase{
		{name: "one page", args: []string{"list", "--state", "Error"}, code: ExitOK, requests: 1,
			stdout:    []string{"ORDER ID", "STATE", "STEP", "FAILURES", "UPDATED", "LAST ERROR", "err-04    Error  high      charge-payment  3", "2026-11-22T12:04:00Z", "payment service: 503", "err-03", "err-02", "err-01", "err-00", "Details: sasctl show ORDER_ID"},
			notStdout: []string{"Next page", "comp-failed-1", "proc-1"}},
		{name: "state in any case", args: []string{"list", "--state", "compensationfailed"}, code: ExitOK, requests: 1,
			stdout: []string{"comp-failed-1  CompensationFailed  normal    reserve-inventory  0"}},
		{name: "empty state", args: []string{"list", "--state", "Cancelled"}, code: ExitOK, requests: 1,
			stdout: []string{"No orders in Cancelled."}, notStdout: []string{"ORDER ID"}},
		{name: "first page shows the next page's command", args: []string{"list", "--state", "Error", "--limit", "2"}, code: ExitOK, requests: 1,
			stdout: []string{"err-04", "err-03", "Next page: sasctl list --state Error --limit 2 --cursor bzoy"}, notStdout: []string{"err-02"}},
		{name: "a cursor starts later", args: []string{"list", "--state", "Error", "--limit", "2", "--cursor", "bzoy"}, code: ExitOK, requests: 1,
			stdout: []string{"err-02", "err-01", "--cursor bzo0"}, notStdout: []string{"err-03", "err-00"}},
		{name: "all follows every cursor", args: []string{"list", "--state", "Error", "--limit", "2", "--all"}, code: ExitOK, requests: 3,
			stdout: []string{"err-04", "err-03", "err-02", "err-01", "err-00", "5 orders in Error"}, notStdout: []string{"Next page"}},
		{name: "all on one page", args: []string{"list", "--all", "--state", "Error"}, code: ExitOK, requests: 1,
			stdout: []string{"err-04", "err-00", "5 orders in Error"}},
		{name: "flags after the command", args: []string{"list", "--state", "Error", "--limit", "1", "--endpoint-url", "http://127.0.0.1:1"}, code: ExitError, requests: 0,
			stderr: []string{"GET /ops/orders?limit=1&state=Error", "connect"}},
		{name: "no state", args: []string{"list"}, code: ExitUsage, requests: 0,
			stderr: []string{"list needs --state, one of Error, Waiting, Compensated, CompensationFailed, Cancelled", "Run 'sasctl --help'"}},
		{name: "unknown state", args: []string{"list", "--state", "Failed"}, code: ExitUsage, requests: 0, stderr: []string{`unknown state "Failed"`, "CompensationFailed"}},
		// The API lists no orders in flight nor Processed ones; asking would
		// only earn its 400.
		{name: "state not listed", args: []string{"list", "--state", "processing"}, code: ExitUsage, requests: 0,
			stderr: []string{"orders in Processing are not listed, only those in Error, Waiting, Compensated, CompensationFailed, Cancelled; show one by its ID"}},
		{name: "Processed not listed", args: []string{"list", "--state", "Processed"}, code: ExitUsage, requests: 0, stderr: []string{"orders in Processed are not listed"}},
		{name: "limit 0", args: []string{"list", "--state", "Error", "--limit", "0"}, code: ExitUsage, requests: 0, stderr: []string{"--limit 0 outside 1..100"}},
		{name: "limit 101", args: []string{"list", "--state", "Error", "--limit", "101"}, code: ExitUsage, requests: 0, stderr: []string{"--limit 101 outside 1..100"}},
		{name: "limit not a number", args: []string{"list", "--state", "Error", "--limit", "x"}, code: ExitUsage, requests: 0, stderr: []string{"invalid value"}},
		{name: "cursor with a space", args: []string{"list", "--state", "Error", "--cursor", "a b"}, code: ExitUsage, requests: 0, stderr: []string{"--cursor: byte 1"}},
		{name: "stray argument", args: []string{"list", "--state", "Error", "extra"}, code: ExitUsage, requests: 0, stderr: []string{"list takes no arguments"}},
		{name: "unknown flag", args: []string{"list", "--state", "Error", "--bogus"}, code: ExitUsage, requests: 0, stderr: []string{"bogus"}},
	})
}

func TestListJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		args       []string
		ids        []string
		nextCursor string
		requests   int
	}{
		{"one page is the API's document", []string{"--json", "list", "--state", "Error", "--limit", "2"}, []string{"err-04", "err-03"}, "bzoy", 1},
		{"all pages join into one", []string{"list", "--state", "Error", "--limit", "2", "--all", "--json"}, []string{"err-04", "err-03", "err-02", "err-01", "err-00"}, "", 3},
		{"no orders is an empty array", []string{"list", "--state", "Cancelled", "--all", "--json"}, []string{}, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, 5)
			r := runCLI(t, Env{}, map[string]string{"SAS_API_URL": f.server().URL}, tc.args...)
			if r.code != ExitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			// Read as the API's page, which refuses a present but empty
			// cursor and a missing orders array.
			doc, _, err := api.DecodePage([]byte(r.stdout))
			if err != nil {
				t.Fatalf("stdout is not a page: %v\n%s", err, r.stdout)
			}
			var ids []string
			for _, o := range doc.Orders {
				ids = append(ids, o.OrderID)
				if o.LastError == "" {
					t.Errorf("order %s lost its lastError", o.OrderID)
				}
			}
			if strings.Join(ids, ",") != strings.Join(tc.ids, ",") {
				t.Errorf("orders %v, want %v", ids, tc.ids)
			}
			if doc.NextCursor != tc.nextCursor {
				t.Errorf("nextCursor %q, want %q", doc.NextCursor, tc.nextCursor)
			}
			if n := len(f.recorded()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}

// The printed next-page command, run as printed, yields the next page.
func TestListNextPageHintRuns(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, 5)
	srv := f.server()
	var seen []string
	args := []string{"--endpoint-url", srv.URL, "list", "--state", "Error", "--limit", "2"}
	for range 5 {
		r := runCLI(t, Env{}, nil, args...)
		if r.code != ExitOK {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		seen = append(seen, regexp.MustCompile(`err-\d\d`).FindAllString(r.stdout, -1)...)
		_, hint, ok := strings.Cut(r.stdout, "Next page: ")
		if !ok {
			break
		}
		fields := strings.Fields(hint)
		if fields[0] != "sasctl" {
			t.Fatalf("hint %q does not start with sasctl", hint)
		}
		args = fields[1:]
	}
	if got := strings.Join(seen, ","); got != "err-04,err-03,err-02,err-01,err-00" {
		t.Errorf("pages yielded %s", got)
	}
}

func TestShow(t *testing.T) {
	t.Parallel()
	runCases(t, []cliCase{
		{name: "order in Error", args: []string{"show", "err-01"}, code: ExitOK, requests: 1, lastMethod: "GET", lastPath: "/ops/orders/err-01",
			stdout: []string{
				"Order:", "err-01", "Workflow:", "order-v1", "State:", "Error (client status error)", "Priority:", "high",
				"Step:", "charge-payment (step 2 of 2)", "Attempt:", "5", "Failures:", "3 (of the current step)",
				"Last error:", "payment service: 503 Service Unavailable",
				"Owner:", "arn:aws:sts::111122223333:assumed-role/shop-checkout", "Owner ID:", "AROAZ3EXAMPLEROLE0001", "Cancelled:", "no",
				"#  STEP", "STATE", "ATTEMPTS", "FAILURES", "STARTED", "FINISHED", "COMPENSATION", "C.ATTEMPTS", "C.FAILURES", "COMPENSATED",
				"1  reserve-inventory  succeeded  1         0         2026-11-22T12:00:00Z  2026-11-22T12:01:00Z  -             -           -           -",
				"2  charge-payment     failed     3         3         2026-11-22T12:01:00Z  -                     -             -           -           -",
				"Step errors:", "charge-payment: payment service: 503 Service Unavailable",
				"Next: sasctl retry err-01",
			},
			notStdout: []string{"cancel err-01", "reservation"}},
		{name: "compensation history", args: []string{"show", "comp-failed-1"}, code: ExitOK, requests: 1,
			stdout: []string{
				"State:", "CompensationFailed (client status compensation-failed)", "Client:", "shop-web", "Cancelled:", "yes", "Resubmits:", "1",
				"Expires:", "2027-02-20T12:00:00Z",
				"1  reserve-inventory  succeeded  1         0         2026-11-22T12:00:00Z  2026-11-22T12:01:00Z  failed        4           4           -",
				"2  charge-payment     cancelled  1         0         2026-11-22T12:02:00Z  -                     succeeded     1           0           2026-11-22T12:03:00Z",
				"Step errors:", "reserve-inventory (compensation): inventory: 500 Internal Server Error",
				"Next: sasctl retry comp-failed-1",
			}},
		{name: "in flight offers cancel", args: []string{"show", "proc-1"}, code: ExitOK, requests: 1,
			stdout: []string{"Complete by:", "2026-11-22T13:31:00Z", "Next: sasctl cancel proc-1"}, notStdout: []string{"retry proc-1", "Step errors", "Expires:"}},
		{name: "waiting offers retry and cancel", args: []string{"show", "wait-1"}, code: ExitOK, requests: 1,
			stdout: []string{"State:", "Waiting (client status waiting)", "Waiting:", "wait 2; the step is tried again at 2026-11-22T14:00:00Z",
				"Next: sasctl retry wait-1", "sasctl cancel wait-1"}},
		{name: "flags after the ID", args: []string{"show", "done-1", "--json"}, code: ExitOK, requests: 1,
			stdout: []string{`"orderId": "done-1"`, `"steps": [`}},
		{name: "not found", args: []string{"show", "missing-1"}, code: ExitNotFound, requests: 1,
			stderr: []string{"GET /ops/orders/missing-1: 404 Not Found: no order with ID missing-1 (request ID req-404)"}},
		{name: "ID with a slash", args: []string{"show", "a/b"}, code: ExitUsage, requests: 0, stderr: []string{`order ID "a/b" must be 1..64 characters`}},
		{name: "ID with a dot-dot", args: []string{"show", ".."}, code: ExitUsage, requests: 0},
		{name: "ID too long", args: []string{"show", strings.Repeat("a", 65)}, code: ExitUsage, requests: 0},
		{name: "ID 64 long", args: []string{"show", strings.Repeat("a", 64)}, code: ExitNotFound, requests: 1},
		{name: "no ID", args: []string{"show"}, code: ExitUsage, requests: 0, stderr: []string{"show takes one ORDER_ID, got 0"}},
		{name: "two IDs", args: []string{"show", "a", "b"}, code: ExitUsage, requests: 0, stderr: []string{"got 2"}},
		// "--json" is a well-formed order ID; "--" lets it through as one.
		{name: "ID after --", args: []string{"show", "--", "--json"}, code: ExitNotFound, requests: 1, lastMethod: "GET", lastPath: "/ops/orders/--json",
			stderr: []string{"no order with ID --json"}},
	})
}

func TestRetryAndCancel(t *testing.T) {
	t.Parallel()
	runCases(t, []cliCase{
		{name: "retry an order in Error", args: []string{"retry", "err-00"}, code: ExitOK, requests: 1, lastMethod: "POST", lastPath: "/orders/err-00/retry",
			stdout: []string{"Order err-00 resubmitted; state now Pending.", "Follow up: sasctl show err-00"}},
		{name: "retry a failed compensation", args: []string{"retry", "comp-failed-1"}, code: ExitOK, requests: 1,
			stdout: []string{"state now CompensationPending."}},
		{name: "retry JSON", args: []string{"--json", "retry", "err-00"}, code: ExitOK, requests: 1,
			stdout: []string{`"orderId": "err-00"`, `"state": "Pending"`, `"self": "/orders/err-00"`}},
		{name: "retry a processed order conflicts", args: []string{"retry", "done-1"}, code: ExitConflict, requests: 1, lastMethod: "POST", lastPath: "/orders/done-1/retry",
			stderr: []string{"retry refused for order done-1 (see: sasctl show done-1)", "409 Conflict: order done-1 is Processed: retry does not apply (request ID req-409)"}},
		{name: "retry a missing order", args: []string{"retry", "nope"}, code: ExitNotFound, requests: 1, stderr: []string{"retry order nope:", "404"}},
		{name: "retry a bad ID", args: []string{"retry", "x y"}, code: ExitUsage, requests: 0},
		{name: "cancel in flight", args: []string{"cancel", "proc-1"}, code: ExitOK, requests: 1, lastMethod: "POST", lastPath: "/orders/proc-1/cancel",
			stdout: []string{"Order proc-1 cancel accepted; state now CompensationPending.", "Follow up: sasctl show proc-1"}},
		{name: "cancel a finished order conflicts", args: []string{"cancel", "done-1"}, code: ExitConflict, requests: 1, stderr: []string{"cancel refused", "409"}},
		{name: "cancel an order in Error conflicts", args: []string{"cancel", "err-02"}, code: ExitConflict, requests: 1},
		{name: "cancel without an ID", args: []string{"cancel"}, code: ExitUsage, requests: 0},
	})
}

// A second retry of the same order conflicts: the first one moved it on.
func TestRetryTwiceConflicts(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, 1)
	vars := map[string]string{"SAS_API_URL": f.server().URL}
	if r := runCLI(t, Env{}, vars, "retry", "err-00"); r.code != ExitOK {
		t.Fatalf("first retry: exit %d: %s", r.code, r.stderr)
	}
	if r := runCLI(t, Env{}, vars, "retry", "err-00"); r.code != ExitConflict || !strings.Contains(r.stderr, "is Pending") {
		t.Fatalf("second retry: exit %d, stderr %s", r.code, r.stderr)
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		args         []string
		code         int
		stdout       string
		stderr       string
		stderrAbsent string
	}{
		{"help flag", []string{"--help"}, ExitOK, "usage: sasctl", "", ""},
		{"help command", []string{"help"}, ExitOK, "exit codes: 0 ok, 1 API, SQS, DynamoDB, IAM or network error, 2 usage error,\n3 conflict, 4 not found", "", ""},
		{"version", []string{"version"}, ExitOK, "sasctl (devel)\n", "", ""},
		{"timeline too narrow", []string{"show", "o-1", "--width", "10"}, ExitUsage, "", "--width 10 outside 40..400", ""},
		{"help of a command", []string{"list", "-h"}, ExitOK, "list --state STATE", "", ""},
		{"help of owners", []string{"owners", "help"}, ExitOK, "owners stamp --orders-table T --state-table S [--dry-run]", "", ""},
		{"no command shows the usage", nil, ExitUsage, "", "sasctl: no command\n\nusage: sasctl", ""},
		{"unknown command", []string{"purge"}, ExitUsage, "", `unknown command "purge"`, "usage: sasctl"},
		{"unknown global flag", []string{"--verbose", "list"}, ExitUsage, "", "flag provided but not defined: -verbose", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, Env{}, map[string]string{"SAS_API_URL": "http://127.0.0.1:1"}, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			if tc.stderrAbsent != "" && strings.Contains(r.stderr, tc.stderrAbsent) {
				t.Errorf("stderr has %q:\n%s", tc.stderrAbsent, r.stderr)
			}
		})
	}
}

func TestEndpointResolution(t *testing.T) {
	t.Parallel()
	flagAPI, sasAPI, awsAPI := newFakeAPI(t, 1), newFakeAPI(t, 1), newFakeAPI(t, 1)
	flagURL, sasURL, awsURL := flagAPI.server().URL, sasAPI.server().URL, awsAPI.server().URL
	prefixed := newFakeAPI(t, 1)
	stage := httptest.NewServer(http.StripPrefix("/prod", prefixed))
	t.Cleanup(stage.Close)
	for _, tc := range []struct {
		name string
		args []string
		vars map[string]string
		code int
		hit  *fakeAPI
		msg  string
	}{
		{"flag first", []string{"--endpoint-url", flagURL}, map[string]string{"SAS_API_URL": sasURL, "AWS_ENDPOINT_URL": awsURL}, ExitOK, flagAPI, ""},
		{"then SAS_API_URL", nil, map[string]string{"SAS_API_URL": sasURL, "AWS_ENDPOINT_URL": awsURL}, ExitOK, sasAPI, ""},
		{"then AWS_ENDPOINT_URL", nil, map[string]string{"AWS_ENDPOINT_URL": awsURL}, ExitOK, awsAPI, ""},
		{"a stage path and a trailing slash", []string{"--endpoint-url", stage.URL + "/prod/"}, nil, ExitOK, prefixed, ""},
		{"none", nil, nil, ExitUsage, nil, "no API endpoint: pass --endpoint-url or set SAS_API_URL"},
		{"not http", []string{"--endpoint-url", "ftp://127.0.0.1/"}, nil, ExitUsage, nil, "--endpoint-url: endpoint \"ftp://127.0.0.1/\": scheme must be http or https"},
		{"a query", nil, map[string]string{"SAS_API_URL": sasURL + "/?x=1"}, ExitUsage, nil, "$SAS_API_URL: endpoint"},
		{"user info", []string{"--endpoint-url", "https://u:secret@api.example.com"}, nil, ExitUsage, nil, "must not carry user info"},
		{"plain http beyond loopback", []string{"--endpoint-url", "http://api.example.com"}, nil, ExitUsage, nil, "refusing to send signed requests over plain http to api.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Not parallel: the fakes' request counts are shared.
			before := map[*fakeAPI]int{}
			for _, f := range []*fakeAPI{flagAPI, sasAPI, awsAPI, prefixed} {
				before[f] = len(f.recorded())
			}
			r := runCLI(t, Env{}, tc.vars, append(tc.args, "show", "err-00")...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
				t.Fatalf("exit %d (want %d), stderr:\n%s", r.code, tc.code, r.stderr)
			}
			for f, n := range before {
				got := len(f.recorded()) - n
				if want := map[bool]int{true: 1}[f == tc.hit]; got != want {
					t.Errorf("an API got %d requests, want %d", got, want)
				}
			}
			if strings.Contains(r.stderr, "secret") {
				t.Errorf("stderr shows the URL's password: %s", r.stderr)
			}
		})
	}
}

func TestHintsNameTheProgram(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, 1)
	r := runCLI(t, Env{Program: "go run ./cmd/sasctl"}, map[string]string{"SAS_API_URL": f.server().URL}, "--region", "eu-west-1", "retry", "err-00")
	if r.code != ExitOK || !strings.Contains(r.stdout, "Follow up: go run ./cmd/sasctl --region eu-west-1 show err-00\n") {
		t.Errorf("exit %d, stdout:\n%s", r.code, r.stdout)
	}
}
