package submission

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/workflow"
)

// ErrNoIdentity is wrapped by Principal when a request carries no usable IAM
// identity. API Gateway with IAM authorization never sends such a request;
// receiving one means a route lost its authorization, so it is refused.
var ErrNoIdentity = errors.New("no IAM identity")

// maxPrincipalLen bounds an owner. The longest IAM ARN API Gateway passes (a
// user with a 512-character path) is well under it, and it keeps the owner
// far below DynamoDB's 2048-byte limit for an index's partition key.
const maxPrincipalLen = 1024

// Owner is who owns what a caller submits, as an order records it
// (workflow.Order.Owner and OwnerID), and is matched on its Key.
type Owner struct {
	// Name is the owner as operators read it: the principal's ARN, every
	// session of one role being the role, or a Cognito identity.
	Name string
	// ID is the unique ID IAM gave the principal, a user's (AIDA…) or a
	// role's (AROA…), which no principal created anew under the same name
	// has; empty for the owners that are unique by their Name.
	ID string
}

// Key is what the owner is matched on (workflow.OwnerKey): its ID, else its
// Name.
func (o Owner) Key() string { return workflow.OwnerKey(o.Name, o.ID) }

// Principal returns the owner of what the caller submits. For a caller with
// Cognito identity pool credentials, API Gateway passes the Cognito
// identity (requestContext.authorizer.iam.cognitoIdentity) beside a session
// of the pool's role that every user of the pool shares, so the owner is
// the identity, in the pool:
//
//	cognito-identity:POOL/IDENTITY     (cognito-identity:us-east-1:4f29.../us-east-1:3f29...)
//
// which names both, is printable ASCII of at most 128 bytes, and, not
// starting with "arn:", is never an IAM principal's owner. Authenticated
// and unauthenticated (guest) identities alike: each is its own client, and
// unique by its name, since Cognito never gives an identity ID twice. The
// userId beside it, the pool role's session every user shares, says
// nothing of the owner and is not read.
//
// Otherwise the owner is the IAM principal API Gateway authenticated:
// its ARN (requestContext.authorizer.iam.userArn), for operators to read,
// and the unique ID IAM gave it (userId), which it is matched on. IAM never
// gives a unique ID again: a user or role deleted and created anew under
// the same name has the same ARN and a new ID, so it is another owner ("IAM
// identifiers", Unique identifiers,
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-unique-ids).
// userId carries the aws:userid of the caller, whose form follows the
// principal's kind ("Policy variables", Principal key values,
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_variables.html#principaltable;
// $context.identity.user, "Customize HTTP API access logs",
// https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-logging-variables.html):
//
//	IAM user        arn:aws:iam::111122223333:user/PATH/NAME             userId AIDA…            owner the ARN, ID AIDA…
//	role session    arn:aws:sts::111122223333:assumed-role/ROLE/SESSION  userId AROA…:SESSION    owner arn:aws:sts::111122223333:assumed-role/ROLE, ID AROA…
//	root user       arn:aws:iam::111122223333:root                       userId 111122223333     owner the ARN
//	federated user  arn:aws:sts::111122223333:federated-user/NAME        userId 111122223333:NAME owner the ARN
//
// Every session of one role is one client: the session name is chosen by
// whoever assumes the role, so it names nobody, and the owner's ID is the
// role's, the part of userId before its ":". The root user and a federated
// user have no ID of their own: the root user is its account's, which is
// never another account's, and a federated user's userId names nothing its
// ARN does not; their ARN is their key, as before IDs were recorded.
//
// Both are outside input as far as this code knows: anything that is not a
// well-formed Cognito identity, or with none a well-formed IAM or STS
// principal ARN of one of the four kinds with a userId of that kind's form,
// wraps ErrNoIdentity.
func Principal(iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) (Owner, error) {
	if iam == nil {
		return Owner{}, ErrNoIdentity
	}
	if hasCognitoIdentity(iam) {
		name, err := cognitoOwner(iam.CognitoIdentity)
		if err != nil {
			return Owner{}, err
		}
		return Owner{Name: name}, nil
	}
	if iam.UserARN == "" {
		return Owner{}, ErrNoIdentity
	}
	arn := iam.UserARN
	if len(arn) > maxPrincipalLen {
		return Owner{}, fmt.Errorf("%w: userArn longer than %d bytes", ErrNoIdentity, maxPrincipalLen)
	}
	for i := 0; i < len(arn); i++ {
		if arn[i] <= ' ' || arn[i] > '~' {
			return Owner{}, fmt.Errorf("%w: userArn has a space, control or non-ASCII character", ErrNoIdentity)
		}
	}
	// arn:partition:service:region:account:resource
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || !partitionName(parts[1]) || parts[3] != "" || !accountID(parts[4]) || parts[5] == "" {
		return Owner{}, fmt.Errorf("%w: userArn is not a principal ARN", ErrNoIdentity)
	}
	service, account, resource := parts[2], parts[4], parts[5]
	switch {
	case service == "sts" && strings.HasPrefix(resource, "assumed-role/"):
		segs := strings.Split(resource, "/")
		if len(segs) != 3 || segs[1] == "" || segs[2] == "" {
			return Owner{}, fmt.Errorf("%w: assumed-role ARN is not assumed-role/ROLE/SESSION", ErrNoIdentity)
		}
		roleID, session, ok := strings.Cut(iam.UserID, ":")
		if !ok || !ValidUniqueID(roleID, RolePrefix) || !sessionName(session) {
			return Owner{}, fmt.Errorf("%w: the userId of a role session is not %s…:SESSION (the role's unique ID, then the session's name)", ErrNoIdentity, RolePrefix)
		}
		return Owner{Name: strings.Join(parts[:5], ":") + ":assumed-role/" + segs[1], ID: roleID}, nil
	case service == "iam" && strings.HasPrefix(resource, "user/") && !strings.HasSuffix(resource, "/"):
		if !ValidUniqueID(iam.UserID, UserPrefix) {
			return Owner{}, fmt.Errorf("%w: the userId of an IAM user is not its unique ID (%s…)", ErrNoIdentity, UserPrefix)
		}
		return Owner{Name: arn, ID: iam.UserID}, nil
	case service == "iam" && resource == "root":
		if iam.UserID != account {
			return Owner{}, fmt.Errorf("%w: the userId of the root user is not its account's ID", ErrNoIdentity)
		}
		return Owner{Name: arn}, nil
	case service == "sts" && strings.HasPrefix(resource, "federated-user/") && len(resource) > len("federated-user/"):
		if iam.UserID != account+":"+strings.TrimPrefix(resource, "federated-user/") {
			return Owner{}, fmt.Errorf("%w: the userId of a federated user is not ACCOUNT:NAME of its ARN", ErrNoIdentity)
		}
		return Owner{Name: arn}, nil
	case service == "sts" || service == "iam":
		return Owner{}, fmt.Errorf("%w: userArn is no IAM user, root user, role session or federated user", ErrNoIdentity)
	}
	return Owner{}, fmt.Errorf("%w: userArn of service %q is not an IAM or STS principal", ErrNoIdentity, service)
}

