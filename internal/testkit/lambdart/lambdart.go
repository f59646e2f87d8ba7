// Package lambdart runs a shipped bootstrap binary the way Lambda's custom
// runtime does, without Docker: an httptest server serves the Lambda Runtime
// API (the interface a provided.al2023 bootstrap polls), the binary is
// started with AWS_LAMBDA_RUNTIME_API pointing at it and the environment the
// test gives it, and each Invoke hands it one event and waits for its answer.
//
// The API served, as Lambda documents it (version 2018-06-01):
//
//	GET  /2018-06-01/runtime/invocation/next          the next event; headers
//	     Lambda-Runtime-Aws-Request-Id, -Deadline-Ms, -Invoked-Function-Arn,
//	     -Trace-Id
//	POST /2018-06-01/runtime/invocation/{id}/response the event's result
//	POST /2018-06-01/runtime/invocation/{id}/error    the event's error
//	POST /2018-06-01/runtime/init/error               the runtime cannot start
//
// A process that exits before it asks for its first event failed its init
// too: Lambda reports that as Runtime.ExitError, and so does Invoke.
package lambdart

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Prefix is the path every Runtime API route starts with.
const Prefix = "/2018-06-01/runtime"

// StartGrace bounds how long Invoke waits for the function to ask for its
// event: its init, or the end of its previous invocation.
const StartGrace = 15 * time.Second

// ErrorReport is what a runtime posted to /error or /init/error: the
// Lambda-Runtime-Function-Error-Type header and the JSON body
// ({"errorMessage": ..., "errorType": ...}).
type ErrorReport struct {
	Type    string
	Message string
	Body    []byte
}

func (e *ErrorReport) Error() string { return e.Type + ": " + e.Message }

// InitError is returned by Invoke when the function never took the event:
// it posted to /init/error, or exited before asking for its first event.
type InitError struct {
	// Report is what was posted to /init/error; nil when the process only
	// exited.
	Report *ErrorReport
	// Exit is the process's exit error, when it exited.
	Exit error
}

func (e *InitError) Error() string {
	var parts []string
	if e.Report != nil {
		parts = append(parts, "init error "+e.Report.Error())
	}
	if e.Exit != nil {
		parts = append(parts, "Runtime.ExitError: "+e.Exit.Error())
	}
	return strings.Join(parts, "; ")
}

// Result is a function's answer to one event: the body posted to /response,
// or the report posted to /error.
type Result struct {
	RequestID string
	Response  []byte
	Error     *ErrorReport
}

type invocation struct {
	id       string
	payload  []byte
	deadline time.Time
	done     chan Result
}

// Function is one running bootstrap behind its own Runtime API.
type Function struct {
	// Name is the function's name, put in AWS_LAMBDA_FUNCTION_NAME and its
	// ARN.
	Name string
	// Timeout bounds each invocation, as the function's timeout does; its
	// deadline is sent in Lambda-Runtime-Deadline-Ms.
	Timeout time.Duration

	srv     *httptest.Server
	next    chan *invocation
	stop    chan struct{}
	exited  chan struct{}
	exitErr error

	mu         sync.Mutex
	pending    map[string]*invocation
	initErrors []*ErrorReport
	output     bytes.Buffer
	seq        int
}

// Start runs binary with env (and nothing of the test process's own
// environment) plus AWS_LAMBDA_RUNTIME_API and the variables Lambda sets for
// a function named name. The process is killed and the server closed when
// the test ends; its output goes to the test log.
func Start(tb testing.TB, binary, name string, timeout time.Duration, env map[string]string) *Function {
	tb.Helper()
	f := &Function{
		Name: name, Timeout: timeout,
		next: make(chan *invocation), stop: make(chan struct{}), exited: make(chan struct{}),
		pending: map[string]*invocation{},
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	vars := map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME":        name,
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128",
		"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/" + name,
		"AWS_LAMBDA_LOG_STREAM_NAME":      "local",
		"_HANDLER":                        "bootstrap",
		"AWS_EXECUTION_ENV":               "AWS_Lambda_provided.al2023",
	}
	for k, v := range env {
		vars[k] = v
	}
	vars["AWS_LAMBDA_RUNTIME_API"] = strings.TrimPrefix(f.srv.URL, "http://")
	cmd := exec.Command(binary)
	cmd.Env = make([]string, 0, len(vars))
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out := &lockedWriter{mu: &f.mu, w: &f.output}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		f.srv.Close()
		tb.Fatalf("start %s: %v", binary, err)
	}
	go func() {
		f.exitErr = cmd.Wait()
		close(f.exited)
	}()
	tb.Cleanup(func() {
		close(f.stop)
		select {
		case <-f.exited:
		default:
			_ = cmd.Process.Kill()
			<-f.exited
		}
		f.srv.Close()
		if out := f.Output(); out != "" {
			tb.Logf("%s output:\n%s", name, out)
		}
	})
	return f
}

