package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/sasflow/sas/internal/dlq"
	"github.com/sasflow/sas/internal/opsclient"
	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// Bounds of what a page shows.
const (
	// overviewLimit is how many orders of each state the overview lists;
	// the state's own page pages through the rest.
	overviewLimit = 25
	// listLimit is a state page's page size.
	listLimit = 50
	// peekLimit is how many messages of each DLQ the DLQ page peeks at.
	peekLimit = 10
)

// needsPerson are the states the overview lists first: an operator must
// act (Error, CompensationFailed) or may (Waiting: retry now, or cancel).
var needsPerson = []workflow.ProcessState{workflow.Error, workflow.CompensationFailed, workflow.Waiting}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", s.overview)
	m.HandleFunc("GET /list/{state}", s.list)
	m.HandleFunc("GET /find", s.find)
	m.HandleFunc("GET /orders/{id}", s.order)
	m.HandleFunc("GET /orders/{id}/{action}", s.confirmAction)
	m.HandleFunc("POST /orders/{id}/{action}", s.act)
	m.HandleFunc("GET /dlq", s.dlqs)
	m.HandleFunc("GET /dlq/{queue}/redrive", s.confirmRedrive)
	m.HandleFunc("POST /dlq/{queue}/redrive", s.redrive)
	m.Handle("GET /static/", http.FileServerFS(staticFS))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusNotFound, "not-found", "The console has no page at "+r.URL.Path+".")
	})
	s.mux = m
}

// page is what every page's layout needs besides its body.
type page struct {
	Title    string
	Nav      string
	Nonce    string
	CSRF     string
	Endpoint string
	Scope    string
	// Live: the page's live part refreshes itself every RefreshMS.
	Live      bool
	RefreshMS int64
	// Flash says what the last action did; FlashErr that it failed.
	Flash    string
	FlashErr bool
	Body     any
}

func (s *Server) newPage(r *http.Request, title, nav string, live bool, body any) page {
	nonce, _ := r.Context().Value(nonceKey{}).(string)
	return page{Title: title, Nav: nav, Nonce: nonce, CSRF: s.csrf, Endpoint: s.o.Endpoint, Scope: s.o.Scope,
		Live: live, RefreshMS: s.o.Refresh.Milliseconds(), Body: body}
}

// render writes p with the page template name; a request of the live
// script (X-Console-Live) gets the live part alone.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	part := "layout"
	if r.Header.Get("X-Console-Live") == "1" {
		part = "content"
	}
	// Into a buffer first: a template that fails halfway must not leave
	// half a page under a 200.
	var buf bytes.Buffer
	if err := s.pages.set[name].ExecuteTemplate(&buf, part, p); err != nil {
		s.log.Error("console page not rendered", slog.String("page", name), slog.Any("error", err))
		writeProblem(w, http.StatusInternalServerError, "page-not-rendered", "The console could not render the page "+name+".")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// failure is a page saying what went wrong, with a way back.
type failure struct {
	Status  int
	Heading string
	Detail  string
	Back    string
	// Forbidden: API Gateway refused the credentials.
	Forbidden bool
}

// fail renders err of the API or the queues: the API's own status for a
// missing order (404) or a refused action (409), else 502, since the
// console stands in front of the API like a gateway.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, heading string, err error, back string) {
	f := failure{Status: http.StatusBadGateway, Heading: heading, Detail: err.Error(), Back: back}
	var ae *opsclient.APIError
	switch {
	case errors.Is(err, opsclient.ErrNotFound):
		f.Status = http.StatusNotFound
	case errors.Is(err, opsclient.ErrConflict):
		f.Status = http.StatusConflict
	case errors.As(err, &ae) && ae.StatusCode == http.StatusForbidden:
		f.Forbidden = true
	}
	s.render(w, r, f.Status, "failure", s.newPage(r, heading, "", false, f))
}

// stateList is the orders in one listed state.
type stateList struct {
	State workflow.ProcessState
	// What says what the state asks of the operator.
	What   string
	Orders []api.OrderSummary
	// Next is the cursor of the next page; "" on the last.
	Next string
	Err  string
}

// stateWhat says what a listed state asks of an operator.
var stateWhat = map[workflow.ProcessState]string{
	workflow.Error:              "stopped until a person acts: fix the cause, then retry; or cancel",
	workflow.CompensationFailed: "an undo failed for good: fix its cause, then retry resumes the undo",
	workflow.Waiting:            "a step waits out its retry policy's wait and is tried again by itself; retry tries it now",
	workflow.Compensated:        "stopped by itself, everything it did undone",
	workflow.Cancelled:          "stopped by an operator's cancel",
}

