package workflow

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Step is one stage of a workflow, performed by one Agent.
type Step struct {
	// Name identifies the step and names the Agent that performs it.
	Name string
	// Budget is the time an Agent has for the remote service in one
	// attempt. A compensation attempt has the same budget.
	Budget time.Duration
	// Wait is how long a dispatched request may wait in its Agent's queue
	// without costing the Agent any of its Budget: CompleteBy is the claim
	// time plus Wait plus Budget, so an Agent that starts within Wait still
	// has the whole Budget. The API sheds new orders long before queues
	// hold Wait's worth of work (see topology.Capacity), so Wait is a guard
	// band, not a queue to fill. Zero makes the Budget cover the wait too.
	Wait time.Duration
	// Compensable says the step's Agent can undo its effect (the Compensating
	// Transaction pattern). Steps without it are left as they are when the
	// order stops.
	Compensable bool
	// MaxOutputBytes bounds the step's output and its undo's output (see
	// OutputLimit); zero means DefaultMaxOutputBytes.
	MaxOutputBytes int
	// Retry is the step's own retry policy (see retry.go); nil takes the
	// global Policy's in full.
	Retry *Retry
}

// Definition is one version of a workflow: an ordered list of steps.
// Versions are declared in shared/catalog/workflows.json.
type Definition struct {
	// Name names the workflow; Version numbers this definition of it. A
	// state record pins both (ID).
	Name    string
	Version int
	Steps   []Step
}

var stepName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// IsStepName reports whether s is a valid step name: a lower-case letter,
// then up to 62 lower-case letters, digits and dashes.
func IsStepName(s string) bool { return stepName.MatchString(s) }

// Validate checks that the definition can run, reporting every problem at
// once: names, budgets, and payload bounds (see limits.go).
func (d Definition) Validate() error {
	if d.Name == "" {
		return errors.New("workflow: definition has no name")
	}
	var errs []error
	if !workflowName.MatchString(d.Name) || versionTail.MatchString(d.Name) {
		errs = append(errs, fmt.Errorf("workflow %q: the name must match %s and not end in -v<number>", d.Name, workflowName))
	}
	if d.Version < 1 || d.Version > MaxVersion {
		errs = append(errs, fmt.Errorf("workflow %q: version %d must be within 1..%d", d.ID(), d.Version, MaxVersion))
	}
	if len(d.Steps) == 0 {
		return errors.Join(append(errs, fmt.Errorf("workflow %q: no steps", d.ID()))...)
	}
	seen := make(map[string]bool, len(d.Steps))
	for i, s := range d.Steps {
		if !stepName.MatchString(s.Name) {
			errs = append(errs, fmt.Errorf("workflow %q: step %d: name %q must match %s", d.ID(), i, s.Name, stepName))
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("workflow %q: step %q appears twice", d.ID(), s.Name))
		}
		seen[s.Name] = true
		if s.Budget < time.Second || s.Budget > 15*time.Minute {
			errs = append(errs, fmt.Errorf("workflow %q: step %q: budget %v must be within 1s..15m (a Lambda's limit)", d.ID(), s.Name, s.Budget))
		}
		if s.Wait < 0 || s.Wait > MaxWait {
			errs = append(errs, fmt.Errorf("workflow %q: step %q: wait %v must be within 0..%v", d.ID(), s.Name, s.Wait, MaxWait))
		}
		if s.Retry != nil {
			errs = append(errs, s.Retry.validate(fmt.Sprintf("workflow %q: step %q: ", d.ID(), s.Name))...)
		}
		if s.Lease() > MaxLease {
			errs = append(errs, fmt.Errorf("workflow %q: step %q: wait %v plus budget %v exceeds the %v an Agent Lambda can use", d.ID(), s.Name, s.Wait, s.Budget, MaxLease))
		}
	}
	errs = append(errs, d.validateSizes()...)
	if run := d.LongestRun(); run > MinRetention {
		// The orders item's TTL counts on an order ending, without a
		// Supervisor's change, within the retention (see retention.go).
		errs = append(errs, fmt.Errorf("workflow %q: a run can take %v, every step and every undo at its whole lease, over the %v of the shortest retention: fewer steps or shorter leases",
			d.ID(), run, MinRetention))
	}
	return errors.Join(errs...)
}

// LongestRun is the longest an order of d can go on by the Scheduler's
// commits alone: every step and every undo taking its whole lease. Anything
// longer is the Supervisor's doing (a retry, a requeue, the end of an
// extended wait) or an operator's. An extended wait (Retry.Wait) is not
// counted: it begins and ends with a change of the Supervisor's, which
// moves the order's TTLs on when it is open past its bound (see
// retention.go), and each wait is at most MaxRetryWait, well within the
// shortest retention, so the orders item outlives it.
func (d Definition) LongestRun() time.Duration {
	var run time.Duration
	for _, s := range d.Steps {
		run += s.Lease()
		if s.Compensable {
			run += s.Lease()
		}
	}
	return run
}

// MaxWait bounds a step's Wait: a request that may sit in its queue longer
// than this is a backlog the API should have shed.
const MaxWait = 5 * time.Minute

// Lease is how long a claim of the step holds: its CompleteBy is the claim
// time plus Lease.
func (s Step) Lease() time.Duration { return s.Wait + s.Budget }

// StepNames lists the step names in order.
func (d Definition) StepNames() []string {
	names := make([]string, len(d.Steps))
	for i, s := range d.Steps {
		names[i] = s.Name
	}
	return names
}

// DefaultWait is the default steps' queue allowance: five times the wait
// at which the deployed API starts shedding (topology.DefaultCapacity's
// AdmitWait), so a burst the admission check sees late still leaves every
// Agent its whole Budget.
const DefaultWait = 5 * time.Second

// Reference is order-v1, the order workflow this project shipped first
// (reserve the goods, then take the payment): the fixed definition the
// tests and the cost, load and recovery benchmarks measure, so that a
// change of the deployed catalog (shared/catalog/workflows.json) does not
// change them. The catalog's order-v1, while it is declared, must be
// exactly this (its test checks), since orders are pinned to it.
func Reference() Definition {
	return Definition{
		Name: "order", Version: 1,
		Steps: []Step{
			{Name: "reserve-inventory", Budget: 30 * time.Second, Wait: DefaultWait, Compensable: true},
			{Name: "charge-payment", Budget: 30 * time.Second, Wait: DefaultWait, Compensable: true},
		},
	}
}
