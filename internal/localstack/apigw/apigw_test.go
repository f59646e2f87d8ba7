package apigw_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/internal/localstack/apigw"
	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/clock"
)

const testID = "TeStReQuEsTiD0a="

var (
	testTime = time.Date(2026, 3, 12, 19, 3, 58, 123_000_000, time.UTC)

	testRoutes = []apigw.Route{
		{Method: "POST", Path: "/orders"},
		{Method: "GET", Path: "/orders/{id}"},
		{Method: "GET", Path: "/files/special"},
		{Method: "ANY", Path: "/files/{path+}"},
		{Method: "GET", Path: "/"},
	}
)

// fake is a Handler that records the events it gets and answers with resp,
// err, or a panic.
type fake struct {
	resp  events.APIGatewayV2HTTPResponse
	err   error
	panic any

	mu    sync.Mutex
	calls []events.APIGatewayV2HTTPRequest
}

func (f *fake) handle(_ context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	f.mu.Lock()
	f.calls = append(f.calls, req)
	f.mu.Unlock()
	if f.panic != nil {
		panic(f.panic)
	}
	return f.resp, f.err
}

func (f *fake) events() []events.APIGatewayV2HTTPRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// only returns the one event the handler got.
func (f *fake) only(t *testing.T) events.APIGatewayV2HTTPRequest {
	t.Helper()
	evs := f.events()
	if len(evs) != 1 {
		t.Fatalf("handler called %d times, want once", len(evs))
	}
	return evs[0]
}

func newGateway(t *testing.T, f *fake, opts ...apigw.Option) *apigw.Gateway {
	t.Helper()
	opts = append([]apigw.Option{
		apigw.WithClock(clock.NewFake(testTime)),
		apigw.WithRequestIDs(func() string { return testID }),
	}, opts...)
	g, err := apigw.New(testRoutes, f.handle, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return g
}

func serve(g http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	return w
}

// wantRefused checks that the gateway answered itself, with one of its own
// JSON answers, and never called the handler.
func wantRefused(t *testing.T, w *httptest.ResponseRecorder, f *fake, status int, message string) {
	t.Helper()
	wantGatewayAnswer(t, w, status, message)
	if n := len(f.events()); n != 0 {
		t.Fatalf("handler called %d times for a request the gateway refused", n)
	}
}

// wantGatewayAnswer checks one of the gateway's own JSON answers.
func wantGatewayAnswer(t *testing.T, w *httptest.ResponseRecorder, status int, message string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d, want %d (body %q)", w.Code, status, w.Body)
	}
	if want := `{"message":"` + message + `"}`; w.Body.String() != want {
		t.Errorf("body %q, want %q", w.Body, want)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("content-type %q, want application/json", ct)
	}
	if id := w.Header().Get("Apigw-Requestid"); id == "" {
		t.Error("no apigw-requestid header")
	}
}

