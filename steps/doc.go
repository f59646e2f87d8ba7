// Package steps holds the code steps, one folder each (steps/<step-name>/,
// a Go package with New and its manifest step.json; see internal/stepgen),
// and the registry of them that stepgen writes (registry.go): All, each
// step's constructor, and Manifests, each one's step.json, by step name.
//
// A step of the workflow catalog whose folder is here is a code step: the
// stack deploys it as its own function (functions/steps/<step-name>) with
// the ledger. Every other step is called over HTTP by the Agent.
package steps
