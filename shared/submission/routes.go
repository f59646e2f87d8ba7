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
// handler.
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

// ClientPolicy is what the stack's OrderClientPolicy allows: the clients'
// routes.
func ClientPolicy() Policy { return routePolicy(false) }

// OperatorPolicy is what the stack's OrderOperatorPolicy allows: every
// route.
func OperatorPolicy() Policy { return routePolicy(true) }

func routePolicy(operator bool) Policy {
	var p Policy
	for _, r := range Routes() {
		if operator || !r.Operator {
			p.Allow = append(p.Allow, r.Resource())
		}
	}
	return p
}
