package simulation

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/internal/localstack/apigw"
	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/submission"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// Config is one run.
type Config struct {
	Seed uint64
	// Orders is how many orders clients post.
	Orders int
	// Rate is how many orders a second clients post, on average.
	Rate float64
	// Mix is the run's faults; nil draws one from the seed (Swarm).
	Mix Mix
	// Record keeps the event log's lines (Result.Log).
	Record bool
	// Settle is the liveness bound: once the faults stop, every order must
	// be terminal within it, in simulated time.
	Settle time.Duration
	// chooser, when set, makes every choice instead of the seed (the
	// exhaustive search); budget then bounds the faults.
	chooser Chooser
	budget  map[Fault]int
	// ref, when set, is the workflow every order names.
	ref string
}

// DefaultSettle is the liveness bound: the longest an order can take once
// faults stop. A step takes at most its lease (wait 5 s, budget 30 s) per
// claim and MaxFailures (3) claims, with backoffs of at most 5 minutes
// between them; a compensation as much again for each step; a record
// waiting on a missed deadline is found within the Supervisor's minute;
// an alert is re-sent after AlertTimeout (2 minutes). Three steps, forward
// and back, come to well under an hour; the bound leaves room for a
// resubmission by an operator just before the faults stopped.
// A step whose retry policy waits (workflow.Retry) may wait that long
// again for each of its rounds: run adds the longest such total of the
// catalog's versions (longestWaits).
const DefaultSettle = 2 * time.Hour

// longestWaits is the longest an order of cat can spend in Waiting: for
// each version, every step's wait times its rounds, summed; the largest of
// the versions.
func longestWaits(cat workflow.Catalog) time.Duration {
	var longest time.Duration
	for _, d := range cat.Definitions {
		var total time.Duration
		for _, s := range d.Steps {
			if r := s.Retry; r != nil && r.OnExhausted == workflow.ExhaustedWait {
				total += r.Wait * time.Duration(r.WaitRounds)
			}
		}
		longest = max(longest, total)
	}
	return longest
}

// demoCatalog is the catalog the runs deploy: demoVersions', or the
// deployed one if it cannot be read (run reports that error).
func demoCatalog() workflow.Catalog {
	v, err := demoVersions()
	if err != nil {
		return catalog.MustDeployed()
	}
	return v.Catalog
}

// Result is what a run did and what it broke.
type Result struct {
	Seed       uint64
	Mix        Mix
	Orders     int
	Accepted   int
	Violations []string
	// Hash digests the event log; Events counts its events.
	Hash   uint64
	Events int
	Log    []string
	// Simulated is the simulated time the run took.
	Simulated time.Duration
	// Transitions counts the committed changes by their Transition.
	Transitions map[workflow.Transition]int
	// States counts the orders by final state.
	States map[workflow.ProcessState]int
	Faults map[Fault]int
	Calls  int
	// CodeStep is what the code steps did, and their window.
	CodeStep CodeStepReport
	// Sweeps counts the Supervisor's listings.
	Sweeps SweepReport
}

// start is the simulated time every run begins at.
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// client is one order as its client sees it: posted with an
// Idempotency-Key, retried until it gets an answer that is not an error of
// ours.
type client struct {
	i        int
	key      string
	clientID string
	ref      string
	// priority is the class the order names: every class, and none.
	priority workflow.Priority
	body     []byte
	tries    int
	id       string
	rejected string
}

type run struct {
	cfg     Config
	w       *World
	f       *faults
	sys     *system
	clients []*client
	// violations found while running (a key answered with two orders).
	violations []string
	next       workflow.Catalog
	// called lists the steps the remote was called for, by order.
	called map[string][]string
	// events are the status events clients got, by order.
	events map[string][]Delivery
	// fixed are the orders the operators retried in the fix (Fix).
	fixed map[string]bool
}

