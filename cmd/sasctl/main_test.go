package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sasflow/sas/internal/opsclient"
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
