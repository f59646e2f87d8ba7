package submission

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// ErrNoIdentity is wrapped by Principal when a request carries no usable IAM
// identity. API Gateway with IAM authorization never sends such a request;
// receiving one means a route lost its authorization, so it is refused.
var ErrNoIdentity = errors.New("no IAM identity")

// maxPrincipalLen bounds an owner. The longest IAM ARN API Gateway passes (a
// user with a 512-character path) is well under it, and it keeps the owner
// far below DynamoDB's 2048-byte limit for an index's partition key.
const maxPrincipalLen = 1024

// Principal returns the owner of what the caller submits: the IAM principal
// API Gateway authenticated (requestContext.authorizer.iam.userArn), with
// every session of one role made one client. For an assumed role,
//
//	arn:aws:sts::111122223333:assumed-role/ROLE/SESSION
//
// the owner is arn:aws:sts::111122223333:assumed-role/ROLE: the session name
// is chosen by whoever assumes the role, so it names nobody. Any other ARN
// (an IAM user, the root user, a federated user) is the owner as it is.
//
// The ARN is outside input as far as this code knows: anything that is not
// a well-formed IAM or STS principal ARN wraps ErrNoIdentity.
func Principal(iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) (string, error) {
	if iam == nil || iam.UserARN == "" {
		return "", ErrNoIdentity
	}
	arn := iam.UserARN
	if len(arn) > maxPrincipalLen {
		return "", fmt.Errorf("%w: userArn longer than %d bytes", ErrNoIdentity, maxPrincipalLen)
	}
	for i := 0; i < len(arn); i++ {
		if arn[i] <= ' ' || arn[i] > '~' {
			return "", fmt.Errorf("%w: userArn has a space, control or non-ASCII character", ErrNoIdentity)
		}
	}
	// arn:partition:service:region:account:resource
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || !partitionName(parts[1]) || parts[3] != "" || !accountID(parts[4]) || parts[5] == "" {
		return "", fmt.Errorf("%w: userArn is not a principal ARN", ErrNoIdentity)
	}
	service, resource := parts[2], parts[5]
	switch {
	case service == "sts" && strings.HasPrefix(resource, "assumed-role/"):
		segs := strings.Split(resource, "/")
		if len(segs) != 3 || segs[1] == "" || segs[2] == "" {
			return "", fmt.Errorf("%w: assumed-role ARN is not assumed-role/ROLE/SESSION", ErrNoIdentity)
		}
		return strings.Join(parts[:5], ":") + ":assumed-role/" + segs[1], nil
	case service == "sts" || service == "iam":
		return arn, nil
	}
	return "", fmt.Errorf("%w: userArn of service %q is not an IAM or STS principal", ErrNoIdentity, service)
}

// partitionName accepts aws, aws-cn, aws-us-gov and any later partition.
func partitionName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < 'a' || s[i] > 'z') && (s[i] < '0' || s[i] > '9') && s[i] != '-' {
			return false
		}
	}
	return true
}

func accountID(s string) bool {
	if len(s) != 12 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// caller reads the owner of a request.
func caller(req events.APIGatewayV2HTTPRequest) (string, error) {
	if req.RequestContext.Authorizer == nil {
		return "", ErrNoIdentity
	}
	return Principal(req.RequestContext.Authorizer.IAM)
}
