package submission

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/workflow"
)

// Limits of an order request.
const (
	MaxItems          = 50
	MaxQuantity       = 1000
	MaxUnitPriceCents = 100_000_000
)

var (
	// ErrMalformed marks a body that is not a well-formed order document:
	// not UTF-8, not JSON, wrong types, unknown or duplicate fields, trailing
	// data. The handler answers 400.
	ErrMalformed = errors.New("malformed order request")
	// ErrInvalid marks a well-formed document whose values break the rules.
	// The handler answers 422 listing every field.
	ErrInvalid = errors.New("invalid order request")
)

// FieldError names one offending field by its JSON path, such as
// items[0].quantity: the API's own type, so a problem body carries it as is.
type FieldError = api.FieldError

// MalformedError is the first structural fault found in a body. Decoding
// stops there: after a syntax or type fault the rest cannot be trusted.
type MalformedError struct {
	Field  string // empty when the fault is not inside a field
	Detail string
}

func (e *MalformedError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%v: %s", ErrMalformed, e.Detail)
	}
	return fmt.Sprintf("%v: %s: %s", ErrMalformed, e.Field, e.Detail)
}

func (e *MalformedError) Unwrap() error { return ErrMalformed }

// ValidationError lists every rule a well-formed body breaks, so a client
// can fix them all in one round trip.
type ValidationError struct {
	Errors []FieldError
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("%v: %s", ErrInvalid, faults(e.Errors).join(" "))
}

func (e *ValidationError) Unwrap() error { return ErrInvalid }

// OrderRequest is a decoded and validated POST /orders body. Its JSON
// encoding is the canonical form the request hash is taken over.
type OrderRequest struct {
	CustomerID string `json:"customerId"`
	// ClientID is optional, and omitted from the canonical form when absent
	// so that bodies without it keep the hash they had before it existed.
	ClientID string          `json:"clientId,omitempty"`
	Currency string          `json:"currency"`
	Items    []workflow.Item `json:"items"`
	// Workflow, optional, names the workflow to run ("order": its current
	// version) or one version of it ("order-v2"); absent, the default
	// workflow's current version. Omitted from the canonical form when
	// absent, like ClientID.
	Workflow string `json:"workflow,omitempty"`
	// Priority, optional, is the order's class (workflow.Priority): high,
	// normal (the default) or low. Omitted from the canonical form when
	// absent, like ClientID; a body that says "normal" hashes apart from
	// one that says nothing, as any other difference of wording would.
	Priority workflow.Priority `json:"priority,omitempty"`
}

// Canonical returns the request's canonical JSON: fixed field order, no
// insignificant whitespace, so two bodies that mean the same order hash alike.
func (r OrderRequest) Canonical() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		// Strings and integers always marshal; a failure is a bug.
		panic(fmt.Sprintf("submission: marshal order request: %v", err))
	}
	return b
}

// Hash is the SHA-256 hex of the canonical JSON; it tells a retry of a
// request apart from another request that reuses its Idempotency-Key.
func (r OrderRequest) Hash() string {
	sum := sha256.Sum256(r.Canonical())
	return hex.EncodeToString(sum[:])
}

// TotalCents sums quantity × unit price. ok is false if the sum does not
// fit an int64; validation rejects such requests, so after DecodeOrder it is
// always true.
func (r OrderRequest) TotalCents() (total int64, ok bool) {
	for _, it := range r.Items {
		q, p := int64(it.Quantity), it.UnitPriceCents
		if q < 0 || p < 0 || (q != 0 && p > math.MaxInt64/q) {
			return 0, false
		}
		line := q * p
		if total > math.MaxInt64-line {
			return 0, false
		}
		total += line
	}
	return total, true
}

var (
	idPattern       = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	clientIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)
)

// DecodeOrder parses and validates a POST /orders body. It is strict: exact
// field names (encoding/json alone would match them case-insensitively),
// no unknown or duplicate fields, integers only where integers belong, one
// JSON object and nothing after it. A null field counts as absent. The error
// wraps ErrMalformed (a *MalformedError) or ErrInvalid (a *ValidationError).
func DecodeOrder(body []byte) (OrderRequest, error) {
	if !utf8.Valid(body) {
		return OrderRequest{}, &MalformedError{Detail: "body is not valid UTF-8"}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return OrderRequest{}, &MalformedError{Detail: "body is empty"}
	}
	p := parser{dec: json.NewDecoder(bytes.NewReader(body))}
	p.dec.UseNumber()
	w, err := p.order()
	if err != nil {
		return OrderRequest{}, err
	}
	return w.validate()
}

// wireOrder holds the fields as found, with presence, before validation.
type wireOrder struct {
	customerID, clientID, currency, workflow, priority opt[string]
	items                                              []wireItem
	hasItems                                           bool
}