// overviewBody is the overview page.
type overviewBody struct {
	Lists []stateList
	// Workflows are the versions and their open orders.
	Workflows    api.Workflows
	WorkflowsErr string
	// Counting: the API has not answered the first count yet.
	Counting     bool
	InFlight     int
	NeedOperator int
	Queues       []dlq.Pair
	QueuesErr    string
	QueuesOff    bool
	Listed       []workflow.ProcessState
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	b := overviewBody{Lists: make([]stateList, len(needsPerson)), QueuesOff: s.o.Queues == nil, Listed: workflow.ListedStates()}
	// One request each, at once: the page costs the slowest, not the sum.
	var wg sync.WaitGroup
	for i, st := range needsPerson {
		wg.Go(func() { b.Lists[i] = s.listState(ctx, st, overviewLimit, "") })
	}
	wg.Go(func() {
		ws, err, ok := s.openCounts(ctx)
		switch {
		case !ok:
			b.Counting = true
			return
		case err != nil:
			b.WorkflowsErr = err.Error()
			return
		}
		b.Workflows = ws
		for _, v := range ws.Workflows {
			b.InFlight += v.InFlight
			b.NeedOperator += v.NeedsOperator
		}
	})
	if s.o.Queues != nil {
		wg.Go(func() {
			pairs, err := s.o.Queues.Discover(ctx)
			if err != nil {
				b.QueuesErr = err.Error()
			}
			b.Queues = pairs
		})
	}
	wg.Wait()
	s.render(w, r, http.StatusOK, "overview", s.newPage(r, "Overview", "overview", true, b))
}

func (s *Server) listState(ctx context.Context, st workflow.ProcessState, limit int, cursor string) stateList {
	l := stateList{State: st, What: stateWhat[st]}
	p, err := s.o.Orders.ListOrders(ctx, opsclient.ListParams{State: st, Limit: limit, Cursor: cursor})
	if err != nil {
		l.Err = err.Error()
		return l
	}
	l.Orders, l.Next = p.Orders, p.NextCursor
	return l
}

// listBody is one page of a listed state.
type listBody struct {
	List   stateList
	Cursor string
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	st, ok := workflow.ParseProcessState(r.PathValue("state"))
	if !ok || !st.Listed() {
		writeProblem(w, http.StatusBadRequest, "state-not-listed", "The API lists the orders in Error, Waiting, CompensationFailed, Compensated and Cancelled only.")
		return
	}
	cursor := r.URL.Query().Get("cursor")
	if cursor != "" && api.CheckCursor(cursor) != nil {
		writeProblem(w, http.StatusBadRequest, "bad-cursor", "The cursor is not one the API gave.")
		return
	}
	l := s.listState(r.Context(), st, listLimit, cursor)
	s.render(w, r, http.StatusOK, "list", s.newPage(r, string(st), "", true, listBody{List: l, Cursor: cursor}))
}

// find goes to the order an operator pasted (from an alert).
func (s *Server) find(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if !message.ValidOrderID(id) {
		writeProblem(w, http.StatusBadRequest, "bad-order-id", "An order ID is 1..64 characters of A-Z, a-z, 0-9 or -.")
		return
	}
	http.Redirect(w, r, "/orders/"+id, http.StatusSeeOther)
}

// orderID is the request's order ID, or a 400 when it is none.
func orderID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !message.ValidOrderID(id) {
		writeProblem(w, http.StatusBadRequest, "bad-order-id", "An order ID is 1..64 characters of A-Z, a-z, 0-9 or -.")
		return "", false
	}
	return id, true
}

func (s *Server) order(w http.ResponseWriter, r *http.Request) {
	id, ok := orderID(w, r)
	if !ok {
		return
	}
	o, err := s.o.Orders.GetOrder(r.Context(), id)
	if err != nil {
		s.fail(w, r, "Order "+id, err, "/")
		return
	}
	p := s.newPage(r, "Order "+id, "", true, newOrderBody(o.Order, s.now()))
	switch r.URL.Query().Get("done") {
	case "retry":
		p.Flash = "Retry accepted: the order is back in flight. This page follows it."
	case "cancel":
		p.Flash = "Cancel accepted: what the order may have done is being undone. This page follows it."
	}
	s.render(w, r, http.StatusOK, "order", p)
}

// actions are what an operator may do to an order, by the URL's name.
var actions = map[string]bool{"retry": true, "cancel": true}

