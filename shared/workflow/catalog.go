package workflow

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Versioned definitions. A workflow has a name and numbered versions; a
// version, once it has run an order, never changes: a change is a new
// version. Every state record pins the version it started on (its Workflow
// attribute holds the version's ID, "order-v1"), and every actor resolves
// that ID in the deployment's Catalog, never "the current one", so orders in
// flight finish on the definition they started with while new orders start
// on the current version.

// ErrUnknownWorkflow: a submission names a workflow the deployment does not
// run, or a record or message names a version it no longer runs.
var ErrUnknownWorkflow = errors.New("unknown workflow")

// LegacyID is the workflow of messages sent before definitions were
// versioned, which carry none: every order then ran order-v1.
const LegacyID = "order-v1"

var (
	workflowName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
	versionTail  = regexp.MustCompile(`-v[0-9]+$`)
	// idPattern is the shape of a version's ID, as messages carry it.
	idPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}-v[1-9][0-9]{0,3}$`)
)

// MaxVersion bounds a version number (four digits in an ID).
const MaxVersion = 9999

// ID names the version: "<name>-v<version>", the state record's Workflow.
func (d Definition) ID() string { return d.Name + "-v" + strconv.Itoa(d.Version) }

// ValidID reports whether id has the shape of a version's ID.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// ValidRef reports whether ref has the shape of what a submission may name
// (ForNew): a workflow's name or a version's ID.
func ValidRef(ref string) bool { return workflowName.MatchString(ref) || ValidID(ref) }

// SplitID splits a version's ID into its workflow's name and its version.
func SplitID(id string) (name string, version int, ok bool) {
	if !ValidID(id) {
		return "", 0, false
	}
	i := strings.LastIndex(id, "-v")
	v, err := strconv.Atoi(id[i+2:])
	return id[:i], v, err == nil
}

// Catalog is every workflow version a deployment runs: the versions new
// orders start on (one current version per workflow) and the older ones
// kept for the orders pinned to them. The functions, the stack and the
// local stack all read the same one (shared/catalog).
type Catalog struct {
	// Definitions lists the live versions.
	Definitions []Definition
	// Current maps a workflow's name to the version new orders get.
	Current map[string]int
	// Default names the workflow of a submission that names none.
	Default string
}

// Single is the catalog of one definition, current and default: what a
// test or a tool that runs one workflow needs.
func Single(d Definition) Catalog {
	return Catalog{Definitions: []Definition{d}, Current: map[string]int{d.Name: d.Version}, Default: d.Name}
}

// Validate checks that the catalog can run, reporting every problem at
// once: each version's own rules (Definition.Validate), unique versions,
// a live current version for every workflow, and a default.
func (c Catalog) Validate() error {
	if len(c.Definitions) == 0 {
		return errors.New("workflow catalog: no definitions")
	}
	var errs []error
	seen := map[string]bool{}
	names := map[string]bool{}
	for _, d := range c.Definitions {
		if err := d.Validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[d.ID()] {
			errs = append(errs, fmt.Errorf("workflow catalog: %s is declared twice", d.ID()))
		}
		seen[d.ID()], names[d.Name] = true, true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		v, ok := c.Current[name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("workflow catalog: workflow %q has no current version", name))
		case !seen[Definition{Name: name, Version: v}.ID()]:
			errs = append(errs, fmt.Errorf("workflow catalog: the current version of %q, %d, is not declared", name, v))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Current)) {
		if !names[name] {
			errs = append(errs, fmt.Errorf("workflow catalog: a current version is set for %q, which has no versions", name))
		}
	}
	if !names[c.Default] {
		errs = append(errs, fmt.Errorf("workflow catalog: the default workflow %q has no versions", c.Default))
	}
	errs = append(errs, c.checkAgents()...)
	return errors.Join(errs...)
}

// checkAgents reports the steps whose versions could not share one Agent:
// an Agent per step name serves every version, so the versions must agree
// on what the Agent itself is configured with (see Agents).
func (c Catalog) checkAgents() []error {
	var errs []error
	for _, a := range c.Agents() {
		// One Lambda runs the Agent, timed out at its longest lease.
		if a.Lease() > MaxLease {
			errs = append(errs, fmt.Errorf("workflow catalog: step %q: the longest wait plus budget of its versions, %v, exceeds the %v an Agent Lambda can use",
				a.Name, a.Lease(), MaxLease))
		}
	}
	return errs
}

// MaxLease bounds a step's Wait plus Budget: its Agent must finish one
// invocation within a Lambda's 15 minutes, with room for its reply.
const MaxLease = 14 * time.Minute

// Resolve returns the version id names: the definition an order pinned to
// it runs. ErrUnknownWorkflow when the catalog does not have it.
func (c Catalog) Resolve(id string) (Definition, error) {
	for _, d := range c.Definitions {
		if d.ID() == id {
			return d, nil
		}
	}
	return Definition{}, fmt.Errorf("%w: %q is not deployed (deployed: %s)", ErrUnknownWorkflow, id, strings.Join(c.IDs(), ", "))
}

// ForNew returns the version a new order runs when its submission names
// ref: the default workflow's current version for "", a workflow's current
// version for its name, or a version by its ID (to try a version before it
// is current, or to keep to an older one). ErrUnknownWorkflow otherwise.
func (c Catalog) ForNew(ref string) (Definition, error) {
	if ref == "" {
		ref = c.Default
	}
	if v, ok := c.Current[ref]; ok {
		return c.Resolve(Definition{Name: ref, Version: v}.ID())
	}
	if ValidID(ref) {
		return c.Resolve(ref)
	}
	return Definition{}, fmt.Errorf("%w: %q names no deployed workflow (workflows: %s; or a version: %s)",
		ErrUnknownWorkflow, ref, strings.Join(slices.Sorted(maps.Keys(c.Current)), ", "), strings.Join(c.IDs(), ", "))
}

// CurrentID is the ID of name's current version, "" if it has none.
func (c Catalog) CurrentID(name string) string {
	v, ok := c.Current[name]
	if !ok {
		return ""
	}
	return Definition{Name: name, Version: v}.ID()
}

// IDs lists the live versions' IDs, in the catalog's order.
func (c Catalog) IDs() []string {
	ids := make([]string, len(c.Definitions))
	for i, d := range c.Definitions {
		ids[i] = d.ID()
	}
	return ids
}

// Agents is one Step per step name across every live version, in order of
// first appearance: what the step's one Agent, queue and alarms must serve.
// Its Budget, Wait and output limit are the largest of its versions' (the
// Agent's timeout and its own check of outputs; the Scheduler still applies
// each order's own version exactly), and it is Compensable if any version
// undoes it.
func (c Catalog) Agents() []Step {
	var out []Step
	at := map[string]int{}
	for _, d := range c.Definitions {
		for _, s := range d.Steps {
			i, ok := at[s.Name]
			if !ok {
				at[s.Name] = len(out)
				s.MaxOutputBytes = s.OutputLimit()
				out = append(out, s)
				continue
			}
			a := &out[i]
			a.Budget, a.Wait = max(a.Budget, s.Budget), max(a.Wait, s.Wait)
			a.MaxOutputBytes = max(a.MaxOutputBytes, s.OutputLimit())
			a.Compensable = a.Compensable || s.Compensable
		}
	}
	return out
}

// AgentNames lists the step names of Agents.
func (c Catalog) AgentNames() []string {
	agents := c.Agents()
	names := make([]string, len(agents))
	for i, a := range agents {
		names[i] = a.Name
	}
	return names
}

// FirstSteps lists the distinct first steps of the live versions: the
// Agents a Submission dispatches new orders to.
func (c Catalog) FirstSteps() []string {
	var out []string
	for _, d := range c.Definitions {
		if len(d.Steps) > 0 && !slices.Contains(out, d.Steps[0].Name) {
			out = append(out, d.Steps[0].Name)
		}
	}
	return out
}

// Agent returns the step name's entry of Agents.
func (c Catalog) Agent(name string) (Step, bool) {
	for _, a := range c.Agents() {
		if a.Name == name {
			return a, true
		}
	}
	return Step{}, false
}

// Machine resolves an order's pinned version into its state machine under
// policy.
func (c Catalog) Machine(id string, policy Policy) (Machine, error) {
	d, err := c.Resolve(id)
	if err != nil {
		return Machine{}, err
	}
	return Machine{Def: d, Policy: policy}, nil
}