type wireItem struct {
	sku                      opt[string]
	quantity, unitPriceCents opt[int64]
}

// opt is a member's value, and whether it was there: null counts as absent.
type opt[T any] struct {
	v  T
	ok bool
}

type parser struct {
	dec *json.Decoder
}

func (p *parser) order() (wireOrder, error) {
	var w wireOrder
	tok, err := p.token("")
	if err != nil {
		return w, err
	}
	if tok != json.Delim('{') {
		return w, &MalformedError{Detail: "body must be a JSON object"}
	}
	err = p.object("", map[string]func(path string) error{
		"customerId": func(path string) (err error) { w.customerID, err = p.str(path); return },
		"clientId":   func(path string) (err error) { w.clientID, err = p.str(path); return },
		"currency":   func(path string) (err error) { w.currency, err = p.str(path); return },
		"workflow":   func(path string) (err error) { w.workflow, err = p.str(path); return },
		"priority":   func(path string) (err error) { w.priority, err = p.str(path); return },
		"items":      func(path string) (err error) { w.items, w.hasItems, err = p.itemList(path); return },
	})
	if err != nil {
		return w, err
	}
	// Exactly one document: a second value or stray bytes make the body
	// ambiguous, so they are refused rather than ignored.
	if _, err := p.dec.Token(); err != io.EOF {
		return w, &MalformedError{Detail: "data after the JSON object"}
	}
	return w, nil
}

func (p *parser) itemList(path string) ([]wireItem, bool, error) {
	tok, err := p.token(path)
	if err != nil {
		return nil, false, err
	}
	switch tok {
	case nil:
		return nil, false, nil
	case json.Delim('['):
	default:
		return nil, false, typeError(path, "must be an array")
	}
	items := []wireItem{}
	for i := 0; p.dec.More(); i++ {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		tok, err := p.token(ipath)
		if err != nil {
			return nil, false, err
		}
		if tok != json.Delim('{') {
			return nil, false, typeError(ipath, "must be an object")
		}
		var it wireItem
		err = p.object(ipath, map[string]func(path string) error{
			"sku":            func(path string) (err error) { it.sku, err = p.str(path); return },
			"quantity":       func(path string) (err error) { it.quantity, err = p.integer(path); return },
			"unitPriceCents": func(path string) (err error) { it.unitPriceCents, err = p.integer(path); return },
		})
		if err != nil {
			return nil, false, err
		}
		items = append(items, it)
	}
	if _, err := p.token(path); err != nil { // the closing ']'
		return nil, false, err
	}
	return items, true, nil
}

// object reads the members of an object whose '{' was just read, handing
// each known key's value to its reader.
func (p *parser) object(path string, fields map[string]func(path string) error) error {
	seen := make(map[string]bool, len(fields))
	for p.dec.More() {
		tok, err := p.token(path)
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok { // Token reports a non-string key as a syntax error; belt and braces.
			return &MalformedError{Field: path, Detail: "object key must be a string"}
		}
		fpath := join(path, key)
		read, known := fields[key]
		switch {
		case !known:
			return &MalformedError{Field: fpath, Detail: "unknown field"}
		case seen[key]:
			// Parsers disagree on which duplicate wins; refusing them keeps
			// what we hash and store equal to what the client meant.
			return &MalformedError{Field: fpath, Detail: "duplicate field"}
		}
		seen[key] = true
		if err := read(fpath); err != nil {
			return err
		}
	}
	_, err := p.token(path) // the closing '}'
	return err
}

func (p *parser) str(path string) (opt[string], error) {
	return scalar(p, path, "must be a string", func(tok json.Token) (string, bool) {
		s, ok := tok.(string)
		return s, ok
	})
}

func (p *parser) integer(path string) (opt[int64], error) {
	return scalar(p, path, "must be an integer", intOf)
}

// scalar reads a member's value, which conv takes from its token, or
// reports as not of the type detail names.
func scalar[T any](p *parser, path, detail string, conv func(json.Token) (T, bool)) (opt[T], error) {
	tok, err := p.token(path)
	if err != nil || tok == nil {
		return opt[T]{}, err
	}
	v, ok := conv(tok)
	if !ok {
		return opt[T]{}, typeError(path, detail)
	}
	return opt[T]{v: v, ok: true}, nil
}

// intOf takes an integer from a number token: no fraction, no exponent.
func intOf(tok json.Token) (int64, bool) {
	num, ok := tok.(json.Number)
	s := string(num)
	if !ok || strings.ContainsAny(s, ".eE") {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// An integer too large for int64 is still an integer: clamp it
		// so validation reports the range, not the type.
		n = math.MaxInt64
		if strings.HasPrefix(s, "-") {
			n = math.MinInt64
		}
	}
	return n, true
}

