package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/sasflow/sas/internal/console"
	"github.com/sasflow/sas/internal/dlq"
	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/opsclient"
	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// The browser test runs the whole local stack on the engines.
func TestMain(m *testing.M) { enginetest.Main(m) }

// testClient and operatorKey are the access keys the test signs with: a
// client's, and the local stack's operator (opsclient.LocalAccessKey).
const (
	testClient  = "test-client"
	operatorKey = opsclient.LocalAccessKey
)

// startStack runs a local stack with o on the test engines.
func startStack(t *testing.T, o localstack.Options) *localstack.Stack {
	t.Helper()
	o.DynamoDBEndpoint, o.AWSEndpoint = enginetest.Endpoints(t)
	o.Prefix = enginetest.UniqueName(t, "local")
	o.Log = slog.New(slog.DiscardHandler)
	st, err := localstack.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// submit posts a small valid order, signed as testClient, and returns its
// ID.
func submit(t *testing.T, st *localstack.Stack) string {
	t.Helper()
	body := `{"customerId":"c-1","currency":"EUR","items":[{"sku":"A-1","quantity":1,"unitPriceCents":100}]}`
	req, err := http.NewRequestWithContext(context.Background(), "POST", st.APIURL+"/orders", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := localstack.SignRequestAt(context.Background(), req, []byte(body), testClient, time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a struct{ OrderID string }
	if resp.StatusCode != 202 || json.Unmarshal(b, &a) != nil || a.OrderID == "" {
		t.Fatalf("POST /orders = %d %s", resp.StatusCode, b)
	}
	return a.OrderID
}

// awaitState polls the order's record until it is in want.
func awaitState(t *testing.T, st *localstack.Stack, id string, want workflow.ProcessState) workflow.State {
	t.Helper()
	return await.Value(t, 30*time.Second, "order "+id+" "+string(want),
		func() (workflow.State, error) { return st.Direct.GetState(context.Background(), id) },
		func(s workflow.State) bool { return s.ProcessState == want })
}

// sasctl runs the operators' CLI against the stack's API, signing as the
// local operator.
func sasctl(t *testing.T, st *localstack.Stack, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := opsclient.Run(context.Background(), append([]string{"--endpoint-url", st.APIURL}, args...), opsclient.Env{
		Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errOut,
		LoadAWSConfig: func(context.Context, string) (aws.Config, error) {
			return aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(operatorKey, "not-checked", "")}, nil
		},
	})
	return out.String() + errOut.String(), code
}

// browserRequired is set where the browser test must run (CI, make
// test): without Chromium it fails there instead of skipping.
const browserRequired = "SAS_BROWSER_REQUIRED"

// screenshotsDir, when set, is where the browser test writes the console's
// screenshots (make screenshots: docs/images).
const screenshotsDir = "SAS_SCREENSHOTS"

// chromium finds the browser scripts/engines.sh install puts on the PATH
// (Debian's chromium), or skips the test where it is not required.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(browserRequired) != "" || os.Getenv("CI") != "" {
		t.Fatalf("no Chromium on the PATH, and %s or CI is set: run scripts/engines.sh install (make deps does)", browserRequired)
	}
	t.Skipf("no Chromium on the PATH: scripts/engines.sh install (make deps) installs it; CI sets %s, so it never skips there", browserRequired)
	return ""
}

// browser is a headless Chromium tab that counts the JavaScript dialogs
// any page opened (an alert an injected script would raise) and accepts
// them, so a test is never stuck behind one.
type browser struct {
	ctx     context.Context
	dialogs atomic.Int64
}

func newBrowser(t *testing.T, path string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox will not start
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 800),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{ctx: ctx}
	// The first Run starts the browser, on a context without a timeout:
	// the browser lives as long as that context.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("start Chromium at %s: %v", path, err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			b.dialogs.Add(1)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return b
}

// run runs the actions, failing the test with what was being done.
func (b *browser) run(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %s: %v\nthe page then: %s", what, err, b.page())
	}
}

// page is the address and the text of the page, for a failure's message.
func (b *browser) page() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	if err != nil {
		return err.Error()
	}
	return text
}

// eval returns what expression evaluates to in the page.
func eval[T any](t *testing.T, b *browser, expression string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expression))
	if err != nil {
		t.Fatalf("browser: evaluate %s: %v", expression, err)
	}
	return v
}

