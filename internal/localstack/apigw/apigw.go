// Package apigw stands in for an Amazon API Gateway HTTP API with a Lambda
// proxy integration (payload format 2.0), so that the local stack and the
// demo can serve the real Submission handler over plain HTTP exactly as it
// is invoked in AWS: each request becomes an events.APIGatewayV2HTTPRequest
// for the route it matches, and the handler's
// events.APIGatewayV2HTTPResponse becomes the HTTP response. It is never
// deployed; in AWS, API Gateway itself does this job.
//
// It copies the behaviour a handler or a client can observe: routes match on
// method and path segments, most specific first, then the catch-all
// DefaultRoute if there is one; a request no route matches gets API
// Gateway's own 404 without invoking the handler; header names are
// lowercased and repeated headers and query parameters are joined with
// commas; cookies move to the cookies field; a body that is not UTF-8 text
// arrives base64-encoded; a body over the payload limit gets 413; a failed
// or panicking handler gets API Gateway's opaque 500; a request line and
// headers over the HTTP API's quota get 431; and every response carries an
// apigw-requestid header naming the event's request ID. With
// WithIAMAuthorization every route needs a SigV4-signed request signed
// within MaxClockSkew of the gateway's clock, as behind the IAM authorizer;
// the access key it is signed with names the caller in
// requestContext.authorizer.iam, and WithCallers says what each caller's
// IAM policy lets it invoke (signatures are not verified locally).
//
// Unlike API Gateway, it also writes a response's multiValueHeaders, which
// format 2.0 does not define; it logs a warning when a handler uses them.
package apigw

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/clock"
)

// MaxHeaderBytes is the HTTP API quota "Total combined size of request line
// and header values", 10240 bytes, which cannot be increased (Quotas for
// configuring and running an HTTP API in API Gateway,
// https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-quotas.html).
// AWS does not document its answer past it; callers report 431, Request
// Header Fields Too Large (RFC 6585), which the gateway answers.
const MaxHeaderBytes = 10240

// DefaultMaxBodyBytes is API Gateway's payload limit, 10 MB. (A Lambda
// function invoked synchronously accepts at most 6 MB, so in AWS a request
// between the two fails in the invocation instead.)
const DefaultMaxBodyBytes int64 = 10 << 20

// The request context values that have no local counterpart.
const (
	accountID = "000000000000"
	apiID     = "local"
	stage     = "$default"
	// timeLayout is how API Gateway writes requestContext.time.
	timeLayout = "02/Jan/2006:15:04:05 -0700"
)

// requestIDHeader is the response header in which API Gateway names the
// request ID, on every response including its own errors.
const requestIDHeader = "Apigw-Requestid"

// Route is a route of the API as API Gateway defines one: an HTTP method (or
// ANY) and a path whose segments are literals, {name} parameters or, as the
// last segment only, a greedy {name+} parameter that matches the rest of the
// path; or the catch-all DefaultRoute.
type Route struct {
	Method string
	Path   string
}

// DefaultRouteKey is the route key of an HTTP API's catch-all route.
const DefaultRouteKey = "$default"

// DefaultRoute is the catch-all route, $default: it takes every request no
// other route matches, whatever its method and path ("The $default route
// catches requests that don't explicitly match other routes in your API",
// Create routes for HTTP APIs in API Gateway,
// https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-develop-routes.html).
var DefaultRoute = Route{Path: DefaultRouteKey}

// Key is the route key API Gateway puts in the event, "GET /orders/{id}",
// or "$default".
func (r Route) Key() string {
	if r == DefaultRoute {
		return DefaultRouteKey
	}
	return r.Method + " " + r.Path
}

// Handler is a Lambda function handler for API Gateway HTTP API events.
type Handler func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Option configures a Gateway.
type Option func(*Gateway)

// WithLogger logs each request (at Info) and every handler failure (at
// Error) to log. Without it, or with nil, the Gateway logs nothing.
func WithLogger(log *slog.Logger) Option { return func(g *Gateway) { g.log = log } }

// WithClock sets the clock for requestContext.time and the logged latency;
// the default (or nil) is the system clock.
func WithClock(clk clock.Clock) Option { return func(g *Gateway) { g.clk = clk } }

