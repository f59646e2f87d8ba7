package opsclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// SigningService is the SigV4 service name of API Gateway's invoke API.
const SigningService = "execute-api"

// MaxLimit is the largest page GET /ops/orders serves.
const MaxLimit = 100

// DefaultTimeout bounds one request when Options.HTTPClient is nil.
const DefaultTimeout = 30 * time.Second

// Sentinels an *APIError matches with errors.Is.
var (
	// ErrNotFound: the API has no such order.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the order's state does not allow the action, or another
	// operator changed it first.
	ErrConflict = errors.New("conflict")
)

// APIError is an error answer of the API or of API Gateway in front of it.
type APIError struct {
	Method, Path string
	StatusCode   int
	// Problem is the API's RFC 9457 body, when it sent one.
	Problem *api.Problem
	// Message is API Gateway's {"message"}, or the start of a body that was
	// neither.
	Message string
	// RequestID names the request for a support case: the problem's, else
	// API Gateway's apigw-requestid header.
	RequestID string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %d %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode))
	switch {
	case e.Problem != nil && e.Problem.Detail != "":
		fmt.Fprintf(&b, ": %s", e.Problem.Detail)
	case e.Problem != nil && e.Problem.Title != "":
		fmt.Fprintf(&b, ": %s", e.Problem.Title)
	case e.Message != "":
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request ID %s)", e.RequestID)
	}
	return sanitize(b.String(), 1000)
}

// Is matches ErrConflict for any 409, and ErrNotFound only for a 404 the API
// itself answered with a problem: API Gateway's bare 404 means the URL has
// no such route (a wrong endpoint), not that the order is missing.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound && e.Problem != nil
	}
	return false
}

// Options configures a Client.
type Options struct {
	// HTTPClient sends the requests; nil means one with DefaultTimeout.
	// Redirects are never followed either way.
	HTTPClient *http.Client
	// Credentials, when set, sign every request with SigV4 for execute-api
	// in Region. Nil sends requests unsigned (--no-sign, for an API without
	// IAM authorization).
	Credentials aws.CredentialsProvider
	Region      string
	// Now is the signing clock; nil means time.Now.
	Now func() time.Time
}

// Client calls the operators' routes of the HTTP API: the listing by state
// and the view of any order under /ops/orders, and retry and cancel.
type Client struct {
	base   *url.URL
	http   *http.Client
	creds  aws.CredentialsProvider
	region string
	signer *v4.Signer
	now    func() time.Time
}

// NewClient returns a client of the API at baseURL, an absolute http(s) URL
// with an optional path prefix (a stage) and no query. Signed requests go
// over https only, except to loopback.
func NewClient(baseURL string, opts Options) (*Client, error) {
	u, err := parseEndpoint(baseURL)
	if err != nil {
		return nil, err
	}
	if opts.Credentials != nil {
		if opts.Region == "" {
			return nil, errors.New("signing requests needs a region")
		}
		if u.Scheme != "https" && !IsLoopback(u.Hostname()) {
			return nil, fmt.Errorf("endpoint %s: refusing to send signed requests over plain http; use https", u.Redacted())
		}
	}
	hc := &http.Client{Timeout: DefaultTimeout}
	if opts.HTTPClient != nil {
		c := *opts.HTTPClient
		hc = &c
	}
	// A redirect would send the request, and its signature, somewhere the
	// operator did not name; the API never redirects.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Client{base: u, http: hc, creds: opts.Credentials, region: opts.Region, signer: v4.NewSigner(), now: now}, nil
}

// ListParams selects a page of GET /ops/orders.
type ListParams struct {
	State workflow.ProcessState
	// Limit is the page size, 1..MaxLimit; 0 leaves it to the API.
	Limit int
	// Cursor is a previous page's NextCursor; empty for the first page.
	Cursor string
}

// ListOrders fetches one page of the orders in a state, every caller's.
func (c *Client) ListOrders(ctx context.Context, p ListParams) (Page, error) {
	if _, ok := workflow.ParseProcessState(string(p.State)); !ok {
		return Page{}, fmt.Errorf("list orders: unknown state %q", p.State)
	}
	if p.Limit < 0 || p.Limit > MaxLimit {
		return Page{}, fmt.Errorf("list orders: limit %d outside 1..%d", p.Limit, MaxLimit)
	}
	q := url.Values{"state": {string(p.State)}}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		if err := api.CheckCursor(p.Cursor); err != nil {
			return Page{}, fmt.Errorf("list orders: cursor: %w", err)
		}
		q.Set("cursor", p.Cursor)
	}
	body, err := c.do(ctx, http.MethodGet, []string{"ops", "orders"}, q, http.StatusOK)
	if err != nil {
		return Page{}, err
	}
	return decodePage(body)
}

// Workflows fetches the workflow versions and the open orders of each.
func (c *Client) Workflows(ctx context.Context) (Workflows, error) {
	body, err := c.do(ctx, http.MethodGet, []string{"ops", "workflows"}, nil, http.StatusOK)
	if err != nil {
		return Workflows{}, err
	}
	return decodeWorkflows(body)
}

// GetOrder fetches any caller's order with its step history and owner.
func (c *Client) GetOrder(ctx context.Context, orderID string) (Order, error) {
	o, err := orderCall(ctx, c, orderID, http.MethodGet, []string{"ops", "orders", orderID}, http.StatusOK, decodeOrder)
	if err != nil {
		return Order{}, err
	}
	if o.OrderID != orderID {
		return Order{}, fmt.Errorf("asked for order %s, the API answered with %s", orderID, o.OrderID)
	}
	return o, nil
}

