// Package admission decides whether the system takes a new order now. The
// Agents' queues are where work waits for the remote services, and a
// request that waits there long enough times out before its Agent starts,
// is retried by the Supervisor, and joins the same queue again: more work
// for less result. So the Submission reads the depth of every Agent queue
// and sheds new orders (429 with Retry-After) while any holds more than its
// backlog, the work of topology.Capacity's AdmitWait. Orders already
// admitted are never shed: their retries and later steps go through.
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
}

// Variables names the fields as the Submission reads them.
var Variables = map[string]string{
	"Queues": "ADMISSION_QUEUES", "Backlog": "ADMISSION_BACKLOG",
	"Rate": "ADMISSION_RATE", "Refresh": "ADMISSION_REFRESH",
}

// DefaultRefresh is ADMISSION_REFRESH's default.
const DefaultRefresh = 250 * time.Millisecond

// Read parses the variables through r:
//
//	ADMISSION_QUEUES   optional, comma-separated Agent queue URLs; unset admits every order
//	ADMISSION_BACKLOG  required with queues, 1..1000000 messages
//	ADMISSION_RATE     required with queues, 1..1000000 requests a second
//	ADMISSION_REFRESH  optional Go duration within 50ms..10s, default 250ms
func Read(r *config.Reader) Config {
	var c Config
	for q := range strings.SplitSeq(r.String("ADMISSION_QUEUES"), ",") {
		if q = strings.TrimSpace(q); q != "" {
			c.Queues = append(c.Queues, q)
		}
	}
	c.Backlog, c.Rate = r.Int("ADMISSION_BACKLOG", 0), r.Int("ADMISSION_RATE", 0)
	c.Refresh = r.Duration("ADMISSION_REFRESH", DefaultRefresh)
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

// Decide is the rule: shed while any queue holds more than backlog,
// telling the client to come back when the fullest has drained to it at
// rate. depths[i] is queue i's depth; nil means unknown, and an order is
// then admitted (see Gate.Admit).
func Decide(queues []string, depths []int, backlog, rate int) Decision {
	if len(depths) == 0 {
		return Decision{Admit: true, Depth: -1}
	}
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
	reading  []int // nil: never read, or the last read failed
	admitted int   // since readAt
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
func (g *Gate) Admit(ctx context.Context) Decision {
	if len(g.cfg.Queues) == 0 {
		return Decision{Admit: true, Depth: -1}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if now := g.clk.Now(); g.readAt.IsZero() || now.Sub(g.readAt) >= g.cfg.Refresh {
		g.reading, g.readAt, g.admitted = g.read(ctx), now, 0
	}
	var est []int
	if g.reading != nil {
		est = make([]int, len(g.reading))
		for i, d := range g.reading {
			est[i] = d + g.admitted
		}
	}
	d := Decide(g.cfg.Queues, est, g.cfg.Backlog, g.cfg.Rate)
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
