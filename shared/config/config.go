// Package config reads an actor's Config from the environment and holds the
// rules every Config's Validate and LoadConfig share. A Reader only parses;
// a Config's Check records what breaks its rules in Rules; Load runs both
// and reports every problem at once, so a misconfigured function says all
// that is wrong at cold start.
package config

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Reader reads variables through getenv (os.Getenv in a Lambda, a map in
// tests). It only parses: a value that does not parse is recorded, under its
// variable, and the default is kept; bounds and every other rule are the
// Config's (see Rules).
type Reader struct {
	getenv func(string) string
	errs   []error
	// failed holds the variables already reported, so the Config's rules
	// (see Load) do not report them again.
	failed map[string]bool
}

// NewReader returns a Reader over getenv.
func NewReader(getenv func(string) string) *Reader { return &Reader{getenv: getenv} }

// Err joins every problem found so far, or returns nil.
func (r *Reader) Err() error { return errors.Join(r.errs...) }

// Fail records a problem of variable name; the Config's rules then say
// nothing more about it.
func (r *Reader) Fail(name, format string, args ...any) {
	if r.failed == nil {
		r.failed = map[string]bool{}
	}
	r.failed[name] = true
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

// String returns a variable, "" when it is unset.
func (r *Reader) String(name string) string { return r.getenv(name) }

// Int returns an integer, or def when it is unset or does not parse.
func (r *Reader) Int(name string, def int) int {
	return parse(r, name, def, strconv.Atoi, "an integer")
}

// Float returns a decimal number ("0.01"), or def when it is unset or does
// not parse.
func (r *Reader) Float(name string, def float64) float64 {
	return parse(r, name, def, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }, "a number")
}

// Duration returns a Go duration ("30s", "2m"), or def when it is unset or
// does not parse.
func (r *Reader) Duration(name string, def time.Duration) time.Duration {
	return parse(r, name, def, time.ParseDuration, "a duration such as 30s or 2m")
}

// parse reads variable name with from, or returns def when it is unset or
// from refuses it (a value that is not what).
func parse[T any](r *Reader, name string, def T, from func(string) (T, error), what string) T {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	x, err := from(v)
	if err != nil {
		r.Fail(name, "%s=%q is not %s", name, v, what)
		return def
	}
	return x
}
