// Package catalog holds the deployment's workflow definitions, as data:
// workflows.json, embedded in every function and read by the CDK stack and
// the local stack, so all three run the same versions. Parse is its strict
// reader; Deployed is the file this build embeds.
//
// A workflow lists its versions and names the current one, which new orders
// get. A version never changes once it has run an order (orders are pinned
// to it): to change a workflow, add a version and make it current, and
// remove the old one once `sasctl workflows` shows no open order on it.
package catalog

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/jsonstrict"
	"github.com/sasflow/sas/shared/workflow"
)

//go:embed workflows.json
var deployed []byte

// MaxFileBytes bounds a catalog file.
const MaxFileBytes = 256 << 10

// File is workflows.json, as written.
type File struct {
	// Default names the workflow of a submission that names none.
	Default   string     `json:"default"`
	Workflows []Workflow `json:"workflows"`
}

// Workflow is one workflow: its versions, and the one new orders get.
type Workflow struct {
	Name     string    `json:"name"`
	Current  int       `json:"current"`
	Versions []Version `json:"versions"`
}

// Version is one definition of a workflow.
type Version struct {
	Version int    `json:"version"`
	Steps   []Step `json:"steps"`
}

// Step is one step of a version (workflow.Step); durations are Go
// durations ("30s").
type Step struct {
	Name           string   `json:"name"`
	Budget         Duration `json:"budget"`
	Wait           Duration `json:"wait,omitempty"`
	Compensable    bool     `json:"compensable,omitempty"`
	MaxOutputBytes int      `json:"maxOutputBytes,omitempty"`
	// Retry is the step's own retry policy (workflow.Retry); what it
	// leaves out is the deployment's (MAX_FAILURES, BACKOFF_BASE,
	// BACKOFF_MAX).
	Retry *Retry `json:"retry,omitempty"`
}

// Retry is a step's retry policy as written: each member optional.
type Retry struct {
	MaxFailures *int      `json:"maxFailures,omitempty"`
	BackoffBase *Duration `json:"backoffBase,omitempty"`
	BackoffMax  *Duration `json:"backoffMax,omitempty"`
	// OnExhausted is "compensate" (the default) or "wait"; Wait and
	// WaitRounds are written only with "wait".
	OnExhausted string    `json:"onExhausted,omitempty"`
	Wait        *Duration `json:"wait,omitempty"`
	WaitRounds  *int      `json:"waitRounds,omitempty"`
}

// policy is r as the workflow reads it. Wait fields written without
// "wait" are reported by check, which sees what was written.
func (r *Retry) policy() *workflow.Retry {
	if r == nil {
		return nil
	}
	out := &workflow.Retry{MaxFailures: r.MaxFailures, OnExhausted: workflow.Exhausted(r.OnExhausted)}
	if r.BackoffBase != nil {
		out.BackoffBase = ptr(time.Duration(*r.BackoffBase))
	}
	if r.BackoffMax != nil {
		out.BackoffMax = ptr(time.Duration(*r.BackoffMax))
	}
	if r.Wait != nil {
		out.Wait = time.Duration(*r.Wait)
	}
	if r.WaitRounds != nil {
		out.WaitRounds = *r.WaitRounds
	}
	return out
}

// check reports what only the file shows: a wait member written, even as
// zero, on a step that does not wait.
func (r *Retry) check(id, step string) error {
	if r == nil || r.OnExhausted == string(workflow.ExhaustedWait) || r.Wait == nil && r.WaitRounds == nil {
		return nil
	}
	return fmt.Errorf("workflow %q: step %q: retry.wait and retry.waitRounds apply only with onExhausted %q", id, step, workflow.ExhaustedWait)
}

func ptr[T any](v T) *T { return &v }

// Duration is a time.Duration written as a Go duration string.
type Duration time.Duration

// UnmarshalJSON reads "30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Parse reads a catalog file strictly (no unknown member, nothing after
// it) and validates it (workflow.Catalog.Validate), reporting every
// problem at once.
func Parse(b []byte) (workflow.Catalog, error) {
	if len(b) > MaxFileBytes {
		return workflow.Catalog{}, fmt.Errorf("workflow catalog: %d bytes, over %d", len(b), MaxFileBytes)
	}
	var f File
	if err := jsonstrict.Decode(b, &f); err != nil {
		return workflow.Catalog{}, fmt.Errorf("workflow catalog: %w", err)
	}
	var errs []error
	seen := map[string]bool{}
	for _, w := range f.Workflows {
		if seen[w.Name] {
			errs = append(errs, fmt.Errorf("workflow catalog: workflow %q is listed twice (list its versions under one entry)", w.Name))
		}
		seen[w.Name] = true
		for _, v := range w.Versions {
			for _, st := range v.Steps {
				if err := st.Retry.check(workflow.Definition{Name: w.Name, Version: v.Version}.ID(), st.Name); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	c := f.Catalog()
	if err := errors.Join(append(errs, c.Validate())...); err != nil {
		return workflow.Catalog{}, err
	}
	return c, nil
}

// Catalog is the file's definitions, unchecked.
func (f File) Catalog() workflow.Catalog {
	c := workflow.Catalog{Default: f.Default, Current: map[string]int{}}
	for _, w := range f.Workflows {
		c.Current[w.Name] = w.Current
		for _, v := range w.Versions {
			d := workflow.Definition{Name: w.Name, Version: v.Version}
			for _, s := range v.Steps {
				d.Steps = append(d.Steps, workflow.Step{Name: s.Name, Budget: time.Duration(s.Budget), Wait: time.Duration(s.Wait),
					Compensable: s.Compensable, MaxOutputBytes: s.MaxOutputBytes, Retry: s.Retry.policy()})
			}
			c.Definitions = append(c.Definitions, d)
		}
	}
	return c
}

// Deployed is the catalog this build embeds: the one the functions run and
// the stack deploys.
func Deployed() (workflow.Catalog, error) { return Parse(deployed) }

// MustDeployed is Deployed for tools and tests, which stop on an invalid
// file; the functions report it at cold start instead (their config).
func MustDeployed() workflow.Catalog {
	c, err := Deployed()
	if err != nil {
		panic(fmt.Sprintf("shared/catalog/workflows.json: %v", err))
	}
	return c
}

// Source gives a configuration its workflow catalog: Read in the
// functions; a fixed catalog (Fixed) in the tests of a configuration,
// which then do not change when the deployed file does.
type Source func(r *config.Reader) workflow.Catalog

// Fixed is a Source of c.
func Fixed(c workflow.Catalog) Source { return func(*config.Reader) workflow.Catalog { return c } }

// Read is Deployed for a function's configuration: a file that does not
// parse is reported with the configuration's other problems.
func Read(r *config.Reader) workflow.Catalog {
	c, err := Deployed()
	if err != nil {
		r.Fail("workflows.json", "shared/catalog/workflows.json: %v", err)
	}
	return c
}
