package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/opsclient"
	"github.com/sasflow/sas/internal/testkit/await"
	"github.com/sasflow/sas/internal/testkit/logtest"
)

func TestRun(t *testing.T) {
	t.Parallel()
	// A one-order stand-in for the API: the commands themselves are tested
	// in package opsclient; this checks the wiring of args, env and streams.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The local stack's IAM authorization: signed, or API Gateway's 403.
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"message":"Forbidden"}`))
			return
		}
		if r.Method != http.MethodGet || r.URL.Path != "/ops/orders/o-1" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"title":"Not Found","status":404,"detail":"no order with ID x"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"orderId":"o-1","workflow":"order-v1","state":"Error","step":"charge-payment","stepIndex":1,"steps":[]}`))
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		stdout string
		stderr string
	}{
		{"help", []string{"--help"}, nil, opsclient.ExitOK, "usage: sasctl", ""},
		{"show from SAS_API_URL", []string{"show", "o-1"}, map[string]string{"SAS_API_URL": srv.URL}, opsclient.ExitOK, "Next: sasctl retry o-1", ""},
		{"not found", []string{"--endpoint-url", srv.URL, "show", "o-2"}, nil, opsclient.ExitNotFound, "", "no order with ID x"},
		{"no endpoint", []string{"show", "o-1"}, nil, opsclient.ExitUsage, "", "no API endpoint"},
		{"unsigned", []string{"--no-sign", "--endpoint-url", srv.URL, "show", "o-1"}, nil, opsclient.ExitError, "", "403 Forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut strings.Builder
			code := run(context.Background(), tc.args, func(k string) string { return tc.env[k] }, &out, &errOut, "sasctl")
			if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errOut.String(), tc.stderr) {
				t.Errorf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", code, tc.code, out.String(), errOut.String())
			}
		})
	}
}

func TestProgram(t *testing.T) {
	t.Parallel()
	for arg0, want := range map[string]string{
		"/tmp/go-build3417/b001/exe/sasctl": "go run ./cmd/sasctl",
		"/home/op/go/bin/sasctl":            "sasctl",
		"./sasctl":                          "sasctl",
	} {
		if got := program(arg0); got != want {
			t.Errorf("program(%q) = %q, want %q", arg0, got, want)
		}
	}
}

// TestUILogsRefusalsAndActionsToStderr: `sasctl ui` writes a JSON line to
// stderr for each request it refuses (a wrong token, a reused one, a
// rebound Host, a cross-origin POST) and each action it takes, with the
// order and how it ended; never the token or the session's cookie.
func TestUILogsRefusalsAndActionsToStderr(t *testing.T) {
	t.Parallel()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Method + " " + r.URL.Path {
		case "GET /ops/orders/o-1":
			_, _ = w.Write([]byte(`{"orderId":"o-1","workflow":"order-v1","state":"Error","step":"charge-payment","stepIndex":1,"attempt":1,"steps":[]}`))
		case "POST /orders/o-1/retry":
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"orderId":"o-1","state":"Pending"}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"title":"Not Found","status":404}`))
		}
	}))
	t.Cleanup(api.Close)

	var out, errOut logtest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--endpoint-url", api.URL, "ui", "--no-dlq"}, func(string) string { return "" }, &out, &errOut, "sasctl")
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != opsclient.ExitOK {
			t.Errorf("sasctl ui exited %d\n%s", code, errOut.String())
		}
	})
	login := await.Value(t, 10*time.Second, "the console's URL on stdout", func() (string, error) {
		m := regexp.MustCompile(`open (http://\S+)`).FindStringSubmatch(out.String())
		if m == nil {
			return "", fmt.Errorf("stdout %q", out.String())
		}
		return m[1], nil
	}, func(string) bool { return true })
	u, err := url.Parse(login)
	if err != nil {
		t.Fatal(err)
	}
	console := "http://" + u.Host
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, target string, header http.Header, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(req.Header, header)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}

	send("GET", console+"/?token=guess", nil, "")
	resp := send("GET", login, nil, "")
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		session = c
	}
	if resp.StatusCode != http.StatusSeeOther || session == nil {
		t.Fatalf("login: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	send("GET", login, nil, "")
	withSession := http.Header{"Cookie": {session.String()}}
	req, _ := http.NewRequest("GET", console+"/", nil)
	req.Host = "evil.example:" + u.Port()
	req.AddCookie(session)
	if resp, err := client.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	confirm := send("GET", console+"/orders/o-1/retry", withSession, "")
	page, _ := io.ReadAll(confirm.Body)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if confirm.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("the retry's confirmation: %d\n%s", confirm.StatusCode, page)
	}
	form := "csrf=" + url.QueryEscape(string(m[1]))
	post := http.Header{"Cookie": {session.String()}, "Content-Type": {"application/x-www-form-urlencoded"}}
	send("POST", console+"/orders/o-1/retry", http.Header{"Origin": {"http://evil.example"}, "Cookie": post["Cookie"], "Content-Type": post["Content-Type"]}, form)
	if resp := send("POST", console+"/orders/o-1/retry", http.Header{"Origin": {console}, "Cookie": post["Cookie"], "Content-Type": post["Content-Type"]}, form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the retry: %d", resp.StatusCode)
	}

	// Each line is written before its answer.
	var seen []string
	for _, r := range errOut.Records(t) {
		switch {
		case r["code"] != nil:
			seen = append(seen, fmt.Sprint(r["code"]))
		case r["action"] != nil:
			seen = append(seen, fmt.Sprint(r["action"], " ", r["orderId"], " ", r["outcome"]))
		}
	}
	if want := []string{"token-refused", "token-used", "host-refused", "origin-refused", "retry o-1 accepted"}; !slices.Equal(seen, want) {
		t.Errorf("lines %q, want %q\n%s", seen, want, errOut.String())
	}
	token := u.Query().Get("token")
	for name, secret := range map[string]string{"the token": token, "the session's cookie": session.Value} {
		if secret == "" || strings.Contains(errOut.String(), secret) {
			t.Errorf("stderr holds %s (or it is empty)", name)
		}
	}
}
