package agent

import (
	"errors"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/sasflow/sas/shared/clock"
)

// Replicated is implemented by Services whose remote has several replicas
// sharing one idempotency state (a key applied through one is known to
// all): the Handler sends each try to the healthiest of them. Each replica
// is a Service of its own, an Endpointer when its endpoints are to be told
// apart.
type Replicated interface {
	Replicas() []Service
}

// Router keeps a health view of every remote endpoint a container calls (a
// breaker from Breakers, and moving averages of latency and failures) and
// picks the endpoint of each try. It is safe for concurrent use.
//
// The rank of an endpoint, best first: its breaker lets the try through;
// it has not failed earlier in the same request (a try that failed
// transiently sends the next one elsewhere); its breaker is closed rather
// than half-open; its cost is lowest, where cost is the latency's moving
// average plus the failure rate's moving average times Penalty (a failed
// try costs about a timeout). Endpoints within tieTolerance of the best
// cost are tied: the one with fewer tries in flight wins, and the rest is
// drawn at random, so a cold container spreads its batch.
type Router struct {
	breakers *Breakers
	clk      clock.Clock
	// intn returns a number in [0, n); injected so tests are deterministic.
	intn func(n int) int
	// penalty is the cost a failure adds; halfLife is how fast an
	// endpoint's record fades without new tries, so an endpoint once slow
	// is tried again.
	penalty, halfLife time.Duration

	mu     sync.Mutex
	health map[string]*health
}

// health is one endpoint's moving averages.
type health struct {
	latency  float64 // nanoseconds
	failures float64 // in [0, 1]
	at       time.Time
	seen     bool
	inflight int
}

// ewmaWeight is the weight of a new sample in the moving averages: the last
// few tries dominate, so a replica that goes down is avoided after one or
// two.
const ewmaWeight = 0.3

// tieTolerance: costs within a fifth of the best, or a millisecond, are
// tied; latencies that close say nothing worth piling onto one replica for.
const (
	tieShare = 0.2
	tieFloor = float64(time.Millisecond)
)

// NewRouter returns a router over breakers. penalty is the cost of a
// failure (the remote timeout is a fair one); halfLife how long an
// endpoint's record takes to fade by half (the breaker's cooldown is a fair
// one); intn draws ties, nil for math/rand/v2's.
func NewRouter(breakers *Breakers, clk clock.Clock, penalty, halfLife time.Duration, intn func(n int) int) *Router {
	if intn == nil {
		intn = rand.IntN
	}
	return &Router{breakers: breakers, clk: clk, intn: intn, penalty: penalty, halfLife: max(halfLife, time.Millisecond), health: map[string]*health{}}
}

// route is a try's endpoint: report must be called once with its result.
type route struct {
	index  int
	report func(Result)
}

