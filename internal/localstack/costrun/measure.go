package costrun

import (
	"bytes"
	"context"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/internal/cost"
	"github.com/sasflow/sas/internal/localstack/streambridge"
	"github.com/sasflow/sas/internal/testkit/reqcount"
	"github.com/sasflow/sas/shared/segments"
)

// functions times the handlers' invocations and counts what they were
// given, by function.
type functions struct {
	mu          sync.Mutex
	records     map[string]int
	invocations map[string]int
	took        map[string]time.Duration
	// stepRecords and stepTook are the Agents' records and handler time
	// by step.
	stepRecords map[string]int
	stepTook    map[string]time.Duration
}

// timeStep runs one invocation of step's Agent with n records: an "agent"
// invocation, counted by step too.
func (f *functions) timeStep(step string, n int, call func() error) error {
	start := time.Now()
	err := f.time(cost.Agent, n, call)
	took := time.Since(start)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stepRecords == nil {
		f.stepRecords, f.stepTook = map[string]int{}, map[string]time.Duration{}
	}
	f.stepRecords[step] += n
	f.stepTook[step] += took
	return err
}

func (f *functions) stepSnapshot() (records map[string]int, took map[string]time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.stepRecords), maps.Clone(f.stepTook)
}

// time runs one invocation of fn with n records.
func (f *functions) time(fn string, n int, call func() error) error {
	start := time.Now()
	err := call()
	took := time.Since(start)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.records == nil {
		f.records, f.invocations, f.took = map[string]int{}, map[string]int{}, map[string]time.Duration{}
	}
	f.records[fn] += n
	f.invocations[fn]++
	f.took[fn] += took
	return err
}

func (f *functions) snapshot() (records, invocations map[string]int, took map[string]time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	records, invocations, took = maps.Clone(f.records), maps.Clone(f.invocations), maps.Clone(f.took)
	// Submission and Supervisor invocations are not records of an event
	// source: cost.Usage keeps them apart.
	delete(records, "submission")
	delete(records, "supervisor")
	for fn := range invocations {
		if fn != "submission" && fn != "supervisor" {
			delete(invocations, fn)
		}
	}
	return records, invocations, took
}

// timeHandlers puts every event source's handler behind the timer: the
// scheduler and response queues feed "scheduler", the agent queues "agent",
// the state table's stream "notifier".
func (r *rig) timeHandlers() {
	steps := map[string]string{}
	for name, q := range r.sys.AgentQueues {
		steps[q.URL] = name
	}
	for _, b := range r.sys.Bridges {
		h := b.Handler
		if step, ok := steps[b.QueueURL]; ok {
			// An Agent's requests are tagged with its step, so the meter
			// counts them by step too (a code step's ledger and S3
			// requests among them).
			b.Handler = r.traced(func(ctx context.Context, ev events.SQSEvent) (resp events.SQSEventResponse, err error) {
				err = r.fns.timeStep(step, len(ev.Records), func() error {
					resp, err = h(reqcount.WithTag(ctx, step), ev)
					return err
				})
				return resp, err
			})
			continue
		}
		b.Handler = r.traced(func(ctx context.Context, ev events.SQSEvent) (resp events.SQSEventResponse, err error) {
			err = r.fns.time(cost.Scheduler, len(ev.Records), func() error {
				resp, err = h(ctx, ev)
				return err
			})
			return resp, err
		})
	}
	for fn, b := range map[string]*streambridge.Bridge{"notifier": r.sys.Stream, "timer": r.sys.TimerStream} {
		h := b.Handler
		b.Handler = func(ctx context.Context, ev events.DynamoDBEvent) (resp events.DynamoDBEventResponse, err error) {
			err = r.fns.time(fn, len(ev.Records), func() error {
				resp, err = h(ctx, ev)
				return err
			})
			return resp, err
		}
	}
	dh := r.sys.DeadlineBridge.Handler
	r.sys.DeadlineBridge.Handler = r.traced(func(ctx context.Context, ev events.SQSEvent) (resp events.SQSEventResponse, err error) {
		err = r.fns.time("deadline", len(ev.Records), func() error {
			resp, err = dh(ctx, ev)
			return err
		})
		return resp, err
	})
}

// traced sends the segments an SQS handler's invocation records, as the
// deployed functions do, outside its timing: the run records every order,
// the deployment a sample, whose sending the model prices apart.
func (r *rig) traced(h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return segments.Wrap(r.tracer, time.Now, h)
}

// logBytes counts the bytes of JSON log lines by the function that wrote
// them, as CloudWatch Logs would ingest them (one line per event).
type logBytes struct {
	mu    sync.Mutex
	bytes map[string]int64
	// warn are the bytes of the WARN and ERROR lines alone.
	warn map[string]int64
}

var functionKey = []byte(`"function":"`)

func (l *logBytes) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"level":"ERROR"`)) {
		// A run that fails says why.
		os.Stderr.Write(p)
	}
	fn := "unknown"
	if i := bytes.Index(p, functionKey); i >= 0 {
		rest := p[i+len(functionKey):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			fn = string(rest[:j])
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bytes == nil {
		l.bytes, l.warn = map[string]int64{}, map[string]int64{}
	}
	l.bytes[fn] += int64(len(p))
	if bytes.Contains(p, []byte(`"level":"WARN"`)) || bytes.Contains(p, []byte(`"level":"ERROR"`)) {
		l.warn[fn] += int64(len(p))
	}
	return len(p), nil
}

func (l *logBytes) snapshot() (all, warn map[string]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.bytes), maps.Clone(l.warn)
}
