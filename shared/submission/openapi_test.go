package submission

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sasflow/sas/shared/admission"
	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// The API's OpenAPI document (api.OpenAPI) and the handler are held to each
// other here: the routes, every documented (route, status) pair reached on
// the handler with a body that validates against the documented schema and
// the documented headers, every example against its schema, every problem
// type of problem.go.
//
// The document's response schemas are open, as clients must ignore members
// they do not know; the test validates against a strict copy, in which every
// object schema of components/schemas with properties refuses any other, so
// a member the handler adds without documenting it fails here.

// openAPIURL is where the document is registered with the schema compiler.
const openAPIURL = "https://sasflow.dev/openapi.json"

// otherMethods is the path item's extension documenting what any method
// the resource does not take gets, and otherPaths the document's
// documenting what any path it does not have gets: both through the
// catch-all route (DefaultRoute).
const (
	otherMethods = "x-sasflow-other-methods"
	otherPaths   = "x-sasflow-other-paths"
)

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

type openAPIDoc struct {
	root map[string]any // the strict copy
	c    *jsonschema.Compiler

	mu      sync.Mutex
	schemas map[string]*jsonschema.Schema
}

var (
	docOnce sync.Once
	docVal  *openAPIDoc
	docErr  error
)

func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	docOnce.Do(func() {
		raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(api.OpenAPI))
		if err != nil {
			docErr = fmt.Errorf("parse api.OpenAPI: %w", err)
			return
		}
		root, ok := raw.(map[string]any)
		if !ok {
			docErr = errors.New("api.OpenAPI is not a JSON object")
			return
		}
		if v := root["openapi"]; v != "3.1.0" {
			docErr = fmt.Errorf("openapi = %v, want 3.1.0", v)
			return
		}
		strict := deepCopy(root).(map[string]any)
		if comps, ok := jsonAt(strict, "/components/schemas").(map[string]any); ok {
			closeObjects(comps)
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat()
		if err := c.AddResource(openAPIURL, strict); err != nil {
			docErr = err
			return
		}
		docVal = &openAPIDoc{root: strict, c: c, schemas: map[string]*jsonschema.Schema{}}
	})
	if docErr != nil {
		t.Fatal(docErr)
	}
	return docVal
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}

// closeObjects makes every schema under v that lists properties refuse any
// other, unless it says otherwise.
func closeObjects(v any) {
	switch v := v.(type) {
	case map[string]any:
		_, props := v["properties"].(map[string]any)
		_, ap := v["additionalProperties"]
		_, up := v["unevaluatedProperties"]
		if props && !ap && !up {
			v["additionalProperties"] = false
		}
		for _, e := range v {
			closeObjects(e)
		}
	case []any:
		for _, e := range v {
			closeObjects(e)
		}
	}
}

