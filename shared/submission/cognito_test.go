package submission

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// The pool and identities of the tests, and the session of the pool's
// role that API Gateway passes for every one of them.
const (
	testPool       = "us-east-1:4f291106-8703-466b-8f2b-3ecee1ca56ce"
	identityAna    = "us-east-1:3f291106-8703-466b-8f2b-3ecee1ca56ce"
	identityBen    = "us-east-1:a1b2c3d4-0000-4000-8000-00000000b0b0"
	poolRoleUser   = "arn:aws:sts::123456789012:assumed-role/Cognito_shopAuth_Role/CognitoIdentityCredentials"
	poolRoleUserID = "AROAZ3EXAMPLEPOOL0001:CognitoIdentityCredentials"
)

func cognitoCaller(identity, pool string, amr ...string) *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription {
	return &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
		AccessKey: "ASIAEXAMPLE", AccountID: "123456789012", CallerID: poolRoleUserID,
		UserARN: poolRoleUser, UserID: poolRoleUserID,
		CognitoIdentity: events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity{AMR: amr, IdentityID: identity, IdentityPoolID: pool},
	}
}

// TestPrincipalOfEachKindOfCaller: the owner rule for every kind of caller
// API Gateway's IAM authorization passes, and the Cognito identities it
// refuses. The userId of a Cognito caller, the pool role's session, is not
// read.
func TestPrincipalOfEachKindOfCaller(t *testing.T) {
	t.Parallel()
	iamCaller := func(arn, userID string) *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription {
		return &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{AccessKey: "AKIAEXAMPLE", AccountID: "123456789012", UserARN: arn,
			CallerID: userID, UserID: userID}
	}
	withoutUserID := func(c *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription {
		c.UserID, c.CallerID = "", ""
		return c
	}
	authenticated := []string{"authenticated", "cognito-idp.us-east-1.amazonaws.com/us-east-1_aaaaaaaaa",
		"cognito-idp.us-east-1.amazonaws.com/us-east-1_aaaaaaaaa:CognitoSignIn:11111111-2222-3333-4444-555555555555"}
	tests := []struct {
		name   string
		caller *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription
		want   Owner // zero: refused
	}{
		{"IAM user", iamCaller("arn:aws:iam::123456789012:user/team/alice", "AIDAJQABLZS4A3QDU576Q"),
			Owner{"arn:aws:iam::123456789012:user/team/alice", "AIDAJQABLZS4A3QDU576Q"}},
		{"root user", iamCaller("arn:aws:iam::123456789012:root", "123456789012"), Owner{Name: "arn:aws:iam::123456789012:root"}},
		{"role session: the role", iamCaller("arn:aws:sts::123456789012:assumed-role/shop/i-0abc", "AROADBQP57FF2AEXAMPLE:i-0abc"),
			Owner{"arn:aws:sts::123456789012:assumed-role/shop", "AROADBQP57FF2AEXAMPLE"}},
		{"federated user", iamCaller("arn:aws:sts::123456789012:federated-user/bob", "123456789012:bob"),
			Owner{Name: "arn:aws:sts::123456789012:federated-user/bob"}},
		{"Cognito, authenticated", cognitoCaller(identityAna, testPool, authenticated...), Owner{Name: CognitoOwnerPrefix + testPool + "/" + identityAna}},
		{"Cognito, another user of the pool", cognitoCaller(identityBen, testPool, authenticated...), Owner{Name: CognitoOwnerPrefix + testPool + "/" + identityBen}},
		{"Cognito, unauthenticated", cognitoCaller(identityBen, testPool, "unauthenticated"), Owner{Name: CognitoOwnerPrefix + testPool + "/" + identityBen}},
		{"Cognito, no amr", cognitoCaller(identityAna, testPool), Owner{Name: CognitoOwnerPrefix + testPool + "/" + identityAna}},
		{"Cognito, no userId", withoutUserID(cognitoCaller(identityAna, testPool)), Owner{Name: CognitoOwnerPrefix + testPool + "/" + identityAna}},
		{"Cognito, the longest IDs", cognitoCaller("r:"+strings.Repeat("a", 53), "r:"+strings.Repeat("0", 53)),
			Owner{Name: CognitoOwnerPrefix + "r:" + strings.Repeat("0", 53) + "/r:" + strings.Repeat("a", 53)}},
		// Without its userId, or with one of another kind, an IAM
		// principal is no owner: the request is refused.
		{"IAM user without a userId", iamCaller("arn:aws:iam::123456789012:user/team/alice", ""), Owner{}},
		{"IAM user with a role's ID", iamCaller("arn:aws:iam::123456789012:user/team/alice", "AROADBQP57FF2AEXAMPLE"), Owner{}},
		{"role session without a userId", iamCaller("arn:aws:sts::123456789012:assumed-role/shop/i-0abc", ""), Owner{}},
		{"role session with a user's ID", iamCaller("arn:aws:sts::123456789012:assumed-role/shop/i-0abc", "AIDAJQABLZS4A3QDU576Q:i-0abc"), Owner{}},
		{"root user with another account", iamCaller("arn:aws:iam::123456789012:root", "210987654321"), Owner{}},
		{"federated user with another name", iamCaller("arn:aws:sts::123456789012:federated-user/bob", "123456789012:eve"), Owner{}},
		// A pool's role session does not make an owner when the identity is
		// malformed: the request is refused, never given the shared role.
		{"Cognito, no pool", cognitoCaller(identityAna, "", authenticated...), Owner{}},
		{"Cognito, no identity", cognitoCaller("", testPool, authenticated...), Owner{}},
		{"Cognito, amr only", cognitoCaller("", "", authenticated...), Owner{}},
		{"Cognito, no region", cognitoCaller(":3f291106", testPool), Owner{}},
		{"Cognito, no GUID", cognitoCaller("us-east-1:", testPool), Owner{}},
		{"Cognito, no colon", cognitoCaller("us-east-1-3f291106", testPool), Owner{}},
		{"Cognito, upper-case GUID", cognitoCaller("us-east-1:3F291106", testPool), Owner{}},
		{"Cognito, a slash", cognitoCaller("us-east-1:3f29/1106", testPool), Owner{}},
		{"Cognito, a second colon", cognitoCaller(identityAna, "us-east-1:4f29:1106"), Owner{}},
		{"Cognito, a dot in the region", cognitoCaller("us.east:3f291106", testPool), Owner{}},
		{"Cognito, an ID too long", cognitoCaller("r:"+strings.Repeat("a", 54), testPool), Owner{}},
		{"Cognito, an empty amr entry", cognitoCaller(identityAna, testPool, "authenticated", ""), Owner{}},
		{"Cognito, a space in amr", cognitoCaller(identityAna, testPool, "authen ticated"), Owner{}},
		{"Cognito, a control character in amr", cognitoCaller(identityAna, testPool, "authenticated\n"), Owner{}},
		{"Cognito, an amr entry too long", cognitoCaller(identityAna, testPool, strings.Repeat("a", 1025)), Owner{}},
		{"Cognito, too many amr entries", cognitoCaller(identityAna, testPool, strings.Split(strings.Repeat("a,", 16)+"a", ",")...), Owner{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Principal(tt.caller)
			if tt.want == (Owner{}) {
				if !errors.Is(err, ErrNoIdentity) || got != (Owner{}) {
					t.Fatalf("Principal = %+v, %v; want ErrNoIdentity", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Principal = %+v, %v; want %+v", got, err, tt.want)
			}
			if key := got.Key(); len(key) > maxPrincipalLen || strings.ContainsFunc(key, func(r rune) bool { return r <= ' ' || r > '~' }) {
				t.Fatalf("owner key %q is not printable ASCII within %d bytes", key, maxPrincipalLen)
			}
		})
	}
}

// TestPrincipalOfTheSampleEvent decodes aws-lambda-go's own sample of an
// IAM-authorized request with Cognito identity pool credentials
// (events/testdata/apigw-v2-request-iam.json): its owner is its Cognito
// identity, not its userArn (which in the sample is not even a
// well-formed ARN, with a ten-digit account).
func TestPrincipalOfTheSampleEvent(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-lambda-go").Output()
	if err != nil {
		t.Fatalf("locate aws-lambda-go: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "events", "testdata", "apigw-v2-request-iam.json"))
	if err != nil {
		t.Fatal(err)
	}
	var req events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	owner, err := caller(req)
	want := Owner{Name: CognitoOwnerPrefix + "us-east-1:4f291106-8703-466b-8f2b-3ecee1ca56ce/us-east-1:3f291106-8703-466b-8f2b-3ecee1ca56ce"}
	if err != nil || owner != want {
		t.Fatalf("owner of the sample = %+v, %v; want %+v", owner, err, want)
	}
	// Without its Cognito identity, the sample's userArn is refused.
	req.RequestContext.Authorizer.IAM.CognitoIdentity = events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity{}
	if owner, err := caller(req); !errors.Is(err, ErrNoIdentity) {
		t.Fatalf("the sample without its Cognito identity: %+v, %v", owner, err)
	}
}

// TestACognitoPoolRoleIsNoOperator: a caller with a Cognito identity is
// never an operator, even if its pool's role is listed; the role's other
// sessions are.
func TestACognitoPoolRoleIsNoOperator(t *testing.T) {
	t.Parallel()
	ops, err := NewOperators([]string{"arn:aws:iam::123456789012:role/Cognito_shopAuth_Role"})
	if err != nil {
		t.Fatal(err)
	}
	if ops.Is(cognitoCaller(identityAna, testPool, "authenticated")) {
		t.Fatal("a Cognito identity of a listed role's pool is an operator")
	}
	if !ops.Is(&events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: poolRoleUser}) {
		t.Fatal("a session of the listed role without a Cognito identity is not an operator")
	}
	// End to end on the handler: 403 on every operator route.
	f := newFixture(t, nil)
	req := request("GET", "/ops/workflows", nil, "")
	req.RequestContext.Authorizer.IAM = cognitoCaller(identityAna, testPool, "authenticated")
	if p := readProblem(t, f.do(t, req), 403); p.Type != ProblemNotOperator {
		t.Fatalf("problem %+v", p)
	}
}

// FuzzPrincipalCognito: whatever Cognito identity arrives, Principal never
// panics; an owner it returns is printable ASCII within the bound, names
// the pool and the identity, has no unique ID, and is never an IAM
// principal's (no "arn:").
func FuzzPrincipalCognito(f *testing.F) {
	f.Add(identityAna, testPool, "authenticated", poolRoleUser)
	f.Add("", testPool, "", "")
	f.Add("us-east-1:", ":", "unauthenticated", "arn:aws:iam::123456789012:user/a")
	f.Add("a:b", "c:d", "x\x00", "")
	f.Add("r:"+strings.Repeat("f", 60), testPool, "", "")
	f.Fuzz(func(t *testing.T, identity, pool, amr, userArn string) {
		var amrs []string
		if amr != "" {
			amrs = strings.Split(amr, ",")
		}
		c := cognitoCaller(identity, pool, amrs...)
		c.UserARN = userArn
		got, err := Principal(c)
		if err != nil {
			if !errors.Is(err, ErrNoIdentity) || got != (Owner{}) {
				t.Fatalf("Principal = %+v, %v", got, err)
			}
			return
		}
		if identity == "" && pool == "" && len(amrs) == 0 {
			// No Cognito identity: the IAM rule's owner, a role's here.
			if !strings.HasPrefix(got.Name, "arn:") || got.ID != strings.Split(poolRoleUserID, ":")[0] {
				t.Fatalf("owner %+v of userArn %q", got, userArn)
			}
			return
		}
		owner := got.Name
		if got.ID != "" || got.Key() != owner || owner != CognitoOwnerPrefix+pool+"/"+identity || strings.HasPrefix(owner, "arn:") || len(owner) > maxPrincipalLen ||
			strings.ContainsFunc(owner, func(r rune) bool { return r <= ' ' || r > '~' }) || strings.Count(owner, "/") != 1 {
			t.Fatalf("owner %+v of identity %q in pool %q", got, identity, pool)
		}
	})
}
