// Package tbrecord tests test kits: it runs a check with a testing.TB that
// keeps failures instead of failing the test, so that a check that must
// fail can be asserted to.
package tbrecord

import (
	"context"
	"fmt"
	"runtime"
	"testing"
)

// recorder implements the methods the kits call; another one panics on the
// nil embedded TB, which shows at once what to add.
type recorder struct {
	testing.TB
	ctx  context.Context
	msgs []string
}

func (r *recorder) Context() context.Context { return r.ctx }

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatal(args ...any) {
	r.msgs = append(r.msgs, fmt.Sprint(args...))
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// Run calls check with a recorder on its own goroutine, since Fatal ends the
// goroutine as it does in a test, and returns the failures, in order.
func Run(check func(testing.TB)) []string {
	return RunContext(context.Background(), check)
}

// RunContext is Run with ctx as the test's Context, which ends when the
// test does.
func RunContext(ctx context.Context, check func(testing.TB)) []string {
	r := &recorder{ctx: ctx}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	return r.msgs
}
