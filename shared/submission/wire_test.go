package submission

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/shared/workflow"
)

// TestAnswersCarryOutputsAsTheyCame: the API's JSON answers write a step's
// output and, to operators, the text of remote errors as the system stores
// them, not HTML-escaped; nosniff keeps a browser from reading the markup
// as a page.
func TestAnswersCarryOutputsAsTheyCame(t *testing.T) {
	t.Parallel()
	const (
		id     = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
		output = "{\"receipt\":\"<b class='x'>&amp;</b> é€😀\u2028\"}"
		fault  = "rejected: <b>sold out</b> & gone"
	)
	st := workflow.NewState(id, workflow.Reference(), json.RawMessage(`{}`), testNow, time.Time{})
	st.ProcessState, st.LastError = workflow.Error, fault
	ownBy(&st, callerA)
	st.Steps[0] = workflow.StepRecord{Name: "reserve-inventory", State: workflow.StepSucceeded, Attempts: 1, Output: json.RawMessage(output)}
	f := newFixture(t, nil)
	f.put(st)
	resp := f.do(t, request("GET", "/ops/orders/"+id, nil, ""))
	if resp.StatusCode != 200 || resp.Headers["X-Content-Type-Options"] != "nosniff" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Headers)
	}
	for _, want := range []string{`"output":` + output, `"lastError":"` + fault + `"`} {
		if !strings.Contains(resp.Body, want) {
			t.Errorf("body %s\ndoes not hold %s as it is", resp.Body, want)
		}
	}
}

// TestProblemsCarryTheirTextAsItIs: a problem's detail quotes what the
// client sent; it is written as it is too.
func TestProblemsCarryTheirTextAsItIs(t *testing.T) {
	t.Parallel()
	resp := respond(400, contentTypeProblem, problem(400, ProblemValidation, `sku "<b>&" is not a SKU`), nil)
	if !strings.Contains(resp.Body, `"detail":"sku \"<b>&\" is not a SKU"`) || resp.Headers["X-Content-Type-Options"] != "nosniff" {
		t.Fatalf("headers %v body %s", resp.Headers, resp.Body)
	}
}
