package apigw_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/sasflow/sas/internal/localstack/apigw"
	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/submission"
)

const (
	testSig  = "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
	testAuth = "AWS4-HMAC-SHA256 Credential=client-a/20260312/us-east-1/execute-api/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=" + testSig
	testDate = "20260312T190358Z"
)

// signed is a request signed with the SDK's SigV4 signer, as a client of
// the deployed API signs it, by accessKey with a secret nobody checks.
func signed(t *testing.T, method, target, accessKey string, body []byte) *http.Request {
	t.Helper()
	r := httptest.NewRequest(method, target, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: "any secret will do"}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hex.EncodeToString(sum[:]), "execute-api", "eu-west-1", testTime); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestIAMAuthorization: with WithIAMAuthorization, an unsigned request gets
// API Gateway's 403 and never reaches the handler; a signed one reaches it
// with the identity its access key names.
func TestIAMAuthorization(t *testing.T) {
	t.Parallel()
	t.Run("unsigned", func(t *testing.T) {
		t.Parallel()
		f := &fake{}
		w := serve(newGateway(t, f, apigw.WithIAMAuthorization()), httptest.NewRequest("POST", "/orders", strings.NewReader(`{}`)))
		wantRefused(t, w, f, http.StatusForbidden, "Forbidden")
	})
	t.Run("unknown route, unsigned", func(t *testing.T) {
		t.Parallel()
		// Routes match before authorization, as in API Gateway.
		f := &fake{}
		wantGatewayAnswer(t, serve(newGateway(t, f, apigw.WithIAMAuthorization()), httptest.NewRequest("GET", "/nowhere", nil)), 404, "Not Found")
	})
	t.Run("signed by the SDK", func(t *testing.T) {
		t.Parallel()
		f := &fake{resp: events.APIGatewayV2HTTPResponse{StatusCode: 202, Body: "{}"}}
		body := []byte(`{"customerId":"c"}`)
		w := serve(newGateway(t, f, apigw.WithIAMAuthorization()), signed(t, "POST", "/orders", "demo-client", body))
		if w.Code != 202 {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		ev := f.only(t)
		id := apigw.LocalUniqueID(apigw.UserIDPrefix, "arn:aws:iam::000000000000:user/demo-client", 0)
		want := &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
			AccessKey: "demo-client", AccountID: "000000000000", CallerID: id,
			UserARN: "arn:aws:iam::000000000000:user/demo-client", UserID: id,
		}
		if ev.RequestContext.Authorizer == nil || !reflect.DeepEqual(ev.RequestContext.Authorizer.IAM, want) {
			t.Fatalf("authorizer %+v, want iam %+v", ev.RequestContext.Authorizer, want)
		}
		if ev.Body != string(body) || ev.Headers["authorization"] == "" {
			t.Fatalf("event %+v", ev)
		}
		if apigw.LocalUserARN("demo-client") != want.UserARN {
			t.Fatalf("LocalUserARN = %s", apigw.LocalUserARN("demo-client"))
		}
	})
	t.Run("signed by curl", func(t *testing.T) {
		t.Parallel()
		// What curl --aws-sigv4 "aws:amz:us-east-1:execute-api" --user local:local sends.
		f := &fake{}
		r := httptest.NewRequest("GET", "/orders/o-1", nil)
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20260312/us-east-1/execute-api/aws4_request, SignedHeaders=host;x-amz-date, Signature="+testSig)
		r.Header.Set("X-Amz-Date", testDate)
		serve(newGateway(t, f, apigw.WithIAMAuthorization()), r)
		if got := f.only(t).RequestContext.Authorizer.IAM.UserARN; got != "arn:aws:iam::000000000000:user/local" {
			t.Fatalf("userArn %q", got)
		}
	})
	t.Run("without the option", func(t *testing.T) {
		t.Parallel()
		f := &fake{}
		serve(newGateway(t, f), httptest.NewRequest("GET", "/orders/o-1", nil))
		if ev := f.only(t); ev.RequestContext.Authorizer != nil {
			t.Fatalf("an authorizer without IAM authorization: %+v", ev.RequestContext.Authorizer)
		}
	})

	withAuth := func(headers ...string) *http.Request {
		r := httptest.NewRequest("GET", "/orders/o-1", nil)
		for i := 0; i < len(headers); i += 2 {
			r.Header.Add(headers[i], headers[i+1])
		}
		return r
	}
	for name, r := range map[string]*http.Request{
		"no X-Amz-Date":             withAuth("Authorization", testAuth),
		"X-Amz-Date of another day": withAuth("Authorization", testAuth, "X-Amz-Date", "20260313T000000Z"),
		"X-Amz-Date malformed":      withAuth("Authorization", testAuth, "X-Amz-Date", "2026-03-12T19:03:58Z"),
		"two X-Amz-Date":            withAuth("Authorization", testAuth, "X-Amz-Date", testDate, "X-Amz-Date", testDate),
		"two Authorization":         withAuth("Authorization", testAuth, "Authorization", testAuth, "X-Amz-Date", testDate),
		"malformed Authorization":   withAuth("Authorization", strings.Replace(testAuth, "Signature=", "Sig=", 1), "X-Amz-Date", testDate),
		"a bearer token":            withAuth("Authorization", "Bearer abc", "X-Amz-Date", testDate),
		"a presigned URL":           httptest.NewRequest("GET", "/orders/o-1?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=a%2F20260312%2Fus-east-1%2Fexecute-api%2Faws4_request&X-Amz-Signature="+testSig, nil),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := &fake{}
			wantRefused(t, serve(newGateway(t, f, apigw.WithIAMAuthorization()), r), f, http.StatusForbidden, "Forbidden")
		})
	}
}