// screenshot writes the viewport, at width x height, to dir/name.png when
// make screenshots asked for them.
func (b *browser) screenshot(t *testing.T, name string, width, height int64) {
	t.Helper()
	dir := os.Getenv(screenshotsDir)
	if dir == "" {
		return
	}
	b.run(t, "resize for "+name, chromedp.EmulateViewport(width, height))
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	b.run(t, "back to 1280x800", chromedp.EmulateViewport(1280, 800))
	t.Logf("wrote %s", filepath.Join(dir, name+".png"))
}

// startConsole serves the console for the stack in-process, as `sasctl
// ui --prefix <the stack's> --sqs-endpoint-url <fauxqs>` does, signed as
// the local operator; it returns the URL with the session's token.
func startConsole(t *testing.T, st *localstack.Stack) string {
	t.Helper()
	o, err := st.ConsoleOptions("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	o.Refresh = 500 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	urls, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- console.Serve(ctx, "127.0.0.1:0", o, func(u string) { urls <- u }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("console: %v", err)
		}
	})
	select {
	case u := <-urls:
		return u
	case err := <-done:
		t.Fatalf("console did not start: %v", err)
	}
	return ""
}

// hostileOrder writes an order in Error whose outputs and errors hold
// markup, as a remote service's answers may: the console must show it as
// text. The submission's validation keeps markup out of an order's own
// fields, so the record is written to the store directly.
func hostileOrder(t *testing.T, st *localstack.Stack, id string) {
	t.Helper()
	now := time.Now().UTC()
	started, finished := now.Add(-2*time.Second), now.Add(-time.Second)
	o := workflow.Order{OrderID: id, CustomerID: "c-1", Currency: "EUR", Items: []workflow.Item{{SKU: "A-1", Quantity: 1, UnitPriceCents: 100}},
		Owner: "arn:aws:iam::000000000000:user/" + testClient, CreatedAt: now.Add(-3 * time.Second)}
	state := workflow.State{
		OrderID: id, Workflow: "order-v2", Step: "charge-payment", StepIndex: 1, ProcessState: workflow.Error, Attempt: 2, FailureCount: 1,
		LastError: `<script>alert("lastError");document.body.dataset.pwned=1</script>`,
		Owner:     "arn:aws:iam::000000000000:user/" + testClient,
		Steps: []workflow.StepRecord{
			{Name: "reserve-inventory", State: workflow.StepSucceeded, Attempts: 1, StartedAt: &started, FinishedAt: &finished,
				Output: json.RawMessage(`{"note":"</pre><script>alert('output')</script>","img":"<img src=x onerror=alert('img')>"}`)},
			{Name: "charge-payment", State: workflow.StepFailed, Attempts: 1, StartedAt: &finished, FinishedAt: &now,
				Error: `"><img src=x onerror="alert('stepError');document.body.dataset.pwned=1">`},
		},
		CreatedAt: now.Add(-3 * time.Second), UpdatedAt: now,
	}
	if err := st.Direct.CreateOrder(context.Background(), o, state); err != nil {
		t.Fatal(err)
	}
}

// hostileID is the ID of the test's hostile order.
func hostileID(t *testing.T) string {
	id := "hostile-" + strings.ReplaceAll(t.Name(), "/", "-")
	return id[:min(len(id), 64)]
}

// injected counts what a hostile value would have added to the page had
// it gone through unescaped: inline scripts, images of the payloads, and
// the mark their handlers set.
const injected = `document.querySelectorAll('script:not([src]), img, svg[onload], [onerror]').length + (document.body.dataset.pwned ? 100 : 0)`

