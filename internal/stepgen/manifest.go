// Package stepgen reads the code steps of steps/ and writes what they need
// to run: functions/steps/<step>/main.go, the Lambda of each, and
// steps/registry.go, which the local stack imports. `make steps` runs it
// (cmd/stepgen); a test fails when the files on disk are stale.
//
// A code step is a folder steps/<step-name>/ holding a Go package named
// for the step without its dashes (ship-order: package shiporder) that
// exports New (a step.New), and step.json, its manifest: what the stack
// deploys with it (Parse, Manifest.Validate).
package stepgen

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/sasflow/sas/shared/jsonstrict"
	"github.com/sasflow/sas/shared/topology"
)

// ManifestFile is a code step's manifest, in its folder.
const ManifestFile = "step.json"

// MaxManifestBytes bounds a manifest.
const MaxManifestBytes = 32 << 10

// Manifest is step.json: what the stack gives the step's function besides
// what every Agent gets.
type Manifest struct {
	// Description says what the step does; it is the function's
	// description after "Code step <name>: ".
	Description string `json:"description"`
	// Parameters are the stack parameters the step needs, by name, each
	// with its description (what an operator passes to cdk deploy).
	Parameters map[string]string `json:"parameters,omitempty"`
	// Environment is the step's own variables, by name; a value may
	// reference the parameters and the pseudo parameters as ${Name}.
	Environment map[string]string `json:"environment,omitempty"`
	// Statements are the IAM statements the step's role gets.
	Statements []Statement `json:"statements,omitempty"`
}

// Statement is one IAM statement: exact actions on resources, which are
// ARNs that may reference the parameters and the pseudo parameters.
type Statement struct {
	Actions   []string `json:"actions"`
	Resources []string `json:"resources"`
}

// The pseudo parameters a manifest may reference, which CloudFormation
// resolves in every stack.
const (
	Partition = "AWS::Partition"
	Region    = "AWS::Region"
	AccountID = "AWS::AccountId"
)

