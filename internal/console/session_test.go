package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestConsoleRedirectsALoginOnlyToItsOwnPages: the token's exchange leads
// to the page asked for when it is a plain path of the console, and to the
// overview otherwise: never to another host, however the path spells one
// (protocol-relative, a backslash, encoded slashes or backslashes, a tab
// a browser drops, an absolute URL in the path).
func TestConsoleRedirectsALoginOnlyToItsOwnPages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, target, want string
	}{
		{"the overview", "/", "/"},
		{"an order", "/orders/" + errorID, "/orders/" + errorID},
		{"a list page, its cursor kept", "/list/Error?cursor=abc", "/list/Error?cursor=abc"},
		{"protocol-relative", "//evil.example/x", "/"},
		{"protocol-relative, the console's host named", "http://" + addr + "//evil.example/x", "/"},
		{"three slashes", "///evil.example/x", "/"},
		{"a backslash", `/\evil.example/x`, "/"},
		{"a backslash and a slash", `/\/evil.example/x`, "/"},
		{"an encoded backslash", "/%5Cevil.example/x", "/"},
		{"encoded slashes", "/%2F%2Fevil.example/x", "/"},
		{"an encoded slash after one", "/%2Fevil.example/x", "/"},
		{"a tab between the slashes", "/%09/evil.example/x", "/"},
		{"a newline between the slashes", "/%0A/evil.example/x", "/"},
		{"dot segments", "/./..//evil.example/x", "/"},
		{"an absolute URL in the path", "/https://evil.example/x", "/"},
		{"an absolute URL, encoded", "/https%3A%2F%2Fevil.example%2Fx", "/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, _, _ := newServer(t)
			target := tc.target
			sep := "?"
			if strings.Contains(target, "?") {
				sep = "&"
			}
			req := httptest.NewRequest("GET", target+sep+"token="+token, nil)
			req.Host = addr
			w := httptest.NewRecorder()
			s.ServeHTTP(w, req)
			loc := w.Header().Get("Location")
			if w.Code != http.StatusSeeOther || loc != tc.want {
				t.Fatalf("%s: %d to %q, want 303 to %q", target, w.Code, loc, tc.want)
			}
			u, err := url.Parse(loc)
			if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") || strings.ContainsAny(loc, "\\\t\r\n") {
				t.Fatalf("Location %q leaves the console (%v)", loc, err)
			}
		})
	}
}
