package submission

import (
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/jsonwire"
)

// Problem types: stable URIs clients may switch on.
const (
	problemBase           = "https://sasflow.dev/problems/"
	ProblemMalformed      = problemBase + "malformed-request"
	ProblemValidation     = problemBase + "validation"
	ProblemMediaType      = problemBase + "unsupported-media-type"
	ProblemTooLarge       = problemBase + "payload-too-large"
	ProblemNotFound       = problemBase + "not-found"
	ProblemMethod         = problemBase + "method-not-allowed"
	ProblemIdempotencyKey = problemBase + "idempotency-key-reuse"
	// ProblemForbidden: the request carries no IAM identity. API Gateway
	// authorizes every route with IAM, so only a misconfigured route gets it.
	ProblemForbidden = problemBase + "forbidden"
	// ProblemNotOperator: an operator route called by someone who is not an
	// operator (Config.OperatorPrincipals), which only an IAM policy that
	// lets a client invoke the operator routes by mistake lets through.
	ProblemNotOperator = problemBase + "not-an-operator"
	// ProblemConflict: the order's state does not allow the request now
	// (retry of an order that is not stopped, cancel of a finished one), or
	// it changed while the request was being applied.
	ProblemConflict = problemBase + "conflict"
	// ProblemOverloaded: the system is behind and sheds new orders for
	// now; the response's Retry-After says when to try again.
	ProblemOverloaded = problemBase + "overloaded"
	ProblemInternal   = problemBase + "internal"
)

// Problem is the API's RFC 9457 problem document (api.Problem); fail sets
// its RequestID.
type Problem = api.Problem

const (
	contentTypeJSON    = "application/json"
	contentTypeProblem = "application/problem+json"
)

// internalErrorBody is prebuilt so a failure to marshal cannot itself fail.
const internalErrorBody = `{"type":"` + ProblemInternal + `","title":"Internal Server Error","status":500,"detail":"internal error"}`

func problem(status int, typ, detail string, errs ...FieldError) Problem {
	return Problem{Type: typ, Title: http.StatusText(status), Status: status, Detail: detail, Errors: errs}
}

// respond marshals body with the given status. Every response, success or
// problem, is personal to one order and must not be cached by anything in
// between, hence no-store throughout.
func respond(status int, contentType string, body any, headers map[string]string) events.APIGatewayV2HTTPResponse {
	h := map[string]string{
		"Content-Type":           contentType,
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
	}
	for k, v := range headers {
		h[k] = v
	}
	// Not HTML-escaped (jsonwire): nosniff above keeps a browser from
	// reading markup in an output as a page.
	b, err := jsonwire.Marshal(body)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{
			StatusCode: http.StatusInternalServerError,
			Headers:    map[string]string{"Content-Type": contentTypeProblem, "Cache-Control": "no-store"},
			Body:       internalErrorBody,
		}
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: h, Body: string(b)}
}
