package cost

import (
	"sort"
	"strings"
)

// PerOrder divides a run total by the run's orders; a run without orders
// costs nothing per order.
func (u Usage) PerOrder(total float64) float64 {
	if u.Orders <= 0 {
		return 0
	}
	return total / float64(u.Orders)
}

// WRUPerOrder is the write request units of every table and index, per
// order, as DynamoDB Local reported them; BilledWRUPerOrder is what AWS
// bills for them.
func (u Usage) WRUPerOrder() float64 { return u.PerOrder(sum(u.WRU)) }

// RRUPerOrder is the read request units of every table and index, per
// order.
func (u Usage) RRUPerOrder() float64 { return u.PerOrder(sum(u.RRU)) }

// BilledPerOrder is the billed requests (64 KiB chunks) of one service
// ("SQS", "SNS") per order. It reads Billed, not Requests: a batch or a
// large message is not one billed request.
func (u Usage) BilledPerOrder(service string) float64 {
	n := 0
	for k, v := range u.Billed {
		if strings.HasPrefix(k, service+" ") {
			n += v
		}
	}
	return u.PerOrder(float64(n))
}

// StreamRecordsPerOrder is the state table's stream records the Notifier
// read per order: one per write of a state record.
func (u Usage) StreamRecordsPerOrder() float64 {
	return u.PerOrder(float64(u.Records[Notifier]))
}

// RemoteCallsPerAgentRecord is how many remote calls one Agent record made
// (more than one when the Agent retried the call).
func (u Usage) RemoteCallsPerAgentRecord() float64 {
	if u.Records[Agent] == 0 {
		return 0
	}
	return float64(u.RemoteCalls) / float64(u.Records[Agent])
}

// LogBytesPerOrder is what the functions' loggers wrote per order.
func (u Usage) LogBytesPerOrder() float64 {
	var n int64
	for _, v := range u.LogBytes {
		n += v
	}
	return u.PerOrder(float64(n))
}

func sum(m map[string]float64) float64 {
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s
}

// sortedKeys gives map keys in a stable order, so tables do not reorder
// between runs.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
