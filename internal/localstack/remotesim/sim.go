// Package remotesim simulates the remote service the Agents call, serving
// the contract of shared/remote: it applies a step's effect at most once per
// Idempotency-Key, and injects faults — random (seedable) or scripted per
// key — so tests and local runs can prove that retries, timeouts and
// duplicate deliveries never apply an effect twice.
//
// It also undoes effects (the Compensating Transaction pattern):
// POST /v1/steps/{step}/compensate, under an Idempotency-Key of its own,
// undoes the effect applied under the body's effectKey at most once per
// compensation key. A compensation that finds nothing applied leaves a
// tombstone, so a late try of the step, still on its way, is refused (409
// "compensated") rather than applied after its undo. Compensation calls draw
// faults exactly like step calls, keyed on their own key.
//
// Like a real idempotent service, a call whose key already has a stored
// result replays it: neither a random permanent fault nor a rejected step
// turns a retry of an applied request into a rejection. A rejection is a
// result too: the key remembers it, for steps and undos alike, so a late
// copy of a refused request is refused again and never applied; an
// operator's retry of a refused step comes under a new key.
package remotesim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sasflow/sas/internal/localstack/draw"

	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/remote"
	"github.com/sasflow/sas/shared/trace"
)

// Limits on requests.
const (
	MaxKeyBytes     = 200
	MaxRequestBytes = 1 << 20
)

var stepPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// DecodeStepRequest reads a step request (shared/remote's contract)
// strictly, as this service chooses to: an unknown member, data after the
// body or a body over MaxRequestBytes is refused. It checks the request
// against the step named in the path. It is the simulator's, not the
// contract's: another service may read more leniently.
func DecodeStepRequest(r io.Reader, step string) (remote.StepRequest, error) {
	return decodeRequest[remote.StepRequest](r, step)
}

// decodeRequest reads and checks a step's or a compensation's request. A
// compensation's is a step's plus EffectKey, so both are read alike, and
// EffectKey, bounded like an Idempotency-Key, is checked where there is one.
func decodeRequest[R remote.StepRequest | remote.CompensateRequest](r io.Reader, step string) (R, error) {
	var req, zero R
	if err := decodeStrict(r, MaxRequestBytes, &req); err != nil {
		return zero, err
	}
	var c remote.CompensateRequest
	undo := false
	switch v := any(req).(type) {
	case remote.StepRequest:
		c = remote.CompensateRequest{OrderID: v.OrderID, Step: v.Step, Input: v.Input}
	case remote.CompensateRequest:
		c, undo = v, true
	}
	switch {
	case c.OrderID == "" || len(c.OrderID) > 64:
		return zero, errors.New("orderId must have 1..64 bytes")
	case c.Step != step:
		return zero, fmt.Errorf("step %q does not match the path's %q", c.Step, step)
	case undo && (c.EffectKey == "" || len(c.EffectKey) > MaxKeyBytes):
		return zero, fmt.Errorf("effectKey must have 1..%d bytes", MaxKeyBytes)
	case len(c.Input) == 0 || string(c.Input) == "null":
		return zero, errors.New("input is required")
	}
	return req, nil
}

// Output is the body of a successful step: this service's output, which
// the contract leaves to each service (the system stores it unread).
type Output struct {
	Confirmation string    `json:"confirmation"`
	OrderID      string    `json:"orderId"`
	Step         string    `json:"step"`
	AppliedAt    time.Time `json:"appliedAt"`
}

// result is what a key's first successful call stored: later calls with the
// key get it again without a new effect. orderID and step say whose effect a
// forward result is, so an undo naming another step is refused.
type result struct {
	body        []byte
	requestHash string
	orderID     string
	step        string
	// refusal, when set, is a permanent rejection the key got: the
	// contract has a service remember it, so every later call with the key
	// gets it again and the key is never applied.
	refusal *outcome
}

// Sim is the simulator; it is an http.Handler and safe for concurrent use.
type Sim struct {
	clk   clock.Clock
	sleep func(ctx context.Context, d time.Duration) error
	mux   *http.ServeMux

	mu sync.Mutex
	// seed and keyCalls make each random draw a hash of the seed, the
	// idempotency key and how often that key was called before: the same
	// seed gives a key the same faults however calls interleave.
	seed     uint64
	keyCalls map[string]int
	faults   Faults
	scripts  map[string][]Fault
	// results holds step and compensation results alike: Idempotency-Keys
	// share one namespace, as at a real service, and the request hash tells
	// the two routes apart.
	results map[string]result
	// effects counts applies by step key; compensations counts undos by the
	// effect key undone; tombstones are effect keys a compensation found
	// unapplied, never to be applied.
	effects       map[string]int
	compensations map[string]int
	tombstones    map[string]bool
	// inProgress counts the HangThenApply calls working on each key.
	inProgress map[string]int
	calls      int
	// traces holds the X-Amzn-Trace-Id headers each key's calls came
	// with, in order.
	traces map[string][]string
	// injected records every fault served, in order (Injections).
	injected []Injection

	stop     chan struct{}
	stopOnce sync.Once
}

