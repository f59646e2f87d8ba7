package console

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/opsclient"
	"github.com/sasflow/sas/internal/testkit/logtest"
	"github.com/sasflow/sas/shared/clock"
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

// cookieOf returns the console's cookie resp sets; "" for none.
func cookieOf(resp *http.Response) string {
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			return c.Value
		}
	}
	return ""
}

// TestConsoleAcceptsItsTokenOnce: the URL's token opens one session, whose
// cookie is a fresh random value, not the token; a second use of the URL
// (from the browser's history, a terminal's scrollback, a screen share)
// is refused with a page that says so and sets no cookie, and the token is
// no cookie either. The session opened stays open.
func TestConsoleAcceptsItsTokenOnce(t *testing.T) {
	t.Parallel()
	var logs logtest.Buffer
	s, _, _ := newServerWith(t, func(o *Options) { o.Log = slog.New(slog.NewJSONHandler(&logs, nil)) })
	first := s.do(t, request{method: "GET", path: "/?token=" + token})
	session := cookieOf(first)
	if first.StatusCode != http.StatusSeeOther || session == "" {
		t.Fatalf("first use: %d, cookie %q", first.StatusCode, session)
	}
	if session == token || len(session) != 43 {
		t.Fatalf("the session's cookie %q is the token, or not 32 random bytes", session)
	}
	for _, tc := range []struct {
		name string
		req  request
	}{
		{"the URL again", request{method: "GET", path: "/?token=" + token}},
		{"the URL again, to an order", request{method: "GET", path: "/orders/" + errorID + "?token=" + token}},
	} {
		resp := s.do(t, tc.req)
		body := read(t, resp)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `"title":"token-used"`) || !strings.Contains(body, "restart sasctl ui") {
			t.Errorf("%s: %d %s; want 403 token-used saying how to get a new URL", tc.name, resp.StatusCode, body)
		}
		if c := cookieOf(resp); c != "" {
			t.Errorf("%s: set a cookie", tc.name)
		}
	}
	if resp := s.do(t, request{method: "GET", path: "/", cookie: token}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the token as a cookie: %d, want 401", resp.StatusCode)
	}
	if resp := s.do(t, request{method: "GET", path: "/", cookie: session}); resp.StatusCode != http.StatusOK {
		t.Errorf("the session's cookie: %d, want 200", resp.StatusCode)
	}
	// The browser that has the session may open the URL again: it goes in
	// on its own cookie, and gets no other.
	resp := s.do(t, request{method: "GET", path: "/dlq?token=" + token, cookie: session})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dlq" || cookieOf(resp) != "" {
		t.Errorf("the URL again with the session: %d to %q, cookie %q", resp.StatusCode, resp.Header.Get("Location"), cookieOf(resp))
	}
	// Another console's session is not this one's.
	other, _, _ := newServer(t)
	if resp := other.do(t, request{method: "GET", path: "/", cookie: session}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("another console took the session: %d", resp.StatusCode)
	}
	codes := map[string]int{}
	for _, r := range logs.Records(t) {
		if c, ok := r["code"].(string); ok {
			codes[c]++
		}
	}
	if codes["token-used"] != 2 || codes["no-session"] != 1 {
		t.Errorf("refusals logged %v, want token-used twice and no-session once", codes)
	}
}

