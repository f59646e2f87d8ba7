package localstack_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/internal/localstack/apigw"
	"github.com/sasflow/sas/internal/opsclient"
	"github.com/sasflow/sas/shared/submission"
)

// mistakenClient is a client whose IAM policy lets it invoke the whole API
// (execute-api:Invoke on *) instead of the client policy.
const mistakenClient = "mistaken-client"

// callSignedAt sends a request signed as accessKey at the given time, with
// the extra headers given.
func callSignedAt(t *testing.T, method, url, accessKey string, at time.Time, headers map[string]string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	sum := sha256.Sum256(nil)
	creds := aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: "not checked"}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), apigw.SigningService, "us-east-1", at); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b)}
}

// TestOperatorRoutesAreRefusedByTheHandlerTooEndToEnd runs the operator
// routes through the local API over HTTP, which emulates the stack's
// policies: a client (the client policy) gets API Gateway's own 403 from
// the IAM check; a client whose policy allows every route by mistake gets
// through API Gateway and is refused by the Submission with its 403
// problem; the local operator, a session of the local operator role, is
// served. A request signed sixteen minutes ago is refused, and so is one
// whose headers are over the HTTP API's quota.
func TestOperatorRoutesAreRefusedByTheHandlerTooEndToEnd(t *testing.T) {
	t.Parallel()
	st, _ := start(t, func(o *localstack.Options) { o.InvokeAll = []string{mistakenClient} })
	if localstack.OperatorAccessKey != opsclient.LocalAccessKey {
		t.Fatalf("the local operator %q is not the key sasctl signs with, %q", localstack.OperatorAccessKey, opsclient.LocalAccessKey)
	}
	id := submit(t, st, testClient, "")
	for _, r := range submission.Routes() {
		if !r.Operator {
			continue
		}
		url := st.APIURL + strings.ReplaceAll(r.Path, "{id}", id)
		if r.Path == "/ops/orders" {
			url += "?state=Error"
		}
		t.Run(r.Method+" "+r.Path, func(t *testing.T) {
			if a := call(t, r.Method, url, "", testClient, nil); a.status != 403 || a.body != `{"message":"Forbidden"}` {
				t.Errorf("a client: %d %s; want API Gateway's 403", a.status, a.body)
			}
			a := call(t, r.Method, url, "", mistakenClient, nil)
			if a.status != 403 || !strings.Contains(a.body, `"type":"`+submission.ProblemNotOperator+`"`) {
				t.Errorf("a client allowed every route: %d %s; want the handler's 403 problem", a.status, a.body)
			}
			// Served: whatever the order's state makes of it, not a refusal.
			if a := call(t, r.Method, url, "", localstack.OperatorAccessKey, nil); a.status == 403 || a.status >= 500 {
				t.Errorf("the local operator: %d %s", a.status, a.body)
			}
		})
	}
	// The client routes stay the client's.
	if a := call(t, "GET", st.APIURL+"/orders/"+id, "", testClient, nil); a.status != 200 {
		t.Fatalf("a client reading its order: %d %s", a.status, a.body)
	}

	// Signed sixteen minutes ago: the signature has expired.
	a := callSignedAt(t, "GET", st.APIURL+"/orders/"+id, testClient, time.Now().Add(-16*time.Minute), nil)
	if a.status != 403 || !strings.HasPrefix(a.body, `{"message":"Signature expired: `) || !strings.HasSuffix(a.body, ` - 5 min.)"}`) {
		t.Fatalf("a request signed 16 minutes ago: %d %s", a.status, a.body)
	}
	// Headers over the quota: refused before anything else.
	a = callSignedAt(t, "GET", st.APIURL+"/orders/"+id, testClient, time.Now(), map[string]string{"X-Padding": strings.Repeat("p", apigw.MaxHeaderBytes)})
	if a.status != http.StatusRequestHeaderFieldsTooLarge || a.body != `{"message":"Request Header Fields Too Large"}` {
		t.Fatalf("a request with %d bytes of headers: %d %s", apigw.MaxHeaderBytes, a.status, a.body)
	}
}