// Run runs one seed.
func Run(cfg Config) (Result, error) {
	if cfg.Orders <= 0 {
		return Result{}, fmt.Errorf("simulation: %d orders", cfg.Orders)
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 20
	}
	if cfg.Settle <= 0 {
		cfg.Settle = DefaultSettle + longestWaits(demoCatalog())
	}
	var c Chooser = cfg.chooser
	if c == nil {
		c = newRandom(cfg.Seed)
	}
	if cfg.Mix == nil {
		// From a stream of its own, so a run given its mix (a replay)
		// makes the same choices as the run that drew it.
		cfg.Mix = Swarm(newRandom(cfg.Seed ^ 0x5eed))
	}
	log := newLog(start, cfg.Record)
	w := newWorld(start, c, log)
	w.exhaustive = cfg.budget != nil
	f := newFaults(w, cfg.Mix, cfg.Seed)
	f.budget = cfg.budget
	versions, err := demoVersions()
	if err != nil {
		return Result{}, err
	}
	old := versions.Catalog
	deploy := cfg.Mix[Deploy] > 0
	if deploy {
		// Before the deploy only the older version is live.
		old = onlyVersion(versions.Catalog, versions.IDs[0])
	}
	skew := time.Duration(0)
	if cfg.Mix[Skew] > 0 {
		skew = 2 * time.Second
	}
	sys, err := newSystem(w, f, old, versions.Catalog, skew)
	if err != nil {
		return Result{}, err
	}
	r := &run{cfg: cfg, w: w, f: f, sys: sys, next: versions.Catalog, fixed: map[string]bool{}}
	rate := cfg.Rate
	if cfg.Mix[Burst] > 0 {
		rate *= 100
	}
	arrivals := time.Duration(float64(cfg.Orders) / rate * float64(time.Second))
	for i := range cfg.Orders {
		cl := &client{i: i, key: fmt.Sprintf("key-%d", i), clientID: "client-" + strconv.Itoa(i%3)}
		cl.priority = []workflow.Priority{workflow.PriorityHigh, "", workflow.PriorityLow, workflow.PriorityNormal}[i%4]
		switch {
		case deploy:
		case i%2 == 1:
			cl.ref = versions.IDs[0] // half the orders name the older version
		case i%4 == 2 && shipsForGood != "":
			cl.ref = shipsForGood // a quarter ship with no undo
		}
		if cfg.ref != "" {
			cl.ref = cfg.ref
		}
		cl.body = orderBody(cl)
		sys.subscribe(cl.clientID)
		r.clients = append(r.clients, cl)
		at := w.delay(0, arrivals)
		w.after(at, func() { r.post(cl, false) })
	}
	faultsEnd := start.Add(arrivals + 2*time.Minute)
	if deploy {
		w.after(w.delay(0, arrivals), func() {
			w.log.add(w.now, "deploy", "deploy starts", r.next.CurrentID("order"))
			if err := sys.deploy(r.next); err != nil {
				r.violations = append(r.violations, "deploy: "+err.Error())
			}
		})
	}
	end := faultsEnd.Add(cfg.Settle)
	if cfg.Mix[Fix] > 0 {
		fixAt := faultsEnd.Add(fixAfter)
		r.fix(fixAt)
		end = fixEnd(fixAt).Add(cfg.Settle)
	}
	sys.until = end
	sys.done = func() bool { return !f.on && r.quiet() }
	sys.resweep()
	w.at(faultsEnd, func() {
		f.on = false
		w.log.add(w.now, "run", "faults stop", "")
	})
	w.run(end)
	w.close()
	res := r.check(end)
	res.Seed, res.Mix, res.Orders = cfg.Seed, cfg.Mix, cfg.Orders
	res.Hash, res.Events, res.Log = log.Hash(), log.Events(), log.Lines()
	res.Simulated = w.now.Sub(start)
	res.Faults, res.Calls = f.counts, f.calls
	res.Transitions = sys.store.transitions
	return res, nil
}

// quiet reports whether nothing is left to happen: every order the store
// holds is terminal and owes no alert, and no message waits in a queue.
func (r *run) quiet() bool {
	for _, l := range r.sys.store.last {
		if st := l.state(); !st.ProcessState.Terminal() || st.AlertPending {
			return false
		}
	}
	for _, q := range r.sys.sqs.queues {
		if !strings.HasSuffix(q.name, "-dlq") && q.depth() > 0 {
			return false
		}
	}
	for _, rd := range r.sys.stream.readers {
		if r.sys.stream.behind(rd) > 0 {
			return false
		}
	}
	return true
}

// demoVersions is the deployed workflow and a version derived from it with
// a step that cannot be undone (localstack.DemoVersions), read once.
//
// A step whose retry policy waits does so here at its first failure
// (waitSooner): the simulated faults rarely fail a step three times in a
// row, and the waits are what the runs must exercise.
var demoVersions = sync.OnceValues(func() (localstack.Versions, error) {
	v, err := localstack.DemoVersions(catalog.MustDeployed(), 2)
	if err != nil {
		return v, err
	}
	v.Catalog, shipsForGood = withShipsForGood(waitSooner(v.Catalog))
	return v, v.Catalog.Validate()
})