// WithRequestIDs sets the source of request IDs, which should be unique.
// The default (or nil) draws random IDs shaped like API Gateway's, 16
// base64 characters.
func WithRequestIDs(next func() string) Option { return func(g *Gateway) { g.newID = next } }

// WithMaxBodyBytes caps a request body; larger ones get 413. The default is
// DefaultMaxBodyBytes.
func WithMaxBodyBytes(n int64) Option { return func(g *Gateway) { g.maxBody = n } }

// Gateway is an http.Handler that serves routes through one Handler. It is
// safe for concurrent use.
type Gateway struct {
	routes  []route
	handler Handler
	log     *slog.Logger
	clk     clock.Clock
	newID   func() string
	maxBody int64
	// iam: every route requires AWS_IAM authorization, and callers says
	// who signs with a credential and what it may invoke.
	iam     bool
	callers func(Credential) Caller
	// catchAll is the $default route, if the API has one.
	catchAll *route
}

var _ http.Handler = (*Gateway)(nil)

// New returns a Gateway that invokes h for requests matching routes. It
// rejects what API Gateway would not accept: an unknown method, a malformed
// path, or two routes that differ only in parameter names.
func New(routes []Route, h Handler, opts ...Option) (*Gateway, error) {
	g := &Gateway{handler: h, maxBody: DefaultMaxBodyBytes}
	for _, opt := range opts {
		opt(g)
	}
	var errs []error
	if h == nil {
		errs = append(errs, errors.New("apigw: nil handler"))
	}
	if len(routes) == 0 {
		errs = append(errs, errors.New("apigw: no routes"))
	}
	if g.maxBody <= 0 {
		errs = append(errs, fmt.Errorf("apigw: max body size %d is not positive", g.maxBody))
	}
	seen := map[string]string{}
	for _, r := range routes {
		if r == DefaultRoute {
			if g.catchAll != nil {
				errs = append(errs, errors.New("apigw: route $default given twice"))
			}
			g.catchAll = &route{key: DefaultRouteKey}
			continue
		}
		rt, err := compile(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[rt.shape]; dup {
			errs = append(errs, fmt.Errorf("apigw: route %q duplicates %q", rt.key, prev))
			continue
		}
		seen[rt.shape] = rt.key
		g.routes = append(g.routes, rt)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortStableFunc(g.routes, compareSpecificity)
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.clk == nil {
		g.clk = clock.System{}
	}
	if g.newID == nil {
		g.newID = randomRequestID
	}
	if g.callers == nil {
		g.callers = defaultCaller
	}
	return g, nil
}

// The methods an HTTP API route can have.
var methods = []string{"ANY", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"}

var paramName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

type segKind int

// In order of precedence.
const (
	literal segKind = iota
	param
	greedy
)

type segment struct {
	kind segKind
	text string // the literal, or the parameter's name
}

type route struct {
	method string
	key    string
	segs   []segment
	// shape is the route key without parameter names: two routes with one
	// shape would match the same requests.
	shape string
}

func compile(r Route) (route, error) {
	rt := route{method: r.Method, key: r.Key()}
	fail := func(format string, args ...any) (route, error) {
		return route{}, fmt.Errorf("apigw: route %q: %s", rt.key, fmt.Sprintf(format, args...))
	}
	if !slices.Contains(methods, r.Method) {
		return fail("method must be one of %s", strings.Join(methods, ", "))
	}
	if !strings.HasPrefix(r.Path, "/") {
		return fail("path must start with /")
	}
	var shape []string
	names := map[string]bool{}
	if r.Path != "/" {
		parts := strings.Split(r.Path[1:], "/")
		for i, s := range parts {
			var seg segment
			switch {
			case s == "":
				return fail("empty path segment")
			case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "+}"):
				if i != len(parts)-1 {
					return fail("greedy parameter %s must be the last segment", s)
				}
				seg = segment{kind: greedy, text: s[1 : len(s)-2]}
				shape = append(shape, "{+}")
			case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}"):
				seg = segment{kind: param, text: s[1 : len(s)-1]}
				shape = append(shape, "{}")
			case strings.ContainsAny(s, "{}?#%") || strings.ContainsFunc(s, isSpaceOrControl):
				return fail("segment %q is neither a literal nor a {parameter}", s)
			default:
				seg = segment{kind: literal, text: s}
				shape = append(shape, s)
			}
			if seg.kind != literal {
				if !paramName.MatchString(seg.text) {
					return fail("parameter name %q must match %s", seg.text, paramName)
				}
				if names[seg.text] {
					return fail("parameter %q appears twice", seg.text)
				}
				names[seg.text] = true
			}
			rt.segs = append(rt.segs, seg)
		}
	}
	rt.shape = r.Method + " /" + strings.Join(shape, "/")
	return rt, nil
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }

// compareSpecificity orders routes as API Gateway prefers them: segment by
// segment a literal beats a parameter, which beats a greedy parameter; then
// a route for the request's method beats an ANY route.
func compareSpecificity(a, b route) int {
	for i := range min(len(a.segs), len(b.segs)) {
		if c := cmp.Compare(a.segs[i].kind, b.segs[i].kind); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(len(a.segs), len(b.segs)); c != 0 {
		return c
	}
	return cmp.Compare(boolInt(a.method == "ANY"), boolInt(b.method == "ANY"))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// match reports whether the route matches the request's method and decoded
// path segments, and the route's path parameters.
func (rt *route) match(method string, segs []string) (map[string]string, bool) {
	if rt.method != method && rt.method != "ANY" {
		return nil, false
	}
	var params map[string]string
	set := func(name, value string) {
		if params == nil {
			params = map[string]string{}
		}
		params[name] = value
	}
	for i, s := range rt.segs {
		if s.kind == greedy {
			rest := strings.Join(segs[min(i, len(segs)):], "/")
			if rest == "" {
				return nil, false
			}
			set(s.text, rest)
			return params, true
		}
		if i >= len(segs) {
			return nil, false
		}
		switch {
		case s.kind == literal && segs[i] != s.text:
			return nil, false
		case s.kind == param && segs[i] == "":
			return nil, false
		case s.kind == param:
			set(s.text, segs[i])
		}
	}
	return params, len(segs) == len(rt.segs)
}

// find returns the most specific route for the request, if any.
func (g *Gateway) find(method, rawPath string) (*route, map[string]string) {
	if !strings.HasPrefix(rawPath, "/") {
		return nil, nil
	}
	// Split before decoding, so that an escaped slash stays in its segment.
	var segs []string
	if rawPath != "/" {
		segs = strings.Split(rawPath[1:], "/")
	}
	for i, s := range segs {
		d, err := url.PathUnescape(s)
		if err != nil {
			return nil, nil
		}
		segs[i] = d
	}
	for i := range g.routes {
		if params, ok := g.routes[i].match(method, segs); ok {
			return &g.routes[i], params
		}
	}
	// Only when no route matches: the catch-all comes last in API
	// Gateway's order (a full match, a greedy one, then $default).
	return g.catchAll, nil
}

// ServeHTTP answers one request the way API Gateway would.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	start := g.clk.Now()
	id := g.newID()
	log := g.log.With(
		slog.String("requestId", id),
		slog.String("method", r.Method),
		slog.String("path", r.URL.EscapedPath()),
	)
	w.Header().Set(requestIDHeader, id)
	status, routeKey := g.serve(ctx, log, w, r, id, start)
	log.LogAttrs(ctx, slog.LevelInfo, "request",
		slog.String("routeKey", routeKey),
		slog.Int("status", status),
		slog.Duration("latency", g.clk.Now().Sub(start)),
	)
}

// serve answers the request and returns the status and the route key, if
// a route matched.
func (g *Gateway) serve(ctx context.Context, log *slog.Logger, w http.ResponseWriter, r *http.Request, id string, now time.Time) (int, string) {
	if n := headerBytes(r); n > MaxHeaderBytes {
		log.InfoContext(ctx, "request refused: request line and header values over the quota", slog.Int("bytes", n))
		return message(w, http.StatusRequestHeaderFieldsTooLarge), ""
	}
	rt, params := g.find(r.Method, r.URL.EscapedPath())
	if rt == nil {
		return message(w, http.StatusNotFound), ""
	}
	var caller *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription
	if g.iam {
		// Authorization comes before the body is read: an unsigned caller
		// learns nothing, not even the payload limit.
		cred, err := credentialOf(r, now)
		if skew, ok := errors.AsType[*skewError](err); ok {
			log.InfoContext(ctx, "request refused by IAM authorization", slog.String("routeKey", rt.key), slog.Any("error", err))
			return messageText(w, http.StatusForbidden, skew.message), rt.key
		}
		if err != nil {
			log.InfoContext(ctx, "request refused by IAM authorization", slog.String("routeKey", rt.key), slog.Any("error", err))
			return message(w, http.StatusForbidden), rt.key
		}
		who := g.callers(cred)
		if !who.Policy.Allows(r.Method, r.URL.EscapedPath()) {
			log.InfoContext(ctx, "request refused: the caller's IAM policy does not allow it", slog.String("routeKey", rt.key),
				slog.String("caller", who.IAM.UserARN))
			return message(w, http.StatusForbidden), rt.key
		}
		caller = who.IAM
	}
	body, err := g.readBody(w, r)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return message(w, http.StatusRequestEntityTooLarge), rt.key
	case err != nil:
		log.WarnContext(ctx, "cannot read the request body", slog.Any("error", err))
		return message(w, http.StatusBadRequest), rt.key
	}
	// Lambda runs the function to the end even if the client goes away, so
	// the handler's context keeps the request's values but not its
	// cancellation.
	ev := g.event(r, rt, params, body, id, now)
	if caller != nil {
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: caller}
	}
	resp, err := g.invoke(context.WithoutCancel(ctx), ev)
	if p, ok := errors.AsType[*panicError](err); ok {
		log.ErrorContext(ctx, "handler panicked", slog.String("routeKey", rt.key), slog.Any("panic", p.value), slog.String("stack", p.stack))
		return message(w, http.StatusInternalServerError), rt.key
	}
	if err != nil {
		log.ErrorContext(ctx, "handler failed", slog.String("routeKey", rt.key), slog.Any("error", err))
		return message(w, http.StatusInternalServerError), rt.key
	}
	return respond(ctx, log, w, resp, id), rt.key
}

