package logtest_test

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/sasflow/sas/internal/testkit/logtest"
)

func TestRecordsDecodesConcurrentLines(t *testing.T) {
	t.Parallel()
	var buf logtest.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { log.Info("line", "i", i) })
	}
	wg.Wait()
	recs := buf.Records(t)
	seen := map[float64]bool{}
	for _, r := range recs {
		seen[r["i"].(float64)] = true
	}
	if len(recs) != 50 || len(seen) != 50 {
		t.Fatalf("%d records, %d distinct", len(recs), len(seen))
	}
}
