// Package admission decides whether the system takes a new order now. The
// Agents' queues are where work waits for the remote services, and a
// request that waits there long enough times out before its Agent starts,
// is retried by the Supervisor, and joins the same queue again: more work
// for less result. So the Submission reads the depth of every Agent queue
// and sheds new orders (429 with Retry-After) while any holds more than its
// backlog, the work of topology.Capacity's AdmitWait. Orders already
// admitted are never shed: their retries and later steps go through.
//
// Each order has a priority class (workflow.Priority). SQS has no
// priority of its own and a queue is roughly first in, first out, so a
// high order waits behind whatever the queue holds when it comes. Each
// class may fill its own part of the backlog (Limits.Limit): high orders
// the whole of it, normal ones three quarters and low ones half; and
// while the system is overloaded and high orders arrive, normal orders
// are held to Reserve and low ones to half of it. The lower classes are
// shed first, and a high order finds little ahead of it in each queue.
package admission

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/workflow"
)

// Depths reads how many messages wait in a queue (queue.Depths).
type Depths interface {
	Depth(ctx context.Context, queueURL string) (int, error)
}

// Config is the admission check's part of the Submission's configuration.
type Config struct {
	// Queues are the Agents' request queues. None turns the check off:
	// every order is admitted.
	Queues []string
	// Backlog is the depth of any one queue beyond which new orders are
	// shed.
	Backlog int
	// Rate is how many requests a second one queue drains, for the
	// Retry-After of a shed request.
	Rate int
	// Refresh is how long one reading of the depths is trusted. Each
	// reading is one SQS request per queue.
	Refresh time.Duration
	// Reserve is the depth to which normal orders are held (low ones to
	// half of it) while high orders arrive in an overload: half a round
	// of an Agent's calls (topology.Capacity.Admission). Zero means half
	// the backlog.
	Reserve int
}

// Bounds of the configuration.
const (
	MinRefresh = 50 * time.Millisecond
	MaxRefresh = 10 * time.Second
	// MaxRetryAfter caps Retry-After: a client told to wait longer would
	// rather hear again soon.
	MaxRetryAfter = 60 * time.Second
	// readTimeout bounds a depth read, so a slow SQS delays a request by
	// at most this much; the order is then admitted (see Gate.Admit).
	readTimeout = time.Second
)

// Check records what breaks the rules in r.
func (c Config) Check(r *config.Rules) {
	if len(c.Queues) == 0 {
		return
	}
	for _, q := range c.Queues {
		r.URL("Queues", q)
	}
	r.Count("Backlog", c.Backlog, 1, 1_000_000)
	r.Count("Rate", c.Rate, 1, 1_000_000)
	r.Within("Refresh", c.Refresh, MinRefresh, MaxRefresh)
	if c.Reserve != 0 {
		r.Count("Reserve", c.Reserve, 1, max(c.Backlog, 1))
	}
}

// reserve is Reserve, or its default.
func (c Config) reserve() int {
	if c.Reserve == 0 {
		return max(c.Backlog/2, 1)
	}
	return c.Reserve
}

// Variables names the fields as the Submission reads them.
var Variables = map[string]string{
	"Queues": "ADMISSION_QUEUES", "Backlog": "ADMISSION_BACKLOG",
	"Rate": "ADMISSION_RATE", "Refresh": "ADMISSION_REFRESH", "Reserve": "ADMISSION_RESERVE",
}

// DefaultRefresh is ADMISSION_REFRESH's default.
const DefaultRefresh = 250 * time.Millisecond

// Read parses the variables through r:
//
//	ADMISSION_QUEUES   optional, comma-separated Agent queue URLs; unset admits every order
//	ADMISSION_BACKLOG  required with queues, 1..1000000 messages
//	ADMISSION_RATE     required with queues, 1..1000000 requests a second
//	ADMISSION_REFRESH  optional Go duration within 50ms..10s, default 250ms
//	ADMISSION_RESERVE  optional, 1..ADMISSION_BACKLOG messages, default half the backlog
func Read(r *config.Reader) Config {
	var c Config
	for q := range strings.SplitSeq(r.String("ADMISSION_QUEUES"), ",") {
		if q = strings.TrimSpace(q); q != "" {
			c.Queues = append(c.Queues, q)
		}
	}
	c.Backlog, c.Rate = r.Int("ADMISSION_BACKLOG", 0), r.Int("ADMISSION_RATE", 0)
	c.Refresh = r.Duration("ADMISSION_REFRESH", DefaultRefresh)
	c.Reserve = r.Int("ADMISSION_RESERVE", 0)
	return c
}

// Decision is the answer for one new order.
type Decision struct {
	Admit bool
	// RetryAfter, when shed, is the time the fullest queue takes to drain
	// below the backlog, in whole seconds, 1s..MaxRetryAfter.
	RetryAfter time.Duration
	// Queue and Depth name the fullest queue and its estimated depth;
	// Depth is -1 when the depths could not be read.
	Queue string
	Depth int
}

// Limits is how deep a queue may be for an order of each class to be
// admitted (Limit).
type Limits struct {
	// Backlog and Reserve are Config's.
	Backlog, Reserve int
	// Reserved says the room above Reserve is kept for high orders: the
	// system is overloaded and high orders arrive.
	Reserved bool
}