func TestRouting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, target string
		wantKey              string // "" for 404
		wantParams           map[string]string
		wantRawPath          string
		wantPath             string
	}{
		{name: "collection", method: "POST", target: "/orders", wantKey: "POST /orders"},
		{name: "path parameter", method: "GET", target: "/orders/ord-1", wantKey: "GET /orders/{id}",
			wantParams: map[string]string{"id": "ord-1"}},
		{name: "escaped slash stays in its parameter", method: "GET", target: "/orders/a%2Fb", wantKey: "GET /orders/{id}",
			wantParams: map[string]string{"id": "a/b"}, wantRawPath: "/orders/a%2Fb", wantPath: "/orders/a/b"},
		{name: "escaped UTF-8", method: "GET", target: "/orders/caf%C3%A9%20x", wantKey: "GET /orders/{id}",
			wantParams: map[string]string{"id": "café x"}, wantRawPath: "/orders/caf%C3%A9%20x", wantPath: "/orders/café x"},
		{name: "plus is not a space in a path", method: "GET", target: "/orders/a+b", wantKey: "GET /orders/{id}",
			wantParams: map[string]string{"id": "a+b"}},
		{name: "escaped literal", method: "GET", target: "/%6Frders/x", wantKey: "GET /orders/{id}",
			wantParams: map[string]string{"id": "x"}, wantRawPath: "/%6Frders/x", wantPath: "/orders/x"},
		{name: "literal beats greedy", method: "GET", target: "/files/special", wantKey: "GET /files/special"},
		{name: "greedy parameter", method: "GET", target: "/files/a/b%20c/", wantKey: "ANY /files/{path+}",
			wantParams: map[string]string{"path": "a/b c/"}, wantRawPath: "/files/a/b%20c/", wantPath: "/files/a/b c/"},
		{name: "ANY takes other methods", method: "POST", target: "/files/special", wantKey: "ANY /files/{path+}",
			wantParams: map[string]string{"path": "special"}},
		{name: "root", method: "GET", target: "/", wantKey: "GET /"},
		{name: "unknown path", method: "GET", target: "/nope"},
		{name: "wrong method on a collection", method: "GET", target: "/orders"},
		{name: "wrong method on an item", method: "DELETE", target: "/orders/ord-1"},
		{name: "method is case-sensitive", method: "get", target: "/orders/ord-1"},
		{name: "trailing slash", method: "GET", target: "/orders/ord-1/"},
		{name: "empty parameter", method: "GET", target: "/orders/"},
		{name: "empty segment", method: "GET", target: "//orders"},
		{name: "extra segment", method: "GET", target: "/orders/a/b"},
		{name: "greedy needs a segment", method: "GET", target: "/files/"},
		{name: "root with wrong method", method: "POST", target: "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{resp: events.APIGatewayV2HTTPResponse{StatusCode: http.StatusTeapot}}
			w := serve(newGateway(t, f), httptest.NewRequest(tt.method, tt.target, nil))
			if tt.wantKey == "" {
				wantRefused(t, w, f, http.StatusNotFound, "Not Found")
				return
			}
			if w.Code != http.StatusTeapot {
				t.Fatalf("status %d, want the handler's %d", w.Code, http.StatusTeapot)
			}
			ev := f.only(t)
			if ev.RouteKey != tt.wantKey || ev.RequestContext.RouteKey != tt.wantKey {
				t.Errorf("route key %q / %q, want %q", ev.RouteKey, ev.RequestContext.RouteKey, tt.wantKey)
			}
			if !reflect.DeepEqual(ev.PathParameters, tt.wantParams) {
				t.Errorf("path parameters %q, want %q", ev.PathParameters, tt.wantParams)
			}
			wantRaw, wantPath := tt.wantRawPath, tt.wantPath
			if wantRaw == "" {
				wantRaw, wantPath = tt.target, tt.target
			}
			if ev.RawPath != wantRaw || ev.RequestContext.HTTP.Path != wantPath {
				t.Errorf("rawPath %q, http.path %q; want %q, %q", ev.RawPath, ev.RequestContext.HTTP.Path, wantRaw, wantPath)
			}
			if ev.RequestContext.HTTP.Method != tt.method {
				t.Errorf("http.method %q, want %q", ev.RequestContext.HTTP.Method, tt.method)
			}
		})
	}
}

// TestDefaultRoute: with the catch-all route, every request no route
// matches reaches the handler as $default, without path parameters; a
// route that matches still wins, and $default is given once.
func TestDefaultRoute(t *testing.T) {
	t.Parallel()
	f := &fake{resp: events.APIGatewayV2HTTPResponse{StatusCode: http.StatusTeapot}}
	g, err := apigw.New(append([]apigw.Route{apigw.DefaultRoute}, testRoutes...), f.handle, apigw.WithClock(clock.NewFake(testTime)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, target, key string }{
		{"GET", "/orders/o-1", "GET /orders/{id}"},
		{"POST", "/files/special", "ANY /files/{path+}"},
		{"GET", "/nope", "$default"},
		{"DELETE", "/orders/o-1", "$default"},
		{"GET", "/orders", "$default"},
		{"PUT", "/", "$default"},
		{"GET", "/orders/o-1/", "$default"},
	} {
		if w := serve(g, httptest.NewRequest(tc.method, tc.target, nil)); w.Code != http.StatusTeapot {
			t.Fatalf("%s %s: status %d", tc.method, tc.target, w.Code)
		}
		evs := f.events()
		ev := evs[len(evs)-1]
		if ev.RouteKey != tc.key || ev.RequestContext.RouteKey != tc.key || (tc.key == "$default" && ev.PathParameters != nil) ||
			ev.RawPath != tc.target || ev.RequestContext.HTTP.Method != tc.method {
			t.Errorf("%s %s: route key %q, parameters %v, path %q; want %q", tc.method, tc.target, ev.RouteKey, ev.PathParameters, ev.RawPath, tc.key)
		}
	}
	if apigw.DefaultRoute.Key() != "$default" {
		t.Errorf("DefaultRoute.Key() = %q", apigw.DefaultRoute.Key())
	}
	if _, err := apigw.New([]apigw.Route{apigw.DefaultRoute, apigw.DefaultRoute}, f.handle); err == nil {
		t.Error("two $default routes accepted")
	}
	// Alone, it takes everything.
	only, err := apigw.New([]apigw.Route{apigw.DefaultRoute}, f.handle)
	if err != nil {
		t.Fatal(err)
	}
	if w := serve(only, httptest.NewRequest("PATCH", "/a/b", nil)); w.Code != http.StatusTeapot {
		t.Errorf("the catch-all alone: %d", w.Code)
	}
}

// baseEvent is the event for a request built by httptest.NewRequest.
func baseEvent(method, key, path string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: key,
		RawPath:  path,
		Headers: map[string]string{
			"host":              "example.com",
			"x-forwarded-for":   "192.0.2.1",
			"x-forwarded-proto": "http",
			"x-forwarded-port":  "80",
		},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     key,
			AccountID:    "000000000000",
			Stage:        "$default",
			RequestID:    testID,
			APIID:        "local",
			DomainName:   "example.com",
			DomainPrefix: "example",
			Time:         "12/Mar/2026:19:03:58 +0000",
			TimeEpoch:    testTime.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:   method,
				Path:     path,
				Protocol: "HTTP/1.1",
				SourceIP: "192.0.2.1",
			},
		},
	}
}

func TestEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  func() *http.Request
		want func() events.APIGatewayV2HTTPRequest
	}{
		{
			name: "everything",
			req: func() *http.Request {
				r := httptest.NewRequest("POST", "http://api.example.com:8080/orders?b=2&a=1&a=x%20y", strings.NewReader(`{"k":"v"}`))
				r.RemoteAddr = "203.0.113.7:54321"
				r.Header.Set("Content-Type", "application/json")
				r.Header.Add("X-Multi", "one")
				r.Header.Add("X-Multi", "two")
				r.Header.Set("User-Agent", "test/1.0")
				r.Header.Add("Cookie", "a=1; b=2")
				r.Header.Add("Cookie", "c=3")
				return r
			},
			want: func() events.APIGatewayV2HTTPRequest {
				ev := baseEvent("POST", "POST /orders", "/orders")
				ev.RawQueryString = "b=2&a=1&a=x%20y"
				ev.QueryStringParameters = map[string]string{"a": "1,x y", "b": "2"}
				ev.Cookies = []string{"a=1", "b=2", "c=3"}
				ev.Headers = map[string]string{
					"content-type":      "application/json",
					"x-multi":           "one,two",
					"user-agent":        "test/1.0",
					"host":              "api.example.com:8080",
					"x-forwarded-for":   "203.0.113.7",
					"x-forwarded-proto": "http",
					"x-forwarded-port":  "8080",
				}
				ev.Body = `{"k":"v"}`
				ev.RequestContext.DomainName = "api.example.com"
				ev.RequestContext.DomainPrefix = "api"
				ev.RequestContext.HTTP.SourceIP = "203.0.113.7"
				ev.RequestContext.HTTP.UserAgent = "test/1.0"
				return ev
			},
		},
		{
			name: "nothing optional",
			req:  func() *http.Request { return httptest.NewRequest("GET", "/orders/x", nil) },
			want: func() events.APIGatewayV2HTTPRequest {
				ev := baseEvent("GET", "GET /orders/{id}", "/orders/x")
				ev.PathParameters = map[string]string{"id": "x"}
				return ev
			},
		},
		{
			name: "binary body is base64",
			req: func() *http.Request {
				return httptest.NewRequest("POST", "/orders", bytes.NewReader([]byte{0xff, 0x00, 0x01}))
			},
			want: func() events.APIGatewayV2HTTPRequest {
				ev := baseEvent("POST", "POST /orders", "/orders")
				ev.Body = "/wAB"
				ev.IsBase64Encoded = true
				return ev
			},
		},
		{
			name: "UTF-8 body is text",
			req:  func() *http.Request { return httptest.NewRequest("POST", "/orders", strings.NewReader("héllo ✓")) },
			want: func() events.APIGatewayV2HTTPRequest {
				ev := baseEvent("POST", "POST /orders", "/orders")
				ev.Body = "héllo ✓"
				return ev
			},
		},
		{
			name: "names differing in case join",
			req: func() *http.Request {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header["X-A"] = []string{"1", "2"}
				r.Header["x-a"] = []string{"3"}
				r.Header["COOKIE"] = []string{"k=v;;  l=w"}
				return r
			},
			want: func() events.APIGatewayV2HTTPRequest {
				ev := baseEvent("GET", "GET /", "/")
				ev.Headers["x-a"] = "1,2,3"
				ev.Cookies = []string{"k=v", "l=w"}
				return ev
			},
		},
		{
			name: "query edge cases",
			req: func() *http.Request {
				return httptest.NewRequest("GET", "/?a=1&a=2&empty&sp=%20+x&bad=%zz&%E2%9C%93=ok", nil)
			},
			want: func() events.APIGatewayV2HTTPRequest {
				ev := baseEvent("GET", "GET /", "/")
				ev.RawQueryString = "a=1&a=2&empty&sp=%20+x&bad=%zz&%E2%9C%93=ok"
				ev.QueryStringParameters = map[string]string{"a": "1,2", "empty": "", "sp": "  x", "✓": "ok"}
				return ev
			},
		},
		{
			name: "empty query",
			req:  func() *http.Request { return httptest.NewRequest("GET", "/?", nil) },
			want: func() events.APIGatewayV2HTTPRequest { return baseEvent("GET", "GET /", "/") },
		},
		{
			name: "TLS and a forwarded client",
			req: func() *http.Request {
				r := httptest.NewRequest("GET", "https://10.0.0.5/", nil)
				r.Header.Set("X-Forwarded-For", "198.51.100.1")
				return r
			},
			want: func() events.APIGatewayV2HTTPRequest {
				ev := baseEvent("GET", "GET /", "/")
				ev.Headers["host"] = "10.0.0.5"
				ev.Headers["x-forwarded-for"] = "198.51.100.1, 192.0.2.1"
				ev.Headers["x-forwarded-proto"] = "https"
				ev.Headers["x-forwarded-port"] = "443"
				ev.RequestContext.DomainName = "10.0.0.5"
				ev.RequestContext.DomainPrefix = "10.0.0.5"
				return ev
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{}
			w := serve(newGateway(t, f), tt.req())
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			got, want := f.only(t), tt.want()
			if !reflect.DeepEqual(got, want) {
				t.Errorf("event\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestOverTheWire runs the gateway behind a real HTTP server, to see what
// net/http itself contributes (the Host, the connection's addresses, the
// Content-Length header) and that a client reads the response as sent.
func TestOverTheWire(t *testing.T) {
	t.Parallel()
	f := &fake{resp: events.APIGatewayV2HTTPResponse{
		StatusCode: http.StatusAccepted,
		Headers:    map[string]string{"Content-Type": "application/json", "Location": "/orders/ord-1"},
		Cookies:    []string{"session=abc; Path=/; HttpOnly", "theme=dark"},
		Body:       `{"orderId":"ord-1"}`,
	}}
	srv := httptest.NewServer(newGateway(t, f))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/orders?x=1", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", "wire/1")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}

	if resp.StatusCode != http.StatusAccepted || string(body) != `{"orderId":"ord-1"}` {
		t.Errorf("response %d %q", resp.StatusCode, body)
	}
	if got := resp.Header.Values("Set-Cookie"); !slices.Equal(got, f.resp.Cookies) {
		t.Errorf("Set-Cookie %q, want %q", got, f.resp.Cookies)
	}
	if got := resp.Header.Get("Location"); got != "/orders/ord-1" {
		t.Errorf("Location %q", got)
	}
	if got := resp.Header.Get("Apigw-Requestid"); got != testID {
		t.Errorf("apigw-requestid %q, want %q", got, testID)
	}
	ev := f.only(t)
	if ev.Body != `{"a":1}` || ev.RawQueryString != "x=1" {
		t.Errorf("body %q, query %q", ev.Body, ev.RawQueryString)
	}
	h := ev.RequestContext.HTTP
	if h.SourceIP != "127.0.0.1" || h.Protocol != "HTTP/1.1" || h.UserAgent != "wire/1" || h.Method != "POST" {
		t.Errorf("requestContext.http %+v", h)
	}
	if ev.RequestContext.DomainName != "127.0.0.1" {
		t.Errorf("domainName %q", ev.RequestContext.DomainName)
	}
	wantHeaders := map[string]string{
		"content-length":    "7",
		"host":              "127.0.0.1:" + port,
		"user-agent":        "wire/1",
		"accept-encoding":   "gzip",
		"x-forwarded-for":   "127.0.0.1",
		"x-forwarded-proto": "http",
		"x-forwarded-port":  port,
	}
	if !reflect.DeepEqual(ev.Headers, wantHeaders) {
		t.Errorf("headers\n got %q\nwant %q", ev.Headers, wantHeaders)
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		limit    int64 // 0: the default
		body     io.Reader
		declared int64 // Content-Length; -1 unknown (chunked)
		wantCall bool
	}{
		{name: "empty", limit: 8, body: nil, declared: 0, wantCall: true},
		{name: "at the limit", limit: 8, body: strings.NewReader("12345678"), declared: 8, wantCall: true},
		{name: "at the limit, undeclared", limit: 8, body: strings.NewReader("12345678"), declared: -1, wantCall: true},
		{name: "over the limit, declared", limit: 8, body: strings.NewReader("123456789"), declared: 9},
		{name: "over the limit, undeclared", limit: 8, body: strings.NewReader("123456789"), declared: -1},
		{name: "declared over the default", body: strings.NewReader("x"), declared: apigw.DefaultMaxBodyBytes + 1},
		{name: "streamed over the default", body: io.LimitReader(zeros{}, apigw.DefaultMaxBodyBytes+1), declared: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{}
			var opts []apigw.Option
			if tt.limit != 0 {
				opts = append(opts, apigw.WithMaxBodyBytes(tt.limit))
			}
			r := httptest.NewRequest("POST", "/orders", tt.body)
			r.ContentLength = tt.declared
			w := serve(newGateway(t, f, opts...), r)
			if !tt.wantCall {
				wantRefused(t, w, f, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
				return
			}
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			f.only(t)
		})
	}
}

// errReader fails every read.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

func TestUnreadableBody(t *testing.T) {
	t.Parallel()
	f := &fake{}
	r := httptest.NewRequest("POST", "/orders", errReader{})
	w := serve(newGateway(t, f), r)
	wantRefused(t, w, f, http.StatusBadRequest, "Bad Request")
}

// TestHandlerOutlivesClient: Lambda runs a function to the end when the
// client hangs up, so the handler's context must not be the request's.
func TestHandlerOutlivesClient(t *testing.T) {
	t.Parallel()
	type key struct{}
	var gotErr error
	var gotValue any
	g, err := apigw.New(testRoutes, func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		gotErr, gotValue = ctx.Err(), ctx.Value(key{})
		return events.APIGatewayV2HTTPResponse{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithValue(t.Context(), key{}, "kept"))
	cancel()
	serve(g, httptest.NewRequestWithContext(ctx, "GET", "/", nil))
	if gotErr != nil || gotValue != "kept" {
		t.Errorf("handler context: err %v, value %v; want no error and the request's values", gotErr, gotValue)
	}
}

func TestHandlerFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		f          *fake
		wantStatus int
		wantMsg    string
		wantLog    string
	}{
		{name: "error", f: &fake{err: errors.New("boom")},
			wantStatus: 500, wantMsg: "Internal Server Error", wantLog: "handler failed"},
		{name: "error with a response", f: &fake{err: errors.New("boom"), resp: events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: "ok"}},
			wantStatus: 500, wantMsg: "Internal Server Error", wantLog: "handler failed"},
		{name: "panic", f: &fake{panic: "nil map"},
			wantStatus: 500, wantMsg: "Internal Server Error", wantLog: "handler panicked"},
		{name: "panic with an error", f: &fake{panic: errors.New("bad")},
			wantStatus: 500, wantMsg: "Internal Server Error", wantLog: "handler panicked"},
		{name: "body not base64", f: &fake{resp: events.APIGatewayV2HTTPResponse{Body: "not base64!", IsBase64Encoded: true}},
			wantStatus: 502, wantMsg: "Bad Gateway", wantLog: "handler returned a body that is not valid base64"},
		{name: "status below 200", f: &fake{resp: events.APIGatewayV2HTTPResponse{StatusCode: 101}},
			wantStatus: 502, wantMsg: "Bad Gateway", wantLog: "handler returned an invalid status code"},
		{name: "negative status", f: &fake{resp: events.APIGatewayV2HTTPResponse{StatusCode: -1}},
			wantStatus: 502, wantMsg: "Bad Gateway", wantLog: "handler returned an invalid status code"},
		{name: "status above 599", f: &fake{resp: events.APIGatewayV2HTTPResponse{StatusCode: 600}},
			wantStatus: 502, wantMsg: "Bad Gateway", wantLog: "handler returned an invalid status code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logs logtest.Buffer
			g := newGateway(t, tt.f, apigw.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
			w := serve(g, httptest.NewRequest("GET", "/orders/x", nil))
			wantGatewayAnswer(t, w, tt.wantStatus, tt.wantMsg)
			tt.f.only(t)
			var found bool
			for _, rec := range logs.Records(t) {
				if rec["msg"] != tt.wantLog {
					continue
				}
				found = true
				if rec["level"] != "ERROR" || rec["requestId"] != testID {
					t.Errorf("log record %v: want level ERROR and requestId %s", rec, testID)
				}
				if rec["msg"] == "handler panicked" && !strings.Contains(rec["stack"].(string), "apigw_test.(*fake).handle") {
					t.Errorf("panic log has no stack through the handler: %v", rec["stack"])
				}
			}
			if !found {
				t.Errorf("no %q log record in\n%s", tt.wantLog, logs.String())
			}
		})
	}
}

func TestResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		resp        events.APIGatewayV2HTTPResponse
		wantStatus  int
		wantBody    string
		wantHeaders http.Header // checked value by value; nil slice: absent
	}{
		{
			name:        "zero status is 200",
			resp:        events.APIGatewayV2HTTPResponse{Body: "hi"},
			wantStatus:  200,
			wantBody:    "hi",
			wantHeaders: http.Header{"Content-Length": {"2"}, "Apigw-Requestid": {testID}},
		},
		{
			name:       "status, headers and cookies",
			resp:       events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"content-type": "application/problem+json", "X-Custom": "a,b"}, Cookies: []string{"s=1; Path=/", "t=2"}},
			wantStatus: 201,
			wantHeaders: http.Header{
				"Content-Type": {"application/problem+json"},
				"X-Custom":     {"a,b"},
				"Set-Cookie":   {"s=1; Path=/", "t=2"},
			},
		},
		{
			name: "multi-value headers merge",
			resp: events.APIGatewayV2HTTPResponse{
				Headers:           map[string]string{"Vary": "Accept"},
				MultiValueHeaders: map[string][]string{"vary": {"Accept", "Origin"}, "X-Two": {"1", "2"}},
			},
			wantStatus:  200,
			wantHeaders: http.Header{"Vary": {"Accept", "Origin"}, "X-Two": {"1", "2"}},
		},
		{
			name:        "base64 body is decoded",
			resp:        events.APIGatewayV2HTTPResponse{Body: base64.StdEncoding.EncodeToString([]byte{0xff, 0, 'a'}), IsBase64Encoded: true},
			wantStatus:  200,
			wantBody:    "\xff\x00a",
			wantHeaders: http.Header{"Content-Length": {"3"}},
		},
		{
			name:       "base64 flag off leaves the body alone",
			resp:       events.APIGatewayV2HTTPResponse{Body: "/wAB"},
			wantStatus: 200,
			wantBody:   "/wAB",
		},
		{
			name:        "content-length is the gateway's",
			resp:        events.APIGatewayV2HTTPResponse{Headers: map[string]string{"Content-Length": "999", "Transfer-Encoding": "chunked"}, Body: "abc"},
			wantStatus:  200,
			wantBody:    "abc",
			wantHeaders: http.Header{"Content-Length": {"3"}, "Transfer-Encoding": nil},
		},
		{
			name:        "no content has no body",
			resp:        events.APIGatewayV2HTTPResponse{StatusCode: 204, Body: "dropped"},
			wantStatus:  204,
			wantHeaders: http.Header{"Content-Length": nil},
		},
		{
			name:        "request ID header is the gateway's",
			resp:        events.APIGatewayV2HTTPResponse{Headers: map[string]string{"apigw-requestid": "forged"}},
			wantStatus:  200,
			wantHeaders: http.Header{"Apigw-Requestid": {testID}},
		},
		{
			name:       "handler's own error status passes",
			resp:       events.APIGatewayV2HTTPResponse{StatusCode: 503, Body: `{"title":"busy"}`},
			wantStatus: 503,
			wantBody:   `{"title":"busy"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := serve(newGateway(t, &fake{resp: tt.resp}), httptest.NewRequest("GET", "/", nil))
			if w.Code != tt.wantStatus || w.Body.String() != tt.wantBody {
				t.Errorf("response %d %q, want %d %q", w.Code, w.Body, tt.wantStatus, tt.wantBody)
			}
			for name, want := range tt.wantHeaders {
				if got := w.Header().Values(name); !slices.Equal(got, want) {
					t.Errorf("header %s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestLogs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, target string
		resp                 events.APIGatewayV2HTTPResponse
		want                 []map[string]any // subsets of the records, in order
	}{
		{
			name: "matched", method: "GET", target: "/orders/x",
			want: []map[string]any{{"level": "INFO", "msg": "request", "requestId": testID, "method": "GET", "path": "/orders/x", "routeKey": "GET /orders/{id}", "status": 200.0}},
		},
		{
			name: "unmatched", method: "PUT", target: "/orders/x",
			want: []map[string]any{{"level": "INFO", "msg": "request", "method": "PUT", "routeKey": "", "status": 404.0}},
		},
		{
			name: "multi-value headers warn", method: "GET", target: "/",
			resp: events.APIGatewayV2HTTPResponse{MultiValueHeaders: map[string][]string{"B": {"1"}, "A": {"2"}}},
			want: []map[string]any{
				{"level": "WARN", "names": []any{"A", "B"}},
				{"level": "INFO", "msg": "request", "status": 200.0},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logs logtest.Buffer
			g := newGateway(t, &fake{resp: tt.resp}, apigw.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
			serve(g, httptest.NewRequest(tt.method, tt.target, nil))
			recs := logs.Records(t)
			if len(recs) != len(tt.want) {
				t.Fatalf("%d log records, want %d:\n%s", len(recs), len(tt.want), logs.String())
			}
			for i, want := range tt.want {
				for k, v := range want {
					if !reflect.DeepEqual(recs[i][k], v) {
						t.Errorf("record %d: %s = %#v, want %#v", i, k, recs[i][k], v)
					}
				}
			}
		})
	}
}

func TestDefaultRequestIDs(t *testing.T) {
	t.Parallel()
	f := &fake{}
	g, err := apigw.New(testRoutes, f.handle)
	if err != nil {
		t.Fatal(err)
	}
	shape := regexp.MustCompile(`^[A-Za-z0-9+/]{15}=$`)
	seen := map[string]bool{}
	for range 100 {
		w := serve(g, httptest.NewRequest("GET", "/", nil))
		id := w.Header().Get("Apigw-Requestid")
		if !shape.MatchString(id) || seen[id] {
			t.Fatalf("request ID %q: not API Gateway's shape, or repeated", id)
		}
		seen[id] = true
	}
	for _, ev := range f.events() {
		if !seen[ev.RequestContext.RequestID] {
			t.Errorf("event request ID %q is not one the responses carried", ev.RequestContext.RequestID)
		}
	}
	// An unmatched request has an ID too.
	w := serve(g, httptest.NewRequest("GET", "/nope", nil))
	if id := w.Header().Get("Apigw-Requestid"); !shape.MatchString(id) || seen[id] {
		t.Errorf("404 request ID %q", id)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	ok := func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{}, nil
	}
	r := func(method, path string) apigw.Route { return apigw.Route{Method: method, Path: path} }
	tests := []struct {
		name    string
		routes  []apigw.Route
		h       apigw.Handler
		opts    []apigw.Option
		wantErr []string // substrings; none: New succeeds
	}{
		{name: "valid", routes: []apigw.Route{r("GET", "/"), r("GET", "/a/{b}/c.d_e-f"), r("ANY", "/a/{b}/{rest+}"), r("POST", "/a/{b}"), r("ANY", "/a/{b}")}, h: ok},
		{name: "nil handler", routes: []apigw.Route{r("GET", "/")}, wantErr: []string{"nil handler"}},
		{name: "no routes", h: ok, wantErr: []string{"no routes"}},
		{name: "body limit", routes: []apigw.Route{r("GET", "/")}, h: ok, opts: []apigw.Option{apigw.WithMaxBodyBytes(0)}, wantErr: []string{"max body size 0"}},
		{name: "duplicate", routes: []apigw.Route{r("GET", "/a"), r("GET", "/a")}, h: ok, wantErr: []string{`"GET /a" duplicates "GET /a"`}},
		{name: "duplicate up to parameter names", routes: []apigw.Route{r("GET", "/o/{id}"), r("GET", "/o/{orderId}")}, h: ok,
			wantErr: []string{`"GET /o/{orderId}" duplicates "GET /o/{id}"`}},
		{name: "duplicate greedy", routes: []apigw.Route{r("ANY", "/{a+}"), r("ANY", "/{b+}")}, h: ok, wantErr: []string{"duplicates"}},
		{name: "unknown method", routes: []apigw.Route{r("FETCH", "/")}, h: ok, wantErr: []string{`"FETCH /": method must be one of`}},
		{name: "lowercase method", routes: []apigw.Route{r("get", "/")}, h: ok, wantErr: []string{"method must be one of"}},
		{name: "relative path", routes: []apigw.Route{r("GET", "orders")}, h: ok, wantErr: []string{"must start with /"}},
		{name: "empty path", routes: []apigw.Route{r("GET", "")}, h: ok, wantErr: []string{"must start with /"}},
		{name: "trailing slash", routes: []apigw.Route{r("GET", "/orders/")}, h: ok, wantErr: []string{"empty path segment"}},
		{name: "double slash", routes: []apigw.Route{r("GET", "/a//b")}, h: ok, wantErr: []string{"empty path segment"}},
		{name: "partial parameter", routes: []apigw.Route{r("GET", "/a{b}")}, h: ok, wantErr: []string{`segment "a{b}"`}},
		{name: "unclosed parameter", routes: []apigw.Route{r("GET", "/{b")}, h: ok, wantErr: []string{`segment "{b"`}},
		{name: "query in path", routes: []apigw.Route{r("GET", "/a?b")}, h: ok, wantErr: []string{`segment "a?b"`}},
		{name: "escape in path", routes: []apigw.Route{r("GET", "/a%20b")}, h: ok, wantErr: []string{`segment "a%20b"`}},
		{name: "space in path", routes: []apigw.Route{r("GET", "/a b")}, h: ok, wantErr: []string{`segment "a b"`}},
		{name: "empty parameter name", routes: []apigw.Route{r("GET", "/{}")}, h: ok, wantErr: []string{`parameter name ""`}},
		{name: "empty greedy name", routes: []apigw.Route{r("GET", "/{+}")}, h: ok, wantErr: []string{`parameter name ""`}},
		{name: "bad parameter name", routes: []apigw.Route{r("GET", "/{a/b}")}, h: ok, wantErr: []string{"segment"}},
		{name: "nested braces", routes: []apigw.Route{r("GET", "/{{a}}")}, h: ok, wantErr: []string{`parameter name "{a}"`}},
		{name: "greedy not last", routes: []apigw.Route{r("GET", "/{a+}/b")}, h: ok, wantErr: []string{"must be the last segment"}},
		{name: "repeated parameter", routes: []apigw.Route{r("GET", "/{a}/{a+}")}, h: ok, wantErr: []string{`parameter "a" appears twice`}},
		{name: "every problem at once", routes: []apigw.Route{r("get", "/"), r("GET", "x")}, wantErr: []string{"nil handler", "method must be", "must start with /"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, err := apigw.New(tt.routes, tt.h, tt.opts...)
			if len(tt.wantErr) == 0 {
				if err != nil || g == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || g != nil {
				t.Fatalf("New = %v, %v; want an error", g, err)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestRouteKey(t *testing.T) {
	t.Parallel()
	if got := (apigw.Route{Method: "GET", Path: "/orders/{id}"}).Key(); got != "GET /orders/{id}" {
		t.Errorf("Key() = %q", got)
	}
}

// FuzzServeHTTP feeds arbitrary requests, and arbitrary handler responses,
// through the gateway: it must never panic, must answer with a status in
// 200..599, and must invoke the handler only with a configured route.
func FuzzServeHTTP(f *testing.F) {
	f.Add("GET", "/orders/ord-1", []byte(nil), "Accept", "application/json", 200, `{"ok":true}`, false)
	f.Add("POST", "/orders?x=1&x=2", []byte(`{"customerId":"c"}`), "Content-Type", "application/json", 202, "", false)
	f.Add("GET", "/orders/a%2Fb%zz", []byte{}, "Cookie", "a=1; b=2", 0, "", false)
	f.Add("PUT", "/files/a/b/c", []byte{0xff, 0xfe}, "X-Forwarded-For", "1.2.3.4", 204, "/wAB", true)
	f.Add("DELETE", "/orders/x", []byte("x"), "", "", -5, "%%%", true)
	f.Add("GET", "/", bytes.Repeat([]byte("a"), 100), "Content-Length", "1", 1000, "", false)
	f.Add("get", "//orders/../orders", []byte(nil), "host", "evil", 599, "ok", false)
	f.Add("OPTIONS", "*", []byte(nil), "X", "\r\n", 101, "", false)
	f.Add("GET", "http://other.example/orders/x?y", []byte(nil), "apigw-requestid", "forged", 302, "aGk=", true)

	const limit = 64
	keys := map[string]string{} // route key -> method
	for _, r := range testRoutes {
		keys[r.Key()] = r.Method
	}
	f.Fuzz(func(t *testing.T, method, target string, body []byte, hName, hValue string, status int, respBody string, respB64 bool) {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return // net/http rejects such a target before any handler runs
		}
		h := &fake{resp: events.APIGatewayV2HTTPResponse{
			StatusCode:      status,
			Headers:         map[string]string{hName: hValue},
			Body:            respBody,
			IsBase64Encoded: respB64,
		}}
		g, err := apigw.New(testRoutes, h.handle,
			apigw.WithMaxBodyBytes(limit),
			apigw.WithRequestIDs(func() string { return testID }))
		if err != nil {
			t.Fatal(err)
		}
		r := &http.Request{
			Method:        method,
			URL:           u,
			RequestURI:    target,
			Proto:         "HTTP/1.1",
			ProtoMajor:    1,
			ProtoMinor:    1,
			Header:        http.Header{hName: {hValue}},
			Host:          u.Host,
			RemoteAddr:    "192.0.2.1:1234",
			ContentLength: int64(len(body)),
			Body:          io.NopCloser(bytes.NewReader(body)),
		}
		w := serve(g, r)

		if w.Code < 200 || w.Code > 599 {
			t.Fatalf("status %d", w.Code)
		}
		if id := w.Header().Get("Apigw-Requestid"); id != testID {
			t.Errorf("apigw-requestid %q", id)
		}
		evs := h.events()
		if len(evs) == 0 {
			if w.Code != 404 && w.Code != 413 {
				t.Fatalf("handler not called but status %d", w.Code)
			}
			if w.Code == 413 && len(body) <= limit {
				t.Fatalf("413 for %d bytes", len(body))
			}
			return
		}
		if len(evs) > 1 {
			t.Fatalf("handler called %d times", len(evs))
		}
		ev := evs[0]
		routeMethod, ok := keys[ev.RouteKey]
		if !ok || ev.RequestContext.RouteKey != ev.RouteKey {
			t.Fatalf("route key %q / %q is not a configured route", ev.RouteKey, ev.RequestContext.RouteKey)
		}
		if routeMethod != method && routeMethod != "ANY" {
			t.Fatalf("%s request routed to %q", method, ev.RouteKey)
		}
		if len(body) > limit {
			t.Fatalf("handler got a %d-byte body over the %d limit", len(body), limit)
		}
		got := []byte(ev.Body)
		if ev.IsBase64Encoded {
			if got, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
				t.Fatalf("event body is not base64: %v", err)
			}
		} else if !utf8.ValidString(ev.Body) {
			t.Fatalf("event body %q is neither UTF-8 nor base64", ev.Body)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("event body %q, sent %q", got, body)
		}
		if ev.RawPath != u.EscapedPath() || ev.RequestContext.HTTP.Path != u.Path {
			t.Fatalf("rawPath %q, path %q for %q", ev.RawPath, ev.RequestContext.HTTP.Path, target)
		}
		for name := range ev.Headers {
			if name != strings.ToLower(name) || name == "cookie" {
				t.Fatalf("header name %q in the event", name)
			}
		}
		for name, v := range ev.PathParameters {
			if v == "" {
				t.Fatalf("empty path parameter %q", name)
			}
		}

		want := status
		_, b64err := base64.StdEncoding.DecodeString(respBody)
		switch {
		case status == 0:
			want = 200
		case status < 200 || status > 599:
			want = 502
		}
		if respB64 && b64err != nil && want != 502 {
			want = 502
		}
		if w.Code != want {
			t.Fatalf("status %d, want %d for the handler's %d", w.Code, want, status)
		}
	})
}
