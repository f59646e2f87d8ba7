package wiring_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/internal/localstack/sqsbridge"
	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/remote"
	"github.com/sasflow/sas/shared/workflow"
)

// answer is how the remote answered one call.
type answer struct {
	key, code string
	status    int
}

// answers records how the simulator answers every call.
type answers struct {
	mu  sync.Mutex
	all []answer
}

func (a *answers) serve(sim *remotesim.Sim) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, r)
		code, _ := remote.ParseProblem(rec.Body.Bytes())
		a.mu.Lock()
		a.all = append(a.all, answer{key: r.Header.Get(remote.IdempotencyKeyHeader), code: code, status: rec.Code})
		a.mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// count is how many calls under key got status and code.
func (a *answers) count(key string, status int, code string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, x := range a.all {
		if x.key == key && x.status == status && x.code == code {
			n++
		}
	}
	return n
}

// agentBridge is the bridge that delivers step's queue to its agent.
func (e *env) agentBridge(step string) *sqsbridge.Bridge {
	e.t.Helper()
	for _, b := range e.sys.Bridges {
		if b.QueueURL == e.sys.AgentQueues[step].URL {
			return b
		}
	}
	e.t.Fatalf("no bridge for the %s agent", step)
	return nil
}

// waitInProgress waits until a call holds key in progress at the remote,
// which only the remote knows.
func (e *env) waitInProgress(key string) {
	e.t.Helper()
	await.Until(e.t, 10*time.Second, "a call holding "+key+" in progress", func() (bool, error) { return e.sim.InProgress(key), nil })
}

// TestADuplicateRequestWhileTheFirstCallRunsDoesNotStopTheOrder: SQS
// delivers an agent request twice, and the copy reaches the remote while
// the first call is still working on the key. The remote answers the copy
// 409 in_progress, as idempotent APIs do; that says the effect is being
// applied, not that it was refused, so the agent retries (the first call's
// agent too, after its own try timed out) until the remote answers the
// stored result. The order ends Processed with one effect and nothing
// undone.
func TestADuplicateRequestWhileTheFirstCallRunsDoesNotStopTheOrder(t *testing.T) {
	t.Parallel()
	const step = "reserve-inventory"
	seen := &answers{}
	e := newEnv(t, envOptions{workflow: workflow.Reference(), remote: seen.serve,
		// The first delivery stays in flight while the copy is received.
		visibility: time.Minute,
		agent:      func(c *agent.Config) { c.RemoteTimeout = 300 * time.Millisecond }})
	// The first call holds the key past its caller's timeout, then applies.
	if err := e.sim.SetFaults(remotesim.Faults{InProgressFor: remotesim.Duration(300 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	id := e.submit("")
	key := workflow.IdempotencyKey(id, step)
	e.sim.Script(key, remotesim.HangThenApply)
	queueURL := e.sys.AgentQueues[step].URL
	request := e.dropAgentRequests(step, 1)[0]

	e.sendRaw(queueURL, request)
	bridge := e.agentBridge(step)
	firstDone := make(chan error, 1)
	go func() {
		n, err := bridge.PollOnce(e.ctx)
		if err == nil && n != 1 {
			err = fmt.Errorf("received %d messages, want 1", n)
		}
		firstDone <- err
	}()
	e.waitInProgress(key)
	// The copy arrives while the first call holds the key.
	e.sendRaw(queueURL, request)
	if n, err := bridge.PollOnce(e.ctx); err != nil || n != 1 {
		t.Fatalf("delivering the copy: %d messages, %v", n, err)
	}
	if err := <-firstDone; err != nil {
		t.Fatalf("delivering the first: %v", err)
	}
	if n := seen.count(key, http.StatusConflict, remote.CodeInProgress); n == 0 {
		t.Fatal("no call was answered 409 in_progress: the test did not make the race it is about")
	}

	st := e.runToTerminal(id, 5)
	if st.ProcessState != workflow.Processed {
		t.Fatalf("final %s, want Processed", brief(st))
	}
	e.assertRemote(id, step, 1, 0)
	e.assertRemote(id, "charge-payment", 1, 0)
}