// shipsForGood is the version withShipsForGood adds: the current one with
// its code step without an undo.
var shipsForGood string

// withShipsForGood is cat with one more version of its default workflow,
// after the newest and not current: the current version with every code
// step that can be undone made one that cannot (a shipment that cannot be
// called back), which a quarter of the orders name. There a code step is
// the order's point of no return, whose refusals and timeouts stop the
// order in Error and wait for an operator.
func withShipsForGood(cat workflow.Catalog) (workflow.Catalog, string) {
	cur, err := cat.ForNew("")
	if err != nil {
		return cat, ""
	}
	next := cur
	next.Steps = slices.Clone(cur.Steps)
	changed := false
	for i, s := range next.Steps {
		if _, code := codeSteps[s.Name]; code && s.Compensable {
			next.Steps[i].Compensable, changed = false, true
		}
	}
	if !changed {
		return cat, ""
	}
	for _, d := range cat.Definitions {
		if d.Name == next.Name {
			next.Version = max(next.Version, d.Version+1)
		}
	}
	out := cat
	out.Definitions = append(slices.Clone(cat.Definitions), next)
	return out, next.ID()
}

// waitSooner is cat with every step whose retry policy waits waiting at
// its first failure.
func waitSooner(cat workflow.Catalog) workflow.Catalog {
	one := 1
	out := cat
	out.Definitions = slices.Clone(cat.Definitions)
	for i, d := range out.Definitions {
		d.Steps = slices.Clone(d.Steps)
		for j, s := range d.Steps {
			if s.Retry != nil && s.Retry.OnExhausted == workflow.ExhaustedWait {
				r := *s.Retry
				r.MaxFailures = &one
				d.Steps[j].Retry = &r
			}
		}
		out.Definitions[i] = d
	}
	return out
}

// onlyVersion is cat with id its one version, current.
func onlyVersion(cat workflow.Catalog, id string) workflow.Catalog {
	out := cat
	out.Definitions = nil
	out.Current = map[string]int{}
	for _, d := range cat.Definitions {
		if d.ID() == id {
			out.Definitions = append(out.Definitions, d)
			out.Current[d.Name] = d.Version
		}
	}
	return out
}

func orderBody(cl *client) []byte {
	o := map[string]any{
		"clientId": cl.clientID, "customerId": fmt.Sprintf("c-%d", cl.i%97), "currency": "EUR",
		"items": []map[string]any{{"sku": fmt.Sprintf("BOOK-%d", cl.i%13), "quantity": 1 + cl.i%3, "unitPriceCents": 500 + 25*(cl.i%40)}},
	}
	if cl.ref != "" {
		o["workflow"] = cl.ref
	}
	if cl.priority != "" {
		o["priority"] = cl.priority
	}
	b, _ := json.Marshal(o)
	return b
}

// request is an API Gateway HTTP API request, signed by principal.
func (r *run) request(method, path, principal string, headers map[string]string, body []byte) events.APIGatewayV2HTTPRequest {
	r.sys.requests++
	h := map[string]string{"content-type": "application/json"}
	for k, v := range headers {
		h[k] = v
	}
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: method + " " + path, RawPath: path, Headers: h, Body: string(body),
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			AccountID: "123456789012", RequestID: "req-" + strconv.Itoa(r.sys.requests), Stage: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, Protocol: "HTTP/1.1"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: callerOf(principal),
			},
		},
	}
}

// callerOf is the caller API Gateway's IAM authorization names for
// principal.
func callerOf(principal string) *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription {
	return &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{AccountID: "123456789012", UserARN: principal, UserID: userIDOf(principal)}
}

// userIDOf is the userId API Gateway passes beside principal, an IAM user
// of the simulation's account or a session of one of its roles: the user's
// unique ID, or the role's and the session's name. There is no IAM here, so
// the IDs are the local stack's (apigw.LocalUniqueID): one per principal,
// the same in every run.
func userIDOf(principal string) string {
	rest, session, ok := strings.Cut(principal, ":assumed-role/")
	if !ok {
		return apigw.LocalUniqueID(apigw.UserIDPrefix, principal, 0)
	}
	role, session, _ := strings.Cut(session, "/")
	return apigw.LocalUniqueID(apigw.RoleIDPrefix, strings.Replace(rest, ":sts:", ":iam:", 1)+":role/"+role, 0) + ":" + session
}