// token reads the next token, turning the decoder's errors into
// MalformedErrors that name where in the document they happened.
func (p *parser) token(path string) (json.Token, error) {
	tok, err := p.dec.Token()
	if err == nil {
		return tok, nil
	}
	var syn *json.SyntaxError
	switch {
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		return nil, &MalformedError{Field: path, Detail: "unexpected end of JSON input"}
	case errors.As(err, &syn):
		return nil, &MalformedError{Field: path, Detail: fmt.Sprintf("invalid JSON at byte %d", syn.Offset)}
	}
	return nil, &MalformedError{Field: path, Detail: "invalid JSON"}
}

func typeError(path, detail string) error { return &MalformedError{Field: path, Detail: detail} }

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// validate checks every rule and reports every broken one.
func (w wireOrder) validate() (OrderRequest, error) {
	var errs faults
	errs.match("customerId", w.customerID, idPattern, idRule)
	// clientId is optional; absent and null mean the client wants no events.
	if w.clientID.ok && !clientIDPattern.MatchString(w.clientID.v) {
		errs.add("clientId", "must be 1..64 characters of A-Z, a-z, 0-9, ., _ or -")
	}
	errs.match("currency", w.currency, currencyPattern, "must be an ISO 4217 code of 3 upper-case letters, such as EUR")
	// workflow is optional; whether it is deployed is the handler's check.
	if w.workflow.ok && !workflow.ValidRef(w.workflow.v) {
		errs.add("workflow", "must be a workflow's name, such as order, or one of its versions, such as order-v2")
	}
	// priority is optional; absent and null mean normal.
	var prio workflow.Priority
	if w.priority.ok {
		var ok bool
		if prio, ok = workflow.ParsePriority(w.priority.v); !ok {
			errs.add("priority", "must be high, normal or low")
		}
	}
	switch {
	case !w.hasItems:
		errs.add("items", required)
	case len(w.items) < 1 || len(w.items) > MaxItems:
		errs.add("items", fmt.Sprintf("must have 1..%d entries", MaxItems))
	}

	req := OrderRequest{CustomerID: w.customerID.v, ClientID: w.clientID.v, Currency: w.currency.v, Workflow: w.workflow.v, Priority: prio}
	// Past MaxItems the count is already wrong; checking thousands of lines
	// would only bloat the problem document.
	for i, it := range w.items[:min(len(w.items), MaxItems)] {
		path := fmt.Sprintf("items[%d]", i)
		errs.match(path+".sku", it.sku, idPattern, idRule)
		errs.within(path+".quantity", it.quantity, 1, MaxQuantity)
		errs.within(path+".unitPriceCents", it.unitPriceCents, 0, MaxUnitPriceCents)
		req.Items = append(req.Items, workflow.Item{
			SKU:            it.sku.v,
			Quantity:       int(it.quantity.v), // only kept when valid, so in range
			UnitPriceCents: it.unitPriceCents.v,
		})
	}
	if len(errs) == 0 {
		// Unreachable within today's limits (50 × 1000 × 1e8 < 2^63), but
		// the limits may grow and a wrapped total would be a wrong charge.
		if _, ok := req.TotalCents(); !ok {
			errs.add("items", "order total exceeds the supported range")
		}
	}
	if len(errs) > 0 {
		return OrderRequest{}, &ValidationError{Errors: errs}
	}
	return req, nil
}

const (
	required = "is required"
	idRule   = "must be 1..64 characters of A-Z, a-z, 0-9, _ or -"
)

// faults collects every fault of a request, each under the field or the
// parameter it concerns, so that one answer lists them all.
type faults []FieldError

func (f *faults) add(field, detail string) { *f = append(*f, FieldError{Field: field, Detail: detail}) }

// join lists the faults for an error's text, each as field, sep and detail,
// or as its detail alone when it concerns no field.
func (f faults) join(sep string) string {
	parts := make([]string, len(f))
	for i, fe := range f {
		parts[i] = fe.Field + sep + fe.Detail
		if fe.Field == "" {
			parts[i] = fe.Detail
		}
	}
	return strings.Join(parts, "; ")
}

// match records a string member that is absent or breaks its pattern.
func (f *faults) match(field string, s opt[string], pattern *regexp.Regexp, rule string) {
	switch {
	case !s.ok:
		f.add(field, required)
	case !pattern.MatchString(s.v):
		f.add(field, rule)
	}
}

// within records an integer member that is absent or outside lo..hi.
func (f *faults) within(field string, n opt[int64], lo, hi int64) {
	switch {
	case !n.ok:
		f.add(field, required)
	case n.v < lo || n.v > hi:
		f.add(field, fmt.Sprintf("must be within %d..%d", lo, hi))
	}
}