// escape is a JSON pointer token for s (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func unescape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// jsonAt is the value at a JSON pointer of v, or nil.
func jsonAt(v any, ptr string) any {
	if ptr == "" {
		return v
	}
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		switch c := v.(type) {
		case map[string]any:
			v = c[unescape(tok)]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

// resolve follows a local $ref at ptr, if there is one: the object and
// where it is.
func (d *openAPIDoc) resolve(t *testing.T, ptr string) (map[string]any, string) {
	t.Helper()
	for range 10 {
		obj, ok := jsonAt(d.root, ptr).(map[string]any)
		if !ok {
			t.Fatalf("no object at %s", ptr)
		}
		ref, ok := obj["$ref"].(string)
		if !ok {
			return obj, ptr
		}
		if !strings.HasPrefix(ref, "#/") {
			t.Fatalf("%s: $ref %q is not local", ptr, ref)
		}
		ptr = strings.TrimPrefix(ref, "#")
	}
	t.Fatalf("$ref loop at %s", ptr)
	return nil, ""
}

// schema compiles the schema at ptr.
func (d *openAPIDoc) schema(t *testing.T, ptr string) *jsonschema.Schema {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.schemas[ptr]; ok {
		return s
	}
	s, err := d.c.Compile(openAPIURL + "#" + ptr)
	if err != nil {
		t.Fatalf("compile schema %s: %v", ptr, err)
	}
	d.schemas[ptr] = s
	return s
}

// validate checks a JSON text against the schema at ptr.
func (d *openAPIDoc) validate(t *testing.T, ptr, text string) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return d.schema(t, ptr).Validate(v)
}

// operations lists the document's operations as "METHOD /path", with
// their pointers.
func (d *openAPIDoc) operations(t *testing.T) map[string]string {
	t.Helper()
	paths, ok := d.root["paths"].(map[string]any)
	if !ok {
		t.Fatal("the document has no paths")
	}
	ops := map[string]string{}
	for path, item := range paths {
		item, ok := item.(map[string]any)
		if !ok {
			t.Fatalf("path %s is not an object", path)
		}
		for _, m := range httpMethods {
			if _, ok := item[m]; ok {
				ops[strings.ToUpper(m)+" "+path] = "/paths/" + escape(path) + "/" + m
			}
		}
	}
	return ops
}

// pathMethods lists the methods the document gives a path, as Allow does.
func (d *openAPIDoc) pathMethods(path string) []string {
	item, _ := jsonAt(d.root, "/paths/"+escape(path)).(map[string]any)
	var out []string
	for _, m := range httpMethods {
		if _, ok := item[m]; ok {
			out = append(out, strings.ToUpper(m))
		}
	}
	sort.Strings(out)
	return out
}

// pairKey names a (route, status) pair; method "*" is any method the path
// does not take (its x-sasflow-other-methods), and path "*" any path the
// document does not have (x-sasflow-other-paths).
func pairKey(method, path string, status int) string {
	return fmt.Sprintf("%s %s %d", method, path, status)
}

// documentedPairs lists every (route, status) pair of the document, with
// the pointer of its response.
func (d *openAPIDoc) documentedPairs(t *testing.T) map[string]string {
	t.Helper()
	pairs := map[string]string{}
	add := func(method, path, responsesPtr string) {
		responses, ok := jsonAt(d.root, responsesPtr).(map[string]any)
		if !ok || len(responses) == 0 {
			t.Fatalf("%s %s: no responses at %s", method, path, responsesPtr)
		}
		for code := range responses {
			status, err := strconv.Atoi(code)
			if err != nil {
				t.Fatalf("%s %s: response %q is not a status code (no default or ranges: every answer is documented)", method, path, code)
			}
			pairs[pairKey(method, path, status)] = responsesPtr + "/" + code
		}
	}
	for op, ptr := range d.operations(t) {
		method, path, _ := strings.Cut(op, " ")
		add(method, path, ptr+"/responses")
	}
	for path, item := range d.root["paths"].(map[string]any) {
		if _, ok := item.(map[string]any)[otherMethods]; ok {
			add("*", path, "/paths/"+escape(path)+"/"+otherMethods+"/responses")
		}
	}
	if _, ok := d.root[otherPaths]; ok {
		add("*", "*", "/"+otherPaths+"/responses")
	}
	return pairs
}

func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	ops := d.operations(t)
	served := map[string]Route{}
	for _, r := range Routes() {
		served[r.Method+" "+r.Path] = r
	}
	for op, ptr := range ops {
		r, ok := served[op]
		if !ok {
			t.Errorf("the document has %s, which the handler does not serve (routes.go)", op)
			continue
		}
		tags, _ := jsonAt(d.root, ptr+"/tags").([]any)
		want := "clients"
		if r.Operator {
			want = "operators"
		}
		if len(tags) != 1 || tags[0] != want {
			t.Errorf("%s: tags %v, want [%s]", op, tags, want)
		}
		if id, _ := jsonAt(d.root, ptr+"/operationId").(string); id == "" {
			t.Errorf("%s has no operationId", op)
		}
	}
	for op := range served {
		if _, ok := ops[op]; !ok {
			t.Errorf("the handler serves %s (routes.go), which the document lacks", op)
		}
	}
	// The catch-all route: the document says what a path it does not have
	// gets, and names the route.
	if _, ok := d.root[otherPaths]; !ok || DefaultRoute != "$default" ||
		!strings.Contains(jsonAt(d.root, "/info/description").(string), "catch-all route ("+DefaultRoute+")") {
		t.Errorf("the document does not document the catch-all route %s (%s, info.description)", DefaultRoute, otherPaths)
	}
	// Every path of the document documents what other methods get, and
	// every path with {id} takes the order ID parameter.
	for path := range d.root["paths"].(map[string]any) {
		item := jsonAt(d.root, "/paths/"+escape(path)).(map[string]any)
		if _, ok := item[otherMethods]; !ok {
			t.Errorf("path %s does not document other methods (%s)", path, otherMethods)
		}
		if strings.Contains(path, "{id}") {
			params, _ := item["parameters"].([]any)
			if len(params) != 1 || jsonAt(params[0], "/$ref") != "#/components/parameters/OrderId" {
				t.Errorf("path %s: parameters %v, want the OrderId parameter", path, params)
			}
		}
	}
	// Every route is signed with SigV4.
	if sec := jsonAt(d.root, "/components/securitySchemes/sigv4/x-amazon-apigateway-authtype"); sec != "awsSigv4" {
		t.Errorf("sigv4 scheme's x-amazon-apigateway-authtype = %v, want awsSigv4", sec)
	}
	if sec, _ := jsonAt(d.root, "/security/0").(map[string]any); len(sec) != 1 || sec["sigv4"] == nil {
		t.Errorf("security = %v, want sigv4 on every route", jsonAt(d.root, "/security"))
	}
}

// bodyCheck says what a POST /orders case's body is to the document's
// request schema.
type bodyCheck int

const (
	bodyUnchecked bodyCheck = iota
	bodyConforms            // the handler takes it, so the schema must
	bodyBreaks              // the handler refuses it, so the schema must
)

// apiCase is one request that reaches one documented (route, status) pair.
type apiCase struct {
	method, path string // the document's; method "*" for a method path does not take
	status       int
	name         string
	req          events.APIGatewayV2HTTPRequest
	hook         fault
	wrap         func(Store) Store
	shed         *admission.Decision
	prep         func(t *testing.T, f *fixture)
	body         bodyCheck
	// contains and header, when set, are in the answer: they show the
	// case reaches what it is for (a next page, the owner, a replay).
	contains, header string
}

// failingLists is a store whose listings and counts fail: memstore's Fault
// hook does not see them.
type failingLists struct{ Store }

var errStoreDown = errors.New("store down")

func (failingLists) ListByState(context.Context, workflow.ProcessState, int, string) (statestore.Page, error) {
	return statestore.Page{}, errStoreDown
}

func (failingLists) ListByOwner(context.Context, string, int, string) (statestore.Page, error) {
	return statestore.Page{}, errStoreDown
}

func (failingLists) CountOpen(context.Context, int) (statestore.OpenCount, error) {
	return statestore.OpenCount{}, errStoreDown
}

func withQuery(req events.APIGatewayV2HTTPRequest, q string) events.APIGatewayV2HTTPRequest {
	req.RawQueryString = q
	return req
}

