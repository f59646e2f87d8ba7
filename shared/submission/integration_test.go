package submission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// The tests in this file run the handler over the real state store on
// DynamoDB Local: the conditional writes, the ByState index and its cursors
// are the store's, not a fake's.

func TestMain(m *testing.M) { enginetest.Main(m) }

type dynamoFixture struct {
	*fixture
	db     *statestore.Store
	clk    *clock.Fake
	client *dynamodb.Client
	tables statestore.Tables
}

// newDynamoFixture builds a Handler over fresh tables; wrap, if given, wraps
// the real store to let a test interleave requests.
func newDynamoFixture(t *testing.T, wrap func(Store) Store) *dynamoFixture {
	t.Helper()
	client := enginetest.DynamoDB(t)
	tables := statestore.Tables{Orders: enginetest.UniqueName(t, "orders"), State: enginetest.UniqueName(t, "state")}
	if err := statestore.CreateTables(context.Background(), client, tables, statestore.WithoutTTL()); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(testNow)
	db := statestore.New(client, tables, statestore.WithClock(clk))
	var store Store = db
	if wrap != nil {
		store = wrap(db)
	}
	f := &dynamoFixture{fixture: &fixture{out: &outbox{}, logs: &logtest.Buffer{}}, db: db, clk: clk, client: client, tables: tables}
	log := slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.h = mustNew(t, testConfig(), store, f.out.sender(), admitAll, actor.Deps{Clock: f.clk, Log: log})
	return f
}

// tick moves the clock on, so every write has its own time.
func (f *dynamoFixture) tick() time.Time {
	f.clk.Advance(time.Second)
	return f.clk.Now()
}

// create submits an order through the handler.
func (f *dynamoFixture) create(t *testing.T, clientID string) string {
	t.Helper()
	body := validBody
	if clientID != "" {
		body = strings.Replace(validBody, `"currency"`, `"clientId":"`+clientID+`","currency"`, 1)
	}
	f.tick()
	return readAccepted(t, f.do(t, postOrder(body))).OrderID
}

// machine is the workflow's state machine as the Scheduler runs it on the
// handler's workflow.
func machine() workflow.Machine {
	return workflow.Machine{Def: testConfig().Workflows.Definitions[0], Policy: workflow.Policy{
		MaxFailures: 3, ClaimTimeout: testConfig().ClaimTimeout, AlertTimeout: time.Minute, Retention: testConfig().Retention}}
}

// apply writes a change to the real store, as an actor would.
func (f *dynamoFixture) apply(t *testing.T, c workflow.Change) workflow.State {
	t.Helper()
	st, err := f.db.Apply(context.Background(), c)
	if err != nil {
		t.Fatalf("%s of %s: %v", c.Transition, c.OrderID, err)
	}
	return st
}

// claim takes the order's current step (or its compensation) as a Scheduler.
func (f *dynamoFixture) claim(t *testing.T, id string, step int, compensate bool) workflow.State {
	t.Helper()
	return f.apply(t, machine().Claim(id, step, compensate, "scheduler-1", f.tick()))
}

// current is the order's record with its current step claimed: a new
// order's first step is claimed at submission; a Pending one (retried) is
// claimed here as a Scheduler would.
func (f *dynamoFixture) current(t *testing.T, id string) workflow.State {
	t.Helper()
	if st := f.get(t, id); st.ProcessState != workflow.Pending {
		return st
	}
	return f.claim(t, id, f.get(t, id).StepIndex, false)
}

// fail forces an order into Error: its first step is claimed and rejected,
// as if it could not be undone (as an order stopped before compensation
// existed, or one with a step that has no undo, is left).
func (f *dynamoFixture) fail(t *testing.T, id string) {
	t.Helper()
	st := f.current(t, id)
	m := machine()
	m.Def.Steps = slices.Clone(m.Def.Steps)
	for i := range m.Def.Steps {
		m.Def.Steps[i].Compensable = false
	}
	if st = f.apply(t, m.StepRejected(id, 0, st.Attempt, "card declined", false, "scheduler-1", f.tick())); st.ProcessState != workflow.Error {
		t.Fatalf("fail %s: %+v", id, st)
	}
}

