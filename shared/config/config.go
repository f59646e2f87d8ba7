// Package config reads environment variables into validated values. Each
// handler package declares its own Config and builds it with a Reader, which
// collects every problem so a misconfigured function says all that is wrong
// at once, at cold start.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Reader reads variables through getenv (os.Getenv in a Lambda, a map in
// tests) and remembers every problem.
type Reader struct {
	getenv func(string) string
	errs   []error
}

// NewReader returns a Reader over getenv.
func NewReader(getenv func(string) string) *Reader { return &Reader{getenv: getenv} }

// Err joins every problem found so far, or returns nil.
func (r *Reader) Err() error { return errors.Join(r.errs...) }

// Fail records a problem found by the caller's own validation.
func (r *Reader) Fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

// String returns a required non-empty variable.
func (r *Reader) String(name string) string {
	v := r.getenv(name)
	if v == "" {
		r.Fail("%s is required", name)
	}
	return v
}

// StringOr returns a variable or def when it is unset.
func (r *Reader) StringOr(name, def string) string {
	if v := r.getenv(name); v != "" {
		return v
	}
	return def
}

// URL returns a required absolute http(s) or https URL.
func (r *Reader) URL(name string) string {
	v := r.String(name)
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		r.Fail("%s=%q is not an absolute http(s) URL", name, v)
	}
	return v
}

// Int returns an integer within [lo, hi], or def when unset.
func (r *Reader) Int(name string, def, lo, hi int) int {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.Fail("%s=%q is not an integer", name, v)
		return def
	}
	if n < lo || n > hi {
		r.Fail("%s=%d must be within %d..%d", name, n, lo, hi)
	}
	return n
}

// Duration returns a Go duration ("30s", "2m") within [lo, hi], or def when
// unset.
func (r *Reader) Duration(name string, def, lo, hi time.Duration) time.Duration {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		r.Fail("%s=%q is not a duration such as 30s or 2m", name, v)
		return def
	}
	if d < lo || d > hi {
		r.Fail("%s=%v must be within %v..%v", name, d, lo, hi)
	}
	return d
}