// confirmBody is a confirmation: what will happen, and the form that does it.
type confirmBody struct {
	Heading string
	What    []string
	Action  string
	Button  string
	Back    string
}

func (s *Server) confirmAction(w http.ResponseWriter, r *http.Request) {
	id, ok := orderID(w, r)
	if !ok {
		return
	}
	action := r.PathValue("action")
	if !actions[action] {
		writeProblem(w, http.StatusNotFound, "not-found", "An order has no action "+action+": retry or cancel.")
		return
	}
	o, err := s.o.Orders.GetOrder(r.Context(), id)
	if err != nil {
		s.fail(w, r, "Order "+id, err, "/")
		return
	}
	b := newOrderBody(o.Order, s.now())
	c := confirmBody{Action: "/orders/" + id + "/" + action, Back: "/orders/" + id}
	switch {
	case action == "retry" && b.CanRetry:
		c.Heading, c.What, c.Button = "Retry order "+id+"?", b.RetryWhat, "Retry order"
	case action == "cancel" && b.CanCancel:
		c.Heading, c.What, c.Button = "Cancel order "+id+"?", b.CancelWhat, "Cancel order"
	default:
		s.fail(w, r, "Order "+id, fmt.Errorf("an order in %s cannot be sent to %s: %w", o.State, action, opsclient.ErrConflict), "/orders/"+id)
		return
	}
	s.render(w, r, http.StatusOK, "confirm", s.newPage(r, c.Heading, "", false, c))
}

func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	id, ok := orderID(w, r)
	if !ok {
		return
	}
	action := r.PathValue("action")
	var a opsclient.Accepted
	var err error
	switch action {
	case "retry":
		a, err = s.o.Orders.Retry(r.Context(), id)
	case "cancel":
		a, err = s.o.Orders.Cancel(r.Context(), id)
	default:
		writeProblem(w, http.StatusNotFound, "not-found", "An order has no action "+action+": retry or cancel.")
		return
	}
	if err != nil {
		// refused: the API answered 409 (the order moved on, or its state
		// does not allow it); failed: anything else.
		outcome := "failed"
		if errors.Is(err, opsclient.ErrConflict) {
			outcome = "refused"
		}
		s.log.Warn("console action", slog.String("action", action), slog.String("orderId", id), slog.String("outcome", outcome), slog.Any("error", err))
		s.fail(w, r, action+" of order "+id+" refused", err, "/orders/"+id)
		return
	}
	s.log.Info("console action", slog.String("action", action), slog.String("orderId", id), slog.String("outcome", "accepted"), slog.String("state", string(a.State)))
	http.Redirect(w, r, "/orders/"+id+"?done="+action, http.StatusSeeOther)
}

// dlqBody is the DLQ page.
type dlqBody struct {
	Off    bool
	Err    string
	Queues []queueView
}

// queueView is one DLQ with the messages peeked.
type queueView struct {
	dlq.Pair
	Messages []messageView
	PeekErr  string
	Poison   int
}

// messageView is one message of a DLQ, as `sasctl dlq list` decodes it.
type messageView struct {
	dlq.Message
	Step    string
	Attempt string
	Why     string
	// Order links to the order when the body names a well-formed one.
	Order bool
}

func newMessageView(m dlq.Message, maxReceives int) messageView {
	v := messageView{Message: m, Step: m.Body.Step, Attempt: "-", Why: m.Reason(maxReceives), Order: message.ValidOrderID(m.Body.OrderID)}
	if v.Step == "" && m.Body.OrderID != "" {
		v.Step = "#" + strconv.Itoa(m.Body.StepIndex+1)
	}
	if m.Body.Attempt > 0 {
		v.Attempt = strconv.Itoa(m.Body.Attempt)
	}
	if m.SourceARN != "" {
		v.Why += "; dead-lettered from " + m.SourceARN
	}
	return v
}

