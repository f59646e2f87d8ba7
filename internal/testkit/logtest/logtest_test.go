package logtest_test

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/internal/testkit/tbrecord"
)

func TestRecordsDecodesConcurrentLines(t *testing.T) {
	t.Parallel()
	var buf logtest.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { log.Info("line", slog.Int("i", i)) })
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

// A key logged twice on one line fails the test: the line's readers would
// keep one value or the other.
func TestRecordsRefusesAKeyTwice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		log  func(*slog.Logger)
		fail bool
	}{
		{"once", func(l *slog.Logger) { l.With(slog.String("step", "a")).Info("line", slog.Int("attempt", 1)) }, false},
		{"once per group", func(l *slog.Logger) {
			l.With(slog.String("step", "a")).Info("line", slog.Group("written", slog.String("step", "b")))
		}, false},
		{"twice", func(l *slog.Logger) { l.With(slog.String("step", "a")).Info("line", slog.String("step", "b")) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf logtest.Buffer
			tc.log(slog.New(slog.NewJSONHandler(&buf, nil)))
			msgs := tbrecord.Run(func(tb testing.TB) { buf.Records(tb) })
			if got := len(msgs) > 0; got != tc.fail {
				t.Errorf("Records failed = %v (%q), want %v", got, msgs, tc.fail)
			}
		})
	}
}