// The prefixes of the unique IDs of an IAM user and of a role ("IAM
// identifiers", Understanding unique ID prefixes,
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-prefixes).
const (
	UserPrefix = "AIDA"
	RolePrefix = "AROA"
)

// IAM's bounds on a unique ID: 16..128 of [\w]+ (the UserId of User and the
// RoleId of Role in IAM's API reference,
// https://docs.aws.amazon.com/IAM/latest/APIReference/API_User.html,
// https://docs.aws.amazon.com/IAM/latest/APIReference/API_Role.html), and on
// a role session's name: 2..64 of [\w+=,.@-] (RoleSessionName,
// https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html),
// of which one character is let through too.
const (
	minUniqueID    = 16
	maxUniqueID    = 128
	maxSessionName = 64
)

// ValidUniqueID reports whether s is a unique ID of IAM's with prefix
// (UserPrefix, RolePrefix): one the Submission takes from API Gateway.
func ValidUniqueID(s, prefix string) bool {
	if len(s) < minUniqueID || len(s) > maxUniqueID || !strings.HasPrefix(s, prefix) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !wordChar(s[i]) {
			return false
		}
	}
	return true
}

// sessionName reports whether s is a role session's name.
func sessionName(s string) bool {
	if s == "" || len(s) > maxSessionName {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !wordChar(s[i]) && !strings.ContainsRune("+=,.@-", rune(s[i])) {
			return false
		}
	}
	return true
}

