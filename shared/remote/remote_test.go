package remote_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sasflow/sas/internal/testkit/golden"
	"github.com/sasflow/sas/shared/jsonstrict"
	"github.com/sasflow/sas/shared/remote"
)

// Each body has its golden documents in testdata (see the golden kit): the
// agent's tests check it writes exactly these for a fixed request, the
// simulator's that it answers with problem.json.

// TestTypesKeepTheirGoldens holds each body's type to its golden documents.
func TestTypesKeepTheirGoldens(t *testing.T) {
	t.Parallel()
	for name, check := range map[string]func(testing.TB, string, string){
		"step-request":       golden.CheckType[remote.StepRequest],
		"compensate-request": golden.CheckType[remote.CompensateRequest],
		"problem":            golden.CheckType[remote.Problem],
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			check(t, "testdata", name)
		})
	}
}

// TestParseProblemReadsTheGolden: the agent reads what the simulator
// writes.
func TestParseProblemReadsTheGolden(t *testing.T) {
	t.Parallel()
	doc := golden.Read(t, "testdata/problem.json")
	var p remote.Problem
	if err := json.Unmarshal(doc, &p); err != nil {
		t.Fatal(err)
	}
	if code, msg := remote.ParseProblem(doc); code != p.Code || msg != p.Message || code == "" || msg == "" {
		t.Errorf("ParseProblem(problem.json) = %q, %q; want %q, %q", code, msg, p.Code, p.Message)
	}
}

// TestConflictGoldensNameTheCodes: the two 409s whose code the Agent acts
// on have golden documents, which the simulator serves and the agent's
// tests classify.
func TestConflictGoldensNameTheCodes(t *testing.T) {
	t.Parallel()
	for file, code := range map[string]string{
		"testdata/problem-in-progress.json": remote.CodeInProgress,
		"testdata/problem-compensated.json": remote.CodeCompensated,
	} {
		doc := golden.Read(t, file)
		var p remote.Problem
		if err := jsonstrict.Decode(doc, &p); err != nil {
			t.Fatalf("%s does not decode strictly into a Problem: %v", file, err)
		}
		if got, msg := remote.ParseProblem(doc); got != code || p.Code != code || msg == "" {
			t.Errorf("%s: code %q (parsed %q), message %q; want %q", file, p.Code, got, msg, code)
		}
	}
}

// TestRoutes: the paths the agent builds are the ones the simulator's
// patterns serve, with the step in the wildcard.
func TestRoutes(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	for _, route := range []string{remote.StepRoute, remote.CompensateRoute} {
		mux.HandleFunc(route, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Route", route)
			w.Header().Set("X-Step", r.PathValue(remote.PathStep))
		})
	}
	for _, tc := range []struct{ path, route string }{
		{remote.StepPath("charge-payment"), remote.StepRoute},
		{remote.CompensatePath("charge-payment"), remote.CompensateRoute},
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, tc.path, nil))
		if rec.Header().Get("X-Route") != tc.route || rec.Header().Get("X-Step") != "charge-payment" {
			t.Errorf("%s served by %q with step %q, want %q", tc.path, rec.Header().Get("X-Route"), rec.Header().Get("X-Step"), tc.route)
		}
	}
	if p := remote.StepPath("a/b c"); p != "/v1/steps/a%2Fb%20c" {
		t.Errorf("StepPath escapes to %s", p)
	}
}

func TestParseProblem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body, code, msg string
	}{
		{`{"code":"rejected","message":"out of stock"}`, "rejected", "out of stock"},
		{`{"code":409,"message":"busy"}`, "409", "busy"},
		{`{"code":" padded ","message":"m"}`, "padded", "m"},
		{`{"type":"about:blank","title":"Bad Request","detail":"sku missing"}`, "", "sku missing"},
		{`{"type":"https://errors.example.com/conflict","title":"Conflict"}`, "https://errors.example.com/conflict", "Conflict"},
		{`{"code":"","type":"https://errors.example.com/x","message":"m","detail":"d"}`, "https://errors.example.com/x", "m"},
		{`{"code":true,"message":"m"}`, "", "m"},
		{`{"code":"c","message":["x"]}`, "", ""},
		{`not here`, "", ""},
		{``, "", ""},
	} {
		if code, msg := remote.ParseProblem([]byte(tc.body)); code != tc.code || msg != tc.msg {
			t.Errorf("ParseProblem(%s) = %q, %q; want %q, %q", tc.body, code, msg, tc.code, tc.msg)
		}
	}
}

// FuzzParseProblem: an error body is outside input. ParseProblem must not
// panic, and a code it returns is trimmed.
func FuzzParseProblem(f *testing.F) {
	f.Add(golden.Read(f, "testdata/problem.json"))
	for _, s := range []string{`{"code":1e400}`, `{"code":-0.5,"type":"about:blank"}`, `{"type":"\ufffd","detail":"\xff"}`, `[]`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		code, _ := remote.ParseProblem(body)
		if code != strings.TrimSpace(code) {
			t.Fatalf("code %q not trimmed", code)
		}
		if !json.Valid(body) && code != "" {
			t.Fatalf("code %q from a body that is not JSON", code)
		}
	})
}
