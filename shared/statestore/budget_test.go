package statestore

import (
	"sync"
	"testing"
)

// TestBudgetEndsExactlyWhenSpent: partitions sharing a budget never read
// past it, and one is told the budget is spent (take answers 0) only once
// exactly all of it was read, however grants and returns interleave.
func TestBudgetEndsExactlyWhenSpent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ budget, parts, perPart, page int }{
		{101, 128, 3, 1000}, // more entries than the budget: it is spent
		{1000, 64, 5, 7},    // fewer: every partition reads to its end
		{1, 8, 1, 1000},
	} {
		b := newBudget(tc.budget)
		var wg sync.WaitGroup
		var mu sync.Mutex
		stopped := 0
		for range tc.parts {
			wg.Go(func() {
				left := tc.perPart
				for left > 0 {
					n := b.take(tc.page)
					if n == 0 {
						mu.Lock()
						stopped++
						mu.Unlock()
						if b.read != tc.budget {
							t.Errorf("budget %d: spent after reading %d", tc.budget, b.read)
						}
						return
					}
					used := min(n, left)
					left -= used
					b.give(n, used)
				}
			})
		}
		wg.Wait()
		total := tc.parts * tc.perPart
		if want := min(total, tc.budget); b.read != want || (stopped > 0) != (total > tc.budget) {
			t.Errorf("budget %d over %d entries: read %d (want %d), %d partitions stopped", tc.budget, total, b.read, want, stopped)
		}
	}
}
