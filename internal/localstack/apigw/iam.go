package apigw

import (
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// WithIAMAuthorization makes every route require AWS_IAM authorization, as
// an HTTP API whose routes use the IAM authorizer does. A request without a
// well-formed SigV4 Authorization header gets API Gateway's own 403,
// {"message":"Forbidden"}, and never reaches the handler; so does one whose
// X-Amz-Date is more than MaxClockSkew off the gateway's clock (with
// API Gateway's "Signature expired" message), and one the caller's policy
// does not allow (see WithCallers).
//
// A signed request is NOT verified: there are no secret keys locally to
// verify it with, so any secret will do. Its access key ID names the
// caller instead (WithCallers); by default the event carries the identity
// API Gateway would pass for an IAM user of that name in the local account,
//
//	requestContext.authorizer.iam = {accessKey: AKID, accountId: "000000000000",
//	    callerId: ID, userId: ID, userArn: "arn:aws:iam::000000000000:user/AKID"}
//
// ID being the user's unique ID (LocalUniqueID), allowed to invoke every
// route, so a local client picks who it is by the access key it signs with
// (curl --aws-sigv4 "aws:amz:us-east-1:execute-api" --user AKID:anything).
// A session token is ignored.
func WithIAMAuthorization() Option { return func(g *Gateway) { g.iam = true } }

// WithCallers says who signs with a credential and what its IAM policy
// lets it invoke, as the identity policies of the deployed stack's callers
// do (see Caller). Without it every signed caller is LocalUser with
// AllowAll. It takes effect with WithIAMAuthorization.
func WithCallers(callers func(Credential) Caller) Option {
	return func(g *Gateway) { g.callers = callers }
}

// Caller is who signed a request, as API Gateway's IAM authorization passes
// it to the handler, and what its identity policies allow.
type Caller struct {
	IAM    *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription
	Policy Policy
}

// Policy is what a caller's identity policies allow of execute-api:Invoke
// on the API's stage. IAM authorizes a request to an HTTP API against the
// resource arn:aws:execute-api:REGION:ACCOUNT:API/STAGE/METHOD/PATH, the
// request's own method and path ("Control access for invoking an API",
// https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-control-access-using-iam-policies-to-invoke-api.html);
// a pattern here is what follows STAGE/, "GET/orders/*", with IAM's
// wildcards: * any run of characters, slashes included, ? any one. As in
// IAM's evaluation, an explicit deny wins over any allow, and what no
// statement allows is denied.
type Policy struct {
	Allow, Deny []string
}

// AllowAll allows invoking every route of the API, as a grant of
// execute-api:Invoke on the whole API does.
var AllowAll = Policy{Allow: []string{"*"}}

// Allows reports whether the policy lets a caller invoke method on the
// (escaped) path.
func (p Policy) Allows(method, path string) bool {
	resource := method + path
	match := func(pattern string) bool { return wildcardMatch(pattern, resource) }
	if slices.ContainsFunc(p.Deny, match) {
		return false
	}
	return slices.ContainsFunc(p.Allow, match)
}

// wildcardMatch matches s against an IAM resource pattern: * any run of
// characters (empty included), ? exactly one.
func wildcardMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// LocalAccount is the account of every local caller.
const LocalAccount = accountID

// LocalUser is the identity API Gateway passes for an IAM user of the local
// account named by the credential's access key: its ARN, and as userId its
// unique ID (LocalUniqueID).
func LocalUser(c Credential) *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription {
	arn := LocalUserARN(c.AccessKeyID)
	id := LocalUniqueID(UserIDPrefix, arn, 0)
	return &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
		AccessKey: c.AccessKeyID, AccountID: accountID, CallerID: id,
		UserARN: arn, UserID: id,
	}
}

// The prefixes IAM starts the unique IDs of users and of roles with ("IAM
// identifiers", Understanding unique ID prefixes,
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-prefixes).
const (
	UserIDPrefix = "AIDA"
	RoleIDPrefix = "AROA"
)

// uniqueIDNamespace separates the local unique IDs from any other hash of
// an ARN.
const uniqueIDNamespace = "sasflow/localstack/apigw/unique-id/v1\x00"