var _ http.Handler = (*Sim)(nil)

// Option configures a Sim.
type Option func(*Sim)

// WithClock sets the clock stamping appliedAt.
func WithClock(c clock.Clock) Option { return func(s *Sim) { s.clk = c } }

// WithSeed makes the random faults replayable.
func WithSeed(seed uint64) Option { return func(s *Sim) { s.seed = seed } }

// WithSleep replaces the real wait used for latency, so tests never wait.
func WithSleep(f func(ctx context.Context, d time.Duration) error) Option {
	return func(s *Sim) { s.sleep = f }
}

// WithFaults sets the initial random faults; New panics if they are invalid,
// as it is a programming error.
func WithFaults(f Faults) Option {
	return func(s *Sim) {
		if err := s.SetFaults(f); err != nil {
			panic(fmt.Sprintf("remotesim: %v", err))
		}
	}
}

// New returns a simulator without faults.
func New(opts ...Option) *Sim {
	s := &Sim{
		clk:      clock.System{},
		sleep:    clock.Sleep,
		seed:     rand.Uint64(),
		keyCalls: make(map[string]int),
		scripts:  make(map[string][]Fault),
		results:  make(map[string]result),
		effects:  make(map[string]int),
		// compensations is never nil, so GET /v1/effects always shows it.
		compensations: make(map[string]int),
		tombstones:    make(map[string]bool),
		inProgress:    make(map[string]int),
		stop:          make(chan struct{}),
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc(remote.StepRoute, s.serveStep)
	s.mux.HandleFunc(remote.CompensateRoute, s.serveCompensate)
	s.mux.HandleFunc("GET /v1/effects", s.serveEffects)
	s.mux.HandleFunc("GET /v1/faults", s.serveGetFaults)
	s.mux.HandleFunc("POST /v1/faults", s.servePostFaults)
	for _, o := range opts {
		o(s)
	}
	return s
}

// unit is number which of the call-th call with key.
func (s *Sim) unit(key string, call, which int) float64 {
	return draw.Unit(s.seed, key, uint64(call)<<8|uint64(which))
}

// ServeHTTP serves the simulator's API.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close releases every hanging call; use it before closing a test server,
// which waits for its calls.
func (s *Sim) Close() { s.stopOnce.Do(func() { close(s.stop) }) }

// SetFaults replaces the random faults, reseeding when f.Seed is set.
func (s *Sim) SetFaults(f Faults) error {
	if err := f.Validate(); err != nil {
		return fmt.Errorf("remotesim: faults: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Seed != nil {
		s.seed = *f.Seed
		clear(s.keyCalls)
	}
	f.RejectSteps = slices.Clone(f.RejectSteps)
	f.RejectUndo = slices.Clone(f.RejectUndo)
	f.HangSteps = slices.Clone(f.HangSteps)
	s.faults = f
	return nil
}

// Faults returns the random faults in force.
func (s *Sim) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults
	f.RejectSteps = slices.Clone(f.RejectSteps)
	f.RejectUndo = slices.Clone(f.RejectUndo)
	f.HangSteps = slices.Clone(f.HangSteps)
	return f
}

// RejectStep rejects every call for step permanently from now on.
func (s *Sim) RejectStep(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.faults.RejectSteps, step) {
		s.faults.RejectSteps = append(slices.Clone(s.faults.RejectSteps), step)
	}
}

// RejectUndo rejects every compensation of step permanently from now on.
func (s *Sim) RejectUndo(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.faults.RejectUndo, step) {
		s.faults.RejectUndo = append(slices.Clone(s.faults.RejectUndo), step)
	}
}

// Script queues faults for the next calls with key (a step's or a
// compensation's), one per call, ahead of any random fault; a call that finds
// the queue empty draws as usual.
func (s *Sim) Script(key string, faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts[key] = append(s.scripts[key], faults...)
}

// Effects returns how often each key's effect was applied (never more than
// once, unless the simulator is broken). An undo does not decrement it: see
// Compensations.
func (s *Sim) Effects() map[string]int { return s.snapshot(s.effects) }

// EffectCount returns how often key's effect was applied.
func (s *Sim) EffectCount(key string) int { return s.count(s.effects, key) }

