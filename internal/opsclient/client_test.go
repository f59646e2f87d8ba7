package opsclient

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sasflow/sas/shared/api"
)

// Answers that are not the API's own: API Gateway's {"message"} errors,
// proxies' HTML, and bodies a client must refuse.
func TestBadAnswers(t *testing.T) {
	t.Parallel()
	huge := `{"orderId":"err-00","state":"Error","lastError":"` + strings.Repeat("x", MaxResponseBytes) + `"}`
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		ctype  string
		body   string
		code   int
		stderr []string
	}{
		{"bad signature", []string{"show", "err-00"}, 403, "application/json", `{"message":"Forbidden"}`, ExitError,
			[]string{"GET /ops/orders/err-00: 403 Forbidden: Forbidden (request ID gw-1)", "check the AWS credentials"}},
		{"signature mismatch", []string{"retry", "err-00"}, 403, "application/json", `{"message":"The request signature we calculated does not match the signature you provided."}`, ExitError,
			[]string{"retry order err-00: POST /orders/err-00/retry: 403 Forbidden: The request signature we calculated"}},
		{"throttled", []string{"list", "--state", "Error"}, 429, "application/json", `{"message":"Too Many Requests"}`, ExitError,
			[]string{"GET /ops/orders?state=Error: 429 Too Many Requests: Too Many Requests"}},
		{"gateway 5xx", []string{"cancel", "proc-1"}, 503, "application/json", `{"message":"Service Unavailable"}`, ExitError,
			[]string{"503 Service Unavailable: Service Unavailable"}},
		// API Gateway's own 404 is a missing route, not a missing order.
		{"no such route", []string{"show", "err-00"}, 404, "application/json", `{"message":"Not Found"}`, ExitError,
			[]string{"404 Not Found: Not Found (request ID gw-1)"}},
		{"route 404 on retry is not a conflict or not-found", []string{"retry", "err-00"}, 404, "application/json", `{"message":"Not Found"}`, ExitError, nil},
		{"problem without detail", []string{"show", "err-00"}, 500, "application/problem+json", `{"type":"about:blank","title":"Internal Server Error","status":500}`, ExitError,
			[]string{"500 Internal Server Error: Internal Server Error"}},
		{"409 from the gateway still conflicts", []string{"retry", "err-00"}, 409, "application/json", `{"message":"Conflict"}`, ExitConflict, nil},
		{"HTML from a proxy", []string{"show", "err-00"}, 502, "text/html", "<html><body>Bad Gateway</body></html>", ExitError,
			[]string{"502 Bad Gateway: <html><body>Bad Gateway"}},
		{"terminal escapes in an error", []string{"show", "err-00"}, 500, "application/json", `{"message":"boom\u001b[2J\u202e"}`, ExitError,
			[]string{"boom\uFFFD[2J\uFFFD"}},
		{"200 not JSON", []string{"show", "err-00"}, 200, "text/plain", `{"orderId":"err-00","state":"Error"}`, ExitError,
			[]string{`200 response has Content-Type "text/plain", not JSON`}},
		{"200 malformed", []string{"show", "err-00"}, 200, "application/json", `{"orderId":"err-00","state":`, ExitError,
			[]string{"decode order: unexpected end of JSON input"}},
		{"200 unknown state", []string{"show", "err-00"}, 200, "application/json", `{"orderId":"err-00","state":"Exploded"}`, ExitError,
			[]string{`unknown state "Exploded"`}},
		{"200 another order", []string{"show", "err-00"}, 200, "application/json", `{"orderId":"err-01","state":"Error"}`, ExitError,
			[]string{"asked for order err-00, the API answered with err-01"}},
		{"202 another order", []string{"retry", "err-00"}, 202, "application/json", `{"orderId":"err-01","state":"Pending"}`, ExitError,
			[]string{"retry of order err-00: the API answered for order err-01"}},
		{"202 shell-unsafe order ID", []string{"retry", "err-00"}, 202, "application/json", `{"orderId":"x; rm -rf ~","state":"Pending"}`, ExitError,
			[]string{`orderId "x; rm -rf ~" is not an order ID`}},
		{"page without orders", []string{"list", "--state", "Error"}, 200, "application/json", `{"nextCursor":"abc"}`, ExitError,
			[]string{"no orders array"}},
		{"page with a bad cursor", []string{"list", "--state", "Error"}, 200, "application/json", `{"orders":[],"nextCursor":"a'b c"}`, ExitError,
			[]string{"nextCursor: byte 3 is not printable ASCII"}},
		{"body over the cap", []string{"show", "err-00"}, 200, "application/json", huge, ExitError,
			[]string{"200 response body exceeds 1048576 bytes"}},
		{"redirect not followed", []string{"show", "err-00"}, 307, "application/json", ``, ExitError,
			[]string{"307 Temporary Redirect"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, 1)
			f.intercept = func(w http.ResponseWriter, r *http.Request) bool {
				w.Header().Set("Content-Type", tc.ctype)
				w.Header().Set("Apigw-Requestid", "gw-1")
				w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
				return true
			}
			r := runCLI(t, Env{}, map[string]string{"SAS_API_URL": f.server().URL}, tc.args...)
			cliCase{code: tc.code, stderr: tc.stderr, requests: 1}.check(t, r, f)
			if strings.ContainsAny(r.stderr, "\x1b\u202e") {
				t.Errorf("stderr carries terminal control characters: %q", r.stderr)
			}
		})
	}
}