// wordChar is [\w]: an ASCII letter, digit or underscore.
func wordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// CognitoOwnerPrefix starts the owner of a Cognito identity.
const CognitoOwnerPrefix = "cognito-identity:"

// Cognito's bounds on an identity's and a pool's IDs, REGION:GUID: 1..55 of
// [\w-]+:[0-9a-f-]+ (Amazon Cognito Federated Identities API reference,
// IdentityDescription and IdentityPoolShortDescription:
// https://docs.aws.amazon.com/cognitoidentity/latest/APIReference/API_IdentityDescription.html,
// https://docs.aws.amazon.com/cognitoidentity/latest/APIReference/API_IdentityPoolShortDescription.html).
// amr is not part of the owner; it is bounded all the same.
const (
	maxCognitoID      = 55
	maxAMREntries     = 16
	maxAMREntryLength = 1024
)

// hasCognitoIdentity reports whether API Gateway passed any of a Cognito
// identity.
func hasCognitoIdentity(iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) bool {
	c := iam.CognitoIdentity
	return c.IdentityID != "" || c.IdentityPoolID != "" || len(c.AMR) > 0
}

// cognitoOwner is the owner of a Cognito identity: both IDs well-formed,
// and amr, if any, a few printable entries.
func cognitoOwner(c events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity) (string, error) {
	if !cognitoID(c.IdentityID) || !cognitoID(c.IdentityPoolID) {
		return "", fmt.Errorf("%w: cognitoIdentity needs an identityId and an identityPoolId of the form REGION:GUID", ErrNoIdentity)
	}
	if len(c.AMR) > maxAMREntries {
		return "", fmt.Errorf("%w: cognitoIdentity.amr has more than %d entries", ErrNoIdentity, maxAMREntries)
	}
	for _, a := range c.AMR {
		if a == "" || len(a) > maxAMREntryLength || strings.ContainsFunc(a, func(r rune) bool { return r <= ' ' || r > '~' }) {
			return "", fmt.Errorf("%w: a cognitoIdentity.amr entry is not 1..%d printable characters", ErrNoIdentity, maxAMREntryLength)
		}
	}
	return CognitoOwnerPrefix + c.IdentityPoolID + "/" + c.IdentityID, nil
}