// Compensations returns how often each effect was undone, by the effect's
// key. More than once means two compensation keys undid one effect: a bug of
// the caller, which should use one key per step.
func (s *Sim) Compensations() map[string]int { return s.snapshot(s.compensations) }

// CompensationCount returns how often the effect applied under effectKey was
// undone.
func (s *Sim) CompensationCount(effectKey string) int { return s.count(s.compensations, effectKey) }

// snapshot copies one of the Sim's counters (which New makes once, and the
// calls change under s.mu).
func (s *Sim) snapshot(counter map[string]int) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(counter)
}

// count reads one key of one of the Sim's counters.
func (s *Sim) count(counter map[string]int, key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return counter[key]
}

// TraceHeaders returns the X-Amzn-Trace-Id headers of the calls made
// under key (a step's or an undo's Idempotency-Key), in order; "" for a
// call without one.
func (s *Sim) TraceHeaders(key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.traces[key])
}

// Injection is one fault the simulator served: to which call, when. A run
// that wants to know why a step outlived its deadline looks here for what
// was done to its calls (localstack's attribution of retries).
type Injection struct {
	At      time.Time
	OrderID string
	Step    string
	// Undo says the call was the step's compensation.
	Undo  bool
	Fault Fault
}

// Injections returns every fault served so far, random, scripted or
// configured (RejectSteps, HangSteps), in the order served; added latency
// is no fault.
func (s *Sim) Injections() []Injection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.injected)
}

// inject records a fault served to the call about.
func (s *Sim) inject(about Injection, f Fault) {
	if f == None {
		return
	}
	about.At, about.Fault = s.clk.Now(), f
	s.mu.Lock()
	s.injected = append(s.injected, about)
	s.mu.Unlock()
}

// Calls returns how many step and compensation calls arrived, good or bad.
func (s *Sim) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *Sim) serveStep(w http.ResponseWriter, r *http.Request) {
	step, key, req, ok := admit(s, w, r, DecodeStepRequest)
	if !ok {
		return
	}
	about := Injection{OrderID: req.OrderID, Step: step}
	if s.hangs(step) {
		s.inject(about, Hang)
		s.hang(r.Context())
		writeUnavailable(w)
		return
	}
	rejection := fmt.Sprintf("step %s of order %s rejected", step, req.OrderID)
	s.serve(w, r, key, about, func(f Faults) bool { return slices.Contains(f.RejectSteps, step) },
		func() outcome { return s.refuse(routeStep, key, req, rejection) },
		func() outcome { return s.apply(key, req) })
}

// hangs reports whether every call of step hangs (Faults.HangSteps).
func (s *Sim) hangs(step string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.faults.HangSteps, step)
}

// InProgress reports whether a HangThenApply call holds key.
func (s *Sim) InProgress(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inProgress[key] > 0
}

// OversizeBytes is the body an Oversize call answers with: over any step's
// output limit, under an agent's 1 MiB read limit.
const OversizeBytes = 300 << 10

// restore replaces the result stored under key with the answer fault gives,
// so every replay under the key answers the same, as at a real service.
func (s *Sim) restore(key string, fault Fault) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := s.results[key]
	if fault == Oversize {
		res.body = []byte(`{"receipt":"` + strings.Repeat("x", OversizeBytes) + `"}`)
	} else {
		res.body = []byte("<html><body>502 Bad Gateway</body></html>")
	}
	s.results[key] = res
	return res.body
}

// hangThenApply holds key in progress until the caller has given up and
// InProgressFor more, then applies the effect, while the call itself answers
// its gone caller: the caller's retries meanwhile get 409 in_progress (see
// apply), which they retry, undos 503 (see undo).
func (s *Sim) hangThenApply(r *http.Request, key string, apply func() outcome) {
	s.mu.Lock()
	s.inProgress[key]++
	late := s.faults.inProgressFor()
	s.mu.Unlock()
	s.hang(r.Context())
	// The caller is gone; the service is not.
	go func() {
		select {
		case <-time.After(late):
		case <-s.stop:
		}
		// Applied as the original call, which is still in progress: its
		// own mark must not refuse it.
		s.mu.Lock()
		s.inProgress[key]--
		if s.inProgress[key] == 0 {
			delete(s.inProgress, key)
		}
		s.mu.Unlock()
		apply()
	}()
}

