package remotesim

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/testkit/golden"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/remote"
)

// The simulator speaks shared/remote's contract: fed the contract's golden
// requests it must answer with the documents in testdata (its own outputs,
// which wiring tests and operators read) and remote's golden problem.

// remoteTestdata holds the contract's goldens.
const remoteTestdata = "../../../shared/remote/testdata"

// TestOutputGolden and TestUndoGolden pin the simulator's answers the way
// shared/remote pins the requests.
func TestOutputGolden(t *testing.T) {
	t.Parallel()
	golden.CheckType[Output](t, "testdata", "output")
}

func TestUndoGolden(t *testing.T) {
	t.Parallel()
	golden.CheckType[Undo](t, "testdata", "undo")
}

// TestServesTheContractGolden: the contract's golden requests get the
// simulator's golden answers, a request without a key remote's golden
// problem, and one whose key is in progress or was undone remote's golden
// conflicts.
func TestServesTheContractGolden(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 9, 41, 5, 120_000_000, time.UTC)
	sim := New(WithClock(clock.NewFake(at)))
	t.Cleanup(sim.Close)
	const key = "9b2f0c1e-5d7a-4c3b-8e6f-0a1b2c3d4e5f/charge-payment"
	// Keys another call holds, and keys an undo closed before their step.
	const held, closed = "other-order/charge-payment", "undone-order/charge-payment"
	sim.mu.Lock()
	sim.inProgress[held]++
	sim.tombstones[closed] = true
	sim.mu.Unlock()
	for _, tc := range []struct {
		path, key, request string
		status             int
		answer             []byte
	}{
		{remote.StepPath("charge-payment"), key, "step-request.json", http.StatusOK, golden.Read(t, "testdata/output.json")},
		{remote.CompensatePath("charge-payment"), key + "/undo", "compensate-request.json", http.StatusOK, golden.Read(t, "testdata/undo.json")},
		{remote.StepPath("charge-payment"), "", "step-request.json", http.StatusBadRequest, golden.Read(t, remoteTestdata+"/problem.json")},
		{remote.StepPath("charge-payment"), held, "step-request.json", http.StatusConflict, golden.Read(t, remoteTestdata+"/problem-in-progress.json")},
		{remote.StepPath("charge-payment"), closed, "step-request.json", http.StatusConflict, golden.Read(t, remoteTestdata+"/problem-compensated.json")},
	} {
		r := httptest.NewRequest(http.MethodPost, tc.path, bytes.NewReader(golden.Read(t, remoteTestdata+"/"+tc.request)))
		if tc.key != "" {
			r.Header.Set(remote.IdempotencyKeyHeader, tc.key)
		}
		w := httptest.NewRecorder()
		sim.ServeHTTP(w, r)
		if got := bytes.TrimSpace(w.Body.Bytes()); w.Code != tc.status || !bytes.Equal(got, tc.answer) {
			t.Errorf("%s %s: %d\n%s\nwant %d\n%s", tc.path, tc.request, w.Code, got, tc.status, tc.answer)
		}
	}
}

// TestRequestHashIsStable: a request's hash tells a retry from a reused key,
// so it must hash the same bytes for the same request whatever type the
// request is decoded into; the values were taken before the request types
// moved to shared/remote.
func TestRequestHashIsStable(t *testing.T) {
	t.Parallel()
	step, err := DecodeStepRequest(bytes.NewReader(golden.Read(t, remoteTestdata+"/step-request.json")), "charge-payment")
	if err != nil {
		t.Fatal(err)
	}
	undo, err := DecodeCompensateRequest(bytes.NewReader(golden.Read(t, remoteTestdata+"/compensate-request.json")), "charge-payment")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ got, want string }{
		{requestHash(routeStep, step), "6f2d6fde1c57475633239111f013a9f1f7038096d0e272e878daa22a2b0a3b14"},
		{requestHash(routeCompensate, undo), "da2228d668a336517bc5bb650a6f7df706d5ac7fafaf658be915258ac62f5efc"},
	} {
		if tc.got != tc.want {
			t.Errorf("request hash %s, want %s", tc.got, tc.want)
		}
	}
}
