package submission

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// Route is one route the Submission handler serves behind API Gateway.
type Route struct {
	// Method and Path are the route key's, as API Gateway declares it: Path
	// is a pattern whose "{name}" segments are parameters that match any
	// one non-empty segment.
	Method, Path string
	// Operator routes see or change every caller's orders: the stack's
	// operator policy allows them and its client policy does not, and the
	// handler serves them to operators only (Config.OperatorPrincipals).
	// The others are the clients', which see only the caller's own orders.
	Operator bool
	// Submit marks the one route that takes new orders, the only one whose
	// requests become work for the Agents: the stack gives it the capacity
	// model's throttle of its own (SubmitRoute).
	Submit bool
}

// args are what a route's handler gets from Handle beside the request.
type args struct {
	// owner is the caller (Principal), who owns what it submits.
	owner Owner
	// orderID is the path's {id}, already checked by message.ValidOrderID;
	// "" on a route without one.
	orderID string
}

// endpoint is a route and the method of Handler that serves it, once the
// route is matched, its caller allowed and its order ID checked.
type endpoint struct {
	Route
	serve func(h *Handler, ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, a args) events.APIGatewayV2HTTPResponse
}

// orderIDParam is the path parameter that names an order.
const orderIDParam = "id"

// endpoints is the API: every route is declared here and only here. Routes,
// the matching of requests (404, 405 and its Allow), the operator check,
// the stack's routes and policies, the local API Gateway and the API
// document's test all read it.
var endpoints = []endpoint{
	{Route{Method: "POST", Path: "/orders", Submit: true}, (*Handler).createOrder},
	{Route{Method: "GET", Path: "/orders"}, (*Handler).listOwnOrders},
	{Route{Method: "GET", Path: "/orders/{id}"}, (*Handler).getOwnOrder},
	{Route{Method: "GET", Path: "/ops/orders", Operator: true}, (*Handler).listOrders},
	{Route{Method: "GET", Path: "/ops/orders/{id}", Operator: true}, (*Handler).getAnyOrder},
	{Route{Method: "GET", Path: "/ops/workflows", Operator: true}, (*Handler).listWorkflows},
	{Route{Method: "POST", Path: "/orders/{id}/retry", Operator: true}, (*Handler).retryOrder},
	{Route{Method: "POST", Path: "/orders/{id}/cancel", Operator: true}, (*Handler).cancelOrder},
}

// Routes lists the API's routes. The CDK stack declares exactly these, and
// the local stack serves exactly these, so neither can drift from the
// handler; both add the catch-all DefaultRoute.
func Routes() []Route {
	out := make([]Route, len(endpoints))
	for i, e := range endpoints {
		out[i] = e.Route
	}
	return out
}

// SubmitRoute is the route that takes new orders (Route.Submit).
func SubmitRoute() Route {
	for _, e := range endpoints {
		if e.Submit {
			return e.Route
		}
	}
	panic("submission: no route takes new orders") // TestRouteTable keeps one
}

// DefaultRoute is the route key of the API's catch-all route, which both
// stacks send to the handler with IAM authorization like every route: a
// request no route of Routes matches (another method, another path) gets
// the handler's 405 with Allow, or its 404, rather than API Gateway's bare
// 404. API Gateway selects it only when no route matches ("The $default
// route catches requests that don't explicitly match other routes in your
// API", Create routes for HTTP APIs in API Gateway,
// https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-develop-routes.html).
const DefaultRoute = "$default"

// Resource is the route's execute-api resource relative to the stage,
// METHOD/PATH as IAM authorizes a request (arn:...:API/STAGE/METHOD/PATH):
// a path parameter matches any one value, which IAM can only express as *.
func (r Route) Resource() string {
	var b strings.Builder
	b.WriteString(r.Method)
	for i := 0; i < len(r.Path); i++ {
		if r.Path[i] == '{' {
			for i < len(r.Path) && r.Path[i] != '}' {
				i++
			}
			b.WriteByte('*')
			continue
		}
		b.WriteByte(r.Path[i])
	}
	return b.String()
}