// admit counts a call and reads what step and compensation calls share: the
// step name in the path, the Idempotency-Key header, and the body, which
// decode reads. A call it refuses (ok false) has been answered.
func admit[R any](s *Sim, w http.ResponseWriter, r *http.Request, decode func(io.Reader, string) (R, error)) (step, key string, req R, ok bool) {
	step = r.PathValue(remote.PathStep)
	key = r.Header.Get(remote.IdempotencyKeyHeader)
	s.mu.Lock()
	s.calls++
	if s.traces == nil {
		s.traces = map[string][]string{}
	}
	s.traces[key] = append(s.traces[key], r.Header.Get(trace.HTTPHeader))
	s.mu.Unlock()
	switch {
	case !stepPattern.MatchString(step):
		writeProblem(w, http.StatusNotFound, "unknown_step", fmt.Sprintf("%q is not a step name", step))
		return step, key, req, false
	case key == "":
		writeProblem(w, http.StatusBadRequest, "missing_idempotency_key", "the Idempotency-Key header is required")
		return step, key, req, false
	case len(key) > MaxKeyBytes:
		writeProblem(w, http.StatusBadRequest, "bad_idempotency_key", fmt.Sprintf("the Idempotency-Key exceeds %d bytes", MaxKeyBytes))
		return step, key, req, false
	}
	req, err := decode(http.MaxBytesReader(w, r.Body, MaxRequestBytes+1), step)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "bad_request", err.Error())
		return step, key, req, false
	}
	return step, key, req, true
}

// outcome is what a check-and-apply decided: a 200 body, or a problem.
type outcome struct {
	status int
	body   []byte
	code   string
	msg    string
}

func conflict(code, msg string) outcome {
	return outcome{status: http.StatusConflict, code: code, msg: msg}
}

var errKeyReused = conflict("idempotency_conflict", "the Idempotency-Key was used with another request body")

// serve draws the call's fault (see draw; rejected says whether its step
// is rejected), records it as injected into the call about, and acts it
// out around apply, the call's check-and-apply: faults that come before
// the effect skip it, the others follow it. A Permanent fault answers what
// refuse, which remembers it, answers.
func (s *Sim) serve(w http.ResponseWriter, r *http.Request, key string, about Injection, rejected func(Faults) bool, refuse, apply func() outcome) {
	fault, latency := s.draw(key, rejected)
	s.inject(about, fault)
	if latency > 0 {
		if err := s.sleep(r.Context(), latency); err != nil {
			return
		}
	}
	switch fault {
	case Transient:
		writeUnavailable(w)
		return
	case Permanent:
		out := refuse()
		writeProblem(w, out.status, out.code, out.msg)
		return
	case Hang:
		s.hang(r.Context())
		writeUnavailable(w)
		return
	}

	if fault == HangThenApply {
		s.hangThenApply(r, key, apply)
		writeUnavailable(w)
		return
	}
	out := apply()
	switch fault {
	case ApplyThenFail:
		writeUnavailable(w)
		return
	case ApplyThenHang:
		s.hang(r.Context())
		writeUnavailable(w)
		return
	case Oversize, Garbage:
		if out.status == http.StatusOK {
			out.body = s.restore(key, fault)
		}
	}
	if out.status != http.StatusOK {
		writeProblem(w, out.status, out.code, out.msg)
		return
	}
	writeJSONBody(w, out.body)
}

