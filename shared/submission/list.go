package submission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// Limits of GET /orders and GET /ops/orders.
const (
	DefaultListLimit = 25
	MaxListLimit     = statestore.MaxPage // the store refuses larger pages
	// maxCursorLen bounds what is handed to the store to decode; the store's
	// cursors are far shorter.
	maxCursorLen = 2048
)

// The parameters of GET /ops/orders; GET /orders takes limit and cursor.
const (
	paramState  = "state"
	paramLimit  = "limit"
	paramCursor = "cursor"
)

// ListQuery is a decoded listing query: GET /ops/orders's, with a State, or
// GET /orders's, without one.
type ListQuery struct {
	State  workflow.ProcessState // "" for a listing of the caller's own orders
	Limit  int
	Cursor string // "" for the first page
}

// QueryError lists every fault of a query string, each under the parameter
// it concerns ("" for the query string as a whole).
type QueryError struct {
	Errors []FieldError
}

func (e *QueryError) Error() string { return faults(e.Errors).join(": ") }

// DecodeListQuery reads the query of GET /ops/orders, where state is
// required. rawQuery is the event's RawQueryString; params, its
// QueryStringParameters, is read only when rawQuery is empty, because API
// Gateway joins repeated values there with commas and so hides a repeat the
// raw string still shows. Unknown and repeated parameters are refused rather
// than ignored, so a typo such as "limt=5" is not silently answered with
// another page size. An empty limit or cursor counts as absent. The error is
// a *QueryError.
func DecodeListQuery(rawQuery string, params map[string]string) (ListQuery, error) {
	return decodeListQuery(rawQuery, params, true)
}

// DecodeOwnListQuery reads the query of GET /orders, the caller's own
// orders: limit and cursor only, by the rules of DecodeListQuery. A state
// is refused with a pointer to the operators' listing, so a client used to
// it learns why its filter is gone.
func DecodeOwnListQuery(rawQuery string, params map[string]string) (ListQuery, error) {
	return decodeListQuery(rawQuery, params, false)
}

func decodeListQuery(rawQuery string, params map[string]string, byState bool) (ListQuery, error) {
	values, err := queryValues(rawQuery, params)
	if err != nil {
		return ListQuery{}, &QueryError{Errors: []FieldError{{Detail: "the query string is not well-formed: " + err.Error()}}}
	}
	var errs faults
	checkParams(&errs, values, byState)
	q := ListQuery{Limit: DefaultListLimit}
	if byState {
		q.State = checkState(&errs, values.Get(paramState))
	}
	if s := values.Get(paramLimit); s != "" {
		n, ok := parseLimit(s)
		if !ok {
			errs.add(paramLimit, fmt.Sprintf("must be an integer within 1..%d", MaxListLimit))
		}
		q.Limit = n
	}
	q.Cursor = values.Get(paramCursor)
	if len(q.Cursor) > maxCursorLen {
		errs.add(paramCursor, "is not a cursor this API returned")
	}
	// Order the errors as the parameters appear in the documentation, the
	// unknown ones last, so the problem is stable.
	slices.SortStableFunc(errs, func(a, b FieldError) int { return paramRank(a.Field) - paramRank(b.Field) })
	if len(errs) > 0 {
		return ListQuery{}, &QueryError{Errors: errs}
	}
	return q, nil
}

// queryValues are the parameters of the raw query string, or else of the
// parameter map.
func queryValues(rawQuery string, params map[string]string) (url.Values, error) {
	if rawQuery != "" {
		return url.ParseQuery(rawQuery)
	}
	values := url.Values{}
	for k, v := range params {
		values[k] = []string{v}
	}
	return values, nil
}

// checkParams records the parameters that are nameless, unknown, repeated,
// or, on a listing of the caller's own orders, a state.
func checkParams(errs *faults, values url.Values, byState bool) {
	known := "use state, limit and cursor"
	if !byState {
		known = "use limit and cursor"
	}
	unknown := make([]string, 0, len(values))
	for k, v := range values {
		switch {
		case k == "":
			errs.add("", "a parameter has no name")
		case k == paramState && !byState:
			errs.add(k, "is not a parameter of this resource, which lists your own orders, newest first; "+
				"listing every caller's orders by state is the operators' GET /ops/orders")
		case k != paramState && k != paramLimit && k != paramCursor:
			unknown = append(unknown, k)
		case len(v) > 1:
			errs.add(k, fmt.Sprintf("is given %d times; give it once", len(v)))
		}
	}
	slices.Sort(unknown) // map order would make the problem differ run to run
	for _, k := range unknown {
		errs.add(k, "is not a parameter of this resource; "+known)
	}
}

func paramRank(p string) int {
	switch p {
	case paramState:
		return 0
	case paramLimit:
		return 1
	case paramCursor:
		return 2
	}
	return 3
}