var (
	// stepName is workflow's rule for a step's name.
	stepName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	// A CloudFormation logical ID (a parameter's name) is alphanumeric.
	paramName = regexp.MustCompile(`^[A-Za-z0-9]{1,255}$`)
	// Lambda: "Keys start with a letter and are at least two characters.
	// Keys only contain letters, numbers, and the underscore character"
	// ("Use Lambda environment variables to configure values in code",
	// https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html).
	envName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]+$`)
	// An IAM action is service:Action, exact: no wildcard.
	action = regexp.MustCompile(`^[a-z0-9-]+:[A-Za-z0-9]+$`)
	ref    = regexp.MustCompile(`\$\{([^}]*)\}`)
)

// Bounds of the manifest's texts: CloudFormation takes a parameter
// description of up to 4000 characters, Lambda a function description of
// up to 256, which "Code step <name>: " shares.
const (
	maxDescription      = 160
	maxParamDescription = 4000
)

// reservedEnv are the prefixes and names a step may not set: Lambda
// reserves them ("The keys for these environment variables are reserved
// and cannot be set in your function configuration", Defined runtime
// environment variables, same page), and AWS_* configures the AWS SDK.
var (
	reservedPrefixes = []string{"AWS_", "LAMBDA_", "_"}
	reservedNames    = []string{"TZ"}
)

// takenPackages are the names the generated files import or declare.
var takenPackages = []string{"main", "step", "codestep", "embed", "steps"}

// Package is the Go package name of the code step name: its name without
// dashes.
func Package(name string) string { return strings.ReplaceAll(name, "-", "") }

// ParamPrefix is what every parameter of the code step name starts with,
// so two steps' parameters, and the stack's own, never collide.
func ParamPrefix(name string) string {
	var sb strings.Builder
	for part := range strings.SplitSeq(name, "-") {
		if part != "" {
			sb.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return sb.String()
}

// Parse reads the manifest of the code step name strictly (one JSON
// object, no unknown member, nothing after it) and validates it, reporting
// every problem at once.
func Parse(name string, b []byte) (Manifest, error) {
	if len(b) > MaxManifestBytes {
		return Manifest{}, fmt.Errorf("steps/%s/%s: %d bytes, over %d", name, ManifestFile, len(b), MaxManifestBytes)
	}
	var m Manifest
	if err := jsonstrict.Decode(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("steps/%s/%s: %w", name, ManifestFile, err)
	}
	if err := m.Validate(name); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// Validate checks m as the manifest of the code step name: a description;
// parameters named for the step; variables that neither Lambda nor the
// runtime reserve; exact actions, none that escalates privileges
// (escalations); resources that are ARNs in the stack's partition, each
// naming one resource or a path under one and nothing of the stack's own
// (checkResource, grant.go); and references only to its parameters and
// the pseudo parameters, each parameter referenced somewhere.
func (m Manifest) Validate(name string) error {
	where := "steps/" + name + "/" + ManifestFile
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(where+": "+format, args...))
	}
	if !stepName.MatchString(name) {
		fail("the folder's name %q is no step name (%s)", name, stepName)
	}
	if slices.Contains(takenPackages, Package(name)) {
		fail("the step's package would be %s, a name the generated files use already: rename the step", Package(name))
	}
	if d := strings.TrimSpace(m.Description); d == "" || len(m.Description) > maxDescription {
		fail("description must be 1 to %d characters, not %d", maxDescription, len(m.Description))
	}
	prefix := ParamPrefix(name)
	for _, p := range sortedKeys(m.Parameters) {
		if !paramName.MatchString(p) || !strings.HasPrefix(p, prefix) || p == prefix || strings.HasSuffix(p, "RemoteBaseUrl") {
			fail("parameter %q must be alphanumeric, start with %q and go on, and not end in RemoteBaseUrl", p, prefix)
		}
		if d := m.Parameters[p]; strings.TrimSpace(d) == "" || len(d) > maxParamDescription {
			fail("parameter %q needs a description of 1 to %d characters", p, maxParamDescription)
		}
	}
	used := map[string]bool{}
	refs := func(what, s string) {
		for _, r := range References(s) {
			if r == Partition || r == Region || r == AccountID {
				continue
			}
			if _, ok := m.Parameters[r]; !ok {
				fail("%s references ${%s}, which is neither a parameter of the step nor %s, %s or %s", what, r, Partition, Region, AccountID)
				continue
			}
			used[r] = true
		}
		if rest := ref.ReplaceAllString(s, ""); strings.Contains(rest, "${") {
			fail("%s has an unclosed ${", what)
		}
	}
	runtime := topology.Variables()
	for _, k := range sortedKeys(m.Environment) {
		switch {
		case !envName.MatchString(k):
			fail("variable %q: a name starts with a letter, has at least two characters, and only letters, digits and _", k)
		case slices.ContainsFunc(reservedPrefixes, func(p string) bool { return strings.HasPrefix(k, p) }) || slices.Contains(reservedNames, k):
			fail("variable %q is reserved by Lambda or the AWS SDK", k)
		case slices.Contains(runtime, k):
			fail("variable %q is the runtime's own", k)
		}
		refs("variable "+k, m.Environment[k])
	}
	for i, s := range m.Statements {
		what := fmt.Sprintf("statement %d", i)
		if len(s.Actions) == 0 || len(s.Resources) == 0 {
			fail("%s needs actions and resources", what)
		}
		for _, a := range s.Actions {
			switch {
			case !action.MatchString(a):
				fail("%s: action %q is not one exact service:Action (no wildcard)", what, a)
			case escalates(a) != "":
				fail("%s: action %q may escalate privileges: %s", what, a, escalates(a))
			}
		}
		for _, r := range s.Resources {
			for _, problem := range m.checkResource(r) {
				fail("%s: resource %q %s", what, r, problem)
			}
			refs(what+" resource "+r, r)
		}
	}
	for _, p := range sortedKeys(m.Parameters) {
		if !used[p] {
			fail("parameter %q is never referenced", p)
		}
	}
	return errors.Join(errs...)
}

// References lists the names s references as ${Name}, in order.
func References(s string) []string {
	var out []string
	for _, m := range ref.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// Part is a piece of a manifest value: literal text, or a reference.
type Part struct {
	Literal string
	// Ref is the name referenced, when the part is a reference.
	Ref string
}

// Parts splits s into its literal text and its references, in order, for
// the stack to substitute.
func Parts(s string) []Part {
	var out []Part
	last := 0
	for _, loc := range ref.FindAllStringSubmatchIndex(s, -1) {
		if loc[0] > last {
			out = append(out, Part{Literal: s[last:loc[0]]})
		}
		out = append(out, Part{Ref: s[loc[2]:loc[3]]})
		last = loc[1]
	}
	if last < len(s) {
		out = append(out, Part{Literal: s[last:]})
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
