package apigw

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// WithIAMAuthorization makes every route require AWS_IAM authorization, as
// an HTTP API whose routes use the IAM authorizer does. A request without a
// well-formed SigV4 Authorization header gets API Gateway's own 403,
// {"message":"Forbidden"}, and never reaches the handler.
//
// A signed request is NOT verified: there are no secret keys locally to
// verify it with, so any secret will do. Its access key ID names the
// caller instead, and the event carries the identity API Gateway would
// pass for an IAM user of that name in the local account:
//
//	requestContext.authorizer.iam = {accessKey: AKID, accountId: "000000000000",
//	    callerId: AKID, userId: AKID, userArn: "arn:aws:iam::000000000000:user/AKID"}
//
// so a local client picks who it is by the access key it signs with
// (curl --aws-sigv4 "aws:amz:us-east-1:execute-api" --user AKID:anything).
// A session token is ignored: locally every caller is a user.
func WithIAMAuthorization() Option { return func(g *Gateway) { g.iam = true } }

// SigningService is the SigV4 service of API Gateway's invoke API; a
// signature for any other service is refused.
const SigningService = "execute-api"

// LocalUserARN is the userArn the gateway passes for a request signed with
// accessKeyID.
func LocalUserARN(accessKeyID string) string {
	return "arn:aws:iam::" + accountID + ":user/" + accessKeyID
}

// Credential is what the Authorization header of a SigV4-signed request
// declares.
type Credential struct {
	// AccessKeyID names the caller.
	AccessKeyID string
	// Date (YYYYMMDD), Region and Service are the credential scope.
	Date, Region, Service string
	// SignedHeaders are the lowercase names the signature covers, sorted.
	SignedHeaders []string
	// Signature is 64 lowercase hex digits.
	Signature string
}

// ErrNotSigned is wrapped by every refusal of ParseAuthorization.
var ErrNotSigned = errors.New("not a SigV4-signed request")

const (
	sigV4Algorithm  = "AWS4-HMAC-SHA256"
	maxAuthHeader   = 4096
	maxAccessKeyLen = 128
	amzDateLayout   = "20060102T150405Z"
	scopeDateLayout = "20060102"
)

// ParseAuthorization reads the value of a SigV4 Authorization header,
//
//	AWS4-HMAC-SHA256 Credential=AKID/20260312/us-east-1/execute-api/aws4_request, SignedHeaders=host;x-amz-date, Signature=<64 hex>
//
// strictly: the three components once each and nothing else, a credential
// scope of five parts ending in aws4_request for execute-api, sorted
// lowercase signed headers that include host, and a signature of 64 hex
// digits. The access key ID must be usable as an IAM user name (1..128 of
// A-Z a-z 0-9 and _+=,.@-), since it becomes one. It checks the shape only;
// nothing is verified. Every error wraps ErrNotSigned.
func ParseAuthorization(v string) (Credential, error) {
	fail := func(format string, args ...any) (Credential, error) {
		return Credential{}, fmt.Errorf("%w: %s", ErrNotSigned, fmt.Sprintf(format, args...))
	}
	if len(v) > maxAuthHeader {
		return fail("the Authorization header is longer than %d bytes", maxAuthHeader)
	}
	rest, ok := strings.CutPrefix(v, sigV4Algorithm+" ")
	if !ok {
		return fail("the Authorization header does not start with %s", sigV4Algorithm)
	}
	var c Credential
	seen := map[string]bool{}
	for part := range strings.SplitSeq(rest, ",") {
		name, value, ok := strings.Cut(strings.Trim(part, " "), "=")
		if !ok || value == "" {
			return fail("component %q is not Name=value", truncate(part, 40))
		}
		if seen[name] {
			return fail("component %s is given twice", truncate(name, 40))
		}
		seen[name] = true
		var err error
		switch name {
		case "Credential":
			err = c.parseScope(value)
		case "SignedHeaders":
			err = c.parseSignedHeaders(value)
		case "Signature":
			if !isLowerHex(value, 64) {
				err = errors.New("the signature is not 64 lowercase hex digits")
			}
			c.Signature = value
		default:
			err = fmt.Errorf("unknown component %q", truncate(name, 40))
		}
		if err != nil {
			return fail("%v", err)
		}
	}
	if len(seen) != 3 {
		return fail("the Authorization header needs Credential, SignedHeaders and Signature")
	}
	return c, nil
}

