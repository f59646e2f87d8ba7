package simulation

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/internal/testkit/ddbmodel"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// simTables are the tables of a run, as the stack declares them.
var simTables = statestore.Tables{Orders: "orders", State: "state", Ledger: "ledger"}

// store is DynamoDB in a run: the model of its API (ddbmodel) under the
// real store of every container (statestore.Store), with the faults at
// each API call, the state table's stream fed by the model's writes, and
// the bookkeeping of claims and commits that the invariants read, kept
// from the writes the tables took.
type store struct {
	w      *World
	f      *faults
	db     *ddbmodel.Model
	stream *stream
	// code sees the ledger's writes.
	code *codeModel
	// truth reads the tables as they are, strongly consistent, on the
	// simulated time, without faults: the checks' reads.
	truth *statestore.Store
	// last is each record as last written, and when.
	last map[string]*written
	// claimed is the latest Attempt a claim of each order wrote.
	claimed map[string]int
	// staleCommits lists commits of an attempt older than a claim the
	// store had already written; lateCommits, replies committed after
	// their record's CompleteBy; earlyRecoveries, the Supervisor's writes
	// to a record whose CompleteBy had not passed.
	staleCommits, lateCommits, earlyRecoveries []string
	// forgedCommits are commits of a reply its step's Agent did not send.
	forgedCommits []string
	// notOwnWrites are Applies that returned another record than the one
	// their own write left.
	notOwnWrites []string
	// sweeps counts the Supervisor's listings of expired records.
	sweeps SweepReport
	// due says whether a record the Supervisor listed at now is due for a
	// recovery (workflow.Machine.Expired); unacted lists the due records
	// each sweep listed and has not yet written (its Apply, won or lost),
	// and ignored the sweeps that ended alive with some left.
	due     func(seen workflow.State, now time.Time) bool
	unacted map[*proc]map[string]bool
	ignored []string
	// tolerance is how far apart two clocks may be, plus a call's
	// latency: a commit decided in time may land that much late.
	tolerance time.Duration
	// transitions counts the committed changes by their Transition.
	transitions map[workflow.Transition]int
	tokens      int
}

// written is a record as last written: the item, read into a
// workflow.State when asked for (most writes are never read so).
type written struct {
	item  map[string]types.AttributeValue
	at    time.Time
	after *workflow.State
}

// state is the record as last written; the zero State when there is none.
func (w *written) state() workflow.State {
	if w == nil {
		return workflow.State{}
	}
	if w.after == nil {
		st, err := statestore.DecodeState(w.item)
		if err != nil {
			panic(fmt.Sprintf("simulation: a state record as written: %v", err))
		}
		w.after = &st
	}
	return *w.after
}

// newStore creates the tables on a new model: eventually consistent reads
// within a second (stale ones when StaleRead strikes), BatchGetItem's
// unprocessed keys when Unprocessed strikes, and TTL deleting an expired
// item some time within two days, drawn per run.
func newStore(w *World, f *faults, s *stream) *store {
	st := &store{w: w, f: f, stream: s, last: map[string]*written{}, claimed: map[string]int{},
		transitions: map[workflow.Transition]int{}}
	st.db = ddbmodel.New(ddbmodel.Options{
		Clock:       worldClock{w},
		Stale:       st.stale,
		Unprocessed: func(string, string) bool { return f.strike(Unprocessed) },
		TTLDelay:    w.delay(time.Second, ddbmodel.DefaultTTLDelay),
		Call: func(ctx context.Context, c ddbmodel.Call) error {
			return f.sdkCall(ctx, "ddb."+c.Op+" "+c.Table, c.Key, c.Write, c.Attempt)
		},
		OnWrite: st.wrote,
		Tokens:  st.token,
	})
	if err := statestore.CreateTables(context.Background(), st.db, simTables); err != nil {
		panic("simulation: create the tables: " + err.Error())
	}
	st.truth = statestore.New(st.db, simTables, statestore.WithClock(worldClock{w}))
	return st
}

// port is the store a container is given: the real store on its own
// clock (the :now its conditions send is that clock's, skew and all), its
// reads one after the other and its waits in simulated time, so the
// scheduler orders every call.
func (s *store) port(clk clock.Clock) port {
	return port{Store: statestore.New(s.db, simTables, statestore.WithClock(clk), statestore.WithSerialReads(), statestore.WithSleep(s.f.sleep)), s: s}
}