// parseLimit takes only plain decimal digits: strconv.Atoi would also take
// "+5", and nothing but a bounded number of digits can be in range.
func parseLimit(s string) (int, bool) {
	if len(s) > len(strconv.Itoa(MaxListLimit))+2 { // room for leading zeros, none for overflow
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n >= 1 && n <= MaxListLimit
}

// checkState reads the state of a listing by state: one of the listed
// states (workflow.ProcessState.Listed). A state that is not listed is
// named as such, with where its orders are found instead.
func checkState(errs *faults, s string) workflow.ProcessState {
	listed := "one of " + listedStates()
	st, ok := workflow.ParseProcessState(s)
	switch {
	case s == "":
		errs.add(paramState, "is required; use "+listed)
	case !ok:
		errs.add(paramState, "must be "+listed)
	case !st.Listed():
		errs.add(paramState, notListed(st))
	}
	return st
}

// notListed is the fault of a listing of a state that is not listed.
func notListed(st workflow.ProcessState) string {
	return fmt.Sprintf("%s is not listed: only %s are; read an order in any state by its ID, GET /ops/orders/{id}", st, listedStates())
}

func listedStates() string {
	states := workflow.ListedStates()
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// Encode returns the query string that DecodeListQuery (or, without a State,
// DecodeOwnListQuery) reads back as q.
func (q ListQuery) Encode() string {
	s := paramLimit + "=" + strconv.Itoa(q.Limit)
	if q.State != "" {
		s = paramState + "=" + url.QueryEscape(string(q.State)) + "&" + s
	}
	if q.Cursor != "" {
		s += "&" + paramCursor + "=" + url.QueryEscape(q.Cursor)
	}
	return s
}

// listOrders answers the operators' GET /ops/orders?state=S: every
// caller's orders in a state.
func (h *Handler) listOrders(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, _ args) events.APIGatewayV2HTTPResponse {
	q, err := DecodeListQuery(req.RawQueryString, req.QueryStringParameters)
	if err != nil {
		return h.reject(ctx, log, req, queryProblem(err), nil)
	}
	page, err := h.store.ListByState(ctx, q.State, q.Limit, q.Cursor)
	if errors.Is(err, statestore.ErrBadCursor) {
		return h.reject(ctx, log, req, badCursorProblem(), nil)
	}
	if errors.Is(err, statestore.ErrNotListed) {
		return h.reject(ctx, log, req, queryProblem(&QueryError{Errors: []FieldError{{Field: paramState, Detail: notListed(q.State)}}}), nil)
	}
	if err != nil {
		return h.internal(ctx, log, req, fmt.Errorf("list orders in %s (limit %d): %w", q.State, q.Limit, err))
	}
	log.DebugContext(ctx, "orders listed", slog.String("state", string(q.State)), slog.Int("count", len(page.States)), slog.Bool("more", page.Next != ""))
	return respond(http.StatusOK, contentTypeJSON, listBody(page, q, "/ops/orders", true, log), nil)
}

// listOwnOrders answers a client's GET /orders: the caller's own orders,
// newest first. A cursor of another caller's listing is refused like a
// forged one.
func (h *Handler) listOwnOrders(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, a args) events.APIGatewayV2HTTPResponse {
	q, err := DecodeOwnListQuery(req.RawQueryString, req.QueryStringParameters)
	if err != nil {
		return h.reject(ctx, log, req, queryProblem(err), nil)
	}
	page, err := h.store.ListByOwner(ctx, a.owner.Key(), q.Limit, q.Cursor)
	if errors.Is(err, statestore.ErrBadCursor) {
		return h.reject(ctx, log, req, badCursorProblem(), nil)
	}
	if err != nil {
		return h.internal(ctx, log, req, fmt.Errorf("list the caller's orders (limit %d): %w", q.Limit, err))
	}
	log.DebugContext(ctx, "own orders listed", slog.Int("count", len(page.States)), slog.Bool("more", page.Next != ""))
	return respond(http.StatusOK, contentTypeJSON, listBody(page, q, "/orders", false, log), nil)
}

func badCursorProblem() Problem {
	return queryProblem(&QueryError{Errors: []FieldError{{
		Field: paramCursor, Detail: "is not a cursor this API returned; list again without it"}}})
}

// listBody is a page of summaries, with the link to the next page of the
// same listing at path. A summary is what the store's index projects: the
// order's status view without the step history or the input (a listed
// record has neither), with its LastError for operators only (newStatus).
func listBody(page statestore.Page, q ListQuery, path string, operator bool, log *slog.Logger) api.Page {
	body := api.Page{Orders: make([]api.OrderSummary, len(page.States))}
	for i, st := range page.States {
		body.Orders[i] = newStatus(st, operator, log).Summary()
	}
	if page.Next != "" {
		next := ListQuery{State: q.State, Limit: q.Limit, Cursor: page.Next}
		body.NextCursor = page.Next
		body.Links = &api.PageLinks{Next: path + "?" + next.Encode()}
	}
	return body
}

// queryProblem is the 400 of a bad query; one fault is named in the detail
// so the problem reads well without its errors member.
func queryProblem(err error) Problem {
	var qe *QueryError
	if !errors.As(err, &qe) || len(qe.Errors) == 0 {
		return problem(http.StatusBadRequest, ProblemMalformed, "the query string is not valid")
	}
	detail := "the query string has invalid parameters"
	if len(qe.Errors) == 1 {
		detail = qe.Error()
	}
	var fields []FieldError
	for _, fe := range qe.Errors {
		if fe.Field != "" {
			fields = append(fields, fe)
		}
	}
	return problem(http.StatusBadRequest, ProblemMalformed, detail, fields...)
}