func TestParseAuthorization(t *testing.T) {
	t.Parallel()
	c, err := apigw.ParseAuthorization(testAuth)
	want := apigw.Credential{AccessKeyID: "client-a", Date: "20260312", Region: "us-east-1", Service: "execute-api",
		SignedHeaders: []string{"content-type", "host", "x-amz-date"}, Signature: testSig}
	if err != nil || !reflect.DeepEqual(c, want) {
		t.Fatalf("ParseAuthorization = %+v, %v; want %+v", c, err, want)
	}
	// Any order and spacing of the components.
	if c, err := apigw.ParseAuthorization("AWS4-HMAC-SHA256 Signature=" + testSig + ",SignedHeaders=host,  Credential=AKIAEXAMPLE/20260312/eu-west-1/execute-api/aws4_request"); err != nil || c.AccessKeyID != "AKIAEXAMPLE" {
		t.Fatalf("reordered: %+v, %v", c, err)
	}
	cred := "Credential=client-a/20260312/us-east-1/execute-api/aws4_request"
	hdrs, sig := "SignedHeaders=host;x-amz-date", "Signature="+testSig
	join := func(parts ...string) string { return "AWS4-HMAC-SHA256 " + strings.Join(parts, ", ") }
	for name, v := range map[string]string{
		"empty":                    "",
		"another algorithm":        strings.Replace(testAuth, "AWS4-HMAC-SHA256", "AWS4-ECDSA-P256-SHA256", 1),
		"no space after algorithm": "AWS4-HMAC-SHA256" + cred,
		"no Credential":            join(hdrs, sig),
		"no SignedHeaders":         join(cred, sig),
		"no Signature":             join(cred, hdrs),
		"a component twice":        join(cred, hdrs, sig, sig),
		"an unknown component":     join(cred, hdrs, sig, "Extra=1"),
		"an empty component":       join(cred, hdrs, sig, ""),
		"an empty value":           join("Credential=", hdrs, sig),
		"scope of four parts":      join("Credential=client-a/20260312/us-east-1/aws4_request", hdrs, sig),
		"scope of six parts":       join("Credential=client-a/x/20260312/us-east-1/execute-api/aws4_request", hdrs, sig),
		"scope without terminator": join("Credential=client-a/20260312/us-east-1/execute-api/aws4", hdrs, sig),
		"another service":          join("Credential=client-a/20260312/us-east-1/s3/aws4_request", hdrs, sig),
		"a bad date":               join("Credential=client-a/20261312/us-east-1/execute-api/aws4_request", hdrs, sig),
		"a short date":             join("Credential=client-a/2026031/us-east-1/execute-api/aws4_request", hdrs, sig),
		"an upper-case region":     join("Credential=client-a/20260312/US-EAST-1/execute-api/aws4_request", hdrs, sig),
		"an empty region":          join("Credential=client-a/20260312//execute-api/aws4_request", hdrs, sig),
		"an empty access key":      join("Credential=/20260312/us-east-1/execute-api/aws4_request", hdrs, sig),
		"a space in the key":       join("Credential=client a/20260312/us-east-1/execute-api/aws4_request", hdrs, sig),
		"a colon in the key":       join("Credential=a:b/20260312/us-east-1/execute-api/aws4_request", hdrs, sig),
		"a key too long":           join("Credential="+strings.Repeat("k", 129)+"/20260312/us-east-1/execute-api/aws4_request", hdrs, sig),
		"headers without host":     join(cred, "SignedHeaders=x-amz-date", sig),
		"headers unsorted":         join(cred, "SignedHeaders=x-amz-date;host", sig),
		"headers repeated":         join(cred, "SignedHeaders=host;host", sig),
		"an upper-case header":     join(cred, "SignedHeaders=Host", sig),
		"an empty header":          join(cred, "SignedHeaders=host;", sig),
		"a short signature":        join(cred, hdrs, "Signature="+testSig[:63]),
		"an upper-case signature":  join(cred, hdrs, "Signature="+strings.ToUpper(testSig)),
		"a non-hex signature":      join(cred, hdrs, "Signature="+strings.Repeat("g", 64)),
		"too long":                 join(cred, hdrs, sig) + strings.Repeat(" ", 4096),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if c, err := apigw.ParseAuthorization(v); !errors.Is(err, apigw.ErrNotSigned) {
				t.Fatalf("ParseAuthorization(%q) = %+v, %v; want ErrNotSigned", v, c, err)
			}
		})
	}
	// The longest access key that still names a user.
	if _, err := apigw.ParseAuthorization(join("Credential="+strings.Repeat("k", 128)+"/20260312/us-east-1/execute-api/aws4_request", hdrs, sig)); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseAuthorization: whatever the header, the parser never panics, and
