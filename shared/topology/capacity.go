package topology

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sasflow/sas/shared/admission"
	"github.com/sasflow/sas/shared/workflow"
)

// Capacity is the stack's capacity model: what the remote service behind
// each Agent takes, from which the Agents' concurrency, the API's throttle,
// the Submission's admission check and the queue-age alarms all follow.
// The stack (infra/) and the local runs derive every figure from it, so
// changing the model changes them together.
//
// The model, per Agent: it keeps Slots calls in flight (MaximumConcurrency
// invocations of AgentBatchSize records each, worked concurrently), each
// taking RemoteLatency, so it completes OrdersPerSecond steps a second.
// Every order runs each Agent once, so that is the workflow's capacity in
// orders a second. A queue holding Backlog requests is AdmitWait of work;
// beyond it the Submission answers 429, so a request the API admits waits
// about AdmitWait at most, well within its step's Wait allowance.
type Capacity struct {
	// RemoteLatency is a remote call's typical latency (take the p90).
	RemoteLatency time.Duration
	// RemoteConcurrency is how many calls the remote service takes at once
	// from one Agent; rounded up to whole invocations of AgentBatchSize.
	RemoteConcurrency int
	// AdmitWait is the queue wait at which the API starts shedding new
	// orders, at least two remote latencies. Longer keeps the Agents busier
	// through bursts; shorter keeps latency lower under overload.
	AdmitWait time.Duration
}

// DefaultCapacity is the deployed default: a remote service answering in
// 100 ms that takes 50 calls at once, and shedding at one second of
// queued work.
func DefaultCapacity() Capacity {
	return Capacity{RemoteLatency: 100 * time.Millisecond, RemoteConcurrency: 50, AdmitWait: time.Second}
}

// Bounds of the model's inputs: an event source mapping's
// MaximumConcurrency is 2..1000, so 20..10,000 calls in flight.
const (
	minRemoteConcurrency = 2 * AgentBatchSize
	maxRemoteConcurrency = 1000 * AgentBatchSize
	// APIHeadroom is the API's rate limit over the capacity: the admission
	// check sheds what the Agents cannot take, and the throttle only keeps
	// a flood from costing a Lambda invocation a request.
	APIHeadroom = 1.25
	// minAdmitRefresh and maxAdmitRefresh bound how often a Submission
	// instance reads the queues' depths (two SQS requests a read).
	minAdmitRefresh = 100 * time.Millisecond
	maxAdmitRefresh = time.Second
)

// Validate reports every input out of bounds.
func (c Capacity) Validate() error {
	var errs []error
	if c.RemoteLatency < time.Millisecond || c.RemoteLatency > 5*time.Minute {
		errs = append(errs, fmt.Errorf("remote latency %v must be within 1ms..5m", c.RemoteLatency))
	}
	if c.RemoteConcurrency < minRemoteConcurrency || c.RemoteConcurrency > maxRemoteConcurrency {
		errs = append(errs, fmt.Errorf("remote concurrency %d must be within %d..%d (2..1000 Agent invocations of %d records)",
			c.RemoteConcurrency, minRemoteConcurrency, maxRemoteConcurrency, AgentBatchSize))
	}
	if c.AdmitWait < 100*time.Millisecond || c.AdmitWait > time.Minute {
		errs = append(errs, fmt.Errorf("admit wait %v must be within 100ms..1m", c.AdmitWait))
	}
	// At full load an Agent's queue holds about one round of calls between
	// two of its polls, so a backlog of less than two rounds sheds orders
	// below the capacity.
	if c.AdmitWait < 2*c.RemoteLatency {
		errs = append(errs, fmt.Errorf("admit wait %v must be at least twice the remote latency %v", c.AdmitWait, c.RemoteLatency))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("capacity model: %w", err)
	}
	return nil
}