// port is statestore.Store with each Apply's change in its context, for
// the bookkeeping of the writes it makes.
type port struct {
	*statestore.Store
	s *store
}

var _ statestore.Port = port{}

type changeKey struct{}

// applying is an Apply under way: its change, and the item its own write
// to the state table left, once it wrote.
type applying struct {
	c       workflow.Change
	written map[string]types.AttributeValue
}

// Apply is the store's, with the change in the context its calls carry.
// What it returns must be the record its own write left: the caller's
// follow-up (its log line, its alert and that alert's confirmation, the
// answer an operator gets) is about that write, even when another writer's
// comes right after it.
func (p port) Apply(ctx context.Context, c workflow.Change) (workflow.State, error) {
	if left := p.s.unacted[procOf(ctx)]; left != nil {
		delete(left, c.OrderID)
	}
	a := &applying{c: c}
	st, err := p.Store.Apply(context.WithValue(ctx, changeKey{}, a), c)
	if err != nil || a.written == nil {
		return st, err
	}
	// Read from the item, not decoded whole: most writes are never read so.
	own := phaseOf(a.written)
	lockedBy := ""
	if v, ok := a.written["LockedBy"].(*types.AttributeValueMemberS); ok {
		lockedBy = v.Value
	}
	alert, _ := a.written["AlertPending"].(*types.AttributeValueMemberBOOL)
	if own.state != string(st.ProcessState) || own.attempt != st.Attempt || int(numberAttr(a.written, "StepIndex")) != st.StepIndex ||
		lockedBy != st.LockedBy || (alert != nil && alert.Value) != st.AlertPending || own.inFlight != st.InFlight ||
		!own.completeBy.Equal(st.CompleteBy) || !own.updated.Equal(st.UpdatedAt) {
		what := string(c.Transition)
		if what == "" {
			what = "a change"
		}
		p.s.notOwnWrites = append(p.s.notOwnWrites, fmt.Sprintf("%s of %s returned %s at step %d attempt %d, its write left %s at step %d attempt %d",
			what, c.OrderID, st.ProcessState, st.StepIndex, st.Attempt, own.state, numberAttr(a.written, "StepIndex"), own.attempt))
	}
	return st, err
}

// Expired is the store's, counted: a listing that failed in part returns
// what it read, which the sweep recovers.
func (p port) Expired(ctx context.Context, now time.Time, limit int) ([]workflow.State, error) {
	found, err := p.Store.Expired(ctx, now, limit)
	p.s.listed(procOf(ctx), found, now)
	r := &p.s.sweeps
	r.Listings++
	switch {
	case err != nil && len(found) > 0:
		r.Partial++
		r.FromPartial += len(found)
	case err != nil:
		r.Failed++
	}
	return found, err
}

// listed holds the sweep of proc to the due records its listing read: it
// must try to recover each before it ends, alive, whatever else its
// listing failed to read.
func (s *store) listed(p *proc, found []workflow.State, now time.Time) {
	if p == nil || s.due == nil {
		return
	}
	left := map[string]bool{}
	for _, st := range found {
		if s.due(st, now) {
			left[st.OrderID] = true
		}
	}
	if len(left) == 0 {
		return
	}
	if s.unacted == nil {
		s.unacted = map[*proc]map[string]bool{}
	}
	s.unacted[p] = left
	p.atEnd(func(killed bool) {
		if left := s.unacted[p]; !killed && len(left) > 0 {
			s.ignored = append(s.ignored, fmt.Sprintf("%s listed %d due records it did not recover, %s among them", p, len(left), slices.Min(slices.Collect(maps.Keys(left)))))
		}
		delete(s.unacted, p)
	})
}

// SweepReport counts the Supervisor's listings of expired records: those
// that failed in part, with the records they found all the same, and
// those that failed whole.
type SweepReport struct {
	Listings, Partial, FromPartial, Failed int
}

func (r *SweepReport) add(o SweepReport) {
	r.Listings += o.Listings
	r.Partial += o.Partial
	r.FromPartial += o.FromPartial
	r.Failed += o.Failed
}

func (r SweepReport) String() string {
	return fmt.Sprintf("%d listings of expired records, %d failed in part (%d records found by them, recovered all the same), %d failed whole",
		r.Listings, r.Partial, r.FromPartial, r.Failed)
}

