// Package reqcount counts the AWS requests an SDK client makes, by service
// and operation, with a middleware added to the client's options. It is how
// the project measures AWS requests per order.
package reqcount

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// Counter counts requests. The zero value is ready to use.
type Counter struct {
	mu     sync.Mutex
	counts map[string]int
}

// Add is an SDK APIOptions entry: append it to a client's Options.APIOptions.
func (c *Counter) Add(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("reqcount",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.inc(awsmiddleware.GetServiceID(ctx) + " " + awsmiddleware.GetOperationName(ctx))
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

func (c *Counter) inc(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[key]++
}

// Snapshot returns the counts so far, keyed "Service Operation".
func (c *Counter) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// Reset forgets every count.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = nil
}

// Total sums counts.
func Total(counts map[string]int) int {
	n := 0
	for _, v := range counts {
		n += v
	}
	return n
}

// Table formats counts as aligned lines, sorted by key, each divided by per
// (the number of orders).
func Table(counts map[string]int, per int) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(&b, "  %-40s %6.2f\n", k, float64(counts[k])/float64(per))
	}
	fmt.Fprintf(&b, "  %-40s %6.2f\n", "total", float64(Total(counts))/float64(per))
	return b.String()
}
