package submission

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// routeRequest is a request as API Gateway's $default route sends it, with
// the stage it was sent on.
func routeRequest(method, path, stage string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		RouteKey: DefaultRoute,
		RawPath:  path,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: DefaultRoute,
			Stage:    stage,
			HTTP:     events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path},
		},
	}
}

// byRouteKey is a request of an explicit route that carries no path, only
// its route key and path parameters.
func byRouteKey(routeKey string, params map[string]string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{RouteKey: routeKey, PathParameters: params}
}

// resolved says what resolve made of a request: "404", "405 <Allow>", or
// the route key matched and its order ID.
func resolved(req events.APIGatewayV2HTTPRequest) string {
	m, ok := resolve(req)
	switch {
	case !ok:
		return "404"
	case m.endpoint == nil:
		return "405 " + strings.Join(m.allow, ", ")
	}
	s := m.endpoint.Method + " " + m.endpoint.Path
	if id, ok := m.params[orderIDParam]; ok {
		s += " id=" + id
	}
	return s
}

func TestResolve(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  events.APIGatewayV2HTTPRequest
		want string
	}{
		// Every route.
		{"submit", routeRequest("POST", "/orders", "$default"), "POST /orders"},
		{"own list", routeRequest("GET", "/orders", "$default"), "GET /orders"},
		{"own order", routeRequest("GET", "/orders/abc", "$default"), "GET /orders/{id} id=abc"},
		{"ops list", routeRequest("GET", "/ops/orders", "$default"), "GET /ops/orders"},
		{"ops order", routeRequest("GET", "/ops/orders/abc", "$default"), "GET /ops/orders/{id} id=abc"},
		{"workflows", routeRequest("GET", "/ops/workflows", "$default"), "GET /ops/workflows"},
		{"retry", routeRequest("POST", "/orders/abc/retry", "$default"), "POST /orders/{id}/retry id=abc"},
		{"cancel", routeRequest("POST", "/orders/abc/cancel", "$default"), "POST /orders/{id}/cancel id=abc"},
		// An ID that looks like an action or a route is still an ID; its
		// validity is Handle's to check.
		{"ID named retry", routeRequest("GET", "/orders/retry", "$default"), "GET /orders/{id} id=retry"},
		{"ID of any characters", routeRequest("GET", "/orders/a%2Fb..", "$default"), "GET /orders/{id} id=a%2Fb.."},

		// Another method: 405, Allow sorted.
		{"PUT orders", routeRequest("PUT", "/orders", "$default"), "405 GET, POST"},
		{"lowercase method", routeRequest("get", "/orders", "$default"), "405 GET, POST"},
		{"no method", routeRequest("", "/orders/abc", "$default"), "405 GET"},
		{"GET retry", routeRequest("GET", "/orders/abc/retry", "$default"), "405 POST"},
		{"POST ops order", routeRequest("POST", "/ops/orders/abc", "$default"), "405 GET"},
		{"DELETE workflows", routeRequest("DELETE", "/ops/workflows", "$default"), "405 GET"},

		// Trailing slashes, empty IDs, extra and missing segments: 404.
		{"root", routeRequest("GET", "/", "$default"), "404"},
		{"empty path", routeRequest("GET", "", "$default"), "404"},
		{"no leading slash", routeRequest("GET", "orders", "$default"), "404"},
		{"orders/", routeRequest("GET", "/orders/", "$default"), "404"},
		{"order/", routeRequest("GET", "/orders/abc/", "$default"), "404"},
		{"retry/", routeRequest("POST", "/orders/abc/retry/", "$default"), "404"},
		{"ops/orders/", routeRequest("GET", "/ops/orders/", "$default"), "404"},
		{"ops/workflows/", routeRequest("GET", "/ops/workflows/", "$default"), "404"},
		{"double slash", routeRequest("GET", "//orders", "$default"), "404"},
		{"empty ID of retry", routeRequest("POST", "/orders//retry", "$default"), "404"},
		{"empty ID of ops order", routeRequest("GET", "/ops/orders//", "$default"), "404"},
		{"extra segment", routeRequest("POST", "/orders/abc/cancel/x", "$default"), "404"},
		{"extra segment of ops order", routeRequest("GET", "/ops/orders/abc/x", "$default"), "404"},
		{"unknown action", routeRequest("POST", "/orders/abc/undo", "$default"), "404"},
		{"action of ops order", routeRequest("POST", "/ops/orders/abc/retry", "$default"), "404"},
		{"case differs", routeRequest("POST", "/orders/abc/Cancel", "$default"), "404"},
		{"Orders", routeRequest("GET", "/Orders", "$default"), "404"},
		{"prefix of a segment", routeRequest("GET", "/ordersx", "$default"), "404"},
		{"ops", routeRequest("GET", "/ops", "$default"), "404"},
		{"workflow", routeRequest("GET", "/ops/workflow", "$default"), "404"},
		{"query in path", routeRequest("GET", "/orders?x=1", "$default"), "404"},

		// On a named stage the path starts with the stage, stripped only
		// when the path does not match as it is.
		{"stage", routeRequest("GET", "/v1/orders/abc", "v1"), "GET /orders/{id} id=abc"},
		{"stage 405", routeRequest("PUT", "/prod/orders", "prod"), "405 GET, POST"},
		{"stage of a route's name", routeRequest("POST", "/ops/orders/abc/cancel", "ops"), "POST /orders/{id}/cancel id=abc"},
		{"path that matches as it is", routeRequest("GET", "/orders/abc", "orders"), "GET /orders/{id} id=abc"},
		{"stage alone", routeRequest("GET", "/v1", "v1"), "404"},
		{"stage and slash", routeRequest("GET", "/v1/", "v1"), "404"},
		{"stage as a prefix of a segment", routeRequest("GET", "/v1orders", "v1"), "404"},
		{"another stage", routeRequest("GET", "/v2/orders", "v1"), "404"},
		{"stage twice", routeRequest("GET", "/v1/v1/orders", "v1"), "404"},
		{"$default is no prefix", routeRequest("GET", "/$default/orders", "$default"), "404"},
		{"no stage", routeRequest("GET", "/v1/orders", ""), "404"},

		// Without a path, the route key and the path parameters.
		{"route key", byRouteKey("GET /orders/{id}", map[string]string{"id": "abc"}), "GET /orders/{id} id=abc"},
		{"route key in the context", events.APIGatewayV2HTTPRequest{
			RequestContext: events.APIGatewayV2HTTPRequestContext{RouteKey: "POST /orders/{id}/cancel"},
			PathParameters: map[string]string{"id": "abc"},
		}, "POST /orders/{id}/cancel id=abc"},
		{"route key without parameters", byRouteKey("POST /orders", nil), "POST /orders"},
		{"route key, greedy parameter", byRouteKey("GET /orders/{id+}", map[string]string{"id": "abc"}), "GET /orders/{id} id=abc"},
		{"route key, parameter missing", byRouteKey("GET /orders/{id}", nil), "404"},
		{"route key, another method", byRouteKey("DELETE /orders/{id}", map[string]string{"id": "abc"}), "405 GET"},
		{"route key $default", byRouteKey(DefaultRoute, nil), "404"},
		{"no path, no route key", events.APIGatewayV2HTTPRequest{}, "404"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := resolved(tt.req); got != tt.want {
				t.Errorf("resolve = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRouteTable checks the table's own rules: every route once, its path a
// route key's pattern, patterns that no one path matches two of (the matcher
// takes the first), and one route that takes new orders, a client's.
func TestRouteTable(t *testing.T) {
	t.Parallel()
	methods := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	seen := map[string]bool{}
	var submit []Route
	for _, e := range endpoints {
		key := e.Method + " " + e.Path
		if seen[key] {
			t.Errorf("%s is declared twice", key)
		}
		seen[key] = true
		if !slices.Contains(methods, e.Method) {
			t.Errorf("%s: method is not one of %v", key, methods)
		}
		if e.serve == nil {
			t.Errorf("%s has no handler", key)
		}
		segs := strings.Split(e.Path, "/")
		if segs[0] != "" || len(segs) < 2 {
			t.Errorf("%s: the path does not start with /", key)
		}
		for _, s := range segs[1:] {
			name, isParam := paramName(s)
			switch {
			case s == "":
				t.Errorf("%s: empty segment", key)
			case isParam && (name != orderIDParam || s != "{"+name+"}"):
				t.Errorf("%s: parameter %q; the handler reads only {%s}", key, s, orderIDParam)
			case !isParam && strings.ContainsAny(s, "{}?%+ "):
				t.Errorf("%s: segment %q is not a literal", key, s)
			}
		}
		if e.Submit {
			submit = append(submit, e.Route)
		}
	}
	if len(submit) != 1 || submit[0].Operator || SubmitRoute() != submit[0] {
		t.Errorf("routes that take new orders: %v (SubmitRoute %v); want one client route", submit, SubmitRoute())
	}
	if got := Routes(); len(got) != len(endpoints) {
		t.Errorf("Routes has %d routes, the table %d", len(got), len(endpoints))
	}
	for i, a := range endpoints {
		for _, b := range endpoints[i+1:] {
			if a.Path != b.Path && overlap(a.Path, b.Path) {
				t.Errorf("patterns %s and %s match the same paths", a.Path, b.Path)
			}
		}
	}
}

// overlap tells whether some path matches both patterns.
func overlap(a, b string) bool {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	if len(as) != len(bs) {
		return false
	}
	for i := range as {
		_, ap := paramName(as[i])
		_, bp := paramName(bs[i])
		if !ap && !bp && as[i] != bs[i] {
			return false
		}
	}
	return true
}

// FuzzResolve matches arbitrary requests: a match is always the route's
// pattern filled with the parameters (on the path, or on it less the
// stage), with non-empty parameters of one segment; a 405 lists the
// pattern's methods sorted, without the request's.
func FuzzResolve(f *testing.F) {
	for _, r := range Routes() {
		f.Add(r.Method, strings.ReplaceAll(r.Path, "{id}", "abc"), "$default", "", "")
		f.Add(r.Method, "/v1"+strings.ReplaceAll(r.Path, "{id}", "abc"), "v1", "", "")
		f.Add(r.Method, "", "", r.Method+" "+r.Path, "abc")
	}
	f.Add("PUT", "/orders/", "$default", "", "")
	f.Add("GET", "/ops/orders//x", "ops", "", "")
	f.Add("", "", "", "GET /orders/{id+}", "a/b")
	f.Add("POST", "/{id}/{id}", "{id}", "POST /{id}", "")
	f.Fuzz(func(t *testing.T, method, path, stage, routeKey, id string) {
		req := routeRequest(method, path, stage)
		req.RouteKey = routeKey
		req.PathParameters = map[string]string{orderIDParam: id}
		m, ok := resolve(req)
		if !ok {
			if m.endpoint != nil || m.allow != nil || m.params != nil {
				t.Fatalf("no match, but %+v", m)
			}
			return
		}
		if len(m.allow) == 0 || !slices.IsSorted(m.allow) || len(slices.Compact(slices.Clone(m.allow))) != len(m.allow) {
			t.Fatalf("Allow %v", m.allow)
		}
		if m.endpoint == nil {
			if slices.Contains(m.allow, requestMethod(req)) {
				t.Fatalf("405 for %q, which Allow %v lists", requestMethod(req), m.allow)
			}
			return
		}
		if m.endpoint.Method != requestMethod(req) || !slices.Contains(m.allow, m.endpoint.Method) {
			t.Fatalf("%s %s matched for method %q, Allow %v", m.endpoint.Method, m.endpoint.Path, requestMethod(req), m.allow)
		}
		filled := m.endpoint.Path
		for name, v := range m.params {
			if v == "" || strings.Contains(v, "/") {
				t.Fatalf("parameter %s = %q", name, v)
			}
			filled = strings.ReplaceAll(filled, "{"+name+"}", v)
		}
		p := requestPath(req)
		if p == "" {
			p = pathFromRouteKey(req)
		}
		if filled != p && filled != strings.TrimPrefix(p, "/"+stage) {
			t.Fatalf("%s %s filled with %v is %q, not the path %q (stage %q)", m.endpoint.Method, m.endpoint.Path, m.params, filled, p, stage)
		}
	})
}