// what it accepts is a usable identity.
func FuzzParseAuthorization(f *testing.F) {
	f.Add(testAuth)
	f.Add("AWS4-HMAC-SHA256 Credential=a/20260312/r/execute-api/aws4_request,SignedHeaders=host,Signature=" + testSig)
	f.Add("AWS4-HMAC-SHA256 Credential=a/20260230/r/execute-api/aws4_request, SignedHeaders=host, Signature=" + testSig)
	f.Add("AWS4-HMAC-SHA256 ,,,")
	f.Add("AWS4-HMAC-SHA256 Credential==, SignedHeaders==, Signature==")
	f.Add("Bearer x")
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		c, err := apigw.ParseAuthorization(v)
		if err != nil {
			if !errors.Is(err, apigw.ErrNotSigned) {
				t.Fatalf("error %v does not wrap ErrNotSigned", err)
			}
			return
		}
		arn := apigw.LocalUserARN(c.AccessKeyID)
		if c.AccessKeyID == "" || len(c.AccessKeyID) > 128 || strings.ContainsAny(c.AccessKeyID, ":/ \t") || strings.Count(arn, ":") != 5 {
			t.Fatalf("accepted access key %q", c.AccessKeyID)
		}
		if c.Service != "execute-api" || len(c.Signature) != 64 || len(c.Date) != 8 || c.Region == "" ||
			!slices.IsSorted(c.SignedHeaders) || !slices.Contains(c.SignedHeaders, "host") {
			t.Fatalf("accepted %+v", c)
		}
	})
}