// writeJSONBody answers 200 with body, a step's stored output.
func writeJSONBody(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// draw picks the call's fault (script first, then rejected steps, then the
// random draw) and its added latency. A key with a stored result is never
// rejected, by rejected or by a random permanent fault: a real idempotent
// service replays the result of an applied request. The draws themselves
// stay as they were, so a seed replays the same faults either way.
func (s *Sim) draw(key string, rejected func(Faults) bool) (Fault, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults
	call := s.keyCalls[key]
	s.keyCalls[key] = call + 1
	var latency time.Duration
	if f.Latency > 0 && s.unit(key, call, 0) < f.Latency {
		latency = time.Duration(f.LatencyMin)
		if span := int64(f.LatencyMax - f.LatencyMin); span > 0 {
			latency += time.Duration(s.unit(key, call, 1) * float64(span+1))
		}
	}
	if q := s.scripts[key]; len(q) > 0 {
		if len(q) == 1 {
			delete(s.scripts, key)
		} else {
			s.scripts[key] = q[1:]
		}
		return q[0], latency
	}
	_, stored := s.results[key]
	if !stored && rejected(f) {
		return Permanent, latency
	}
	u := s.unit(key, call, 2)
	for _, c := range f.exclusive() {
		if u < c.p {
			if c.fault == Permanent && stored {
				return None, latency
			}
			return c.fault, latency
		}
		u -= c.p
	}
	return None, latency
}

// apply applies key's effect unless it was already applied, returning the
// stored output, or refuses it when a compensation undid it before it was
// applied. Check and apply happen under one lock, so concurrent calls with
// one key cannot both apply, nor can a step apply after its undo.
func (s *Sim) apply(key string, req remote.StepRequest) outcome {
	return s.once(routeStep, key, req, func(hash string) outcome {
		if s.tombstones[key] {
			return conflict(remote.CodeCompensated, fmt.Sprintf("step %s of order %s was compensated before it was applied", req.Step, req.OrderID))
		}
		if s.inProgress[key] > 0 {
			return conflict(remote.CodeInProgress, fmt.Sprintf("a request with the key of step %s of order %s is still in progress", req.Step, req.OrderID))
		}
		s.effects[key]++
		return s.store(key, hash, req.OrderID, req.Step, Output{
			Confirmation: req.Step + "-" + shortHash(key),
			OrderID:      req.OrderID,
			Step:         req.Step,
			AppliedAt:    s.clk.Now().UTC(),
		})
	})
}

// once runs do, a call's check-and-apply, under s.mu, unless key already
// has a stored result: that it replays for the same request (hash, of
// route and req) and refuses for another. do stores its answer with store.
func (s *Sim) once(route, key string, req any, do func(hash string) outcome) outcome {
	hash := requestHash(route, req)
	s.mu.Lock()
	defer s.mu.Unlock()
	if res, ok := s.results[key]; ok {
		if res.requestHash != hash {
			return errKeyReused
		}
		if res.refusal != nil {
			return *res.refusal
		}
		return outcome{status: http.StatusOK, body: res.body}
	}
	return do(hash)
}

// refuse rejects key's request for good, msg saying why, and remembers the
// rejection as the key's result (or replays what the key has already).
func (s *Sim) refuse(route, key string, req any, msg string) outcome {
	var orderID, step string
	switch v := req.(type) {
	case remote.StepRequest:
		orderID, step = v.OrderID, v.Step
	case remote.CompensateRequest:
		orderID, step = v.OrderID, v.Step
	}
	refusal := outcome{status: http.StatusUnprocessableEntity, code: "rejected", msg: msg}
	out := s.once(route, key, req, func(hash string) outcome {
		s.results[key] = result{requestHash: hash, orderID: orderID, step: step, refusal: &refusal}
		return refusal
	})
	if out.status == http.StatusOK {
		// Only a script rejects a key applied before (draw never does):
		// it is answered, and the applied result stays the key's.
		return refusal
	}
	return out
}

// store keeps answer as the result of key's request (hash), naming whose
// step it is, for replay, and answers with it. Call it under s.mu.
func (s *Sim) store(key, hash, orderID, step string, answer any) outcome {
	body, err := json.Marshal(answer)
	if err != nil {
		panic(fmt.Sprintf("remotesim: encode %T: %v", answer, err))
	}
	s.results[key] = result{body: body, requestHash: hash, orderID: orderID, step: step}
	return outcome{status: http.StatusOK, body: body}
}

// shortHash names key in a confirmation: stable, and short.
func shortHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
}

// Routes a request hash is taken for.
const (
	routeStep       = "step"
	routeCompensate = "compensate"
)

// requestHash fingerprints a request and its route so a key reused with
// another body, or on the other route, is told apart from a retry. Marshal
// sorts map keys, so it is stable.
func requestHash(route string, req any) string {
	b, err := json.Marshal(req)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(append([]byte(route+"\n"), b...))
	return hex.EncodeToString(sum[:])
}

func (s *Sim) hang(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-s.stop:
	}
}

type effectsBody struct {
	Effects       map[string]int `json:"effects"`
	Compensations map[string]int `json:"compensations"`
	Calls         int            `json:"calls"`
}

func (s *Sim) serveEffects(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	body := effectsBody{Effects: maps.Clone(s.effects), Compensations: maps.Clone(s.compensations), Calls: s.calls}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, body)
}

func (s *Sim) serveGetFaults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Faults())
}

func (s *Sim) servePostFaults(w http.ResponseWriter, r *http.Request) {
	f, err := DecodeFaults(http.MaxBytesReader(w, r.Body, maxFaultsBytes+1))
	if err == nil {
		err = s.SetFaults(f)
	}
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "bad_faults", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s.Faults())
}

func writeUnavailable(w http.ResponseWriter) {
	writeProblem(w, http.StatusServiceUnavailable, "unavailable", "try again later")
}

func writeProblem(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, remote.Problem{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// Loopback refuses an address beyond this machine: the simulator and the
// local stack built on it have no authentication.
func Loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("address %q: serves on loopback only", addr)
	}
	return nil
}