func apiCases() []apiCase {
	const orderB = "0e7a4b1c-9d3f-4a2e-8b6c-5f1d2e3a4b5c"
	get := func(path string) events.APIGatewayV2HTTPRequest { return request("GET", path, nil, "") }
	storeDown := func(method string) fault { return failing(failure{method: method, err: errStoreDown}) }
	put := func(sts ...workflow.State) func(*testing.T, *fixture) {
		return func(_ *testing.T, f *fixture) {
			for _, st := range sts {
				f.put(st)
			}
		}
	}
	// created writes the records with their orders, of callerA.
	created := func(sts ...workflow.State) func(*testing.T, *fixture) {
		return func(t *testing.T, f *fixture) {
			for _, st := range sts {
				if err := f.store.CreateOrder(context.Background(), workflow.Order{OrderID: st.OrderID, Owner: ownerA.Name, OwnerID: ownerA.ID, CreatedAt: st.CreatedAt}, st); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// submitted orders get the IDs submittedID gives, so a request can
	// name one before it exists.
	submitted := func(n int) func(*testing.T, *fixture) {
		return func(t *testing.T, f *fixture) {
			next := 0
			f.h.newID = func(string, string) string { next++; return submittedID(next - 1) }
			for i := range n {
				if resp := f.do(t, postOrder(validBody, IdempotencyKeyHeader, "k-"+strconv.Itoa(i))); resp.StatusCode != 202 {
					t.Fatalf("submit: %d %s", resp.StatusCode, resp.Body)
				}
			}
		}
	}
	// undeliverable submits an order whose first step's queue refuses it,
	// with what SQS answers a role that lost its permission.
	undeliverable := func(t *testing.T, f *fixture) {
		id := readAccepted(t, f.do(t, postOrder(validBody))).OrderID
		m := workflow.Machine{Def: workflow.Reference(), Policy: workflow.DefaultPolicy()}
		c := m.DispatchFailed(f.state(t, id), testNow, "AccessDenied: User: arn:aws:sts::444455556666:assumed-role/s/x is not authorized")
		if _, err := f.store.Apply(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	processing := at(orderA, workflow.Processing, 1, 1)
	inError := at(orderA, workflow.Error, 1, 2)
	otherError := at(orderB, workflow.Error, 0, 1)
	otherError.UpdatedAt = inError.UpdatedAt.Add(time.Second)
	processed := at(orderA, workflow.Processed, 1, 1)
	shed := &admission.Decision{Admit: false, RetryAfter: 5 * time.Second, Queue: "agent-reserve-inventory", Depth: 9000}
	tooLarge := validBody + strings.Repeat(" ", DefaultMaxBodyBytes+1-len(validBody))

	cases := []apiCase{
		// POST /orders
		{method: "POST", path: "/orders", status: 202, name: "new order", req: postOrder(validBody), body: bodyConforms},
		{method: "POST", path: "/orders", status: 202, name: "with clientId and key", body: bodyConforms,
			req: postOrder(`{"customerId":"c-42","clientId":"shop-web","currency":"EUR","items":[{"sku":"PEN","quantity":1,"unitPriceCents":0}]}`, IdempotencyKeyHeader, "order-0001")},
		{method: "POST", path: "/orders", status: 202, name: "idempotent replay", prep: submitted(1),
			req: postOrder(validBody, IdempotencyKeyHeader, "k-0"), body: bodyConforms, header: ReplayedHeader},
		{method: "POST", path: "/orders", status: 400, name: "not JSON", req: postOrder(`{"customerId":`), body: bodyBreaks},
		{method: "POST", path: "/orders", status: 400, name: "unknown member", body: bodyBreaks,
			req: postOrder(`{"customerId":"c-42","currency":"EUR","items":[{"sku":"PEN","quantity":1,"unitPriceCents":1}],"coupon":"X"}`)},
		{method: "POST", path: "/orders", status: 400, name: "fractional quantity", body: bodyBreaks,
			req: postOrder(`{"customerId":"c-42","currency":"EUR","items":[{"sku":"PEN","quantity":1.5,"unitPriceCents":1}]}`)},
		{method: "POST", path: "/orders", status: 400, name: "bad Idempotency-Key", req: postOrder(validBody, IdempotencyKeyHeader, "")},
		{method: "POST", path: "/orders", status: 403, name: "no identity", req: as(postOrder(validBody), "")},
		{method: "POST", path: "/orders", status: 413, name: "body too large", req: postOrder(tooLarge)},
		{method: "POST", path: "/orders", status: 415, name: "text/plain", req: postOrder(validBody, "content-type", "text/plain")},
		{method: "POST", path: "/orders", status: 422, name: "invalid fields", body: bodyBreaks,
			req: postOrder(`{"customerId":"c 42","currency":"eur","items":[{"sku":"PEN","quantity":0,"unitPriceCents":-1}]}`)},
		{method: "POST", path: "/orders", status: 422, name: "too many items", body: bodyBreaks,
			req: postOrder(`{"customerId":"c-42","currency":"EUR","items":[` + strings.Repeat(`{"sku":"PEN","quantity":1,"unitPriceCents":1},`, MaxItems) + `{"sku":"PEN","quantity":1,"unitPriceCents":1}]}`)},
		{method: "POST", path: "/orders", status: 422, name: "Idempotency-Key reused", prep: submitted(1), body: bodyConforms,
			req: postOrder(`{"customerId":"c-43","currency":"EUR","items":[{"sku":"PEN","quantity":1,"unitPriceCents":1}]}`, IdempotencyKeyHeader, "k-0")},
		{method: "POST", path: "/orders", status: 429, name: "shed", shed: shed, req: postOrder(validBody), body: bodyConforms},
		{method: "POST", path: "/orders", status: 500, name: "store down", hook: storeDown("CreateOrder"), req: postOrder(validBody), body: bodyConforms},

		// GET /orders
		{method: "GET", path: "/orders", status: 200, name: "a page and a next", prep: submitted(2), req: withQuery(get("/orders"), "limit=1"), contains: `"nextCursor"`},
		{method: "GET", path: "/orders", status: 200, name: "no orders", req: get("/orders")},
		{method: "GET", path: "/orders", status: 200, name: "a failure's reason", prep: undeliverable, req: get("/orders"), contains: `"reason":"dispatch-failed"`},
		{method: "GET", path: "/orders", status: 400, name: "state", req: withQuery(get("/orders"), "state=Error")},
		{method: "GET", path: "/orders", status: 400, name: "bad cursor", req: withQuery(get("/orders"), "cursor=forged")},
		{method: "GET", path: "/orders", status: 403, name: "no identity", req: as(get("/orders"), "")},
		{method: "GET", path: "/orders", status: 500, name: "store down", wrap: func(s Store) Store { return failingLists{s} }, req: get("/orders")},

		// GET /orders/{id}
		{method: "GET", path: "/orders/{id}", status: 200, name: "own order", prep: put(processing), req: get("/orders/" + orderA)},
		{method: "GET", path: "/orders/{id}", status: 200, name: "own order in Error", prep: put(inError), req: get("/orders/" + orderA), contains: `"reason":"rejected"`},
		{method: "GET", path: "/orders/{id}", status: 200, name: "submitted order", prep: submitted(1), req: get("/orders/" + submittedID(0))},
		{method: "GET", path: "/orders/{id}", status: 400, name: "bad ID", req: get("/orders/not_an_id")},
		{method: "GET", path: "/orders/{id}", status: 403, name: "no identity", req: as(get("/orders/"+orderA), "")},
		{method: "GET", path: "/orders/{id}", status: 404, name: "missing", req: get("/orders/" + orderA)},
		{method: "GET", path: "/orders/{id}", status: 404, name: "another caller's", prep: put(processing), req: as(get("/orders/"+orderA), callerB)},
		{method: "GET", path: "/orders/{id}", status: 500, name: "store down", hook: storeDown("GetState"), req: get("/orders/" + orderA)},

		// GET /ops/workflows
		{method: "GET", path: "/ops/workflows", status: 200, name: "versions and counts", prep: put(processing, otherError), req: get("/ops/workflows"),
			contains: `"inFlight":1,"needsOperator":1`},
		{method: "GET", path: "/ops/workflows", status: 400, name: "a parameter", req: withQuery(get("/ops/workflows"), "state=Error")},
		{method: "GET", path: "/ops/workflows", status: 403, name: "no identity", req: as(get("/ops/workflows"), "")},
		{method: "GET", path: "/ops/workflows", status: 403, name: "a client", req: as(get("/ops/workflows"), callerA), contains: ProblemNotOperator},
		{method: "GET", path: "/ops/workflows", status: 500, name: "store down", wrap: func(s Store) Store { return failingLists{s} }, req: get("/ops/workflows")},

		// POST /orders/{id}/retry
		{method: "POST", path: "/orders/{id}/retry", status: 202, name: "from Error", prep: put(inError), req: post("/orders/" + orderA + "/retry")},
		{method: "POST", path: "/orders/{id}/retry", status: 400, name: "bad ID", req: post("/orders/not_an_id/retry")},
		{method: "POST", path: "/orders/{id}/retry", status: 403, name: "no identity", req: as(post("/orders/"+orderA+"/retry"), "")},
		{method: "POST", path: "/orders/{id}/retry", status: 403, name: "a client", req: as(post("/orders/"+orderA+"/retry"), callerA), contains: ProblemNotOperator},
		{method: "POST", path: "/orders/{id}/retry", status: 404, name: "missing", req: post("/orders/" + orderA + "/retry")},
		{method: "POST", path: "/orders/{id}/retry", status: 409, name: "still processing", prep: put(processing), req: post("/orders/" + orderA + "/retry")},
		{method: "POST", path: "/orders/{id}/retry", status: 500, name: "store down", hook: storeDown("GetState"), req: post("/orders/" + orderA + "/retry")},

		// POST /orders/{id}/cancel
		{method: "POST", path: "/orders/{id}/cancel", status: 202, name: "processing", prep: put(processing), req: post("/orders/" + orderA + "/cancel")},
		{method: "POST", path: "/orders/{id}/cancel", status: 202, name: "in Error", prep: put(inError), req: post("/orders/" + orderA + "/cancel")},
		{method: "POST", path: "/orders/{id}/cancel", status: 400, name: "bad ID", req: post("/orders/not_an_id/cancel")},
		{method: "POST", path: "/orders/{id}/cancel", status: 403, name: "no identity", req: as(post("/orders/"+orderA+"/cancel"), "")},
		{method: "POST", path: "/orders/{id}/cancel", status: 403, name: "a client", req: as(post("/orders/"+orderA+"/cancel"), callerB), contains: ProblemNotOperator},
		{method: "POST", path: "/orders/{id}/cancel", status: 404, name: "missing", req: post("/orders/" + orderA + "/cancel")},
		{method: "POST", path: "/orders/{id}/cancel", status: 409, name: "processed", prep: put(processed), req: post("/orders/" + orderA + "/cancel")},
		{method: "POST", path: "/orders/{id}/cancel", status: 500, name: "store down", hook: storeDown("GetState"), req: post("/orders/" + orderA + "/cancel")},

		// GET /ops/orders
		{method: "GET", path: "/ops/orders", status: 200, name: "a page and a next", prep: put(inError, otherError), req: withQuery(get("/ops/orders"), "state=Error&limit=1"), contains: `"nextCursor"`},
		{method: "GET", path: "/ops/orders", status: 200, name: "none", req: withQuery(get("/ops/orders"), "state=Cancelled")},
		{method: "GET", path: "/ops/orders", status: 400, name: "no state", req: get("/ops/orders")},
		{method: "GET", path: "/ops/orders", status: 400, name: "unlisted state, bad limit, unknown", req: withQuery(get("/ops/orders"), "state=Processing&limit=0&limt=5")},
		{method: "GET", path: "/ops/orders", status: 403, name: "no identity", req: as(withQuery(get("/ops/orders"), "state=Error"), "")},
		{method: "GET", path: "/ops/orders", status: 403, name: "a client", req: as(withQuery(get("/ops/orders"), "state=Error"), callerA), contains: ProblemNotOperator},
		{method: "GET", path: "/ops/orders", status: 500, name: "store down", wrap: func(s Store) Store { return failingLists{s} }, req: withQuery(get("/ops/orders"), "state=Error")},

		// GET /ops/orders/{id}
		{method: "GET", path: "/ops/orders/{id}", status: 200, name: "with owner", prep: created(inError), req: get("/ops/orders/" + orderA), contains: `"owner":"` + callerA + `","ownerId":"` + ownerA.ID + `"`},
		{method: "GET", path: "/ops/orders/{id}", status: 200, name: "compensation", prep: put(at(orderA, workflow.CompensationFailed, 1, 3)), req: get("/ops/orders/" + orderA)},
		{method: "GET", path: "/ops/orders/{id}", status: 400, name: "bad ID", req: get("/ops/orders/not_an_id")},
		{method: "GET", path: "/ops/orders/{id}", status: 403, name: "no identity", req: as(get("/ops/orders/"+orderA), "")},
		{method: "GET", path: "/ops/orders/{id}", status: 403, name: "a client", req: as(get("/ops/orders/"+orderA), callerB), contains: ProblemNotOperator},
		{method: "GET", path: "/ops/orders/{id}", status: 404, name: "missing", req: get("/ops/orders/" + orderA)},
		{method: "GET", path: "/ops/orders/{id}", status: 500, name: "store down", hook: storeDown("GetState"), req: get("/ops/orders/" + orderA)},
	}
	// Any other method, on every path.
	for _, p := range []string{"/orders", "/orders/{id}", "/orders/{id}/retry", "/orders/{id}/cancel", "/ops/orders", "/ops/orders/{id}", "/ops/workflows"} {
		for _, m := range []string{"DELETE", "PUT"} {
			cases = append(cases, apiCase{method: "*", path: p, status: 405, name: m,
				req: request(m, strings.ReplaceAll(p, "{id}", orderA), nil, "")})
		}
	}
	// Any other path, through the catch-all route.
	for _, m := range []string{"GET", "POST", "DELETE"} {
		for _, p := range []string{"/", "/nowhere", "/orders/" + orderA + "/items", "/ops", "/ops/orders/" + orderA + "/x"} {
			cases = append(cases, apiCase{method: "*", path: "*", status: 404, name: m + " " + p, req: request(m, p, nil, "")})
		}
	}
	cases = append(cases,
		apiCase{method: "*", path: "/orders/{id}", status: 405, name: "POST", req: post("/orders/" + orderA)},
		apiCase{method: "*", path: "/orders/{id}/retry", status: 405, name: "GET", req: request("GET", "/orders/"+orderA+"/retry", nil, "")},
		apiCase{method: "*", path: "/ops/orders", status: 405, name: "POST", req: post("/ops/orders")},
		apiCase{method: "*", path: "/ops/workflows", status: 405, name: "POST", req: post("/ops/workflows")},
	)
	return cases
}

// headersOfEveryAnswer are set on every answer, and documented once, in
// the document's description.
var headersOfEveryAnswer = map[string]string{"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}

// TestOpenAPIConformance reaches every documented (route, status) pair on
// the handler and checks the answer against the document: Content-Type,
// body schema, headers. A documented pair without a case fails, as does a
// case for a pair the document lacks.
func TestOpenAPIConformance(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	pairs := d.documentedPairs(t)
	covered := map[string]int{}
	cases := apiCases()
	requestSchema := "/components/schemas/OrderRequest"
	for _, c := range cases {
		key := pairKey(c.method, c.path, c.status)
		covered[key]++
		t.Run(key+" "+c.name, func(t *testing.T) {
			t.Parallel()
			respPtr, ok := pairs[key]
			if !ok {
				t.Fatalf("the document does not have %s", key)
			}
			f := newFixtureOver(t, c.hook, c.wrap)
			if c.shed != nil {
				f.decision = c.shed
			}
			if c.prep != nil {
				c.prep(t, f)
			}
			resp := f.do(t, c.req)
			if resp.StatusCode != c.status {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, c.status, resp.Body)
			}
			checkAnswer(t, d, respPtr, resp)
			if c.contains != "" && !strings.Contains(resp.Body, c.contains) {
				t.Errorf("body %s lacks %s", resp.Body, c.contains)
			}
			if _, ok := resp.Headers[c.header]; c.header != "" && !ok {
				t.Errorf("header %s missing: %v", c.header, resp.Headers)
			}
			if c.method == "*" && c.path != "*" {
				allow := strings.Split(resp.Headers["Allow"], ", ")
				sort.Strings(allow)
				if want := d.pathMethods(c.path); !slices.Equal(allow, want) {
					t.Errorf("Allow = %v; the document gives %s %v", allow, c.path, want)
				}
			}
			switch err := d.validate(t, requestSchema, c.req.Body); {
			case c.body == bodyConforms && err != nil:
				t.Errorf("the handler takes the body, the document's OrderRequest refuses it: %v", err)
			case c.body == bodyBreaks && err == nil:
				t.Errorf("the handler refuses the body, the document's OrderRequest takes it")
			}
		})
	}
	var missing []string
	for key := range pairs {
		if covered[key] == 0 {
			missing = append(missing, key)
		}
	}
	sort.Strings(missing)
	for _, key := range missing {
		t.Errorf("documented %s has no case", key)
	}
}

// checkAnswer checks resp against the documented response at respPtr.
func checkAnswer(t *testing.T, d *openAPIDoc, respPtr string, resp events.APIGatewayV2HTTPResponse) {
	t.Helper()
	doc, ptr := d.resolve(t, respPtr)
	content, ok := doc["content"].(map[string]any)
	if !ok || len(content) != 1 {
		t.Fatalf("%s: want exactly one media type, have %v", ptr, content)
	}
	var mt string
	for k := range content {
		mt = k
	}
	if ct := resp.Headers["Content-Type"]; ct != mt {
		t.Errorf("Content-Type = %q, documented %q", ct, mt)
	}
	if err := d.validate(t, ptr+"/content/"+escape(mt)+"/schema", resp.Body); err != nil {
		t.Errorf("body %s does not validate against %s: %v", resp.Body, ptr, err)
	}

	documented := map[string]bool{"Content-Type": true}
	headers, _ := doc["headers"].(map[string]any)
	for name := range headers {
		documented[name] = true
		h, hptr := d.resolve(t, ptr+"/headers/"+escape(name))
		v, present := resp.Headers[name]
		switch {
		case !present && h["required"] == true:
			t.Errorf("documented required header %s is missing; headers %v", name, resp.Headers)
		case present:
			if err := d.schema(t, hptr+"/schema").Validate(v); err != nil {
				t.Errorf("header %s: %q does not validate: %v", name, v, err)
			}
		}
	}
	for name, v := range resp.Headers {
		if want, ok := headersOfEveryAnswer[name]; ok {
			if v != want {
				t.Errorf("%s = %q, want %q", name, v, want)
			}
			continue
		}
		if !documented[name] {
			t.Errorf("header %s: %q is not documented for this answer (%s)", name, v, ptr)
		}
	}
	for name := range headersOfEveryAnswer {
		if _, ok := resp.Headers[name]; !ok {
			t.Errorf("header %s missing", name)
		}
	}
}

// TestOpenAPIExamples validates every example of the document against its
// schema, and requires one for every body.
func TestOpenAPIExamples(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	n := 0
	var walk func(v any, ptr string)
	walk = func(v any, ptr string) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["schema"]; ok {
				if ex, ok := v["example"]; ok {
					n++
					if err := d.schema(t, ptr+"/schema").Validate(ex); err != nil {
						t.Errorf("%s/example: %v", ptr, err)
					}
				}
				exs, _ := v["examples"].(map[string]any)
				for name := range exs {
					ex, exPtr := d.resolve(t, ptr+"/examples/"+escape(name))
					value, ok := ex["value"]
					if !ok {
						t.Errorf("%s has no value", exPtr)
						continue
					}
					n++
					if err := d.schema(t, ptr+"/schema").Validate(value); err != nil {
						t.Errorf("%s: %v", exPtr, err)
					}
				}
				// A media type of a body shows what it looks like.
				if strings.Contains(ptr, "/content/") && v["example"] == nil && len(exs) == 0 {
					t.Errorf("%s has no example", ptr)
				}
			}
			// Schemas hold their examples in an array.
			if exs, ok := v["examples"].([]any); ok {
				for i, ex := range exs {
					n++
					if err := d.schema(t, ptr).Validate(ex); err != nil {
						t.Errorf("%s/examples/%d: %v", ptr, i, err)
					}
				}
			}
			for k, e := range v {
				walk(e, ptr+"/"+escape(k))
			}
		case []any:
			for i, e := range v {
				walk(e, ptr+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(d.root, "")
	if n < 20 {
		t.Errorf("only %d examples checked", n)
	}
	t.Logf("%d examples validated", n)
}

// TestOpenAPIProblemTypes checks the document's problem types are exactly
// those problem.go defines, read from its source so that a new one cannot
// be missed.
func TestOpenAPIProblemTypes(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	defined := problemTypesOf(t, "problem.go")
	if len(defined) < 11 || !slices.Contains(defined, ProblemOverloaded) {
		t.Fatalf("read %d problem types from problem.go: %v", len(defined), defined)
	}
	oneOf, _ := jsonAt(d.root, "/components/schemas/ProblemType/oneOf").([]any)
	var documented []string
	for i, alt := range oneOf {
		uri, ok := jsonAt(alt, "/const").(string)
		if !ok {
			t.Fatalf("ProblemType/oneOf/%d has no const", i)
		}
		if desc, _ := jsonAt(alt, "/description").(string); desc == "" {
			t.Errorf("problem type %s has no description", uri)
		}
		documented = append(documented, uri)
	}
	sort.Strings(defined)
	sort.Strings(documented)
	for _, u := range defined {
		if !slices.Contains(documented, u) {
			t.Errorf("problem type %s (problem.go) is not in the document", u)
		}
	}
	for _, u := range documented {
		if !slices.Contains(defined, u) {
			t.Errorf("the document has problem type %s, which problem.go does not define", u)
		}
	}
	// Each status's answer names the problem types it may carry; each of
	// them is one of the document's.
	for name, resp := range d.root["components"].(map[string]any)["responses"].(map[string]any) {
		schema := jsonAt(resp, "/content/application~1problem+json/schema")
		if schema == nil {
			continue
		}
		types := []any{jsonAt(schema, "/properties/type/const")}
		if enum, ok := jsonAt(schema, "/properties/type/enum").([]any); ok {
			types = enum
		}
		for _, typ := range types {
			if s, _ := typ.(string); !slices.Contains(documented, s) {
				t.Errorf("response %s: problem type %v is not a documented one", name, typ)
			}
		}
	}
}

// problemTypesOf reads the values of the Problem* constants of a source file
// of this package: string literals, or problemBase plus one.
func problemTypesOf(t *testing.T, file string) []string {
	t.Helper()
	f, err := goparser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]ast.Expr{}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					consts[name.Name] = vs.Values[i]
				}
			}
		}
	}
	var eval func(e ast.Expr) string
	eval = func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(e.Value)
			if err != nil {
				t.Fatalf("%s: %v", e.Value, err)
			}
			return s
		case *ast.Ident:
			if v, ok := consts[e.Name]; ok {
				return eval(v)
			}
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				return eval(e.X) + eval(e.Y)
			}
		}
		t.Fatalf("cannot evaluate %T in %s", e, file)
		return ""
	}
	var out []string
	for name, v := range consts {
		if strings.HasPrefix(name, "Problem") {
			out = append(out, eval(v))
		}
	}
	return out
}

