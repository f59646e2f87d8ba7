//go:build !unix

package enginetest

// lockFile does not lock where flock is missing: concurrent test binaries
// may then run npm ci together, so run scripts/engines.sh install first.
func lockFile(string) (unlock func(), err error) { return func() {}, nil }