func (s *Server) dlqs(w http.ResponseWriter, r *http.Request) {
	b := dlqBody{Off: s.o.Queues == nil}
	if b.Off {
		s.render(w, r, http.StatusOK, "dlq", s.newPage(r, "Dead-letter queues", "dlq", false, b))
		return
	}
	ctx := r.Context()
	pairs, err := s.o.Queues.Discover(ctx)
	if err != nil {
		b.Err = err.Error()
	}
	b.Queues = make([]queueView, len(pairs))
	var wg sync.WaitGroup
	for i, p := range pairs {
		b.Queues[i].Pair = p
		if p.Depth == 0 {
			continue
		}
		wg.Go(func() {
			msgs, err := s.o.Queues.Peek(ctx, p, peekLimit)
			if err != nil {
				b.Queues[i].PeekErr = err.Error()
			}
			for _, m := range msgs {
				v := newMessageView(m, p.MaxReceiveCount)
				if m.Body.Poison != "" {
					b.Queues[i].Poison++
				}
				b.Queues[i].Messages = append(b.Queues[i].Messages, v)
			}
		})
	}
	wg.Wait()
	// Not live: every peek counts as a receive of each message, so the page
	// peeks when asked, not every few seconds.
	p := s.newPage(r, "Dead-letter queues", "dlq", false, b)
	q := r.URL.Query()
	if q.Get("done") == "redrive" {
		if id := q.Get("queue"); queueIDPattern(id) {
			if n, err := strconv.Atoi(q.Get("moved")); err == nil && n >= 0 {
				p.Flash = fmt.Sprintf("Moved %d messages of %s back to its source queue.", n, id)
			} else {
				p.Flash = "Started a message move task for " + id + ": SQS moves the messages in the background."
			}
		}
	}
	s.render(w, r, http.StatusOK, "dlq", p)
}

// queueIDPattern: a queue ID as Discover names them (a queue name's
// tail): SQS names are 1..80 of A-Z, a-z, 0-9, - and _.
func queueIDPattern(id string) bool {
	if id == "" || len(id) > 80 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// pair finds the queue the request names among those discovered.
func (s *Server) pair(w http.ResponseWriter, r *http.Request) (dlq.Pair, bool) {
	if s.o.Queues == nil {
		writeProblem(w, http.StatusNotFound, "no-queues", "The console was started without the dead-letter queues.")
		return dlq.Pair{}, false
	}
	id := r.PathValue("queue")
	if !queueIDPattern(id) {
		writeProblem(w, http.StatusBadRequest, "bad-queue", "A queue ID is 1..80 characters of A-Z, a-z, 0-9, - or _.")
		return dlq.Pair{}, false
	}
	pairs, err := s.o.Queues.Discover(r.Context())
	if err != nil {
		s.fail(w, r, "Dead-letter queues", err, "/dlq")
		return dlq.Pair{}, false
	}
	for _, p := range pairs {
		if p.ID == id {
			return p, true
		}
	}
	writeProblem(w, http.StatusNotFound, "no-such-queue", "No work queue "+id+" with a dead-letter queue.")
	return dlq.Pair{}, false
}

func (s *Server) confirmRedrive(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pair(w, r)
	if !ok {
		return
	}
	c := confirmBody{
		Heading: "Redrive " + p.ID + "?",
		What: []string{
			fmt.Sprintf("Moves every message of the dead-letter queue %s (%d now) back to its source queue %s, whose consumer handles each again.", p.DLQ.Name, p.Depth, p.Source.Name),
			"SQS moves them with a message move task, in the background; where the endpoint has none (the local stack), the console copies them: receive, send to the source, then delete, so a crash duplicates a message and never loses one.",
			"Fix the cause first: a message whose handler still fails comes back after its receives, and a poison one (which no consumer can read) comes straight back.",
		},
		Action: "/dlq/" + p.ID + "/redrive", Button: "Redrive " + p.ID, Back: "/dlq",
	}
	s.render(w, r, http.StatusOK, "confirm", s.newPage(r, c.Heading, "dlq", false, c))
}

func (s *Server) redrive(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pair(w, r)
	if !ok {
		return
	}
	res, err := s.o.Queues.Redrive(r.Context(), p)
	if err != nil {
		s.log.Warn("console action", slog.String("action", "redrive"), slog.String("queue", p.ID), slog.String("outcome", "failed"), slog.Any("error", err))
		s.fail(w, r, "Redrive of "+p.ID+" failed", err, "/dlq")
		return
	}
	// copied: the console moved Count messages itself; started: an SQS
	// message move task moves them.
	if res.Copied {
		s.log.Info("console action", slog.String("action", "redrive"), slog.String("queue", p.ID), slog.String("outcome", "copied"), slog.Int("moved", res.Count))
	} else {
		s.log.Info("console action", slog.String("action", "redrive"), slog.String("queue", p.ID), slog.String("outcome", "started"), slog.String("task", res.Task))
	}
	q := url.Values{"done": {"redrive"}, "queue": {p.ID}}
	if res.Copied {
		q.Set("moved", strconv.Itoa(res.Count))
	}
	http.Redirect(w, r, "/dlq?"+q.Encode(), http.StatusSeeOther)
}
