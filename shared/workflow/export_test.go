package workflow

// The package's test fixtures, for its external tests: the property test
// (machine_property_test.go) runs the catalog's real definitions, and
// shared/catalog imports this package.
var (
	ThreeSteps  = threeSteps
	TwoVersions = twoVersions
	TestPolicy  = testPol
)