// LocalUniqueID is the unique ID of a local user or role, whose ARN is arn
// (arn:aws:iam::000000000000:user/NAME, LocalRoleARN), in its incarnation:
// prefix (UserIDPrefix or RoleIDPrefix), then 17 upper-case letters and
// digits of a hash of both, 21 characters as IAM's are. There is no IAM
// locally, so the ID is derived, the same for the same principal at every
// start. Incarnation 0 is the principal as first created; IAM gives a
// principal deleted and created anew under the same name the same ARN and
// a new unique ID ("IAM identifiers", Unique identifiers,
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-unique-ids),
// which incarnation 1, 2, ... stand for (Recreated).
func LocalUniqueID(prefix, arn string, incarnation int) string {
	sum := sha256.Sum256([]byte(uniqueIDNamespace + arn + "\x00" + strconv.Itoa(incarnation)))
	return prefix + base32.StdEncoding.EncodeToString(sum[:])[:17]
}

// Recreated is iam, the identity a local user or role session signs with,
// as it is once its user or role was deleted and created anew under the
// same name incarnation times: the same ARN, the unique ID of that
// incarnation (LocalUniqueID). Incarnation 0, or any other identity (a
// Cognito identity's is its pool role's), is iam as it is.
func Recreated(iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription, incarnation int) *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription {
	if iam == nil || incarnation == 0 || iam.CognitoIdentity.IdentityID != "" {
		return iam
	}
	out := *iam
	parts := strings.SplitN(iam.UserARN, ":", 6)
	if len(parts) != 6 {
		return iam
	}
	switch kind, rest, _ := strings.Cut(parts[5], "/"); kind {
	case "user":
		out.UserID = LocalUniqueID(UserIDPrefix, iam.UserARN, incarnation)
	case "assumed-role":
		role, session, _ := strings.Cut(rest, "/")
		out.UserID = LocalUniqueID(RoleIDPrefix, "arn:"+parts[1]+":iam::"+parts[4]+":role/"+role, incarnation) + ":" + session
	default:
		return iam
	}
	out.CallerID = out.UserID
	return &out
}

// LocalCaller is who signs with a credential locally: a Cognito identity
// for an access key of the Cognito convention (LocalCognitoIdentity), else
// the IAM user LocalUser.
func LocalCaller(c Credential) *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription {
	if iam, ok := LocalCognitoIdentity(c); ok {
		return iam
	}
	return LocalUser(c)
}

// The local Cognito identity pool and its roles. A pool's users all get
// credentials of its role, in sessions named CognitoIdentityCredentials,
// and API Gateway passes the identity beside them
// (requestContext.authorizer.iam.cognitoIdentity).
const (
	// LocalIdentityPoolGUID is the local pool's ID after its region.
	LocalIdentityPoolGUID = "00000000-0000-4000-8000-00000000c091"
	// LocalCognitoAuthRole and LocalCognitoUnauthRole are the pool's roles
	// for signed-in users and for guests.
	LocalCognitoAuthRole   = "LocalCognitoAuthRole"
	LocalCognitoUnauthRole = "LocalCognitoUnauthRole"
	cognitoSession         = "CognitoIdentityCredentials"
	// cognitoPrefix and cognitoGuestPrefix start the access keys of the
	// Cognito convention; the rest is the identity's GUID.
	cognitoPrefix      = "cognito-"
	cognitoGuestPrefix = "cognito-guest-"
	// maxCognitoID is Cognito's bound on an identity or pool ID, REGION:GUID.
	maxCognitoID = 55
)

// LocalCognitoIdentity is the identity API Gateway passes for Cognito
// identity pool credentials, for an access key of the local convention:
// cognito-GUID is the signed-in user REGION:GUID of the local pool
// REGION:LocalIdentityPoolGUID, cognito-guest-GUID an unauthenticated
// (guest) identity of it, REGION being the credential scope's and GUID
// lowercase hex digits and dashes (Cognito's [0-9a-f-]+). Their IAM
// identity is the session CognitoIdentityCredentials of the pool's
// authenticated or unauthenticated role, the same for every user of the
// pool. Any other access key is not of the convention.
func LocalCognitoIdentity(c Credential) (*events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription, bool) {
	guid, guest := strings.CutPrefix(c.AccessKeyID, cognitoGuestPrefix)
	if !guest {
		var ok bool
		if guid, ok = strings.CutPrefix(c.AccessKeyID, cognitoPrefix); !ok {
			return nil, false
		}
	}
	if guid == "" || len(c.Region)+1+len(guid) > maxCognitoID || strings.IndexFunc(guid, func(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'f') && r != '-' }) >= 0 {
		return nil, false
	}
	role, amr := LocalCognitoAuthRole, []string{"authenticated", "cognito-idp." + c.Region + ".amazonaws.com/" + c.Region + "_local",
		"cognito-idp." + c.Region + ".amazonaws.com/" + c.Region + "_local:CognitoSignIn:" + guid}
	if guest {
		role, amr = LocalCognitoUnauthRole, []string{"unauthenticated"}
	}
	iam := LocalRoleSession(role, Credential{AccessKeyID: cognitoSession})
	iam.AccessKey = c.AccessKeyID
	iam.CognitoIdentity = events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity{
		AMR: amr, IdentityID: c.Region + ":" + guid, IdentityPoolID: c.Region + ":" + LocalIdentityPoolGUID,
	}
	return iam, true
}