// Limit is the depth past which an order of class is shed (an empty class
// is normal): at least one message, so a class is never shut out by
// rounding.
func (l Limits) Limit(class workflow.Priority) int {
	n := l.Backlog
	switch {
	case class == workflow.PriorityHigh:
	case l.Reserved && class == workflow.PriorityLow:
		n = min(l.Reserve, l.Backlog) / 2
	case l.Reserved:
		n = min(l.Reserve, l.Backlog)
	case class == workflow.PriorityLow:
		n = l.Backlog / 2
	default:
		// The top quarter is always high orders' alone, so a high order
		// that comes as an overload begins is not shed with the others.
		n = l.Backlog * 3 / 4
	}
	return max(n, 1)
}

// HighReserve is how long a Gate keeps the room above Reserve for high
// orders after it last saw both a high order and a sign of overload (an
// order above low shed, or a high order admitted behind more than
// Reserve): a few refreshes' worth of them is a stream, not one.
const HighReserve = 10 * time.Second

// Decide is the rule: shed an order of class while any queue holds more
// than the class's limit, telling the client to come back when the
// fullest has drained to it at rate. depths[i] is queue i's depth; nil
// means unknown, and an order is then admitted (see Gate.Admit).
func Decide(queues []string, depths []int, limits Limits, rate int, class workflow.Priority) Decision {
	if len(depths) == 0 {
		return Decision{Admit: true, Depth: -1}
	}
	backlog := limits.Limit(class)
	worst := 0
	for i, d := range depths {
		if d > depths[worst] {
			worst = i
		}
	}
	d := Decision{Admit: depths[worst] <= backlog, Queue: queues[worst], Depth: depths[worst]}
	if !d.Admit {
		secs := math.Ceil(float64(depths[worst]-backlog) / float64(rate))
		d.RetryAfter = min(max(time.Duration(secs)*time.Second, time.Second), MaxRetryAfter)
	}
	return d
}

// Gate applies Decide to readings of the queues' depths, each trusted for
// Refresh. Between readings it counts the orders it admitted into every
// queue's depth, so one busy instance cannot overfill a queue between two
// reads. It is safe for concurrent use.
type Gate struct {
	cfg    Config
	depths Depths
	clk    clock.Clock
	log    *slog.Logger

	mu       sync.Mutex
	readAt   time.Time
	reading  []int     // nil: never read, or the last read failed
	admitted int       // since readAt
	highAt   time.Time // when the last high order came
	// overloadAt is the last sign of overload: an order above low shed,
	// or a high one admitted behind more than Reserve.
	overloadAt time.Time
}

// New returns a Gate, or every problem of cfg at once.
func New(cfg Config, depths Depths, deps actor.Deps) (*Gate, error) {
	err := actor.Check("admission", config.Validate("admission config", cfg), actor.Port{Name: "Depths", Value: depths})
	if err != nil {
		return nil, err
	}
	deps = deps.WithDefaults()
	return &Gate{cfg: cfg, depths: depths, clk: deps.Clock, log: deps.Log}, nil
}

// Admit decides on one new order. It fails open: if the depths cannot be
// read, orders are admitted (and a warning logged), because shedding
// protects budgets, not correctness; an order admitted into a backlog is
// still recovered by the Supervisor.
func (g *Gate) Admit(ctx context.Context, class workflow.Priority) Decision {
	if len(g.cfg.Queues) == 0 {
		return Decision{Admit: true, Depth: -1}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clk.Now()
	if g.readAt.IsZero() || now.Sub(g.readAt) >= g.cfg.Refresh {
		g.reading, g.readAt, g.admitted = g.read(ctx), now, 0
	}
	if class == workflow.PriorityHigh {
		g.highAt = now
	}
	recent := func(t time.Time) bool { return !t.IsZero() && now.Sub(t) < HighReserve }
	limits := Limits{Backlog: g.cfg.Backlog, Reserve: g.cfg.reserve(), Reserved: recent(g.highAt) && recent(g.overloadAt)}
	var est []int
	if g.reading != nil {
		// Since the reading, the queue took the orders admitted and lost
		// what the Agents took, at most Rate a second: without the drain
		// a reading taken just before a poll would hold the queue back
		// for a whole Refresh, and shallow limits would starve the Agents.
		// A slower drain over-admits by at most Rate × Refresh.
		drained := int(float64(g.cfg.Rate) * now.Sub(g.readAt).Seconds())
		est = make([]int, len(g.reading))
		for i, d := range g.reading {
			est[i] = max(d-drained, 0) + g.admitted
		}
	}
	d := Decide(g.cfg.Queues, est, limits, g.cfg.Rate, class)
	switch {
	case d.Admit && class == workflow.PriorityHigh && d.Depth > limits.Reserve:
		// A high order that finds more than the reserve ahead of it is
		// the first sign of an overload: reserve at once, rather than
		// once the queue has filled to the normal orders' limit.
		g.overloadAt = now
	case d.Admit:
	case class != workflow.PriorityLow:
		// Only a shed order above low says the system is overloaded: low
		// orders are shed early by design, and counting them would let
		// the reserve, which sheds more of them, keep itself going.
		g.overloadAt = now
	}
	if d.Admit {
		g.admitted++
	}
	return d
}

// read returns every queue's depth, or nil if any cannot be read.
func (g *Gate) read(ctx context.Context) []int {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	out := make([]int, len(g.cfg.Queues))
	for i, q := range g.cfg.Queues {
		n, err := g.depths.Depth(ctx, q)
		if err != nil {
			g.log.WarnContext(ctx, "queue depths unread; admitting new orders unchecked", slog.Any("error", fmt.Errorf("admission: %w", err)))
			return nil
		}
		out[i] = n
	}
	return out
}