// FuzzIAMAuthorization serves requests with arbitrary Authorization and
// X-Amz-Date headers through a gateway with IAM authorization: it never
// panics, the handler sees exactly the requests the parser accepts that
// are signed within MaxClockSkew of the gateway's clock, and each with the
// identity its access key names; one signed too far off gets API
// Gateway's "Signature expired" or "not yet current" answer.
func FuzzIAMAuthorization(f *testing.F) {
	f.Add(testAuth, testDate, false)
	f.Add(testAuth, "20260313T000000Z", false)
	f.Add(testAuth, testDate, true)
	f.Add("", "", false)
	f.Add("AWS4-HMAC-SHA256 Credential=x", testDate, false)
	f.Add(testAuth, "20260312T185858Z", false)
	f.Add(testAuth, "20260312T190859Z", false)
	f.Fuzz(func(t *testing.T, auth, date string, twice bool) {
		h := &fake{}
		g, err := apigw.New(testRoutes, h.handle, apigw.WithIAMAuthorization(), apigw.WithClock(clock.NewFake(testTime)))
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("POST", "/orders", io.NopCloser(strings.NewReader("{}")))
		r.Header["Authorization"] = []string{auth}
		if twice {
			r.Header["Authorization"] = append(r.Header["Authorization"], auth)
		}
		r.Header["X-Amz-Date"] = []string{date}
		w := serve(g, r)
		c, perr := apigw.ParseAuthorization(auth)
		ok := perr == nil && !twice && len(date) == 16 && strings.HasPrefix(date, c.Date) && validAmzDate(date)
		skewed := false
		if d, err := time.Parse("20060102T150405Z", date); ok && err == nil {
			now := testTime.Truncate(time.Second)
			skewed = d.Before(now.Add(-apigw.MaxClockSkew)) || d.After(now.Add(apigw.MaxClockSkew))
		}
		evs := h.events()
		if len(evs) == 0 {
			if w.Code != http.StatusForbidden {
				t.Fatalf("refused with %d %s", w.Code, w.Body)
			}
			if skewed != strings.HasPrefix(w.Body.String(), `{"message":"Signature `) || (!skewed && w.Body.String() != `{"message":"Forbidden"}`) {
				t.Fatalf("refused (%q, %q, skewed %v) with %s", auth, date, skewed, w.Body)
			}
			if ok && !skewed {
				t.Fatalf("a well-signed request (%q, %q) was refused", auth, date)
			}
			return
		}
		if !ok || skewed {
			t.Fatalf("the handler got a request with Authorization %q, X-Amz-Date %q, twice %v", auth, date, twice)
		}
		iam := evs[0].RequestContext.Authorizer.IAM
		if iam.AccessKey != c.AccessKeyID || iam.UserARN != apigw.LocalCaller(c).UserARN || iam.AccountID != "000000000000" {
			t.Fatalf("identity %+v for %q", iam, auth)
		}
	})
}

func validAmzDate(s string) bool {
	_, err := time.Parse("20060102T150405Z", s)
	return err == nil
}

// signedAt is a request signed at the given time, by accessKey.
func signedAt(t *testing.T, method, target, accessKey string, at time.Time) *http.Request {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	sum := sha256.Sum256(nil)
	creds := aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: "any secret will do"}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hex.EncodeToString(sum[:]), "execute-api", "eu-west-1", at); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestClockSkew: a request signed more than five minutes before or after
// the gateway's clock is refused with API Gateway's own message, as AWS
// refuses one; within five minutes either way it passes.
func TestClockSkew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		off     time.Duration
		message string // "" passes
	}{
		{"on time", 0, ""},
		{"five minutes behind", -5 * time.Minute, ""},
		{"five minutes ahead", 5 * time.Minute, ""},
		{"five minutes and a second behind", -5*time.Minute - time.Second,
			"Signature expired: 20260312T185857Z is now earlier than 20260312T185858Z (20260312T190358Z - 5 min.)"},
		{"sixteen minutes behind", -16 * time.Minute,
			"Signature expired: 20260312T184758Z is now earlier than 20260312T185858Z (20260312T190358Z - 5 min.)"},
		{"five minutes and a second ahead", 5*time.Minute + time.Second,
			"Signature not yet current: 20260312T190859Z is still later than 20260312T190858Z (20260312T190358Z + 5 min.)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{}
			w := serve(newGateway(t, f, apigw.WithIAMAuthorization()), signedAt(t, "GET", "/orders/o-1", "client-a", testTime.Truncate(time.Second).Add(tt.off)))
			if tt.message == "" {
				f.only(t)
				return
			}
			wantRefused(t, w, f, http.StatusForbidden, tt.message)
		})
	}
}