// readBody reads the whole body, failing with an *http.MaxBytesError when it
// is over the limit.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > g.maxBody {
		return nil, &http.MaxBytesError{Limit: g.maxBody}
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, g.maxBody))
}

// panicError is a handler's panic; Lambda reports it as a function error.
type panicError struct {
	value any
	stack string
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

func (g *Gateway) invoke(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (_ events.APIGatewayV2HTTPResponse, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: string(debug.Stack())}
		}
	}()
	return g.handler(ctx, ev)
}

// event builds the payload format 2.0 event for a request.
func (g *Gateway) event(r *http.Request, rt *route, params map[string]string, body []byte, id string, now time.Time) events.APIGatewayV2HTTPRequest {
	sourceIP := r.RemoteAddr
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		sourceIP = host
	}
	domain := r.Host
	if host, _, err := net.SplitHostPort(domain); err == nil {
		domain = host
	}
	prefix := domain
	if net.ParseIP(domain) == nil {
		prefix, _, _ = strings.Cut(domain, ".")
	}
	headers, cookies := requestHeaders(r, sourceIP)
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              rt.key,
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: queryParameters(r.URL.RawQuery),
		PathParameters:        params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     rt.key,
			AccountID:    accountID,
			Stage:        stage,
			RequestID:    id,
			APIID:        apiID,
			DomainName:   domain,
			DomainPrefix: prefix,
			Time:         now.UTC().Format(timeLayout),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  sourceIP,
				UserAgent: r.UserAgent(),
			},
		},
	}
	if utf8.Valid(body) {
		ev.Body = string(body)
	} else {
		ev.Body = base64.StdEncoding.EncodeToString(body)
		ev.IsBase64Encoded = true
	}
	return ev
}