func (c *Credential) parseScope(v string) error {
	parts := strings.Split(v, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" {
		return errors.New("the credential is not AKID/date/region/service/aws4_request")
	}
	c.AccessKeyID, c.Date, c.Region, c.Service = parts[0], parts[1], parts[2], parts[3]
	switch {
	case !validAccessKeyID(c.AccessKeyID):
		return fmt.Errorf("access key ID %q must be 1..%d of A-Z a-z 0-9 _+=,.@-", truncate(c.AccessKeyID, 40), maxAccessKeyLen)
	case !validScopeDate(c.Date):
		return fmt.Errorf("credential date %q is not YYYYMMDD", truncate(c.Date, 40))
	case !validRegion(c.Region):
		return fmt.Errorf("region %q is not a region name", truncate(c.Region, 40))
	case c.Service != SigningService:
		return fmt.Errorf("the request is signed for %q, not %s", truncate(c.Service, 40), SigningService)
	}
	return nil
}

func (c *Credential) parseSignedHeaders(v string) error {
	names := strings.Split(v, ";")
	for i, n := range names {
		if n == "" || strings.IndexFunc(n, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' }) >= 0 {
			return fmt.Errorf("signed header %q is not a lowercase header name", truncate(n, 40))
		}
		if i > 0 && names[i-1] >= n {
			return errors.New("the signed headers are not sorted and distinct")
		}
	}
	if !slices.Contains(names, "host") {
		return errors.New("the signed headers do not include host")
	}
	c.SignedHeaders = names
	return nil
}

func validAccessKeyID(s string) bool {
	if s == "" || len(s) > maxAccessKeyLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if (b < 'a' || b > 'z') && (b < 'A' || b > 'Z') && (b < '0' || b > '9') && !strings.ContainsRune("_+=,.@-", rune(b)) {
			return false
		}
	}
	return true
}

func validScopeDate(s string) bool {
	if len(s) != len(scopeDateLayout) {
		return false
	}
	_, err := time.Parse(scopeDateLayout, s)
	return err == nil
}

func validRegion(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' }) < 0
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'f') }) < 0
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// callerOf returns the IAM identity API Gateway would pass for a signed
// request: one Authorization header that ParseAuthorization accepts, and
// one X-Amz-Date of the credential's day (the signing time every SigV4
// signer sends). Any failure wraps ErrNotSigned.
func callerOf(r *http.Request) (*events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription, error) {
	auth := r.Header.Values("Authorization")
	switch len(auth) {
	case 0:
		return nil, fmt.Errorf("%w: no Authorization header", ErrNotSigned)
	case 1:
	default:
		return nil, fmt.Errorf("%w: %d Authorization headers", ErrNotSigned, len(auth))
	}
	c, err := ParseAuthorization(auth[0])
	if err != nil {
		return nil, err
	}
	date := r.Header.Values("X-Amz-Date")
	if len(date) != 1 || len(date[0]) != len(amzDateLayout) {
		return nil, fmt.Errorf("%w: no single X-Amz-Date header", ErrNotSigned)
	}
	if _, err := time.Parse(amzDateLayout, date[0]); err != nil || date[0][:8] != c.Date {
		return nil, fmt.Errorf("%w: X-Amz-Date %q is not a time of the credential's day %s", ErrNotSigned, truncate(date[0], 40), c.Date)
	}
	return &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
		AccessKey: c.AccessKeyID,
		AccountID: accountID,
		CallerID:  c.AccessKeyID,
		UserARN:   LocalUserARN(c.AccessKeyID),
		UserID:    c.AccessKeyID,
	}, nil
}