// TestHeaderQuota: a request whose request line and header values add up
// to more than the HTTP API's 10240 bytes is refused with 431 before
// anything else is looked at; one at the quota passes.
func TestHeaderQuota(t *testing.T) {
	t.Parallel()
	at := func(n int) *http.Request {
		r := httptest.NewRequest("GET", "/orders/o-1", nil)
		// "GET /orders/o-1 HTTP/1.1" and the host example.com.
		r.Header.Set("X-Filler", strings.Repeat("x", n-len("GET /orders/o-1 HTTP/1.1")-len("example.com")))
		return r
	}
	f := &fake{}
	serve(newGateway(t, f), at(apigw.MaxHeaderBytes))
	f.only(t)

	f = &fake{}
	wantRefused(t, serve(newGateway(t, f, apigw.WithIAMAuthorization()), at(apigw.MaxHeaderBytes+1)), f,
		http.StatusRequestHeaderFieldsTooLarge, "Request Header Fields Too Large")
	// Many small headers count alike, and so does an unknown route.
	r := httptest.NewRequest("GET", "/nowhere", nil)
	for i := range 1100 {
		r.Header.Add("X-Many", strconv.Itoa(i%10)+"123456789")
	}
	wantGatewayAnswer(t, serve(newGateway(t, f), r), http.StatusRequestHeaderFieldsTooLarge, "Request Header Fields Too Large")
}

// TestCallers: WithCallers names who signs with a credential and what its
// policy allows: a request the policy does not allow gets API Gateway's
// 403, one it allows reaches the handler with the caller's identity.
func TestCallers(t *testing.T) {
	t.Parallel()
	callers := apigw.WithCallers(func(c apigw.Credential) apigw.Caller {
		if c.AccessKeyID == "ops" {
			return apigw.Caller{IAM: apigw.LocalRoleSession("OrderOperatorRole", c), Policy: apigw.AllowAll}
		}
		return apigw.Caller{IAM: apigw.LocalUser(c), Policy: apigw.Policy{Allow: []string{"POST/orders", "GET/orders/*"}}}
	})
	for _, tc := range []struct {
		name, method, path, key string
		userArn                 string // "" refused
	}{
		{"a client on its route", "GET", "/orders/o-1", "client-a", "arn:aws:iam::000000000000:user/client-a"},
		{"a client on another route", "GET", "/files/special", "client-a", ""},
		{"a client with another method", "POST", "/files/x", "client-a", ""},
		{"the operator", "GET", "/files/special", "ops", "arn:aws:sts::000000000000:assumed-role/OrderOperatorRole/ops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{}
			w := serve(newGateway(t, f, apigw.WithIAMAuthorization(), callers), signedAt(t, tc.method, tc.path, tc.key, testTime))
			if tc.userArn == "" {
				wantRefused(t, w, f, http.StatusForbidden, "Forbidden")
				return
			}
			if got := f.only(t).RequestContext.Authorizer.IAM; got.UserARN != tc.userArn || got.AccessKey != tc.key || got.AccountID != apigw.LocalAccount {
				t.Fatalf("identity %+v, want userArn %s", got, tc.userArn)
			}
		})
	}
	if got := apigw.LocalRoleARN("OrderOperatorRole"); got != "arn:aws:iam::000000000000:role/OrderOperatorRole" {
		t.Fatalf("LocalRoleARN = %s", got)
	}
}