// cognitoID is Cognito's rule for an identity or pool ID: [\w-]+:[0-9a-f-]+.
func cognitoID(s string) bool {
	region, guid, ok := strings.Cut(s, ":")
	if !ok || region == "" || guid == "" || len(s) > maxCognitoID {
		return false
	}
	for i := 0; i < len(region); i++ {
		c := region[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	for i := 0; i < len(guid); i++ {
		c := guid[i]
		if (c < 'a' || c > 'f') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
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

// Operators is who may call the operator routes (Route.Operator): every
// session of a listed IAM role, and a listed IAM user. It is matched on the
// caller's IAM identity, requestContext.authorizer.iam.userArn, which API
// Gateway's IAM authorization verified.
type Operators struct {
	// roles holds "partition:account:name" of each role: a session's ARN,
	// arn:aws:sts::111122223333:assumed-role/NAME/SESSION, carries neither
	// the role's path nor anything but its name, and a role's name is
	// unique in its account.
	roles map[string]bool
	// users holds each user's ARN, path included, as API Gateway passes it.
	users map[string]bool
}

// The shapes of IAM names and paths, as IAM's API reference gives them
// (EntityInfo, https://docs.aws.amazon.com/IAM/latest/APIReference/API_EntityInfo.html):
// a name is 1..64 of [\w+=,.@-], a path "/" or "/.../" of 1..512 characters
// within U+0021..U+007E. The ARN forms are IAM's (IAM identifiers, IAM
// ARNs: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html).
const (
	maxIAMName = 64
	maxIAMPath = 512
)

// NewOperators reads the ARNs of the operators: each an IAM role,
// arn:PARTITION:iam::ACCOUNT:role/PATH/NAME, or an IAM user,
// arn:PARTITION:iam::ACCOUNT:user/PATH/NAME. None is no operator at all.
// Every ARN that is neither is reported.
func NewOperators(arns []string) (Operators, error) {
	o := Operators{roles: map[string]bool{}, users: map[string]bool{}}
	var errs []error
	for _, arn := range arns {
		kind, key, err := operatorARN(arn)
		switch {
		case err != nil:
			errs = append(errs, err)
		case kind == "role":
			o.roles[key] = true
		default:
			o.users[key] = true
		}
	}
	return o, errors.Join(errs...)
}

// operatorARN checks an operator's ARN and returns its kind, "role" or
// "user", and its key in Operators.
func operatorARN(arn string) (kind, key string, err error) {
	fail := func(why string) (string, string, error) {
		return "", "", fmt.Errorf("%q is not an IAM role or user ARN (arn:partition:iam::account:role/name or user/name): %s", truncated(arn), why)
	}
	if len(arn) > maxPrincipalLen {
		return fail(fmt.Sprintf("longer than %d bytes", maxPrincipalLen))
	}
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || !partitionName(parts[1]) || parts[2] != "iam" || parts[3] != "" || !accountID(parts[4]) {
		return fail("not arn:partition:iam::account:...")
	}
	kind, rest, ok := strings.Cut(parts[5], "/")
	if !ok || (kind != "role" && kind != "user") {
		return fail("its resource is neither role/... nor user/...")
	}
	i := strings.LastIndexByte(rest, '/')
	path, name := "/"+rest[:i+1], rest[i+1:]
	if !iamName(name) {
		return fail(fmt.Sprintf("the name is not 1..%d of A-Z a-z 0-9 _+=,.@-", maxIAMName))
	}
	if len(path) > maxIAMPath || strings.ContainsFunc(path, func(r rune) bool { return r < '!' || r > '~' }) {
		return fail(fmt.Sprintf("the path is not /.../ of up to %d printable characters", maxIAMPath))
	}
	if kind == "role" {
		return kind, parts[1] + ":" + parts[4] + ":" + name, nil
	}
	return kind, arn, nil
}

// iamName is IAM's rule for a role or user name.
func iamName(s string) bool {
	if s == "" || len(s) > maxIAMName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && !strings.ContainsRune("_+=,.@-", rune(c)) {
			return false
		}
	}
	return true
}

func truncated(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "..."
}

// Is reports whether the caller API Gateway authenticated is an operator:
// a session of a listed role, or a listed user. Anything else, including
// an identity that is not a well-formed principal ARN, is not; nor is a
// caller with a Cognito identity, even if its pool's role is listed: that
// role is every user's of the pool, and an operator is one principal.
func (o Operators) Is(iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) bool {
	if iam == nil || hasCognitoIdentity(iam) {
		return false
	}
	arn := iam.UserARN
	if o.users[arn] {
		return true
	}
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sts" || parts[3] != "" {
		return false
	}
	segs := strings.Split(parts[5], "/")
	if len(segs) != 3 || segs[0] != "assumed-role" || segs[1] == "" || segs[2] == "" {
		return false
	}
	return o.roles[parts[1]+":"+parts[4]+":"+segs[1]]
}

// ParseOperatorPrincipals splits OPERATOR_PRINCIPALS, a comma-separated
// list of ARNs; an empty entry (the stack joins its role with a parameter
// that may be empty) is no entry.
func ParseOperatorPrincipals(s string) []string {
	var out []string
	for arn := range strings.SplitSeq(s, ",") {
		if arn != "" {
			out = append(out, arn)
		}
	}
	return out
}

// caller reads the owner of a request.
func caller(req events.APIGatewayV2HTTPRequest) (Owner, error) {
	if req.RequestContext.Authorizer == nil {
		return Owner{}, ErrNoIdentity
	}
	return Principal(req.RequestContext.Authorizer.IAM)
}