// pick chooses the endpoint of one try among endpoints; failed marks those
// that failed transiently earlier in the same request. When no breaker lets
// the try through it returns the *OpenError of the endpoint that reopens
// first, so the retry loop waits for it.
func (r *Router) pick(endpoints []string, failed []bool) (route, error) {
	type candidate struct {
		i        int
		rank     int // failed earlier, half-open
		cost     float64
		inflight int
		draw     int
	}
	now := r.clk.Now()
	var cands []candidate
	var soonest *OpenError
	r.mu.Lock()
	for i, ep := range endpoints {
		st := r.breakers.For(ep).State()
		if st == Open {
			continue
		}
		c := candidate{i: i, cost: r.costLocked(ep, now)}
		if failed[i] {
			c.rank += 2
		}
		if st == HalfOpen {
			c.rank++
		}
		if h := r.health[ep]; h != nil {
			c.inflight = h.inflight
		}
		cands = append(cands, c)
	}
	r.mu.Unlock()
	if len(cands) > 0 {
		slices.SortStableFunc(cands, func(a, b candidate) int {
			if a.rank != b.rank {
				return a.rank - b.rank
			}
			return cmpFloat(a.cost, b.cost)
		})
		// The tied: the best rank, within tolerance of the best cost.
		best := cands[0]
		n := 1
		for n < len(cands) && cands[n].rank == best.rank && cands[n].cost <= best.cost+max(best.cost*tieShare, tieFloor) {
			n++
		}
		if tied := cands[:n]; n > 1 {
			for k := range tied {
				tied[k].draw = r.intn(1 << 30)
			}
			slices.SortStableFunc(tied, func(a, b candidate) int {
				if a.inflight != b.inflight {
					return a.inflight - b.inflight
				}
				return a.draw - b.draw
			})
		}
	}
	for _, c := range cands {
		ep := endpoints[c.i]
		done, err := r.breakers.For(ep).Allow()
		if err != nil {
			// Another try took the half-open probe, or the breaker opened
			// since State; the next candidate may do.
			var oe *OpenError
			if errors.As(err, &oe) && (soonest == nil || oe.Wait < soonest.Wait) {
				soonest = oe
			}
			continue
		}
		return route{index: c.i, report: r.begin(ep, done)}, nil
	}
	for _, ep := range endpoints {
		// Every breaker is open: fail fast, waiting for the first to cool.
		if err := r.breakers.For(ep).refusal(); err != nil && (soonest == nil || err.Wait < soonest.Wait) {
			soonest = err
		}
	}
	if soonest == nil {
		soonest = &OpenError{Endpoint: "every replica"}
	}
	return route{}, soonest
}

// begin counts a try in flight on ep and returns what reports its end: to
// the breaker, and to the moving averages unless it says nothing of the
// remote.
func (r *Router) begin(ep string, done func(Result)) func(Result) {
	start := r.clk.Now()
	r.mu.Lock()
	h := r.healthLocked(ep)
	h.inflight++
	r.mu.Unlock()
	var once sync.Once
	return func(res Result) {
		once.Do(func() {
			done(res)
			now := r.clk.Now()
			r.mu.Lock()
			defer r.mu.Unlock()
			h.inflight--
			if res == Ignored {
				return
			}
			lat, fail := float64(now.Sub(start)), 0.0
			if res == Failure {
				fail = 1
			}
			if !h.seen {
				h.latency, h.failures, h.seen = lat, fail, true
			} else {
				d := r.decay(h, now)
				h.latency = ewmaWeight*lat + (1-ewmaWeight)*h.latency*d
				h.failures = ewmaWeight*fail + (1-ewmaWeight)*h.failures*d
			}
			h.at = now
		})
	}
}

func (r *Router) healthLocked(ep string) *health {
	h, ok := r.health[ep]
	if !ok {
		h = &health{}
		r.health[ep] = h
	}
	return h
}

// decay is the share of an endpoint's record left after the time since its
// last sample.
func (r *Router) decay(h *health, now time.Time) float64 {
	age := now.Sub(h.at)
	if age <= 0 {
		return 1
	}
	return math.Exp2(-float64(age) / float64(r.halfLife))
}

// costLocked is ep's cost now; an endpoint never tried costs nothing, so a
// new replica gets its share.
func (r *Router) costLocked(ep string, now time.Time) float64 {
	h := r.health[ep]
	if h == nil || !h.seen {
		return 0
	}
	d := r.decay(h, now)
	return (h.latency + h.failures*float64(r.penalty)) * d
}

// Health is an endpoint's view, for tests and logs.
type Health struct {
	Breaker  BreakerState
	Latency  time.Duration
	Failures float64
	InFlight int
}

// Health returns ep's view now.
func (r *Router) Health(ep string) Health {
	st := r.breakers.For(ep).State()
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.health[ep]
	if h == nil {
		return Health{Breaker: st}
	}
	d := r.decay(h, r.clk.Now())
	return Health{Breaker: st, Latency: time.Duration(h.latency * d), Failures: h.failures * d, InFlight: h.inflight}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Host is what logs say of an endpoint: a URL's host, never its path or
// anything else it may carry; an endpoint that is no URL (a Service's own
// name for a step) as it is.
func Host(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return endpoint
	}
	return u.Host
}