func TestPolicy(t *testing.T) {
	t.Parallel()
	p := apigw.Policy{Allow: []string{"*"}, Deny: []string{"GET/ops/orders", "GET/ops/orders/*", "POST/orders/*/retry", "GET/a?c"}}
	for _, tc := range []struct {
		method, path string
		allowed      bool
	}{
		{"GET", "/orders", true},
		{"DELETE", "/ops/orders", true},
		{"GET", "/ops/orders", false},
		{"GET", "/ops/orders/x", false},
		{"GET", "/ops/orders/", false},
		{"GET", "/ops/ordersx", true},
		{"POST", "/orders/x/retry", false},
		{"POST", "/orders/x/y/retry", false},
		{"POST", "/orders/x/retryx", true},
		{"GET", "/abc", false},
		{"GET", "/ac", true},
		{"GET", "/abbc", true},
	} {
		if got := p.Allows(tc.method, tc.path); got != tc.allowed {
			t.Errorf("Allows(%s %s) = %v, want %v", tc.method, tc.path, got, tc.allowed)
		}
	}
	if (apigw.Policy{}).Allows("GET", "/") || (apigw.Policy{Allow: []string{"GET/x"}}).Allows("GET", "/xy") {
		t.Error("a policy allows what no statement names")
	}
}