// match is a request's path matched to a route's pattern.
type match struct {
	// endpoint is the route of the pattern and the request's method, nil
	// when the pattern has no route of that method (405).
	endpoint *endpoint
	// params are the path's parameters, by name.
	params map[string]string
	// allow lists the pattern's methods, sorted, for 405's Allow.
	allow []string
}

// resolve matches a request to a route; ok is false when no route's
// pattern matches its path (404). It reads the path, which both a $default
// route and explicit routes ("POST /orders") carry; on a named stage of the
// execute-api domain the path starts with the stage, which is stripped when
// the path does not match as it is. Only if an event has no path at all does
// it fall back to the route key and path parameters.
func resolve(req events.APIGatewayV2HTTPRequest) (m match, ok bool) {
	method, path := requestMethod(req), requestPath(req)
	if path == "" {
		path = pathFromRouteKey(req)
	}
	if m, ok := matchPath(method, path); ok {
		return m, true
	}
	if stage := req.RequestContext.Stage; stage != "" && stage != "$default" {
		if rest, ok := strings.CutPrefix(path, "/"+stage); ok && strings.HasPrefix(rest, "/") {
			return matchPath(method, rest)
		}
	}
	return match{}, false
}

// matchPath matches method and path to the routes: ok is false when no
// route's pattern matches path. Patterns are disjoint (TestRouteTable), so
// at most one does.
func matchPath(method, path string) (m match, ok bool) {
	segs := strings.Split(path, "/")
	var pattern string // the pattern path matches, once found
	for i, e := range endpoints {
		if pattern == "" {
			params, ok := matchSegments(e.Path, segs)
			if !ok {
				continue
			}
			pattern, m.params = e.Path, params
		}
		if e.Path != pattern {
			continue
		}
		m.allow = append(m.allow, e.Method)
		if e.Method == method {
			m.endpoint = &endpoints[i]
		}
	}
	slices.Sort(m.allow)
	return m, pattern != ""
}

// matchSegments matches a path, split at its slashes, to a route's
// pattern: segment by segment, a literal exactly (case and all) and a
// parameter any non-empty segment, so a trailing slash, an empty ID or an
// extra segment matches nothing.
func matchSegments(pattern string, segs []string) (params map[string]string, ok bool) {
	tmpl := strings.Split(pattern, "/")
	if len(tmpl) != len(segs) {
		return nil, false
	}
	params = map[string]string{}
	for i, t := range tmpl {
		name, isParam := paramName(t)
		switch {
		case isParam && segs[i] != "":
			params[name] = segs[i]
		case isParam || t != segs[i]:
			return nil, false
		}
	}
	return params, true
}

// paramName is the name of a pattern's segment "{name}" (or greedy
// "{name+}", as a route key may spell it).
func paramName(seg string) (string, bool) {
	name, ok := strings.CutPrefix(seg, "{")
	if !ok {
		return "", false
	}
	return strings.TrimSuffix(strings.TrimSuffix(name, "}"), "+"), true
}

// pathFromRouteKey rebuilds a path from "GET /orders/{id}" and the path
// parameters.
func pathFromRouteKey(req events.APIGatewayV2HTTPRequest) string {
	_, tmpl, ok := strings.Cut(routeKey(req), " ")
	if !ok {
		return ""
	}
	segs := strings.Split(tmpl, "/")
	for i, s := range segs {
		if name, ok := paramName(s); ok {
			segs[i] = req.PathParameters[name]
		}
	}
	return strings.Join(segs, "/")
}

// requestMethod is the request's method, or its route key's when the event
// has none.
func requestMethod(req events.APIGatewayV2HTTPRequest) string {
	if m := req.RequestContext.HTTP.Method; m != "" {
		return m
	}
	if m, _, ok := strings.Cut(routeKey(req), " "); ok {
		return m
	}
	return ""
}

func routeKey(req events.APIGatewayV2HTTPRequest) string {
	if req.RouteKey != "" {
		return req.RouteKey
	}
	return req.RequestContext.RouteKey
}

// requestPath is the path as the client sent it.
func requestPath(req events.APIGatewayV2HTTPRequest) string {
	if req.RawPath != "" {
		return req.RawPath
	}
	return req.RequestContext.HTTP.Path
}