// stale is the model's choice of an eventually consistent read: the
// latest, unless StaleRead strikes, and then an older version within the
// lag ("the responses may not reflect the results of a recently completed
// write operation", the DynamoDB Developer Guide's "Read consistency").
func (s *store) stale(n int) int {
	if !s.f.strike(StaleRead) {
		return 0
	}
	return 1 + s.w.choose.Intn(n-1)
}

// token is the ClientRequestToken the SDK fills in: a counter, so a run
// replays exactly.
func (s *store) token() string {
	s.tokens++
	return "sdk-token-" + strconv.Itoa(s.tokens)
}

// wrote sees every write the tables take: a state record's feeds the
// stream and the bookkeeping, a ledger entry's the code steps' tries.
func (s *store) wrote(ctx context.Context, w ddbmodel.Write) {
	if w.ByTTL {
		s.w.log.add(s.w.now, "ttl", "deleted from "+w.Table, w.Key)
	}
	switch w.Table {
	case simTables.State:
		if w.Record != nil {
			s.stream.append(w.Record)
		}
		if w.New != nil {
			s.wroteState(ctx, w)
		}
	case simTables.Ledger:
		if s.code != nil && w.New != nil {
			s.code.ledgerWrote(ctx, w)
		}
	}
}

// wroteState keeps the ledger of claims and commits for a state record's
// write, checking each as it lands: a reply committed late or of a
// superseded attempt, a recovery before its deadline, a forged reply.
func (s *store) wroteState(ctx context.Context, w ddbmodel.Write) {
	// The deadline before the write, and the Attempt after it, read from
	// the items: decoding every write would cost more than the rest of
	// the bookkeeping.
	completeBy := time.UnixMilli(numberAttr(w.Old, statestore.CompleteByAttr)).UTC()
	attempt := int(numberAttr(w.New, "Attempt"))
	s.last[w.Key] = &written{item: w.New, at: w.At}
	a, _ := ctx.Value(changeKey{}).(*applying)
	if a == nil {
		// The creation of the order, with its first claim, if it has one.
		if attempt > 0 {
			s.claimed[w.Key] = max(s.claimed[w.Key], attempt)
		}
		return
	}
	a.written = w.New
	c := &a.c
	now := s.w.now
	if c.CommitsReply() && now.After(completeBy.Add(s.tolerance)) {
		s.lateCommits = append(s.lateCommits, fmt.Sprintf("%s %s %v after CompleteBy", c.OrderID, c.Transition, now.Sub(completeBy)))
	}
	if p := procOf(ctx); p != nil && (p.name == "supervisor" || p.name == "deadline") && c.Transition != "" &&
		completeBy.After(now.Add(s.tolerance)) {
		s.earlyRecoveries = append(s.earlyRecoveries, fmt.Sprintf("%s %s by %s, %v before CompleteBy", c.OrderID, c.Transition, p.name, completeBy.Sub(now)))
	}
	if c.CommitsReply() && c.Fence.Attempt != nil && *c.Fence.Attempt < s.claimed[c.OrderID] {
		s.staleCommits = append(s.staleCommits, c.OrderID)
	}
	if c.Dispatch {
		s.claimed[c.OrderID] = max(s.claimed[c.OrderID], attempt)
	}
	if f := forged(*c); f != "" {
		s.forgedCommits = append(s.forgedCommits, f)
	}
	s.transitions[c.Transition]++
}

// numberAttr reads a number attribute of an item; 0 when it has none.
func numberAttr(it map[string]types.AttributeValue, name string) int64 {
	v, ok := it[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		panic(fmt.Sprintf("simulation: attribute %s of a state record: %v", name, err))
	}
	return n
}

// expire is TTL's background pass, run with the Supervisor's schedule.
func (s *store) expire() { s.db.RunTTL() }

// ledgerAttr reads a string attribute of a ledger entry.
func ledgerAttr(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// worldClock is the simulated time, exactly.
type worldClock struct{ w *World }

func (c worldClock) Now() time.Time { return c.w.now }

// skewed is an actor instance's clock: the simulated time, off by skew.
type skewed struct {
	w    *World
	skew time.Duration
}

func (c skewed) Now() time.Time { return c.w.now.Add(c.skew) }
