package api

import (
	"errors"
	"fmt"
	"strings"
)

// Workflows is the body of GET /ops/workflows: every workflow version the
// deployment runs, and every other version open orders are pinned to, with
// how many open orders each has, so an operator knows whether a version can
// leave the catalog.
type Workflows struct {
	// Default names the workflow of a submission that names none.
	Default   string            `json:"default"`
	Workflows []WorkflowVersion `json:"workflows"`
	// Truncated: the server stopped counting at its bound, so every count
	// is a lower bound and no version can be removed on its word.
	Truncated bool `json:"truncated"`
}

// WorkflowVersion is one workflow version and its open orders.
type WorkflowVersion struct {
	// ID is the version's ID, as orders pin it ("order-v1").
	ID string `json:"id"`
	// Name and Version are the ID's parts; absent when a record pins an
	// ID that does not have the shape of one.
	Name    string `json:"name,omitempty"`
	Version int    `json:"version,omitempty"`
	// Current: new orders of the workflow start on this version.
	Current bool `json:"current"`
	// Deployed: the catalog runs this version. A version found only on
	// open orders is not: those orders are stranded.
	Deployed bool `json:"deployed"`
	// InFlight counts the open orders the system is moving on,
	// NeedsOperator those stopped until an operator acts.
	InFlight      int `json:"inFlight"`
	NeedsOperator int `json:"needsOperator"`
	// CanRemove: deployed, not current, no open order, and the count was
	// not truncated.
	CanRemove bool `json:"canRemove"`
}

// maxVersionIDBytes bounds a version ID a client accepts: the catalog's are
// at most 46 bytes.
const maxVersionIDBytes = 64

// DecodeWorkflows reads a body of GET /ops/workflows. It refuses an answer
// without a workflows array, a version whose ID a terminal or shell could
// not take as it is, and a negative count.
func DecodeWorkflows(body []byte) (Workflows, error) {
	var w Workflows
	if err := unmarshal(body, &w); err != nil {
		return Workflows{}, fmt.Errorf("decode workflows: %w", err)
	}
	if w.Workflows == nil {
		return Workflows{}, errors.New("decode workflows: no workflows array")
	}
	if err := checkWord(w.Default); w.Default != "" && err != nil {
		return Workflows{}, fmt.Errorf("decode workflows: default: %w", err)
	}
	for i, v := range w.Workflows {
		if err := checkWord(v.ID); err != nil {
			return Workflows{}, fmt.Errorf("decode workflows: version %d: id: %w", i, err)
		}
		if err := checkWord(v.Name); v.Name != "" && err != nil {
			return Workflows{}, fmt.Errorf("decode workflows: version %s: name: %w", v.ID, err)
		}
		if v.Version < 0 || v.InFlight < 0 || v.NeedsOperator < 0 {
			return Workflows{}, fmt.Errorf("decode workflows: version %s: a negative number", v.ID)
		}
	}
	return w, nil
}

// checkWord accepts 1..maxVersionIDBytes of printable ASCII without spaces.
func checkWord(s string) error {
	if s == "" || len(s) > maxVersionIDBytes {
		return fmt.Errorf("length %d outside 1..%d", len(s), maxVersionIDBytes)
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r > '~' }); i >= 0 {
		return fmt.Errorf("%q: byte %d is not printable ASCII", clip(s, 80), i)
	}
	return nil
}
