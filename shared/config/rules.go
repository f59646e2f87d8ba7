package config

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Rules collects what breaks the rules of an actor's Config. Every actor's
// Validate and LoadConfig share one set of rules: LoadConfig only parses,
// then runs the rules with Names mapping each field to its variable, so an
// operator reads AGENT_CONCURRENCY=101, and a Config built in code reads
// Concurrency=101.
type Rules struct {
	// Names maps a field to the environment variable it is read from; a
	// field not in it is called by its own name.
	Names map[string]string
	// reported are the variables the Reader already reported (a value that
	// did not parse keeps its default): one line about each is enough.
	reported map[string]bool
	errs     []error
}

// Checker is a Config with rules: Check records what breaks them in r.
type Checker interface{ Check(r *Rules) }

// Load reads a Config through getenv: parse only parses (what does not
// parse is reported by the Reader and keeps its default), then the Config's
// rules run, naming each field by its variable in names. Every problem is
// reported at once, prefixed with what.
func Load[C Checker](what string, getenv func(string) string, names map[string]string, parse func(r *Reader) C) (C, error) {
	r := NewReader(getenv)
	c := parse(r)
	rules := &Rules{Names: names, reported: r.failed}
	rules.Add(r.Err())
	c.Check(rules)
	if err := rules.Err(what); err != nil {
		var zero C
		return zero, err
	}
	return c, nil
}

// Validate applies c's rules to a Config built in code, naming each field by
// its Go name, and reports every problem at once, prefixed with what.
func Validate(what string, c Checker) error {
	r := &Rules{}
	c.Check(r)
	return r.Err(what)
}

// Name is how a problem calls field.
func (r *Rules) Name(field string) string {
	if n, ok := r.Names[field]; ok {
		return n
	}
	return field
}

// Bad records that field's value breaks rule; strings are quoted so an
// empty or blank value shows.
func (r *Rules) Bad(field string, value any, rule string, args ...any) {
	if r.reported[r.Name(field)] {
		return
	}
	if s, ok := value.(string); ok {
		value = strconv.Quote(s)
	}
	r.errs = append(r.errs, fmt.Errorf("%s=%v %s", r.Name(field), value, fmt.Sprintf(rule, args...)))
}

// Problem records a problem of field that Bad's form does not fit.
func (r *Rules) Problem(field, format string, args ...any) {
	if !r.reported[r.Name(field)] {
		r.errs = append(r.errs, fmt.Errorf("%s: %s", r.Name(field), fmt.Sprintf(format, args...)))
	}
}

// Add records problems found by another validator (a workflow's, a
// policy's); nil is ignored.
func (r *Rules) Add(err error) {
	if err != nil {
		r.errs = append(r.errs, err)
	}
}

// Required records a missing value and tells whether it is present.
func (r *Rules) Required(field, value string) bool {
	if value == "" && !r.reported[r.Name(field)] {
		r.errs = append(r.errs, fmt.Errorf("%s is required", r.Name(field)))
	}
	return value != ""
}

// URL requires an absolute http(s) URL and returns it parsed, or nil.
func (r *Rules) URL(field, value string) *url.URL {
	if !r.Required(field, value) {
		return nil
	}
	u, err := url.Parse(value)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		r.Bad(field, value, "is not an absolute http(s) URL")
		return nil
	}
	return u
}

// Within requires lo <= v <= hi.
func (r *Rules) Within(field string, v, lo, hi time.Duration) {
	if v < lo || v > hi {
		r.Bad(field, v, "must be within %v..%v", lo, hi)
	}
}

// Count requires lo <= v <= hi.
func (r *Rules) Count(field string, v, lo, hi int) {
	if v < lo || v > hi {
		r.Bad(field, v, "must be within %d..%d", lo, hi)
	}
}

// tableName is DynamoDB's rule for table names.
var tableName = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)

// Table requires a DynamoDB table name.
func (r *Rules) Table(field, value string) {
	if r.Required(field, value) && !tableName.MatchString(value) {
		r.Bad(field, value, "is not a DynamoDB table name")
	}
}

// Tables requires the orders and state tables to be two different tables:
// one table for both would let an order overwrite its own state record.
func (r *Rules) Tables(ordersField, orders, stateField, state string) {
	r.Table(ordersField, orders)
	r.Table(stateField, state)
	if orders != "" && orders == state {
		r.errs = append(r.errs, fmt.Errorf("%s and %s must differ, both are %q", r.Name(ordersField), r.Name(stateField), orders))
	}
}

// TopicARN requires the shape of an SNS topic ARN: a wrong value would
// otherwise show only when the first publish fails, and then on every one.
// Whether the topic exists is SNS's to say.
func (r *Rules) TopicARN(field, value string) {
	if !r.Required(field, value) {
		return
	}
	p := strings.Split(value, ":")
	ok := len(p) == 6 && p[0] == "arn" && p[2] == "sns"
	for _, part := range p {
		ok = ok && part != ""
	}
	if !ok {
		r.Bad(field, value, "is not an SNS topic ARN (arn:partition:sns:region:account:name)")
	}
}

// Err joins every problem recorded, prefixed with what was validated, or
// returns nil.
func (r *Rules) Err(what string) error {
	if err := errors.Join(r.errs...); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
