package cost

import "testing"

func TestRecordsPerInvocation(t *testing.T) {
	tests := []struct {
		name           string
		level          Level
		fn             string
		streamPerOrder float64
		want           float64
	}{
		{"scheduler batches full", Reference, Scheduler, 0, 10},
		{"agent batches full", Reference, Agent, 0, 10},
		{"scheduler unbatched", MillionAMonth, Scheduler, 0, 1},
		{"agent unbatched", MillionAMonth, Agent, 0, 1},
		{"submission never batched", Reference, Submission, 0, 1},
		// 400 records a second, one shard, 4 polls a second: 100.
		{"stream at the batch size", Reference, Notifier, 4, 100},
		// 300 records a second: 75 a poll.
		{"stream below the batch size", Reference, Notifier, 3, 75},
		// 4,000 records a second on 4 shards: 250 a poll, capped at 100.
		{"stream capped", Reference, Notifier, 40, 100},
		// 20 records a second: 5 a poll.
		{"stream at 10 orders/s", Level{Name: "10/s", OrdersPerSecond: 10}, Notifier, 2, 5},
		// About 1.5 records a second: less than one a poll, so one.
		{"stream at 1M orders/month", MillionAMonth, Notifier, 4, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.level.RecordsPerInvocation(tt.fn, tt.streamPerOrder); !near(got, tt.want) {
				t.Errorf("got %g, want %g", got, tt.want)
			}
		})
	}
}

func TestStreamShards(t *testing.T) {
	tests := []struct{ writes, want float64 }{{0, 1}, {999, 1}, {1000, 1}, {1001, 2}, {4000, 4}}
	for _, tt := range tests {
		if got := StreamShards(tt.writes); got != tt.want {
			t.Errorf("StreamShards(%g) = %g, want %g", tt.writes, got, tt.want)
		}
	}
}

func TestMillionAMonthRate(t *testing.T) {
	// 1,000,000 / 2,592,000 s: about 0.39 orders a second.
	if r := MillionAMonth.OrdersPerSecond; r < 0.385 || r > 0.386 {
		t.Errorf("1M orders a month is %g orders/s", r)
	}
}