// The statuses the handler writes are all documented somewhere: a status
// in a problem document the document does not know fails the conformance
// test already; this pins the list the report names.
func TestOpenAPIStatuses(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	seen := map[int]bool{}
	for key := range d.documentedPairs(t) {
		fields := strings.Fields(key)
		s, _ := strconv.Atoi(fields[len(fields)-1])
		seen[s] = true
	}
	for _, s := range []int{http.StatusOK, http.StatusAccepted, http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound,
		http.StatusMethodNotAllowed, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType,
		http.StatusUnprocessableEntity, http.StatusTooManyRequests, http.StatusInternalServerError} {
		if !seen[s] {
			t.Errorf("no route documents status %d", s)
		}
	}
}

// TestOpenAPIOrderRequestBounds holds the document's OrderRequest to
// DecodeOrder at every bound: a body the decoder takes, the schema takes,
// and a body it refuses, the schema refuses. What JSON Schema cannot say is
// left out: duplicate members (a parser keeps one), and integers written
// with a fraction or an exponent (1.0 is an integer to JSON Schema), both
// of which the decoder refuses and the document's description names.
func TestOpenAPIOrderRequestBounds(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	item := func(sku, qty, price string) string {
		return `{"sku":` + sku + `,"quantity":` + qty + `,"unitPriceCents":` + price + `}`
	}
	order := func(customer, currency, items string, more ...string) string {
		s := `{"customerId":` + customer + `,"currency":` + currency + `,"items":` + items
		for _, m := range more {
			s += "," + m
		}
		return s + "}"
	}
	one := "[" + item(`"PEN"`, "1", "1") + "]"
	items := func(n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item(`"PEN"`, "1", "1")+",", n), ",") + "]"
	}
	q := strconv.Quote
	id64, id65 := strings.Repeat("a", 64), strings.Repeat("a", 65)
	bodies := []string{
		order(`"c-42"`, `"EUR"`, one),
		order(`"c_42"`, `"EUR"`, one),
		order(q(id64), `"EUR"`, one),
		order(q(id65), `"EUR"`, one),
		order(`""`, `"EUR"`, one),
		order(`"c.42"`, `"EUR"`, one),
		order(`"c 42"`, `"EUR"`, one),
		order(`"ü"`, `"EUR"`, one),
		order(`null`, `"EUR"`, one),
		order(`42`, `"EUR"`, one),
		order(`"c"`, `"eur"`, one),
		order(`"c"`, `"EU"`, one),
		order(`"c"`, `"EURO"`, one),
		order(`"c"`, `null`, one),
		order(`"c"`, `"EUR"`, items(0)),
		order(`"c"`, `"EUR"`, items(1)),
		order(`"c"`, `"EUR"`, items(MaxItems)),
		order(`"c"`, `"EUR"`, items(MaxItems+1)),
		order(`"c"`, `"EUR"`, `null`),
		order(`"c"`, `"EUR"`, `{}`),
		order(`"c"`, `"EUR"`, `[1]`),
		order(`"c"`, `"EUR"`, one, `"clientId":null`),
		order(`"c"`, `"EUR"`, one, `"clientId":"shop.web_1-x"`),
		order(`"c"`, `"EUR"`, one, `"clientId":`+q(id64)),
		order(`"c"`, `"EUR"`, one, `"clientId":`+q(id65)),
		order(`"c"`, `"EUR"`, one, `"clientId":""`),
		order(`"c"`, `"EUR"`, one, `"clientId":"a b"`),
		order(`"c"`, `"EUR"`, one, `"workflow":"order"`),
		order(`"c"`, `"EUR"`, one, `"workflow":"order-v2"`),
		order(`"c"`, `"EUR"`, one, `"workflow":null`),
		order(`"c"`, `"EUR"`, one, `"workflow":"Order"`),
		order(`"c"`, `"EUR"`, one, `"workflow":""`),
		order(`"c"`, `"EUR"`, one, `"coupon":"X"`),
		order(`"c"`, `"EUR"`, one, `"CustomerId":"c"`),
		`{"currency":"EUR","items":` + one + `}`,
		`[]`,
		`"order"`,
	}
	for _, sku := range []string{`"PEN"`, `"P_1-x"`, q(id64), q(id65), `""`, `"P.1"`, `null`, `1`} {
		bodies = append(bodies, order(`"c"`, `"EUR"`, "["+item(sku, "1", "1")+"]"))
	}
	for _, n := range []string{"-1", "0", "1", strconv.Itoa(MaxQuantity), strconv.Itoa(MaxQuantity + 1), "null", `"1"`, "99999999999999999999"} {
		bodies = append(bodies, order(`"c"`, `"EUR"`, "["+item(`"PEN"`, n, "1")+"]"))
	}
	for _, n := range []string{"-1", "0", "1", strconv.Itoa(MaxUnitPriceCents), strconv.Itoa(MaxUnitPriceCents + 1), "null", "true"} {
		bodies = append(bodies, order(`"c"`, `"EUR"`, "["+item(`"PEN"`, "1", n)+"]"))
	}
	bodies = append(bodies, order(`"c"`, `"EUR"`, `[{"sku":"PEN","quantity":1}]`), order(`"c"`, `"EUR"`, `[{"sku":"PEN","quantity":1,"unitPriceCents":1,"note":""}]`))

	valid := 0
	for _, body := range bodies {
		_, decErr := DecodeOrder([]byte(body))
		schemaErr := d.validate(t, "/components/schemas/OrderRequest", body)
		switch {
		case decErr == nil && schemaErr != nil:
			t.Errorf("DecodeOrder takes %s, the document refuses it: %v", body, schemaErr)
		case decErr != nil && schemaErr == nil:
			t.Errorf("DecodeOrder refuses %s (%v), the document takes it", body, decErr)
		case decErr == nil:
			valid++
		}
	}
	if valid < 10 || valid > len(bodies)-10 {
		t.Errorf("%d of %d bodies valid: the table has lost its balance", valid, len(bodies))
	}
}

