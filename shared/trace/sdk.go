package trace

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// APIOptions returns opts with a middleware that sends h as the
// X-Amzn-Trace-Id header of an AWS SDK request: an SNS publish in an active
// topic continues that trace. It takes the place of the SDK's own header,
// the Lambda invocation's, which names whichever order the invocation
// started with. A zero h returns opts as they are. The result never shares
// opts' array, so a per-call option does not race other calls.
func APIOptions(opts []func(*middleware.Stack) error, h Header) []func(*middleware.Stack) error {
	if h.IsZero() {
		return opts
	}
	return append(slices.Clip(opts), func(s *middleware.Stack) error {
		return s.Build.Add(headerSetter{value: h.String()}, middleware.Before)
	})
}

type headerSetter struct{ value string }

func (headerSetter) ID() string { return "sasflow.TraceHeader" }

func (m headerSetter) HandleBuild(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
	req, ok := in.Request.(*smithyhttp.Request)
	if !ok {
		return middleware.BuildOutput{}, middleware.Metadata{}, fmt.Errorf("trace header: unknown request type %T", in.Request)
	}
	req.Header.Set(HTTPHeader, m.value)
	return next.HandleBuild(ctx, in)
}