// Retry resubmits an order in Error from its failed step, or one in
// CompensationFailed from its failed compensation.
func (c *Client) Retry(ctx context.Context, orderID string) (Accepted, error) {
	return c.act(ctx, orderID, "retry")
}

// Cancel compensates an order still in flight.
func (c *Client) Cancel(ctx context.Context, orderID string) (Accepted, error) {
	return c.act(ctx, orderID, "cancel")
}

func (c *Client) act(ctx context.Context, orderID, action string) (Accepted, error) {
	a, err := orderCall(ctx, c, orderID, http.MethodPost, []string{"orders", orderID, action}, http.StatusAccepted, decodeAccepted)
	if err != nil {
		return Accepted{}, err
	}
	if a.OrderID != orderID {
		return Accepted{}, fmt.Errorf("%s of order %s: the API answered for order %s", action, orderID, a.OrderID)
	}
	return a, nil
}

// orderCall sends a request about one order, after checking its ID, and
// decodes the answer with the wanted status. The caller checks that the
// answer names that order, in its own words.
func orderCall[T any](ctx context.Context, c *Client, orderID, method string, segments []string, want int, decode func([]byte) (T, error)) (T, error) {
	var zero T
	if err := checkOrderID(orderID); err != nil {
		return zero, err
	}
	body, err := c.do(ctx, method, segments, nil, want)
	if err != nil {
		return zero, err
	}
	return decode(body)
}

func checkOrderID(id string) error {
	if !message.ValidOrderID(id) {
		return fmt.Errorf("order ID %q must be 1..64 characters of A-Z, a-z, 0-9 or -", truncate(id, 80))
	}
	return nil
}

// do sends a request without a body and returns the body of an answer with
// the wanted status; any other status becomes an *APIError.
func (c *Client) do(ctx context.Context, method string, segments []string, query url.Values, want int) ([]byte, error) {
	u := *c.base
	for _, s := range segments {
		u.Path += "/" + s
		u.RawPath += "/" + url.PathEscape(s)
	}
	u.RawQuery = query.Encode()
	display := u.EscapedPath()
	if u.RawQuery != "" {
		display += "?" + u.RawQuery
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("%s %s: build request: %w", method, display, err)
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", "sasctl")
	if err := c.sign(ctx, req, nil); err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, display, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, display, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read %d response: %w", method, display, resp.StatusCode, err)
	}
	if len(body) > MaxResponseBytes {
		return nil, fmt.Errorf("%s %s: %d response body exceeds %d bytes", method, display, resp.StatusCode, MaxResponseBytes)
	}
	if resp.StatusCode != want {
		return nil, newAPIError(method, display, resp, body)
	}
	if !isJSON(resp.Header.Get("Content-Type")) {
		return nil, fmt.Errorf("%s %s: %d response has Content-Type %q, not JSON", method, display, resp.StatusCode, truncate(resp.Header.Get("Content-Type"), 80))
	}
	return body, nil
}

// sign adds a SigV4 Authorization for execute-api over the payload's
// SHA-256, when the client signs.
func (c *Client) sign(ctx context.Context, req *http.Request, payload []byte) error {
	if c.creds == nil {
		return nil
	}
	creds, err := c.creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("retrieve AWS credentials to sign the request: %w", err)
	}
	sum := sha256.Sum256(payload)
	if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), SigningService, c.region, c.now()); err != nil {
		return fmt.Errorf("sign request: %w", err)
	}
	return nil
}

func newAPIError(method, path string, resp *http.Response, body []byte) *APIError {
	e := &APIError{Method: method, Path: path, StatusCode: resp.StatusCode}
	e.Problem, e.Message = decodeErrorBody(body)
	if e.Problem == nil && e.Message == "" && len(body) > 0 {
		// An HTML error page or plain text: quote its start.
		e.Message = truncate(string(body), 200)
	}
	e.RequestID = resp.Header.Get("Apigw-Requestid")
	if e.Problem != nil && e.Problem.RequestID != "" {
		e.RequestID = e.Problem.RequestID
	}
	return e
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// parseEndpoint checks an API base URL and drops a trailing slash.
func parseEndpoint(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("endpoint URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("endpoint %q: scheme must be http or https", raw)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("endpoint %q: no host", raw)
	case u.User != nil:
		return nil, fmt.Errorf("endpoint %s: must not carry user info", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, fmt.Errorf("endpoint %q: must not have a query or fragment", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = strings.TrimRight(u.EscapedPath(), "/")
	return u, nil
}

// IsLoopback reports whether host (a URL's Hostname) names this machine:
// the local stack, which needs signed requests as API Gateway does but
// verifies no signature, so plain http is fine and any credentials do.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// RegionFromHost returns the region in an execute-api host name,
// abc123.execute-api.eu-west-1.amazonaws.com, or "" for any other host (a
// custom domain names none).
func RegionFromHost(host string) string {
	labels := strings.Split(strings.ToLower(host), ".")
	for i := 0; i+3 < len(labels); i++ {
		if labels[i] == "execute-api" && labels[i+2] == "amazonaws" && isRegionName(labels[i+1]) {
			return labels[i+1]
		}
	}
	return ""
}

func isRegionName(s string) bool {
	if len(s) < 3 || len(s) > 32 || strings.Count(s, "-") < 2 {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' }) < 0
}