// process runs an order's two steps to Processed as a Scheduler would.
func (f *dynamoFixture) process(t *testing.T, id string) {
	t.Helper()
	st := f.current(t, id)
	for i := range 2 {
		st = f.apply(t, machine().StepCompleted(id, i, st.Attempt, nil, "scheduler-1", f.tick()))
	}
	if st.ProcessState != workflow.Processed {
		t.Fatalf("process %s: %+v", id, st)
	}
}

func (f *dynamoFixture) get(t *testing.T, id string) workflow.State {
	t.Helper()
	st, err := f.db.GetState(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// list walks the operators' listing by state page by page.
func (f *dynamoFixture) list(t *testing.T, query string) (ids []string, pages int) {
	t.Helper()
	orders, cursors := f.walk(t, getOrders(query))
	return orderIDs(orders), len(cursors) + 1
}

func TestIntegrationListOrders(t *testing.T) {
	t.Parallel()
	f := newDynamoFixture(t, nil)
	var failed []string
	for i := range 5 {
		failed = append(failed, f.create(t, fmt.Sprintf("shop.%d", i)))
	}
	pending := []string{f.create(t, ""), f.create(t, "")} // in flight
	for _, id := range failed {
		f.fail(t, id)
	}

	ids, pages := f.list(t, "state=Error&limit=2")
	// Newest entry into the state first: the last order failed comes first.
	want := []string{failed[4], failed[3], failed[2], failed[1], failed[0]}
	if pages != 3 || strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("listed %v in %d pages, want %v in 3", ids, pages, want)
	}
	// Orders in flight are not listed: the state is refused, naming those
	// that are.
	if len(pending) != 2 || f.get(t, pending[0]).ProcessState != workflow.Processing {
		t.Fatalf("orders in flight %v", pending)
	}
	p := readProblem(t, f.do(t, getOrders("state=Pending")), 400)
	if len(p.Errors) != 1 || p.Errors[0].Field != "state" || !strings.Contains(p.Detail, "Pending is not listed: only Error, Waiting, Compensated, CompensationFailed, Cancelled") {
		t.Fatalf("listing of Pending: %+v", p)
	}

	// One summary in full: what the index projects is enough for it.
	first := readList(t, f.do(t, getOrders("state=Error&limit=1")))
	resp := f.do(t, getOrders("state=Error&limit=1"))
	var body struct {
		Orders []map[string]any `json:"orders"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil || len(body.Orders) != 1 {
		t.Fatalf("body %s: %v", resp.Body, err)
	}
	o := body.Orders[0]
	if o["orderId"] != failed[4] || o["state"] != "Error" || o["status"] != "error" || o["step"] != "reserve-inventory" ||
		o["attempt"] != 1.0 || o["lastError"] != "card declined" || o["clientId"] != "shop.4" || o["createdAt"] == nil || o["updatedAt"] == nil {
		t.Fatalf("summary %v", o)
	}

	// A cursor is bound to its listing, and a forged one is the client's
	// mistake, not a 500.
	for _, q := range []string{
		"state=Cancelled&cursor=" + first.NextCursor,
		"state=Error&cursor=not-a-cursor",
		"state=Error&cursor=" + strings.Repeat("A", 600),
	} {
		p := readProblem(t, f.do(t, getOrders(q)), 400)
		if len(p.Errors) != 1 || p.Errors[0].Field != "cursor" {
			t.Fatalf("%s: problem %+v", q, p)
		}
	}
}

// idsOf drops the page count of a listing.
func idsOf(ids []string, _ int) []string { return ids }

// TestIntegrationListingFollowsTheState: an order retried leaves the
// listing of Error; failing again, it comes back first.
func TestIntegrationListingFollowsTheState(t *testing.T) {
	t.Parallel()
	f := newDynamoFixture(t, nil)
	var failed []string
	for range 3 {
		id := f.create(t, "")
		f.fail(t, id)
		failed = append(failed, id)
	}
	readOperatorAccepted(t, f.do(t, post("/orders/"+failed[0]+"/retry")), failed[0], workflow.Pending)
	if want := []string{failed[2], failed[1]}; !slices.Equal(idsOf(f.list(t, "state=Error")), want) {
		t.Fatalf("after a retry Error lists %v, want %v", idsOf(f.list(t, "state=Error")), want)
	}
	f.fail(t, failed[0])
	if want := []string{failed[0], failed[2], failed[1]}; !slices.Equal(idsOf(f.list(t, "state=Error&limit=1")), want) {
		t.Fatalf("after failing again Error lists %v, want %v", idsOf(f.list(t, "state=Error")), want)
	}
}

func TestIntegrationRetry(t *testing.T) {
	t.Parallel()
	f := newDynamoFixture(t, nil)
	id := f.create(t, "")
	f.fail(t, id)
	before := f.get(t, id)

	f.tick()
	readOperatorAccepted(t, f.do(t, post("/orders/"+id+"/retry")), id, workflow.Pending)
	st := f.get(t, id)
	if st.ProcessState != workflow.Pending || st.Resubmits != 1 || st.FailureCount != 0 || st.AlertPending ||
		st.EventSeq != before.EventSeq+1 || !st.CompleteBy.Equal(f.clk.Now().Add(testConfig().ClaimTimeout)) {
		t.Fatalf("after retry %+v", st)
	}
	// The Scheduler can claim what the message asks for.
	if ms := schedules(t, f.out); len(ms) != 1 || ms[0] != message.NewSchedule(id, "order-v1", 0, "resubmitted") {
		t.Fatalf("sent %+v", ms)
	}
	f.claim(t, id, 0, false)

	p := readProblem(t, f.do(t, post("/orders/"+id+"/retry")), 409)
	if p.Type != ProblemConflict || !strings.Contains(p.Detail, "is Processing") {
		t.Fatalf("second retry: %+v", p)
	}
	readProblem(t, f.do(t, post("/orders/"+randomOrderID()+"/retry")), 404)
}

// barrierAtWrites is the real store whose writes wait at b: every request
// has read before any writes.
type barrierAtWrites struct {
	Store
	b *barrier
}

func (s barrierAtWrites) Apply(ctx context.Context, c workflow.Change) (workflow.State, error) {
	s.b.wait()
	return s.Store.Apply(ctx, c)
}

// TestIntegrationConcurrentRetries: both operators read the order in Error
// before either writes; the store's condition lets exactly one through.
func TestIntegrationConcurrentRetries(t *testing.T) {
	t.Parallel()
	b := newBarrier(2)
	f := newDynamoFixture(t, func(s Store) Store { return barrierAtWrites{s, b} })
	id := f.create(t, "")
	f.fail(t, id)

	resps := atOnce(t, f.h, 2, post("/orders/"+id+"/retry"))
	if a, b := resps[0].StatusCode, resps[1].StatusCode; a+b != 202+409 || a == b {
		t.Fatalf("statuses %d and %d, want one 202 and one 409: %s / %s", a, b, resps[0].Body, resps[1].Body)
	}
	if st := f.get(t, id); st.Resubmits != 1 || st.ProcessState != workflow.Pending {
		t.Fatalf("after both retries %+v", st)
	}
	if ms := schedules(t, f.out); len(ms) != 1 || ms[0] != message.NewSchedule(id, "order-v1", 0, "resubmitted") {
		t.Fatalf("sent %+v, want one resubmission's", ms)
	}
}

func TestIntegrationCancel(t *testing.T) {
	t.Parallel()
	f := newDynamoFixture(t, nil)

	// Never claimed: nothing to undo, the order is Cancelled outright. A
	// new order's first step is claimed at submission, so only a record
	// written before that has none (seeded as such here).
	idle := randomOrderID()
	old := workflow.NewState(idle, workflow.Reference(), json.RawMessage(`{}`), f.tick(), f.clk.Now().Add(time.Minute))
	ownBy(&old, callerA)
	if err := f.db.CreateOrder(context.Background(), workflow.Order{OrderID: idle, Owner: old.Owner, OwnerID: old.OwnerID, CreatedAt: f.clk.Now()}, old); err != nil {
		t.Fatal(err)
	}
	f.tick()
	readOperatorAccepted(t, f.do(t, post("/orders/"+idle+"/cancel")), idle, workflow.Cancelled)
	readOperatorAccepted(t, f.do(t, post("/orders/"+idle+"/cancel")), idle, workflow.Cancelled) // a repeat
	if st := f.get(t, idle); st.ProcessState != workflow.Cancelled || !st.Cancelled || st.Steps[0].State != workflow.StepCancelled {
		t.Fatalf("idle order after cancel %+v", st)
	}
	var status struct {
		Status    string `json:"status"`
		Cancelled bool   `json:"cancelled"`
	}
	resp := f.do(t, request("GET", "/orders/"+idle, nil, ""))
	if err := json.Unmarshal([]byte(resp.Body), &status); err != nil || status.Status != "cancelled" || !status.Cancelled {
		t.Fatalf("status %s", resp.Body)
	}

	// Claimed at submission: the Agent may have applied the step, so it is
	// undone, and the Agent's late reply is refused.
	busy := f.create(t, "shop.web")
	claimed := f.get(t, busy)
	f.tick()
	readOperatorAccepted(t, f.do(t, post("/orders/"+busy+"/cancel")), busy, workflow.CompensationPending)
	st := f.get(t, busy)
	if st.ProcessState != workflow.CompensationPending || !st.Cancelled || st.Attempt != claimed.Attempt+1 ||
		st.Steps[0].Compensation != workflow.StepPending || st.LockedBy != "" {
		t.Fatalf("busy order after cancel %+v", st)
	}
	sent := schedules(t, f.out)
	if last := sent[len(sent)-1]; last != message.NewCompensation(busy, "order-v1", 0, "cancelled") {
		t.Fatalf("last message %+v", last)
	}
	_, err := f.db.Apply(context.Background(), machine().StepCompleted(busy, 0, claimed.Attempt, nil, "scheduler-1", f.tick()))
	if !errors.Is(err, workflow.ErrStale) {
		t.Fatalf("the cancelled Agent's reply: %v, want ErrStale", err)
	}

	// Its compensation fails; an operator retries the compensation.
	undo := f.claim(t, busy, 0, true)
	if st := f.apply(t, machine().UndoRejected(busy, 0, undo.Attempt, "warehouse down", false, workflow.State{}, f.tick())); st.ProcessState != workflow.CompensationFailed {
		t.Fatalf("failed compensation %+v", st)
	}
	readOperatorAccepted(t, f.do(t, post("/orders/"+busy+"/retry")), busy, workflow.CompensationPending)
	sent = schedules(t, f.out)
	if last := sent[len(sent)-1]; last != message.NewCompensation(busy, "order-v1", 0, "resubmitted") {
		t.Fatalf("last message %+v", last)
	}
	// Still the answer to a repeated cancel: it took effect.
	readOperatorAccepted(t, f.do(t, post("/orders/"+busy+"/cancel")), busy, workflow.CompensationPending)

	// In Error: its claimed step may have been applied, so the cancel
	// undoes it.
	failed := f.create(t, "")
	f.fail(t, failed)
	readOperatorAccepted(t, f.do(t, post("/orders/"+failed+"/cancel")), failed, workflow.CompensationPending)
	if st := f.get(t, failed); !st.Cancelled || st.AlertPending || st.Steps[0].Compensation != workflow.StepPending {
		t.Fatalf("cancelled Error order %+v", st)
	}
	// A Processed one has nothing to cancel.
	done := f.create(t, "")
	f.process(t, done)
	if p := readProblem(t, f.do(t, post("/orders/"+done+"/cancel")), 409); !strings.Contains(p.Detail, "is Processed") {
		t.Fatalf("cancel of a processed order: %+v", p)
	}

	// Cancelled is listed; the orders whose compensation runs are not
	// (the Supervisor watches them), and no longer listed in Error.
	for q, want := range map[string][]string{"state=Cancelled": {idle}, "state=Error": nil, "state=CompensationFailed": nil} {
		if ids, _ := f.list(t, q); !slices.Equal(ids, want) {
			t.Fatalf("%s lists %v, want %v", q, ids, want)
		}
	}
}

// TestIntegrationTenantIsolation is TestTenantIsolation on DynamoDB Local,
// through the real store: the ByOwner index, its cursors bound to their
// owner, and the order IDs derived from owner and key.
func TestIntegrationTenantIsolation(t *testing.T) {
	t.Parallel()
	f := newDynamoFixture(t, nil)
	post := func(caller, key string) events.APIGatewayV2HTTPResponse {
		f.tick()
		req := postOrder(validBody)
		if key != "" {
			req = postOrder(validBody, "Idempotency-Key", key)
		}
		return f.do(t, as(req, caller))
	}
	// The same key from A and from B: two orders, both 202, neither 422.
	a1, b1 := post(callerA, "same-key"), post(callerB, "same-key")
	aID, bID := readAccepted(t, a1).OrderID, readAccepted(t, b1).OrderID
	if aID == bID || a1.Headers[ReplayedHeader] != "" || b1.Headers[ReplayedHeader] != "" {
		t.Fatalf("one key from two callers: %s / %s", a1.Body, b1.Body)
	}
	if r := post(callerB, "same-key"); readAccepted(t, r).OrderID != bID || r.Headers[ReplayedHeader] != "true" {
		t.Fatalf("B's retry: %s", r.Body)
	}
	aIDs, bIDs := []string{aID}, []string{bID}
	for range 2 {
		aIDs = append(aIDs, readAccepted(t, post(callerA, "")).OrderID)
		bIDs = append(bIDs, readAccepted(t, post(callerB, "")).OrderID)
	}
	for _, id := range aIDs {
		if o, err := f.db.GetOrder(context.Background(), id); err != nil || o.Owner != callerA || o.OwnerID != ownerA.ID || f.get(t, id).OwnerKey() != ownerA.Key() {
			t.Fatalf("order %s: %+v, %v", id, o, err)
		}
	}

	// GET: one's own is 200, the other's 404 like a missing one.
	if r := f.do(t, as(request("GET", "/orders/"+bID, nil, ""), callerB)); r.StatusCode != 200 {
		t.Fatalf("B reading its order: %d %s", r.StatusCode, r.Body)
	}
	foreign := f.do(t, as(request("GET", "/orders/"+aID, nil, ""), callerB))
	readProblem(t, foreign, 404)
	neverUsed := randomOrderID()
	missing := f.do(t, as(request("GET", "/orders/"+neverUsed, nil, ""), callerB))
	if strings.ReplaceAll(foreign.Body, aID, "ID") != strings.ReplaceAll(missing.Body, neverUsed, "ID") {
		t.Fatalf("another's order answered %s, a missing one %s", foreign.Body, missing.Body)
	}

	// Listings: each its own, newest first, a page of 2 at a time.
	list := func(caller string) (ids, cursors []string) {
		orders, cursors := f.walk(t, ownOrders("limit=2", caller))
		for _, o := range orders {
			if o.State != "Processing" || o.Status != "accepted" {
				t.Fatalf("summary %+v", o)
			}
		}
		return orderIDs(orders), cursors
	}
	gotA, aCursors := list(callerA)
	gotB, bCursors := list(callerB)
	if want := []string{aIDs[2], aIDs[1], aIDs[0]}; strings.Join(gotA, ",") != strings.Join(want, ",") || len(aCursors) != 1 {
		t.Fatalf("A lists %v with %d cursors, want %v", gotA, len(aCursors), want)
	}
	if want := []string{bIDs[2], bIDs[1], bIDs[0]}; strings.Join(gotB, ",") != strings.Join(want, ",") || len(bCursors) != 1 {
		t.Fatalf("B lists %v with %d cursors, want %v", gotB, len(bCursors), want)
	}
	for _, tc := range []struct{ caller, cursor string }{{callerA, bCursors[0]}, {callerB, aCursors[0]}, {callerA, "forged"}} {
		p := readProblem(t, f.do(t, ownOrders("cursor="+tc.cursor, tc.caller)), 400)
		if len(p.Errors) != 1 || p.Errors[0].Field != "cursor" {
			t.Fatalf("cursor %s for %s: %+v", tc.cursor, tc.caller, p)
		}
	}

	// The operators' listing by state has both callers' orders, once
	// they are in a listed state: cancelled, which undoes the first step
	// dispatched at submission, then Compensated once a Scheduler commits
	// the undo.
	for _, id := range append(slices.Clone(aIDs), bIDs...) {
		f.tick()
		readOperatorAccepted(t, f.do(t, request("POST", "/orders/"+id+"/cancel", nil, "")), id, workflow.CompensationPending)
		undo := f.claim(t, id, 0, true)
		f.apply(t, machine().UndoCompleted(id, 0, undo.Attempt, nil, workflow.State{}, "scheduler-1", f.tick()))
	}
	ids, _ := f.list(t, "state=Compensated&limit=100")
	if len(ids) != len(aIDs)+len(bIDs) {
		t.Fatalf("the operators list %v, want all of %v and %v", ids, aIDs, bIDs)
	}
}

// TestIntegrationAStampedOrderIsItsOwnersAgain: an order of an IAM user
// written before owners' unique IDs were recorded is no client's on
// DynamoDB Local; once stamped with the user's ID (sasctl owners stamp),
// the user reads it, lists it and has its Idempotency-Key replay it, and
// the operators see its owner and ID.
func TestIntegrationAStampedOrderIsItsOwnersAgain(t *testing.T) {
	t.Parallel()
	f := newDynamoFixture(t, nil)
	ctx := context.Background()
	at := f.tick()
	const id = "5b0c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d"
	o := workflow.Order{OrderID: id, Owner: callerA, CustomerID: "c-42", Currency: "EUR", IdempotencyKey: "k-legacy",
		RequestHash: mustDecode(t, validBody).Hash(), CreatedAt: at, KeyExpiresAt: at.Add(time.Hour)}
	st := workflow.NewState(id, workflow.Reference(), json.RawMessage(`{}`), at, at.Add(time.Minute))
	st.Owner = callerA
	if err := f.db.CreateOrder(ctx, o, st); err != nil {
		t.Fatal(err)
	}
	visible := func() bool {
		t.Helper()
		r := f.do(t, as(request("GET", "/orders/"+id, nil, ""), callerA))
		l := readList(t, f.do(t, ownOrders("", callerA)))
		if (r.StatusCode == 200) != (len(l.Orders) == 1) {
			t.Fatalf("read %d, listed %+v", r.StatusCode, l.Orders)
		}
		return r.StatusCode == 200
	}
	if visible() {
		t.Fatal("the unstamped order is its ARN's")
	}

	stamper := statestore.NewStamper(f.client, f.tables, f.clk)
	if err := stamper.ScanUnstamped(ctx, func(u statestore.Unstamped) error {
		_, err := stamper.StampOwner(ctx, u, ownerA.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !visible() {
		t.Fatal("the stamped order is not its owner's")
	}
	r := f.do(t, postOrder(validBody, "Idempotency-Key", "k-legacy"))
	if readAccepted(t, r).OrderID != id || r.Headers[ReplayedHeader] != "true" {
		t.Fatalf("the legacy key after the stamp: %s %v", r.Body, r.Headers)
	}
	ops := f.do(t, request("GET", "/ops/orders/"+id, nil, ""))
	if ops.StatusCode != 200 || !strings.Contains(ops.Body, `"owner":"`+callerA+`","ownerId":"`+ownerA.ID+`"`) {
		t.Fatalf("the operators' view: %d %s", ops.StatusCode, ops.Body)
	}
}