// api calls the Submission's current release as API Gateway does, and
// hands done the answer, or killed when the invocation died (a 502 to
// the caller).
func (r *run) api(req events.APIGatewayV2HTTPRequest, done func(resp events.APIGatewayV2HTTPResponse, killed bool)) {
	var resp events.APIGatewayV2HTTPResponse
	r.w.spawn("submission", topology.SubmissionTimeout, func(ctx context.Context) {
		ctx = r.sys.invocation(ctx, req.RequestContext.RequestID)
		resp, _ = r.sys.container(ctx, topology.Submission).(*submission.Handler).Handle(ctx, req)
	}, func(killed bool) { done(resp, killed) })
}

// post sends a client's order; dup marks a repeat of one already answered.
func (r *run) post(cl *client, dup bool) {
	cl.tries++
	req := r.request(http.MethodPost, "/orders", clientARN(cl),
		map[string]string{"idempotency-key": cl.key}, cl.body)
	r.api(req, func(resp events.APIGatewayV2HTTPResponse, killed bool) {
		switch {
		case killed || resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
			if !killed && resp.StatusCode == http.StatusTooManyRequests {
				r.f.counts["shed"]++
				// A key that made an order is answered with it, shed or
				// not: the client must learn its order exists.
				if use, err := r.keyUse(cl); err == nil {
					r.violations = append(r.violations, fmt.Sprintf("shed replay: %s made order %s, and its retry was shed", cl.key, use.OrderID))
				}
			}
			wait := r.w.delay(time.Millisecond, 2*time.Second)
			if s, err := strconv.Atoi(resp.Headers["Retry-After"]); err == nil {
				wait += time.Duration(s) * time.Second
			}
			if cl.tries < 20 {
				r.w.after(wait, func() { r.post(cl, dup) })
			}
		case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusOK:
			var out struct {
				OrderID string `json:"orderId"`
			}
			if err := json.Unmarshal([]byte(resp.Body), &out); err != nil || out.OrderID == "" {
				r.violations = append(r.violations, fmt.Sprintf("%s: %d without an order ID", cl.key, resp.StatusCode))
				return
			}
			if cl.id != "" && cl.id != out.OrderID {
				r.violations = append(r.violations, fmt.Sprintf("key %s made two orders: %s and %s", cl.key, cl.id, out.OrderID))
			}
			first := cl.id == ""
			cl.id = out.OrderID
			r.w.log.add(r.w.now, "client", "accepted", cl.key+" "+cl.id)
			if first && r.f.strike(Duplicate) {
				// Half at once, as a client's retry after a timeout; half
				// later, as a client replaying its log.
				later := r.w.delay(0, 2*time.Second)
				if r.w.either(2) == 1 {
					later = r.w.delay(0, 2*time.Minute)
				}
				r.w.after(later, func() { r.post(cl, true) })
			}
			if first && r.f.strike(Forge) {
				r.forge(cl.id)
			}
			if first && r.f.strike(Operator) {
				r.w.after(r.w.delay(0, 10*time.Minute), func() { r.operate(cl.id) })
			}
		default:
			cl.rejected = fmt.Sprintf("%d %s", resp.StatusCode, resp.Body)
			r.violations = append(r.violations, fmt.Sprintf("%s refused: %s", cl.key, cl.rejected))
		}
	})
}

// keyUse is the order cl's key made, if it made one: looked up under the
// owner key the Submission keeps it under, which it derives from the
// caller API Gateway names (submission.Principal: the principal's unique
// ID).
func (r *run) keyUse(cl *client) (workflow.KeyUse, error) {
	owner, err := submission.Principal(callerOf(clientARN(cl)))
	if err != nil {
		return workflow.KeyUse{}, err
	}
	return r.sys.store.truth.GetKey(context.Background(), workflow.OwnerKey(owner.Name, owner.ID), cl.key)
}

// clientARN is the IAM user a client signs as, its orders' owner.
func clientARN(cl *client) string { return "arn:aws:iam::123456789012:user/" + cl.clientID }

// operate retries or cancels an order as an operator would, on whatever
// state it is in. A quarter of the time a second operator acts on the same
// order within a second (the console and the CLI, two people answering one
// alert), so their writes meet those of the actors the first one woke.
func (r *run) operate(id string) {
	action := func() string {
		if r.w.choose.Intn(2) == 0 {
			return "cancel"
		}
		return "retry"
	}
	r.act(id, action(), 0)
	if r.w.either(4) == 1 {
		second := action()
		r.w.after(r.w.delay(0, time.Second), func() { r.act(id, second, 0) })
	}
}
