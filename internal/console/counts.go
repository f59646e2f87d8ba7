package console

import (
	"context"
	"sync"
	"time"

	"github.com/sasflow/sas/internal/opsclient"
	"github.com/sasflow/sas/shared/api"
)

// GET /ops/workflows counts every open order: it queries every shard of
// two indexes and reads each open record, seconds of DynamoDB reads on a
// large table (over a second on the local stack, slowing every other read
// meanwhile). The overview must not pay that on every refresh, nor wait
// for it, so the console keeps the last answer and asks again in the
// background once it is older than countsMaxAge; only the first overview
// waits, and at most countsWait, before it says the count is on its way.
const (
	countsMaxAge = time.Minute
	countsWait   = 500 * time.Millisecond
)

// counts is the last answer of GET /ops/workflows.
type counts struct {
	mu  sync.Mutex
	ws  api.Workflows
	err error
	// at is when the last answer came; zero before the first.
	at time.Time
	// fetching is open while a request runs, and closes when it ends.
	fetching chan struct{}
}

// openCounts returns the last answer and whether there is one yet, asking
// the API again when it is stale.
func (s *Server) openCounts(ctx context.Context) (api.Workflows, error, bool) {
	c := &s.counts
	c.mu.Lock()
	if c.fetching == nil && (c.at.IsZero() || s.now().Sub(c.at) > countsMaxAge) {
		done := make(chan struct{})
		c.fetching = done
		go func() {
			defer close(done)
			// Not the page's request: the answer serves the pages after it.
			ctx, cancel := context.WithTimeout(context.Background(), opsclient.DefaultTimeout)
			defer cancel()
			ws, err := s.o.Orders.Workflows(ctx)
			c.mu.Lock()
			defer c.mu.Unlock()
			c.ws, c.err, c.at, c.fetching = ws.Workflows, err, s.now(), nil
		}()
	}
	fetching, first := c.fetching, c.at.IsZero()
	c.mu.Unlock()
	if first && fetching != nil {
		t := time.NewTimer(countsWait)
		defer t.Stop()
		select {
		case <-fetching:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ws, c.err, !c.at.IsZero()
}
