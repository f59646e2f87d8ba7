package submission

import "strings"

// Route is one route the Submission handler serves behind API Gateway.
type Route struct {
	Method, Path string
	// Operator routes see or change every caller's orders: the stack's
	// operator policy allows them and its client policy does not, and the
	// handler serves them to operators only (Config.OperatorPrincipals).
	// The others are the clients', which see only the caller's own orders.
	Operator bool
}

// Routes lists the API's routes. The CDK stack declares exactly these, and
// the local stack serves exactly these, so neither can drift from the
// handler; both add the catch-all DefaultRoute.
func Routes() []Route {
	return []Route{
		{Method: "POST", Path: "/orders"},
		{Method: "GET", Path: "/orders"},
		{Method: "GET", Path: "/orders/{id}"},
		{Method: "GET", Path: "/ops/orders", Operator: true},
		{Method: "GET", Path: "/ops/orders/{id}", Operator: true},
		{Method: "GET", Path: "/ops/workflows", Operator: true},
		{Method: "POST", Path: "/orders/{id}/retry", Operator: true},
		{Method: "POST", Path: "/orders/{id}/cancel", Operator: true},
	}
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

// Policy is an identity policy on execute-api:Invoke over the API's stage:
// resources relative to it, METHOD/PATH with IAM's wildcards (* any run of
// characters, ? one), an explicit deny winning over any allow.
type Policy struct {
	Allow, Deny []string
}

// everything is every method and path of the stage.
const everything = "*/*"

// ClientPolicy is what the stack's OrderClientPolicy allows: everything but
// the operator routes, which it denies. IAM authorizes a request that only
// the catch-all route matches against its own method and path, like any
// other ("Control access for invoking an API",
// https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-control-access-using-iam-policies-to-invoke-api.html),
// so a client reaches the handler's 404 and 405 only through a policy that
// allows every method and path; IAM's wildcards cannot say "all but these",
// so the operator routes are denied explicitly, and an explicit deny wins
// over any allow ("The difference between explicit and implicit denies",
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic_AccessPolicyLanguage_Interplay.html).
// That reveals nothing: the handler answers a request of no route with 404
// or 405, and refuses the operator routes to anyone but an operator.
func ClientPolicy() Policy {
	p := Policy{Allow: []string{everything}}
	for _, r := range Routes() {
		if r.Operator {
			p.Deny = append(p.Deny, r.Resource())
		}
	}
	return p
}

// OperatorPolicy is what the stack's OrderOperatorPolicy allows: every
// route, the catch-all's requests included.
func OperatorPolicy() Policy { return Policy{Allow: []string{everything}} }