// CheckWorkflow reports the steps whose Wait allowance does not cover
// twice the admission's wait: a request admitted at the limit, behind a
// burst that arrived between two depth reads, would start eating its
// Budget.
func (c Capacity) CheckWorkflow(d workflow.Definition) error {
	var errs []error
	for _, s := range d.Steps {
		if s.Wait < 2*c.AdmitWait {
			errs = append(errs, fmt.Errorf("step %q: wait %v must be at least twice the admit wait %v", s.Name, s.Wait, c.AdmitWait))
		}
	}
	return errors.Join(errs...)
}

// AgentMaxConcurrency is each Agent's event source mapping's
// MaximumConcurrency.
func (c Capacity) AgentMaxConcurrency() int {
	return max(2, (c.RemoteConcurrency+AgentBatchSize-1)/AgentBatchSize)
}

// Slots is how many remote calls one Agent keeps in flight.
func (c Capacity) Slots() int { return c.AgentMaxConcurrency() * AgentBatchSize }

// OrdersPerSecond is the workflow's capacity: each Agent's completions a
// second.
func (c Capacity) OrdersPerSecond() float64 { return float64(c.Slots()) / c.RemoteLatency.Seconds() }

// Backlog is the depth of an Agent queue beyond which the Submission sheds
// new orders: AdmitWait of work.
func (c Capacity) Backlog() int {
	return max(1, int(math.Ceil(c.OrdersPerSecond()*c.AdmitWait.Seconds())))
}

// AdmitRefresh is how long a Submission instance trusts a reading of the
// queues' depths: a quarter of AdmitWait, so the backlog it cannot see
// stays a fraction of the limit.
func (c Capacity) AdmitRefresh() time.Duration {
	return min(max(c.AdmitWait/4, minAdmitRefresh), maxAdmitRefresh)
}

// APIRateLimit is the API stage's steady rate limit, requests a second.
func (c Capacity) APIRateLimit() float64 { return math.Ceil(c.OrdersPerSecond() * APIHeadroom) }

// APIBurstLimit is the API's burst: what the queues take in AdmitWait.
func (c Capacity) APIBurstLimit() int { return min(5000, c.Backlog()) }

// AgentQueueAgeAlarm is the age of an Agent queue's oldest request that
// raises an alarm: the step's lease (Wait plus Budget). SQS counts a
// message being worked on as not yet deleted, so an Agent retrying a slow
// remote within its budget ages the queue too; a request older than its
// whole lease, though, can no longer complete in time, so the Agent is
// down, throttled or far behind. Queues filling up show earlier in the
// shed-orders metric.
func AgentQueueAgeAlarm(s workflow.Step) time.Duration { return s.Lease() }

// ResponseQueueAgeAlarm is the same for the Scheduler's response queue,
// which every live version's replies share: a reply is committed only
// before its step's CompleteBy, so one older than the shortest lease of any
// version's step is certainly refused as stale (the Agents' union would
// take each step's longest lease, and alarm late).
func ResponseQueueAgeAlarm(c workflow.Catalog) time.Duration {
	age := time.Duration(math.MaxInt64)
	for _, d := range c.Definitions {
		for _, s := range d.Steps {
			age = min(age, AgentQueueAgeAlarm(s))
		}
	}
	return age
}

// Admission is the Submission's admission check over the Agents' queues.
func (c Capacity) Admission(agentQueues []string) admission.Config {
	return admission.Config{
		Queues: agentQueues, Backlog: c.Backlog(),
		Rate: int(math.Ceil(c.OrdersPerSecond())), Refresh: c.AdmitRefresh(),
		// Half a round of calls: while high orders come in an overload,
		// the lower classes may fill a queue that far, and a high order
		// waits behind about half a remote latency a step (`make load`'s
		// mixed run: one round kept high orders' p99 at 1.7 times their
		// p99 at half the capacity, half a round at 1.4).
		Reserve: min(max(c.Slots()/2, 1), c.Backlog()),
	}
}
