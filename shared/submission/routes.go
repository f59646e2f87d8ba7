package submission

// Route is one route the Submission handler serves behind API Gateway.
type Route struct {
	Method, Path string
	// Operator routes see or change every caller's orders: the stack lets
	// only its operator policy call them. The others are the clients',
	// which see only the caller's own orders.
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