// LocalRoleARN is the ARN of the local account's role named role.
func LocalRoleARN(role string) string { return "arn:aws:iam::" + accountID + ":role/" + role }

// LocalRoleSession is the identity API Gateway passes for a session of the
// local role named role, whose session name is the credential's access key:
// userArn arn:aws:sts::000000000000:assumed-role/ROLE/AKID, and callerId and
// userId the role's unique ID (LocalUniqueID) and the session name.
func LocalRoleSession(role string, c Credential) *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription {
	id := LocalUniqueID(RoleIDPrefix, LocalRoleARN(role), 0) + ":" + c.AccessKeyID
	return &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
		AccessKey: c.AccessKeyID, AccountID: accountID, CallerID: id,
		UserARN: "arn:aws:sts::" + accountID + ":assumed-role/" + role + "/" + c.AccessKeyID, UserID: id,
	}
}

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

// MaxClockSkew is how far a request's X-Amz-Date may be from the gateway's
// clock: "a request must reach AWS within five minutes of the time stamp in
// the request. Otherwise, AWS denies the request" (AWS Signature Version 4
// for API requests, https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv.html).
// AWS's answer names the bound: "Signature expired: 20230118T161739Z is now
// earlier than ... (... - 5 min.)" (re:Post Knowledge Center, "How do I
// resolve the Signature expired error when I use an AWS SDK to invoke a
// Lambda function?", https://repost.aws/knowledge-center/lambda-sdk-signature).
const MaxClockSkew = 5 * time.Minute

// skewError refuses a request signed too far from the gateway's clock,
// with API Gateway's message.
type skewError struct{ message string }

func (e *skewError) Error() string { return e.message }

// credentialOf reads a signed request's credential: one Authorization
// header that ParseAuthorization accepts, and one X-Amz-Date of the
// credential's day (the signing time every SigV4 signer sends) within
// MaxClockSkew of now. A malformed request wraps ErrNotSigned; one signed
// too far from now is a *skewError.
func credentialOf(r *http.Request, now time.Time) (Credential, error) {
	auth := r.Header.Values("Authorization")
	switch len(auth) {
	case 0:
		return Credential{}, fmt.Errorf("%w: no Authorization header", ErrNotSigned)
	case 1:
	default:
		return Credential{}, fmt.Errorf("%w: %d Authorization headers", ErrNotSigned, len(auth))
	}
	c, err := ParseAuthorization(auth[0])
	if err != nil {
		return Credential{}, err
	}
	date := r.Header.Values("X-Amz-Date")
	if len(date) != 1 || len(date[0]) != len(amzDateLayout) {
		return Credential{}, fmt.Errorf("%w: no single X-Amz-Date header", ErrNotSigned)
	}
	signed, err := time.Parse(amzDateLayout, date[0])
	if err != nil || date[0][:8] != c.Date {
		return Credential{}, fmt.Errorf("%w: X-Amz-Date %q is not a time of the credential's day %s", ErrNotSigned, truncate(date[0], 40), c.Date)
	}
	now = now.UTC().Truncate(time.Second)
	switch {
	case signed.Before(now.Add(-MaxClockSkew)):
		return Credential{}, &skewError{fmt.Sprintf("Signature expired: %s is now earlier than %s (%s - 5 min.)",
			date[0], now.Add(-MaxClockSkew).Format(amzDateLayout), now.Format(amzDateLayout))}
	case signed.After(now.Add(MaxClockSkew)):
		return Credential{}, &skewError{fmt.Sprintf("Signature not yet current: %s is still later than %s (%s + 5 min.)",
			date[0], now.Add(MaxClockSkew).Format(amzDateLayout), now.Format(amzDateLayout))}
	}
	return c, nil
}

// defaultCaller is every caller's identity and policy without WithCallers.
func defaultCaller(c Credential) Caller { return Caller{IAM: LocalCaller(c), Policy: AllowAll} }