// FuzzPolicy holds the wildcard match to a regular expression of the same
// pattern.
func FuzzPolicy(f *testing.F) {
	for _, s := range [][2]string{{"*", "GET/x"}, {"GET/*/retry", "GET/a/b/retry"}, {"a?c*", "abc"}, {"**?", ""}, {"*a*a", "aaa"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, resource string) {
		if len(pattern) > 64 || len(resource) > 256 {
			return
		}
		var re strings.Builder
		re.WriteString(`\A(?s:`)
		for _, r := range pattern {
			switch r {
			case '*':
				re.WriteString(".*")
			case '?':
				re.WriteString(".")
			default:
				re.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		re.WriteString(`)\z`)
		// The matcher works on bytes; keep to ASCII, as paths are escaped.
		for _, s := range []string{pattern, resource} {
			for i := 0; i < len(s); i++ {
				if s[i] >= 0x80 {
					return
				}
			}
		}
		want := regexp.MustCompile(re.String()).MatchString(resource)
		if got := (apigw.Policy{Allow: []string{pattern}}).Allows("", resource); got != want {
			t.Fatalf("%q matches %q: %v, want %v", pattern, resource, got, want)
		}
	})
}

// TestLocalCognitoIdentity: an access key cognito-GUID signs as a user of
// the local identity pool, cognito-guest-GUID as a guest of it, with the
// pool role's session every user shares and the Cognito identity beside
// it, as API Gateway passes Cognito credentials; any other key is a user.
func TestLocalCognitoIdentity(t *testing.T) {
	t.Parallel()
	f := &fake{}
	g := newGateway(t, f, apigw.WithIAMAuthorization())
	for _, key := range []string{"cognito-0a1b-2c3d", "cognito-guest-0a1b-2c3d", "cognito-0A1B", "cognito-", "cognito-guest-", "cognito-x1", "alice"} {
		serve(g, signedAt(t, "GET", "/orders/o-1", key, testTime))
	}
	evs := f.events()
	if len(evs) != 7 {
		t.Fatalf("%d events", len(evs))
	}
	user := evs[0].RequestContext.Authorizer.IAM
	if user.UserARN != "arn:aws:sts::000000000000:assumed-role/LocalCognitoAuthRole/CognitoIdentityCredentials" || user.AccessKey != "cognito-0a1b-2c3d" ||
		user.CognitoIdentity.IdentityID != "eu-west-1:0a1b-2c3d" || user.CognitoIdentity.IdentityPoolID != "eu-west-1:"+apigw.LocalIdentityPoolGUID ||
		len(user.CognitoIdentity.AMR) != 3 || user.CognitoIdentity.AMR[0] != "authenticated" {
		t.Errorf("a pool user: %+v", user)
	}
	guest := evs[1].RequestContext.Authorizer.IAM
	if guest.UserARN != "arn:aws:sts::000000000000:assumed-role/LocalCognitoUnauthRole/CognitoIdentityCredentials" ||
		guest.CognitoIdentity.IdentityID != "eu-west-1:0a1b-2c3d" || !slices.Equal(guest.CognitoIdentity.AMR, []string{"unauthenticated"}) {
		t.Errorf("a guest: %+v", guest)
	}
	// Not of the convention: IAM users, without a Cognito identity.
	for i, key := range []string{"cognito-0A1B", "cognito-", "cognito-guest-", "cognito-x1", "alice"} {
		iam := evs[2+i].RequestContext.Authorizer.IAM
		if iam.UserARN != apigw.LocalUserARN(key) || iam.CognitoIdentity.IdentityID != "" || iam.CognitoIdentity.AMR != nil {
			t.Errorf("%s: %+v", key, iam)
		}
	}
}

// TestLocalUniqueIDs: a local user and a local role have a unique ID of
// IAM's form, stable from start to start, that the Submission reads as the
// owner's; every session of a role shares the role's. A principal created
// anew under its name (Recreated) keeps its ARN and gets another ID, so the
// Submission sees another owner; a Cognito identity is its own owner
// whatever its pool role's ID.
func TestLocalUniqueIDs(t *testing.T) {
	t.Parallel()
	owner := func(iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) submission.Owner {
		t.Helper()
		o, err := submission.Principal(iam)
		if err != nil {
			t.Fatalf("the Submission refuses %+v: %v", iam, err)
		}
		return o
	}
	iamForm := func(id, prefix string) bool {
		return len(id) == 21 && strings.HasPrefix(id, prefix) && strings.IndexFunc(id, func(r rune) bool { return (r < 'A' || r > 'Z') && (r < '2' || r > '7') }) < 0
	}
	alice := apigw.LocalUser(apigw.Credential{AccessKeyID: "alice"})
	if alice.UserID != alice.CallerID || !iamForm(alice.UserID, apigw.UserIDPrefix) ||
		!reflect.DeepEqual(apigw.LocalUser(apigw.Credential{AccessKeyID: "alice"}), alice) || apigw.LocalUser(apigw.Credential{AccessKeyID: "bob"}).UserID == alice.UserID {
		t.Fatalf("alice: %+v", alice)
	}
	if o := owner(alice); o != (submission.Owner{Name: apigw.LocalUserARN("alice"), ID: alice.UserID}) {
		t.Fatalf("alice's owner %+v", o)
	}
	ops1 := apigw.LocalRoleSession("OrderOperatorRole", apigw.Credential{AccessKeyID: "s1"})
	ops2 := apigw.LocalRoleSession("OrderOperatorRole", apigw.Credential{AccessKeyID: "s2"})
	roleID := apigw.LocalUniqueID(apigw.RoleIDPrefix, apigw.LocalRoleARN("OrderOperatorRole"), 0)
	if ops1.UserID != roleID+":s1" || !iamForm(roleID, apigw.RoleIDPrefix) || owner(ops1) != owner(ops2) || owner(ops1).ID != roleID {
		t.Fatalf("two sessions of a role: %+v, %+v", ops1, ops2)
	}

	seen := map[string]bool{}
	for n := range 3 {
		again := apigw.Recreated(alice, n)
		session := apigw.Recreated(ops1, n)
		if again.UserARN != alice.UserARN || again.AccessKey != alice.AccessKey || again.CallerID != again.UserID ||
			session.UserARN != ops1.UserARN || !strings.HasSuffix(session.UserID, ":s1") {
			t.Fatalf("incarnation %d: %+v, %+v", n, again, session)
		}
		for _, key := range []string{owner(again).Key(), owner(session).Key()} {
			if seen[key] {
				t.Fatalf("incarnation %d has the key %s of an earlier one", n, key)
			}
			seen[key] = true
		}
	}
	if apigw.Recreated(alice, 0) != alice || !reflect.DeepEqual(apigw.Recreated(alice, 1), apigw.Recreated(alice, 1)) {
		t.Fatal("incarnations are not stable")
	}
	pool, _ := apigw.LocalCognitoIdentity(apigw.Credential{AccessKeyID: "cognito-0a1b", Region: "eu-west-1"})
	if apigw.Recreated(pool, 1) != pool || owner(pool).Name != submission.CognitoOwnerPrefix+"eu-west-1:"+apigw.LocalIdentityPoolGUID+"/eu-west-1:0a1b" {
		t.Fatalf("a Cognito identity: %+v", owner(pool))
	}
}