// Text from the API reaches the terminal without control sequences.
func TestOutputIsSanitized(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, 1)
	f.orders["err-00"].LastError = "evil\x1b]0;pwned\x07\nnext line\u202etxt"
	f.orders["err-00"].Steps[1].Error = "step\x1b[31m red"
	f.orders["err-00"].Step = "charge\tpayment"
	vars := map[string]string{"SAS_API_URL": f.server().URL}
	for _, args := range [][]string{{"list", "--state", "Error"}, {"show", "err-00"}} {
		r := runCLI(t, Env{}, vars, args...)
		if r.code != ExitOK {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
		if strings.ContainsAny(r.stdout, "\x1b\x07\u202e") || strings.Contains(r.stdout, "charge\tpayment") {
			t.Errorf("%v: control characters reach stdout: %q", args, r.stdout)
		}
		if !strings.Contains(r.stdout, "evil\uFFFD]0;pwned\uFFFD next line\uFFFDtxt") {
			t.Errorf("%v: last error not shown on one line: %q", args, r.stdout)
		}
	}
}

func TestListCursorLoop(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, 1)
	f.intercept = func(w http.ResponseWriter, r *http.Request) bool {
		writeJSONResponse(w, 200, "application/json", map[string]any{
			"orders": []map[string]any{{"orderId": "err-00", "state": "Error"}}, "nextCursor": "same",
		})
		return true
	}
	r := runCLI(t, Env{}, map[string]string{"SAS_API_URL": f.server().URL}, "list", "--state", "Error", "--all")
	cliCase{code: ExitError, stderr: []string{`the API returned cursor "same" twice`}, requests: 2}.check(t, r, f)
}

// A failure on a later page names how far paging got.
func TestListAllFailsMidway(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, 5)
	f.intercept = func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Query().Get("cursor") == "bzo0" {
			gatewayMessage(w, 500, "Internal Server Error")
			return true
		}
		return false
	}
	r := runCLI(t, Env{}, map[string]string{"SAS_API_URL": f.server().URL}, "list", "--state", "Error", "--limit", "2", "--all")
	cliCase{code: ExitError, stderr: []string{"after 4 orders: GET /ops/orders?cursor=bzo0&limit=2&state=Error: 500"}, requests: 3}.check(t, r, f)
}