// TestConsoleEndsAnIdleSession: a session the operator leaves alone for
// the idle timeout (by default 30 minutes, on the console's clock) ends:
// its next request is refused with a page that says why and how to get
// back in. A request of the operator's keeps it open; the page's own
// refresh of its live part does not.
func TestConsoleEndsAnIdleSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		idle time.Duration
		want time.Duration
	}{
		{"the default", 0, 30 * time.Minute},
		{"a timeout set", 5 * time.Minute, 5 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(t0)
			var logs logtest.Buffer
			s, _, _ := newServerWith(t, func(o *Options) {
				o.Now, o.IdleTimeout, o.Log = clk.Now, tc.idle, slog.New(slog.NewJSONHandler(&logs, nil))
			})
			get := func(live bool) *http.Response {
				r := request{method: "GET", path: "/", session: true}
				if live {
					r.headers = map[string]string{"X-Console-Live": "1"}
				}
				return s.do(t, r)
			}
			if resp := get(false); resp.StatusCode != http.StatusOK {
				t.Fatalf("after login: %d", resp.StatusCode)
			}
			// The operator's requests keep the session open past the timeout.
			for range 3 {
				clk.Advance(tc.want - time.Second)
				if resp := get(false); resp.StatusCode != http.StatusOK {
					t.Fatalf("%v after the last request: %d", tc.want-time.Second, resp.StatusCode)
				}
			}
			// The live part's refreshes do not.
			clk.Advance(tc.want / 2)
			if resp := get(true); resp.StatusCode != http.StatusOK {
				t.Fatalf("a refresh within the timeout: %d", resp.StatusCode)
			}
			clk.Advance(tc.want/2 + time.Second)
			resp := get(true)
			body := read(t, resp)
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"title":"session-expired"`) || !strings.Contains(body, "restart sasctl ui") {
				t.Fatalf("after the timeout: %d %.300s; want 401 session-expired", resp.StatusCode, body)
			}
			// Ended for good, even were the clock to go back.
			clk.Set(t0)
			if resp := get(false); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("the ended session again: %d", resp.StatusCode)
			}
			var expired int
			for _, r := range logs.Records(t) {
				if r["code"] == "session-expired" {
					expired++
				}
			}
			if expired != 1 {
				t.Fatalf("session-expired logged %d times, want once:\n%s", expired, logs.String())
			}
		})
	}
}

// TestConsoleLogsWhatItRefusesAndDoesButNoSecret: every refusal (a rebound
// Host, a cross-origin POST, a wrong or reused token, no session) and
// every action (a retry, a cancel, a redrive) is a JSON line with what
// it was about and how it ended; no line holds the token, the session's
// cookie or the CSRF token.
func TestConsoleLogsWhatItRefusesAndDoesButNoSecret(t *testing.T) {
	t.Parallel()
	var logs logtest.Buffer
	s, fake, _ := newServerWith(t, func(o *Options) { o.Log = slog.New(slog.NewJSONHandler(&logs, nil)) })
	session := s.sessionCookie(t)
	origin := map[string]string{"Origin": "http://" + addr}
	form := url.Values{"csrf": {s.csrf}}
	for _, r := range []request{
		{method: "GET", path: "/?token=guess"},
		{method: "GET", path: "/?token=" + token},
		{method: "GET", path: "/", host: "evil.example:8765", session: true},
		{method: "GET", path: "/", cookie: "guess"},
		{method: "POST", path: "/orders/" + errorID + "/retry", session: true, headers: map[string]string{"Origin": "http://evil.example"}, form: form},
		{method: "POST", path: "/orders/" + errorID + "/retry", session: true, headers: origin, form: form},
		{method: "POST", path: "/orders/" + errorID + "/cancel", session: true, headers: origin, form: form},
		{method: "POST", path: "/dlq/scheduler/redrive", session: true, headers: origin, form: form},
	} {
		s.do(t, r)
	}
	fake.refuse = &opsclient.APIError{Method: "POST", StatusCode: http.StatusConflict}
	s.do(t, request{method: "POST", path: "/orders/" + errorID + "/retry", session: true, headers: origin, form: form})

	type line struct{ Msg, Code, Action, OrderID, Queue, Outcome string }
	var got []line
	for _, r := range logs.Records(t) {
		b, _ := json.Marshal(r)
		var l line
		_ = json.Unmarshal(b, &l)
		got = append(got, l)
	}
	want := []line{
		{Msg: "console session opened"},
		{Msg: "console refused a request", Code: "token-refused"},
		{Msg: "console refused a request", Code: "token-used"},
		{Msg: "console refused a request", Code: "host-refused"},
		{Msg: "console refused a request", Code: "no-session"},
		{Msg: "console refused a request", Code: "origin-refused"},
		{Msg: "console action", Action: "retry", OrderID: errorID, Outcome: "accepted"},
		{Msg: "console action", Action: "cancel", OrderID: errorID, Outcome: "accepted"},
		{Msg: "console action", Action: "redrive", Queue: "scheduler", Outcome: "copied"},
		{Msg: "console action", Action: "retry", OrderID: errorID, Outcome: "refused"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), logs.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for name, secret := range map[string]string{"the token": token, "the session's cookie": session, "the CSRF token": s.csrf} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the logs hold %s", name)
		}
	}
}
