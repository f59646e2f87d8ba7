package localstack

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sasflow/sas/shared/workflow"
)

// DemoStep is the step a demo's derived version adds at the end of the
// default workflow's only version.
const DemoStep = "ship-order"

// Versions is what a demo with several workflow versions runs: the catalog
// the stack deploys and what each client names in turn.
type Versions struct {
	// Catalog is the stack's catalog: the deployed one, or the deployed one
	// plus a version derived for the demo.
	Catalog workflow.Catalog
	// Refs is what the orders name in turn (Demo.Workflows): a version's ID,
	// or "" for none, which gets the current version.
	Refs []string
	// IDs are the versions the demo runs, older first.
	IDs []string
	// Derived is the ID of the version made up for the demo, if any.
	Derived string
}

// DemoVersions picks n versions (1 or 2) of cat's default workflow for a
// demo to run at once. One: the current version, orders naming none, as
// before. Two: the current version and the one before it, or, when the
// workflow has a single version, a new current one derived from it with
// DemoStep added (budgeted like the last step, and without an undo, as a
// shipment cannot be called back), so that a freshly cloned repository can
// show two versions side by side, one with a step that cannot be undone. Every other
// order names the older version; the rest name none and get the current.
func DemoVersions(cat workflow.Catalog, n int) (Versions, error) {
	cur, err := cat.ForNew("")
	if err != nil {
		return Versions{}, err
	}
	switch n {
	case 1:
		return Versions{Catalog: cat, Refs: []string{""}, IDs: []string{cur.ID()}}, nil
	case 2:
	default:
		return Versions{}, fmt.Errorf("-versions %d: a demo runs 1 or 2 versions", n)
	}
	var older *workflow.Definition
	latest := cur.Version
	for i, d := range cat.Definitions {
		if d.Name != cur.Name {
			continue
		}
		latest = max(latest, d.Version)
		if d.Version < cur.Version && (older == nil || d.Version > older.Version) {
			older = &cat.Definitions[i]
		}
	}
	if older != nil {
		return Versions{Catalog: cat, Refs: []string{older.ID(), ""}, IDs: []string{older.ID(), cur.ID()}}, nil
	}
	if latest != cur.Version {
		// A version newer than the current one is on trial; which one the
		// demo should set beside the current is not ours to guess.
		return Versions{}, fmt.Errorf("-versions 2: %s has no version before its current one, %s", cur.Name, cur.ID())
	}
	if slices.ContainsFunc(cur.Steps, func(s workflow.Step) bool { return s.Name == DemoStep }) {
		return Versions{}, fmt.Errorf("-versions 2: %s already has a step %s to derive a version with", cur.ID(), DemoStep)
	}
	next := cur
	next.Version = cur.Version + 1
	last := cur.Steps[len(cur.Steps)-1]
	next.Steps = append(slices.Clone(cur.Steps), workflow.Step{Name: DemoStep, Budget: last.Budget, Wait: last.Wait})
	out := cat
	out.Definitions = append(slices.Clone(cat.Definitions), next)
	out.Current = maps.Clone(cat.Current)
	out.Current[cur.Name] = next.Version
	if err := out.Validate(); err != nil {
		return Versions{}, fmt.Errorf("-versions 2: the derived %s: %w", next.ID(), err)
	}
	return Versions{Catalog: out, Refs: []string{cur.ID(), ""}, IDs: []string{cur.ID(), next.ID()}, Derived: next.ID()}, nil
}

// String names the versions for the demo's header line.
func (v Versions) String() string {
	if len(v.IDs) == 1 {
		return "version " + v.IDs[0]
	}
	s := fmt.Sprintf("versions %s (named by every other order) and %s (current)", v.IDs[0], strings.Join(v.IDs[1:], ", "))
	if v.Derived != "" {
		s += fmt.Sprintf(", %s derived for the demo: + %s", v.Derived, DemoStep)
	}
	return s
}
