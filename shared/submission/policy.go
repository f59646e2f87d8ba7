package submission

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