// requestHeaders returns the headers with lowercase names, repeated ones
// joined with commas, and the cookies of the Cookie headers, which format
// 2.0 moves out of the headers. Like API Gateway it adds host and the
// x-forwarded-* headers.
func requestHeaders(r *http.Request, sourceIP string) (map[string]string, []string) {
	headers := make(map[string]string, len(r.Header)+4)
	var cookies []string
	// Sorted, so that names differing only in case join in a stable order.
	for _, name := range slices.Sorted(maps.Keys(r.Header)) {
		values := r.Header[name]
		lower := strings.ToLower(name)
		if lower == "cookie" {
			for _, v := range values {
				for c := range strings.SplitSeq(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						cookies = append(cookies, c)
					}
				}
			}
			continue
		}
		joined := strings.Join(values, ",")
		if prev, ok := headers[lower]; ok {
			joined = prev + "," + joined
		}
		headers[lower] = joined
	}
	if r.Host != "" {
		headers["host"] = r.Host
	}
	if sourceIP != "" {
		if prev := headers["x-forwarded-for"]; prev != "" {
			headers["x-forwarded-for"] = prev + ", " + sourceIP
		} else {
			headers["x-forwarded-for"] = sourceIP
		}
	}
	proto, port := "http", "80"
	if r.TLS != nil {
		proto, port = "https", "443"
	}
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, p, err := net.SplitHostPort(addr.String()); err == nil {
			port = p
		}
	} else if _, p, err := net.SplitHostPort(r.Host); err == nil {
		port = p
	}
	headers["x-forwarded-proto"] = proto
	headers["x-forwarded-port"] = port
	return headers, cookies
}