// TestConsoleInABrowser drives the console in headless Chromium against
// the local stack: it finds an order in Error on the overview, opens it,
// reads its graph and timeline, retries it through the confirmation and
// watches it reach Processed without reloading; it redrives a
// dead-lettered message; and an order whose outputs and errors hold
// markup stays inert: no dialog, no injected element. It times the path
// from the overview to an accepted retry against the CLI's. With
// SAS_SCREENSHOTS=dir (make screenshots) it writes the docs' screenshots.
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	path := chromium(t)
	// The first step's service refuses every call, and the step has no
	// undo here: each order stops in Error at it (with an undo, the refused
	// step would be undone and the order Compensated).
	cat := catalog.MustDeployed()
	cat.Definitions = slices.Clone(cat.Definitions)
	for i, d := range cat.Definitions {
		d.Steps = slices.Clone(d.Steps)
		d.Steps[0].Compensable = false
		cat.Definitions[i] = d
	}
	// New orders get the current version; the test reads its steps from
	// the catalog, so a step added to the workflow does not break it.
	cur, err := cat.ForNew("")
	if err != nil {
		t.Fatal(err)
	}
	o := localstack.DemoOptionsOf(cat)
	o.Seed, o.Crash = 7, 0
	o.Faults = remotesim.Faults{RejectSteps: []string{cur.Steps[0].Name}}
	st := startStack(t, o)
	prefix := st.QueuePrefix()
	failed, forCLI := submit(t, st), submit(t, st)
	stopped := awaitState(t, st, failed, workflow.Error)
	awaitState(t, st, forCLI, workflow.Error)
	// A message dead-lettered from the scheduler queue: a schedule of the
	// order below in Error, which the Scheduler drops once redriven (the
	// order is not Pending).
	hostile := hostileID(t)
	body := message.Encode(message.NewSchedule(hostile, "order-v2", 1, "requeue"))
	if _, err := st.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(st.Sys.SchedulerQueue.DLQURL), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t, path)
	url := startConsole(t, st)

	// The overview, as an operator opens it from the URL sasctl ui
	// printed, after an alert.
	// consoleTook adds up the page loads of the path from the overview to
	// an accepted retry: what the operator waits for, not the test's
	// checks and screenshots between them.
	var consoleTook time.Duration
	timed := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		began := time.Now()
		b.run(t, what, actions...)
		consoleTook += time.Since(began)
		t.Logf("%s: %v", what, time.Since(began))
	}
	timed("open the overview", chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`#list-Error tr[data-order="`+failed+`"]`)))
	if got := eval[string](t, b, `location.search`); got != "" {
		t.Fatalf("the token stayed in the address: %q", got)
	}
	if n := eval[int](t, b, `document.querySelectorAll('tr[data-queue="scheduler"][data-depth="1"]').length`); n != 1 {
		t.Fatalf("the overview does not show the scheduler DLQ's 1 message")
	}
	if os.Getenv(screenshotsDir) != "" {
		// The open orders' count comes a little later, with a refresh.
		b.run(t, "await the count", chromedp.WaitVisible(chromedp.CSS(`tr[data-version="`+cur.ID()+`"]`)))
		b.screenshot(t, "console-overview", 1280, 800)
	}

	// Click 1: the order.
	timed("open the order", chromedp.Click(chromedp.CSS(`#list-Error a[href="/orders/`+failed+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#order-state[data-state="Error"]`)))
	graph := eval[map[string]string](t, b, `Object.fromEntries([...document.querySelectorAll('ol.graph:not(.undos) li')].map(n => [n.dataset.step, n.dataset.state]))`)
	want := map[string]string{}
	for i, step := range cur.Steps {
		want[step.Name] = "pending"
		if i == 0 {
			want[step.Name] = "failed"
		}
	}
	if !maps.Equal(graph, want) {
		t.Fatalf("graph %v, want %v: the first step failed, the others pending", graph, want)
	}
	rows := eval[[]string](t, b, `[...document.querySelectorAll('table.timeline tbody tr')].map(r => r.dataset.step + ' ' + r.dataset.undo + ' ' + r.dataset.ends)`)
	if len(rows) != 1 || rows[0] != cur.Steps[0].Name+" false failed" {
		t.Fatalf("timeline rows %q: want the failed first step alone", rows)
	}
	if q := eval[string](t, b, `document.querySelector('#trace-query').textContent`); !strings.HasPrefix(q, `filter traceId = "1-`) {
		t.Fatalf("the trace's query is %q", q)
	}
	b.screenshot(t, "console-order", 1280, 800)
	b.screenshot(t, "console-order-narrow", 390, 844)

	// The operator fixes the cause (the service accepts again)...
	if err := st.Sim.SetFaults(remotesim.Faults{}); err != nil {
		t.Fatal(err)
	}
	// ...clicks retry (2), reads what will happen, and confirms (3).
	timed("ask for the retry", chromedp.Click(chromedp.ID(`#retry`)), chromedp.WaitVisible(chromedp.ID(`#confirm`)))
	if what := eval[string](t, b, `document.querySelector('.confirm').innerText`); !strings.Contains(what, fmt.Sprintf("%s (step 1 of %d)", cur.Steps[0].Name, len(cur.Steps))) || !strings.Contains(what, fmt.Sprintf("as attempt %d,", stopped.Attempt+1)) {
		t.Fatalf("the confirmation says %q", what)
	}
	timed("confirm the retry", chromedp.Click(chromedp.ID(`#confirm`)), chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
	// The page follows the order by itself, without a reload: the mark set
	// now survives only if the page is never loaded again.
	eval[bool](t, b, `window.notReloaded = true`)
	await.Until(t, 30*time.Second, "the order page shows Processed", func() (bool, error) {
		state, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('#order-state').dataset.state`))
		return err == nil && state == string(workflow.Processed), fmt.Errorf("state %q (%v)", state, err)
	})
	if !eval[bool](t, b, `window.notReloaded === true`) {
		t.Fatal("the page reloaded instead of refreshing its live part")
	}
	graph = eval[map[string]string](t, b, `Object.fromEntries([...document.querySelectorAll('ol.graph:not(.undos) li')].map(n => [n.dataset.step, n.dataset.state]))`)
	for name := range want {
		want[name] = "succeeded"
	}
	if !maps.Equal(graph, want) {
		t.Fatalf("graph after the retry %v, want %v", graph, want)
	}

	// The CLI's path for the other order: the two commands the alert
	// names, show and retry.
	cliBegan := time.Now()
	for _, args := range [][]string{{"show", forCLI}, {"retry", forCLI}} {
		if out, code := sasctl(t, st, args...); code != 0 {
			t.Fatalf("sasctl %v = %d\n%s", args, code, out)
		}
	}
	cliTook := time.Since(cliBegan)
	t.Logf("from the overview to an accepted retry: the console 3 clicks (order, Retry, Confirm) in %v of page loads; the CLI 2 commands (show, retry, as the alert names them) in %v of requests; a person's reading and typing not counted", consoleTook.Round(time.Millisecond), cliTook.Round(time.Millisecond))

	// The DLQ: the message decoded, then redriven through the confirmation.
	b.run(t, "open the DLQs", chromedp.Navigate(strings.Split(url, "?")[0]+"dlq"),
		chromedp.WaitVisible(chromedp.CSS(`#q-scheduler tr[data-message]`)))
	if got := eval[string](t, b, `document.querySelector('#q-scheduler tr[data-message] a').textContent`); got != hostile {
		t.Fatalf("the dead-lettered message names order %q, want %s", got, hostile)
	}
	b.screenshot(t, "console-dlq", 1280, 800)
	b.run(t, "redrive", chromedp.Click(chromedp.ID(`#redrive-scheduler`)), chromedp.WaitVisible(chromedp.ID(`#confirm`)),
		chromedp.Click(chromedp.ID(`#confirm`)), chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
	if flash := eval[string](t, b, `document.querySelector('p.flash').textContent`); !strings.Contains(flash, "Moved 1 messages of scheduler") {
		t.Fatalf("after the redrive: %q", flash)
	}
	await.Until(t, 30*time.Second, "the scheduler DLQ empty", func() (bool, error) {
		pairs, err := dlq.Discover(context.Background(), st.SQS, dlq.PrefixScope(prefix))
		for _, p := range pairs {
			if p.ID == "scheduler" {
				return err == nil && p.Depth+p.InFlight == 0, fmt.Errorf("%d visible, %d in flight", p.Depth, p.InFlight)
			}
		}
		return false, fmt.Errorf("no scheduler DLQ among %d (%v)", len(pairs), err)
	})

	// The hostile order, on its page (outputs opened) and in the overview.
	hostileOrder(t, st, hostile)
	b.run(t, "open the hostile order", chromedp.Navigate(strings.Split(url, "?")[0]+"orders/"+hostile),
		chromedp.WaitVisible(chromedp.ID(`#last-error`)))
	b.run(t, "open its outputs", chromedp.Click(chromedp.CSS(`#output-0 summary`)), chromedp.WaitVisible(chromedp.CSS(`#output-0 pre`)))
	if got := eval[string](t, b, `document.querySelector('#last-error').textContent`); !strings.Contains(got, `<script>alert("lastError")`) {
		t.Fatalf("the last error shows as %q, not as its text", got)
	}
	if got := eval[string](t, b, `document.querySelector('#output-0 pre').textContent`); !strings.Contains(got, `<img src=x onerror=alert('img')>`) {
		t.Fatalf("the output shows as %q, not as its text", got)
	}
	if n := eval[int](t, b, injected); n != 0 {
		t.Fatalf("the hostile order's page gained %d injected elements", n)
	}
	b.run(t, "the overview again", chromedp.Navigate(strings.Split(url, "?")[0]),
		chromedp.WaitVisible(chromedp.CSS(`#list-Error tr[data-order="`+hostile+`"]`)))
	if n := eval[int](t, b, injected); n != 0 {
		t.Fatalf("the overview gained %d injected elements", n)
	}
	if n := b.dialogs.Load(); n != 0 {
		t.Fatalf("%d JavaScript dialogs opened", n)
	}
}