// tlsFake serves the fake API over TLS as any host: the client dials the
// fake whatever the URL's host, and checks the test certificate for
// example.com, so the URL can name a remote host (which the CLI signs for).
func tlsFake(t *testing.T, f *fakeAPI) *http.Client {
	t.Helper()
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		},
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "example.com"},
	}}
}

var authPattern = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([a-z0-9-]+)/execute-api/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$`)

// sigCheck verifies requests the way API Gateway does: it signs the request
// it received again with the same key and time, over the SHA-256 of the
// body it received, and compares.
type sigCheck struct {
	t     *testing.T
	creds aws.Credentials
	mu    sync.Mutex
	seen  []string // access key/region of each request, or "unsigned"
}

func (c *sigCheck) verify(r *http.Request, body []byte) {
	auth := r.Header.Get("Authorization")
	c.mu.Lock()
	defer c.mu.Unlock()
	if auth == "" {
		c.seen = append(c.seen, "unsigned")
		return
	}
	m := authPattern.FindStringSubmatch(auth)
	if m == nil {
		c.t.Errorf("Authorization %q is not SigV4 for execute-api", auth)
		return
	}
	c.seen = append(c.seen, m[1]+"/"+m[3])
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		c.t.Errorf("X-Amz-Date: %v", err)
		return
	}
	again, err := http.NewRequest(r.Method, "https://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		c.t.Errorf("rebuild request: %v", err)
		return
	}
	for name := range strings.SplitSeq(m[4], ";") {
		if name != "host" {
			again.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		}
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), c.creds, again, hex.EncodeToString(sum[:]), "execute-api", m[3], at); err != nil {
		c.t.Errorf("sign again: %v", err)
		return
	}
	if got := again.Header.Get("Authorization"); got != auth {
		c.t.Errorf("signature does not verify:\n got  %s\n want %s", auth, got)
	}
	if c.creds.SessionToken != "" && r.Header.Get("X-Amz-Security-Token") != c.creds.SessionToken {
		c.t.Errorf("X-Amz-Security-Token %q, want the session token", r.Header.Get("X-Amz-Security-Token"))
	}
}

func (c *sigCheck) signed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

func TestSigning(t *testing.T) {
	t.Parallel()
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", SessionToken: "token-1"}
	for _, tc := range []struct {
		name       string
		endpoint   string
		args       []string
		cfgRegion  string // the SDK configuration's region
		wantLoad   string // region passed to LoadAWSConfig; "-" when not called
		wantSigned []string
		code       int
	}{
		{"list with --region", "https://ops.example.com", []string{"--region", "eu-west-1", "list", "--state", "Error", "--limit", "1", "--all"}, "us-east-1", "eu-west-1",
			[]string{"AKIDEXAMPLE/eu-west-1", "AKIDEXAMPLE/eu-west-1"}, ExitOK},
		{"show takes the SDK's region", "https://ops.example.com/", []string{"show", "err-00"}, "ap-south-1", "",
			[]string{"AKIDEXAMPLE/ap-south-1"}, ExitOK},
		{"retry takes the host's region", "https://abc123.execute-api.eu-central-1.amazonaws.com", []string{"retry", "err-00"}, "us-east-1", "eu-central-1",
			[]string{"AKIDEXAMPLE/eu-central-1"}, ExitOK},
		{"cancel signs an empty body", "https://ops.example.com", []string{"--region", "eu-west-1", "cancel", "proc-1"}, "", "eu-west-1",
			[]string{"AKIDEXAMPLE/eu-west-1"}, ExitOK},
		{"--no-sign", "https://ops.example.com", []string{"--no-sign", "show", "err-00"}, "", "-", []string{"unsigned"}, ExitOK},
		{"no region anywhere", "https://ops.example.com", []string{"show", "err-00"}, "", "", nil, ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, 2)
			check := &sigCheck{t: t, creds: creds}
			f.verify = check.verify
			env := Env{HTTPClient: tlsFake(t, f)}
			loaded := "-"
			env.LoadAWSConfig = func(_ context.Context, region string) (aws.Config, error) {
				loaded = region
				return aws.Config{Region: cmpOr(region, tc.cfgRegion), Credentials: credentials.NewStaticCredentialsProvider(creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken)}, nil
			}
			r := runCLI(t, env, map[string]string{"SAS_API_URL": tc.endpoint}, tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d: %s", r.code, tc.code, r.stderr)
			}
			if loaded != tc.wantLoad {
				t.Errorf("LoadAWSConfig got region %q, want %q", loaded, tc.wantLoad)
			}
			if got := strings.Join(check.signed(), ","); got != strings.Join(tc.wantSigned, ",") {
				t.Errorf("requests signed as %q, want %q", got, strings.Join(tc.wantSigned, ","))
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Loopback hosts are the local stack, which authorizes like API Gateway but
// verifies no signature: requests go over plain http, signed with the
// chain's credentials, or as LocalAccessKey when the chain has none.
func TestLoopbackIsSigned(t *testing.T) {
	t.Parallel()
	chainCreds := aws.Credentials{AccessKeyID: "AKIDDEVELOPER", SecretAccessKey: "dev-secret"}
	local := aws.Credentials{AccessKeyID: LocalAccessKey, SecretAccessKey: localSecret}
	for _, tc := range []struct {
		name, host string
		cfg        aws.Config
		args       []string
		creds      aws.Credentials
		want       string // access key/region it signs as
	}{
		{"no credentials, no region", "127.0.0.1", aws.Config{}, nil, local, LocalAccessKey + "/us-east-1"},
		{"the chain's credentials and region", "localhost", aws.Config{Region: "eu-west-1",
			Credentials: credentials.NewStaticCredentialsProvider(chainCreds.AccessKeyID, chainCreds.SecretAccessKey, "")}, nil, chainCreds, "AKIDDEVELOPER/eu-west-1"},
		{"a chain that fails", "[::1]", aws.Config{Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("no EC2 instance role")
		})}, nil, local, LocalAccessKey + "/us-east-1"},
		{"--region", "127.0.0.1", aws.Config{}, []string{"--region", "ap-south-1"}, local, LocalAccessKey + "/ap-south-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, 1)
			check := &sigCheck{t: t, creds: tc.creds}
			f.verify = check.verify
			srv := f.server()
			_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			var d net.Dialer
			hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, srv.Listener.Addr().String())
			}}}
			env := Env{HTTPClient: hc, LoadAWSConfig: func(context.Context, string) (aws.Config, error) { return tc.cfg, nil }}
			r := runCLI(t, env, map[string]string{"SAS_API_URL": "http://" + tc.host + ":" + port}, append(tc.args, "show", "err-00")...)
			if r.code != ExitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if got := check.signed(); len(got) != 1 || got[0] != tc.want {
				t.Errorf("signed as %q, want %s", got, tc.want)
			}
		})
	}
	// --no-sign still sends unsigned requests, and loads nothing.
	f := newFakeAPI(t, 1)
	env := Env{LoadAWSConfig: func(context.Context, string) (aws.Config, error) {
		t.Error("loaded AWS configuration for --no-sign")
		return aws.Config{}, nil
	}}
	r := runCLI(t, env, map[string]string{"SAS_API_URL": f.server().URL}, "--no-sign", "show", "err-00")
	if reqs := f.recorded(); r.code != ExitOK || len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "" {
		t.Fatalf("exit %d, %d requests: %s", r.code, len(reqs), r.stderr)
	}
}

// Without a LoadAWSConfig the CLI signs with the SDK's standard chain, in an
// environment that names none of this machine's AWS configuration.
func TestSigningWithTheDefaultChain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    map[string]string // set over the blanked chain
		remote bool              // https://ops.example.com through tlsFake, else the fake's loopback URL
		creds  aws.Credentials   // what the fake verifies the signature with
		want   string            // access key/region it signs as
	}{
		{"the environment's static keys", map[string]string{
			"AWS_ACCESS_KEY_ID":         "AKIDFROMENV",
			"AWS_SECRET_ACCESS_KEY":     "secret-from-env",
			"AWS_REGION":                "sa-east-1",
			"AWS_EC2_METADATA_DISABLED": "true",
		}, true, aws.Credentials{AccessKeyID: "AKIDFROMENV", SecretAccessKey: "secret-from-env"}, "AKIDFROMENV/sa-east-1"},
		// Without credentials anywhere, a loopback endpoint gets requests
		// signed as LocalAccessKey: the real loader's fallback, not a test
		// double's.
		{"no credentials, loopback", nil, false, aws.Credentials{AccessKeyID: LocalAccessKey, SecretAccessKey: localSecret}, LocalAccessKey + "/us-east-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE",
				"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
				t.Setenv(k, "")
			}
			t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			f := newFakeAPI(t, 1)
			check := &sigCheck{t: t, creds: tc.creds}
			f.verify = check.verify
			var out, errOut strings.Builder
			env := Env{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errOut}
			var endpoint string
			if tc.remote {
				env.HTTPClient, endpoint = tlsFake(t, f), "https://ops.example.com"
			} else {
				endpoint = f.server().URL
			}
			if code := Run(context.Background(), []string{"--endpoint-url", endpoint, "show", "err-00"}, env); code != ExitOK {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			if got := check.signed(); len(got) != 1 || got[0] != tc.want {
				t.Errorf("signed as %q, want %s", got, tc.want)
			}
		})
	}
}

func TestCredentialsFailure(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, 1)
	env := Env{HTTPClient: tlsFake(t, f), LoadAWSConfig: func(context.Context, string) (aws.Config, error) {
		return aws.Config{Region: "eu-west-1", Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("the SSO session has expired")
		})}, nil
	}}
	r := runCLI(t, env, map[string]string{"SAS_API_URL": "https://ops.example.com"}, "show", "err-00")
	cliCase{code: ExitError, stderr: []string{"GET /ops/orders/err-00: retrieve AWS credentials to sign the request: the SSO session has expired"}, requests: 0}.check(t, r, f)

	env.LoadAWSConfig = func(context.Context, string) (aws.Config, error) { return aws.Config{}, errors.New("bad profile") }
	r = runCLI(t, env, map[string]string{"SAS_API_URL": "https://ops.example.com"}, "show", "err-00")
	cliCase{code: ExitError, stderr: []string{"load AWS configuration to sign requests: bad profile"}, requests: 0}.check(t, r, f)
}

func TestRegionFromHost(t *testing.T) {
	t.Parallel()
	checkEach(t, "RegionFromHost", RegionFromHost, map[string]string{
		"abc123.execute-api.eu-west-1.amazonaws.com":     "eu-west-1",
		"ABC123.EXECUTE-API.US-GOV-WEST-1.AMAZONAWS.COM": "us-gov-west-1",
		"abc123.execute-api.cn-north-1.amazonaws.com.cn": "cn-north-1",
		"api.example.com":                       "",
		"execute-api.eu-west-1.example.com":     "",
		"abc.execute-api.amazonaws.com":         "",
		"abc.execute-api.eu_west.amazonaws.com": "",
		"127.0.0.1":                             "",
	})
}

func TestIsLoopback(t *testing.T) {
	t.Parallel()
	checkEach(t, "IsLoopback", IsLoopback, map[string]bool{
		"127.0.0.1": true, "127.0.0.2": true, "::1": true, "localhost": true, "LOCALHOST": true,
		"0.0.0.0": false, "10.0.0.1": false, "localhost.example.com": false, "abc.execute-api.eu-west-1.amazonaws.com": false, "": false,
	})
}

// checkEach calls fn, a function of one string named name, with each input
// of want and reports every result that is not the one want maps it to.
func checkEach[T comparable](t *testing.T, name string, fn func(string) T, want map[string]T) {
	t.Helper()
	for in, w := range want {
		if got := fn(in); got != w {
			t.Errorf("%s(%q) = %#v, want %#v", name, in, got, w)
		}
	}
}

func TestNewClientRefuses(t *testing.T) {
	t.Parallel()
	static := credentials.NewStaticCredentialsProvider("a", "b", "")
	for _, tc := range []struct {
		url  string
		opts Options
		want string
	}{
		{"https://api.example.com", Options{Credentials: static}, "needs a region"},
		{"http://api.example.com", Options{Credentials: static, Region: "eu-west-1"}, "plain http"},
		{"api.example.com", Options{}, "scheme must be http or https"},
		{"https://", Options{}, "no host"},
		{"https://api.example.com#x", Options{}, "query or fragment"},
	} {
		if _, err := NewClient(tc.url, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewClient(%q): %v, want %q", tc.url, err, tc.want)
		}
	}
	if _, err := NewClient("http://127.0.0.1:8080", Options{Credentials: static, Region: "eu-west-1"}); err != nil {
		t.Errorf("signed plain http to loopback: %v", err)
	}
}

// The client API itself, without the CLI: typed results and errors.Is.
func TestClient(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, 3)
	c, err := NewClient(f.server().URL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	page, err := c.ListOrders(ctx, ListParams{State: "Error", Limit: 2})
	if err != nil || len(page.Orders) != 2 || page.NextCursor == "" || page.Orders[0].OrderID != "err-02" || page.Orders[0].FailureCount != 3 ||
		!page.Orders[0].UpdatedAt.Equal(*ts(2)) || page.Orders[0].Status != "error" {
		t.Fatalf("page %+v, %v", page, err)
	}
	o, err := c.GetOrder(ctx, "comp-failed-1")
	if err != nil || len(o.Steps) != 2 || o.Steps[0].CompensationFailures != 4 || !o.Steps[1].CompensatedAt.Equal(*ts(3)) ||
		string(o.Steps[1].CompensationOutput) != `{"refund":"none"}` || !o.Cancelled || o.Resubmits != 1 || o.ClientID != "shop-web" {
		t.Fatalf("order %+v, %v", o, err)
	}
	a, err := c.Retry(ctx, "err-00")
	if err != nil || a.State != "Pending" || a.Links.Self != "/orders/err-00" {
		t.Fatalf("retry %+v, %v", a, err)
	}
	_, err = c.Cancel(ctx, "done-1")
	var ae *APIError
	if !errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) || !errors.As(err, &ae) || ae.Problem == nil || ae.Problem.RequestID != "req-409" {
		t.Fatalf("cancel of a processed order: %v", err)
	}
	if _, err := c.GetOrder(ctx, "gone"); !errors.Is(err, ErrNotFound) || ExitCode(err) != ExitNotFound {
		t.Fatalf("missing order: %v", err)
	}
	for _, p := range []ListParams{{State: "Nope"}, {State: "Error", Limit: 101}, {State: "Error", Limit: -1}, {State: "Error", Cursor: "a b"}} {
		if _, err := c.ListOrders(ctx, p); err == nil {
			t.Errorf("ListOrders(%+v) accepted", p)
		}
	}
	if _, err := c.Retry(ctx, "../x"); err == nil {
		t.Error("Retry accepted ../x")
	}
	if n := len(f.recorded()); n != 5 {
		t.Errorf("%d requests, want 5 (invalid input must not reach the API)", n)
	}
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("dial"), ExitError},
		{usagef("x"), ExitUsage},
		{&APIError{StatusCode: 409}, ExitConflict},
		{&APIError{StatusCode: 404, Problem: &api.Problem{Status: 404}}, ExitNotFound},
		{&APIError{StatusCode: 404, Message: "Not Found"}, ExitError},
		{&APIError{StatusCode: 403}, ExitError},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