// queryParameters decodes a query string, joining repeated parameters with
// commas; it is nil when there are none, as API Gateway omits the field.
func queryParameters(raw string) map[string]string {
	values, _ := url.ParseQuery(raw) // what does not parse is dropped
	if len(values) == 0 {
		return nil
	}
	params := make(map[string]string, len(values))
	for k, v := range values {
		params[k] = strings.Join(v, ",")
	}
	return params
}

// respond writes the handler's response and returns its status. A response
// API Gateway could not use (an invalid status code, a body that is not
// base64 although it says so) gets 502.
func respond(ctx context.Context, log *slog.Logger, w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse, id string) int {
	status := cmp.Or(resp.StatusCode, http.StatusOK)
	if status < 200 || status > 599 {
		log.ErrorContext(ctx, "handler returned an invalid status code", slog.Int("statusCode", resp.StatusCode))
		return message(w, http.StatusBadGateway)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			log.ErrorContext(ctx, "handler returned a body that is not valid base64", slog.Any("error", err))
			return message(w, http.StatusBadGateway)
		}
	}
	h := w.Header()
	for name, v := range resp.Headers {
		h.Set(name, v)
	}
	if len(resp.MultiValueHeaders) > 0 {
		log.WarnContext(ctx, "multiValueHeaders is not part of payload format 2.0: API Gateway ignores it; use headers (values joined by commas) and cookies",
			slog.Any("names", slices.Sorted(maps.Keys(resp.MultiValueHeaders))))
		for name, values := range resp.MultiValueHeaders {
			for _, v := range values {
				if !slices.Contains(h.Values(name), v) {
					h.Add(name, v)
				}
			}
		}
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	h.Set(requestIDHeader, id)
	h.Del("Transfer-Encoding")
	if status == http.StatusNoContent || status == http.StatusNotModified {
		h.Del("Content-Length")
		body = nil
	} else {
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body) // the client may be gone; nothing to do then
	return status
}

// headerBytes is the size API Gateway's quota counts: the request line and
// the header values.
func headerBytes(r *http.Request) int {
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	n := len(r.Method) + 1 + len(uri) + 1 + len(r.Proto) + len(r.Host)
	for _, values := range r.Header {
		for _, v := range values {
			n += len(v)
		}
	}
	return n
}

// message writes one of API Gateway's own answers, {"message":"Not Found"}.
func message(w http.ResponseWriter, status int) int {
	return messageText(w, status, http.StatusText(status))
}

// messageText writes an answer of API Gateway's with its own message.
func messageText(w http.ResponseWriter, status int, text string) int {
	b, _ := json.Marshal(map[string]string{"message": text}) // a map of strings always marshals
	body := string(b)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
	return status
}

// randomRequestID draws an ID shaped like API Gateway's: 11 random bytes in
// standard base64, 16 characters ending in "=".
func randomRequestID() string {
	var b [11]byte
	_, _ = rand.Read(b[:]) // never fails, see crypto/rand.Read
	return base64.StdEncoding.EncodeToString(b[:])
}