// TestOpenAPIConstants holds the document's enumerations and limits to the
// code's.
func TestOpenAPIConstants(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	strs := func(ptr string) []string {
		var out []string
		list, _ := jsonAt(d.root, ptr).([]any)
		for _, v := range list {
			s, _ := v.(string)
			out = append(out, s)
		}
		return out
	}
	names := func(states []workflow.ProcessState) []string {
		out := make([]string, len(states))
		for i, s := range states {
			out[i] = string(s)
		}
		return out
	}
	if got, want := strs("/components/schemas/ProcessState/enum"), names(workflow.ProcessStates()); !slices.Equal(got, want) {
		t.Errorf("ProcessState enum %v, want %v", got, want)
	}
	if got, want := strs("/components/parameters/State/schema/enum"), names(workflow.ListedStates()); !slices.Equal(got, want) {
		t.Errorf("state parameter enum %v, want %v", got, want)
	}
	statuses := []workflow.Status{workflow.StatusAccepted, workflow.StatusProcessing, workflow.StatusProcessed, workflow.StatusError,
		workflow.StatusWaiting, workflow.StatusCompensating, workflow.StatusCompensated, workflow.StatusCompensationFailed, workflow.StatusCancelled}
	var wantStatuses []string
	for _, s := range statuses {
		wantStatuses = append(wantStatuses, string(s))
	}
	if got := strs("/components/schemas/Status/enum"); !slices.Equal(got, wantStatuses) {
		t.Errorf("Status enum %v, want %v", got, wantStatuses)
	}
	steps := []workflow.StepState{workflow.StepPending, workflow.StepProcessing, workflow.StepSucceeded, workflow.StepFailed, workflow.StepCancelled}
	var wantSteps []string
	for _, s := range steps {
		wantSteps = append(wantSteps, string(s))
	}
	if got := strs("/components/schemas/StepState/enum"); !slices.Equal(got, wantSteps) {
		t.Errorf("StepState enum %v, want %v", got, wantSteps)
	}
	num := func(ptr string) int {
		n, err := strconv.Atoi(fmt.Sprint(jsonAt(d.root, ptr)))
		if err != nil {
			t.Errorf("%s: %v", ptr, err)
		}
		return n
	}
	for ptr, want := range map[string]int{
		"/components/parameters/Limit/schema/maximum":                MaxListLimit,
		"/components/parameters/Limit/schema/default":                DefaultListLimit,
		"/components/parameters/Cursor/schema/maxLength":             maxCursorLen,
		"/components/parameters/IdempotencyKey/schema/maxLength":     maxIdempotencyKeyLen,
		"/components/schemas/Page/properties/orders/maxItems":        MaxListLimit,
		"/components/schemas/OrderRequest/properties/items/maxItems": MaxItems,
	} {
		if got := num(ptr); got != want {
			t.Errorf("%s = %d, want %d", ptr, got, want)
		}
	}
	// The body limit is in prose: the request body's and the 413's.
	limit := strconv.Itoa(DefaultMaxBodyBytes) + " bytes"
	for _, ptr := range []string{"/paths/~1orders/post/requestBody/description", "/components/responses/PayloadTooLarge/description"} {
		if s, _ := jsonAt(d.root, ptr).(string); !strings.Contains(s, limit) {
			t.Errorf("%s does not name the body limit, %s: %q", ptr, limit, s)
		}
	}
}

// submittedID is the ID of the i-th order a test submits with known IDs.
func submittedID(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// TestOpenAPIReasons checks the document's reason codes are exactly
// workflow.ReasonCodes, in order, each described as workflow documents it.
func TestOpenAPIReasons(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	oneOf, _ := jsonAt(d.root, "/components/schemas/Reason/oneOf").([]any)
	codes := workflow.ReasonCodes()
	if len(oneOf) != len(codes) {
		t.Fatalf("the document has %d reason codes, workflow %d (%v)", len(oneOf), len(codes), codes)
	}
	for i, c := range codes {
		if got, _ := jsonAt(oneOf[i], "/const").(string); got != string(c) {
			t.Errorf("Reason/oneOf/%d is %q, want %q", i, got, c)
		}
		if got, _ := jsonAt(oneOf[i], "/description").(string); got != c.About() {
			t.Errorf("reason %s is described as %q, want %q", c, got, c.About())
		}
	}
}