// Output is what the process has written to stdout and stderr so far.
func (f *Function) Output() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.output.String()
}

// InitErrors are the reports posted to /init/error.
func (f *Function) InitErrors() []*ErrorReport {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*ErrorReport(nil), f.initErrors...)
}

// Invoke hands payload to the function as its next event and waits for the
// answer. The error is an *InitError when the function failed to start; a
// plain error when it did not ask for the event within StartGrace, or did
// not answer within its Timeout (plus a second for the round trip).
func (f *Function) Invoke(ctx context.Context, payload []byte) (Result, error) {
	f.mu.Lock()
	f.seq++
	id := fmt.Sprintf("%08d-0000-4000-8000-%012d", f.seq, f.seq)
	f.mu.Unlock()
	inv := &invocation{id: id, payload: payload, done: make(chan Result, 1)}
	start := time.NewTimer(StartGrace)
	defer start.Stop()
	// Hand the event over at the function's next poll.
	select {
	case f.next <- inv:
	case <-f.exited:
		return Result{}, f.initError(f.exitErr)
	case <-start.C:
		if reports := f.InitErrors(); len(reports) > 0 {
			return Result{}, &InitError{Report: reports[0]}
		}
		return Result{}, fmt.Errorf("%s did not ask for an event within %v", f.Name, StartGrace)
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	wait := time.NewTimer(f.Timeout + time.Second)
	defer wait.Stop()
	select {
	case r := <-inv.done:
		return r, nil
	case <-f.exited:
		return Result{}, fmt.Errorf("%s exited during invocation %s: %v", f.Name, id, f.exitErr)
	case <-wait.C:
		return Result{}, fmt.Errorf("%s did not answer invocation %s within %v", f.Name, id, f.Timeout)
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// WaitExit waits for the process to end, up to timeout, and returns its
// *InitError (nil if it is still running).
func (f *Function) WaitExit(timeout time.Duration) error {
	select {
	case <-f.exited:
		return f.initError(f.exitErr)
	case <-time.After(timeout):
		return nil
	}
}

func (f *Function) initError(exit error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := &InitError{Exit: exit}
	if exit == nil {
		e.Exit = errors.New("exit status 0")
	}
	if len(f.initErrors) > 0 {
		e.Report = f.initErrors[0]
	}
	return e
}

func (f *Function) serve(w http.ResponseWriter, r *http.Request) {
	path, ok := strings.CutPrefix(r.URL.Path, Prefix+"/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	switch {
	case r.Method == http.MethodGet && path == "invocation/next":
		f.serveNext(w, r)
	case r.Method == http.MethodPost && path == "init/error":
		rep, err := readReport(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.initErrors = append(f.initErrors, rep)
		f.mu.Unlock()
		accepted(w)
	case r.Method == http.MethodPost && strings.HasPrefix(path, "invocation/"):
		id, kind, _ := strings.Cut(strings.TrimPrefix(path, "invocation/"), "/")
		f.mu.Lock()
		inv := f.pending[id]
		delete(f.pending, id)
		f.mu.Unlock()
		if inv == nil {
			http.Error(w, `{"errorMessage":"unknown request ID","errorType":"InvalidRequestID"}`, http.StatusBadRequest)
			return
		}
		res := Result{RequestID: id}
		var err error
		switch kind {
		case "response":
			res.Response, err = io.ReadAll(r.Body)
		case "error":
			res.Error, err = readReport(r)
		default:
			http.NotFound(w, r)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		inv.done <- res
		accepted(w)
	default:
		http.NotFound(w, r)
	}
}

func (f *Function) serveNext(w http.ResponseWriter, r *http.Request) {
	select {
	case inv := <-f.next:
		inv.deadline = time.Now().Add(f.Timeout)
		f.mu.Lock()
		f.pending[inv.id] = inv
		f.mu.Unlock()
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
		h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(inv.deadline.UnixMilli(), 10))
		h.Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:"+f.Name)
		h.Set("Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000;Parent=0000000000000000;Sampled=0")
		_, _ = w.Write(inv.payload)
	case <-f.stop:
		http.Error(w, "shutting down", http.StatusGone)
	case <-r.Context().Done():
	}
}

func accepted(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write([]byte(`{"status":"OK"}`))
}

func readReport(r *http.Request) (*ErrorReport, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	rep := &ErrorReport{Type: r.Header.Get("Lambda-Runtime-Function-Error-Type"), Body: body}
	var doc struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &doc); err != nil {
			return nil, fmt.Errorf("error body is not JSON: %w", err)
		}
	}
	rep.Message = doc.ErrorMessage
	if rep.Type == "" {
		rep.Type = doc.ErrorType
	}
	return rep, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
