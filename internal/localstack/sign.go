package localstack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/sasflow/sas/internal/localstack/apigw"
)

// DemoAccessKey is the access key the demo's client signs with: the local
// API names it arn:aws:iam::000000000000:user/demo-client, the owner of
// every demo order.
const DemoAccessKey = "demo-client"

// OperatorAccessKey is the local operator, the access key the operators'
// CLI signs with against the local stack (opsclient.LocalAccessKey): the
// local API names it a session of OperatorRole, the one operator role the
// local Submission lists, allowed every route as the stack's operator
// policy allows.
const OperatorAccessKey = "local-operator"

// OperatorRole is the local stack's operator role, as the stack's
// OrderOperatorRole: arn:aws:iam::000000000000:role/OrderOperatorRole.
const OperatorRole = "OrderOperatorRole"

// localSecret signs every local request. The local API checks a
// signature's shape, not its value, because no secret exists locally; the
// access key alone names the caller.
const localSecret = "local-secret-not-checked"

// signingRegion is the region local requests are signed for; the local API
// takes any.
const signingRegion = "us-east-1"

// SignRequest signs req with SigV4 for execute-api as the local caller
// accessKey, over body (the bytes req will send; nil for none), as a client
// of the deployed API signs with its own credentials.
func SignRequest(ctx context.Context, req *http.Request, body []byte, accessKey string) error {
	return SignRequestAt(ctx, req, body, accessKey, time.Now())
}

// SignRequestAt is SignRequest with the signature's time at, such as one
// too far off for the gateway's clock-skew check.
func SignRequestAt(ctx context.Context, req *http.Request, body []byte, accessKey string, at time.Time) error {
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: localSecret, Source: "localrun"}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), apigw.SigningService, signingRegion, at); err != nil {
		return fmt.Errorf("sign %s %s as %s: %w", req.Method, req.URL.Path, accessKey, err)
	}
	return nil
}
