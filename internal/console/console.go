// Package console is the operators' web console, `sasctl ui`: a server on
// the operator's own machine that shows the orders needing a person, one
// order's steps as a graph and a timeline, and the dead-letter queues, and
// retries, cancels and redrives behind a confirmation. It reads and acts
// through the same clients as the CLI: the API through internal/opsclient,
// every request SigV4-signed with the operator's own credentials, and the
// DLQs through internal/dlq over SQS. So it needs no cloud resource, no
// authentication path and no permission the CLI does not.
//
// The pages are server-rendered with html/template, which escapes every
// value the API or a queue returns for its context; one small script,
// embedded with the templates and the style sheet, refreshes the live part
// of a page and copies text. There is no front-end build.
//
// The server holds the operator's credentials by proxy: whoever can make
// it send a request acts as the operator. So it listens on loopback only,
// and every request must pass, in this order (see Server.ServeHTTP): a Host
// check (only the host:port it listens on, against DNS rebinding), the
// session, and for every POST an Origin (or Sec-Fetch-Site) check and a
// CSRF token in the form. The URL it prints carries a one-time token: the
// first request that brings it opens the session, with a fresh random
// HttpOnly, SameSite=Strict cookie, and the token opens nothing after
// that; a session left idle for the idle timeout ends. Every answer
// carries a Content-Security-Policy that runs no script but its own, by
// nonce.
package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/sasflow/sas/internal/dlq"
	"github.com/sasflow/sas/internal/opsclient"
	"github.com/sasflow/sas/shared/jsonwire"
)

// Orders is the API the console reads and acts through.
type Orders interface {
	ListOrders(ctx context.Context, p opsclient.ListParams) (opsclient.Page, error)
	GetOrder(ctx context.Context, orderID string) (opsclient.Order, error)
	Retry(ctx context.Context, orderID string) (opsclient.Accepted, error)
	Cancel(ctx context.Context, orderID string) (opsclient.Accepted, error)
	Workflows(ctx context.Context) (opsclient.Workflows, error)
}

var _ Orders = (*opsclient.Client)(nil)

// Queues are the dead-letter queues the console shows and redrives.
type Queues interface {
	// Discover lists the work queues that have a DLQ, with each DLQ's
	// depth.
	Discover(ctx context.Context) ([]dlq.Pair, error)
	// Peek reads up to limit of a DLQ's messages without consuming them.
	Peek(ctx context.Context, p dlq.Pair, limit int) ([]dlq.Message, error)
	// Redrive moves a DLQ's messages back to its source queue.
	Redrive(ctx context.Context, p dlq.Pair) (Redriven, error)
}

// Redriven is what a redrive did: a move task started, or messages copied.
type Redriven struct {
	// Copied: the messages were copied (Count of them); else a move task
	// (Task) moves them in the background.
	Copied bool
	Count  int
	Task   string
}

// Options configures a Server.
type Options struct {
	Orders Orders
	// Queues, when nil, leaves the DLQs out (the page says how to name
	// them).
	Queues Queues
	// Addr is the host:port the browser reaches the server at: the only
	// Host the server answers. A loopback host.
	Addr string
	// Endpoint and Scope name the API and the queues in the page header.
	Endpoint, Scope string
	// Refresh is the live part's refresh period; 0 means DefaultRefresh.
	Refresh time.Duration
	// Now is the console's clock: the time an order in flight is drawn up
	// to, and the one a session's idle time is measured on; nil means
	// time.Now.
	Now func() time.Time
	// Log records the session opened, the requests refused (an ended
	// session's among them) and the actions taken (retry, cancel,
	// redrive), never a token or a cookie; nil discards.
	Log *slog.Logger
	// Token is the URL's one-time login token; "" makes a random one.
	// Tests set it.
	Token string
	// IdleTimeout ends a session without a request of the operator's for
	// this long; 0 means opsclient.DefaultIdleTimeout.
	IdleTimeout time.Duration
}

// maxFormBytes bounds a POST's body: the forms hold one token.
const maxFormBytes = 4 << 10

// DefaultRefresh is how often a page's live part refreshes itself.
const DefaultRefresh = 3 * time.Second

// Server is the console: an http.Handler.
type Server struct {
	o      Options
	mux    *http.ServeMux
	token  string
	csrf   string
	cookie string
	origin string
	pages  *pages
	now    func() time.Time
	log    *slog.Logger
	counts counts

	// mu guards the login: whether the token was used, and the session it
	// opened.
	mu        sync.Mutex
	tokenUsed bool
	// session is the session's cookie, "" while none is open; seen is the
	// time of its last request of the operator's.
	session string
	seen    time.Time
}

// New checks o and builds the console.
func New(o Options) (*Server, error) {
	if o.Orders == nil {
		return nil, errors.New("console: no API client")
	}
	host, port, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("console: address %q: %w", o.Addr, err)
	}
	if !opsclient.IsLoopback(host) {
		return nil, fmt.Errorf("console: address %s is not loopback: the console acts with your AWS credentials, so it serves this machine only", o.Addr)
	}
	s := &Server{o: o, now: o.Now, log: o.Log, token: o.Token}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if o.Refresh <= 0 {
		s.o.Refresh = DefaultRefresh
	}
	if o.IdleTimeout <= 0 {
		s.o.IdleTimeout = opsclient.DefaultIdleTimeout
	}
	if s.token == "" {
		s.token = randomToken()
	}
	s.csrf = randomToken()
	// Cookies are scoped to a host, not a port (RFC 6265, section 8.5):
	// the port in the name keeps two consoles from taking each other's.
	s.cookie = "sasctl-ui-" + port
	s.origin = "http://" + o.Addr
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// URL is the address to open: the console's root with the one-time token,
// which the first request that brings it trades for a session.
func (s *Server) URL() string {
	return s.origin + "/?token=" + url.QueryEscape(s.token)
}

// randomToken is 32 random bytes, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ServeHTTP refuses what did not come from the operator's own page, then
// serves the page.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	nonce := randomToken()
	// No script but ours (by nonce), no inline style, nothing from
	// elsewhere, no framing (clickjacking), forms posting only here.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'nonce-"+nonce+"'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer a browser sends a
	// form's POST with Origin: null. Nothing leaves for another site.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")

	// DNS rebinding: a page of evil.example whose name now resolves to
	// 127.0.0.1 reaches this port with Host evil.example. Only the exact
	// host:port the console printed is answered.
	if r.Host != s.o.Addr {
		s.refuse(w, r, http.StatusForbidden, "host-refused", "This console answers only at "+s.o.Addr+"; the request named host "+r.Host+".")
		return
	}
	if tok := r.URL.Query().Get("token"); tok != "" {
		s.login(w, r, tok)
		return
	}
	// The live part's refresh is the page's, not the operator's: it does
	// not keep a session open.
	if code, detail := s.check(r, r.Header.Get("X-Console-Live") != "1"); code != "" {
		s.refuse(w, r, http.StatusUnauthorized, code, detail)
		return
	}
	if r.Method == http.MethodPost {
		// The console's forms carry a token and nothing else.
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if !s.sameOrigin(r) {
			s.refuse(w, r, http.StatusForbidden, "origin-refused", "A POST must come from the console's own page.")
			return
		}
		if !equal(r.PostFormValue("csrf"), s.csrf) {
			s.refuse(w, r, http.StatusForbidden, "csrf-refused", "The form's token is missing or stale: reload the page and try again.")
			return
		}
	}
	s.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), nonceKey{}, nonce)))
}

// getBackIn says how an operator opens the console again.
const getBackIn = "restart sasctl ui (Ctrl-C, then the same command) and open the new URL it prints"

// login trades the URL's one-time token for a session: the first request
// that brings it gets a fresh random cookie, and leaves for the page asked
// for without the token in its address. The token opens nothing after
// that: a second use is refused, unless it comes with the session's own
// cookie (the operator opened the URL again), which goes in without a new
// one.
func (s *Server) login(w http.ResponseWriter, r *http.Request, tok string) {
	if !equal(tok, s.token) {
		s.refuse(w, r, http.StatusForbidden, "token-refused", "The token in the URL is not this console's: open the URL sasctl ui printed.")
		return
	}
	s.mu.Lock()
	first := !s.tokenUsed
	if first {
		s.tokenUsed = true
		s.session, s.seen = randomToken(), s.now()
	}
	session := s.session
	s.mu.Unlock()
	if first {
		http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		s.log.Info("console session opened", slog.String("idleTimeout", s.o.IdleTimeout.String()))
	} else if code, _ := s.check(r, true); code != "" {
		s.refuse(w, r, http.StatusForbidden, "token-used", "This URL was used already: its token opens one session, once. To open the console, "+getBackIn+".")
		return
	}
	// The token leaves the address bar, so it is not copied along with it.
	q := r.URL.Query()
	q.Del("token")
	to := localPath(r.URL.Path)
	if len(q) > 0 {
		to += "?" + q.Encode()
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// check finds the session of the request's cookie: "" if it is open, else
// the refusal's code and detail. A session idle for the idle timeout ends
// for good. An active request keeps the session open.
func (s *Server) check(r *http.Request, active bool) (code, detail string) {
	c, err := r.Cookie(s.cookie)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || s.session == "" || !equal(c.Value, s.session) {
		return "no-session", "No session: open the URL sasctl ui printed. It opens one session, once; if it was used already, " + getBackIn + "."
	}
	now := s.now()
	if now.Sub(s.seen) >= s.o.IdleTimeout {
		s.session = ""
		return "session-expired", "The session ended after " + opsclient.Duration(s.o.IdleTimeout) + " without a request. To open the console again, " + getBackIn + "."
	}
	if active {
		s.seen = now
	}
	return "", ""
}

// localPath is where a login leads: the path asked for when the console
// could serve it as it stands (absolute, clean, of the characters its
// routes use), else the overview. A path a browser would read as another
// host's ("//evil.example", "/\evil.example", "/\t/evil.example", each
// perhaps percent-encoded in the request) is none of those.
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || path.Clean(p) != p {
		return "/"
	}
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/-_.~", c)) {
			return "/"
		}
	}
	return p
}

// nonceKey holds the request's script nonce in its context.
type nonceKey struct{}

// sameOrigin: a browser names the page that sent a POST in Origin, or
// sends Origin: null where it hides it (a sandboxed frame, a page whose
// referrer policy is no-referrer), and says in Sec-Fetch-Site whether the
// request came from this origin. A named origin must be the console's;
// else Sec-Fetch-Site must say same-origin. Neither header: refused.
func (s *Server) sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		return o == s.origin
	}
	return r.Header.Get("Sec-Fetch-Site") == "same-origin"
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// refuse answers a request the console will not serve with an RFC 9457
// problem, and logs it.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, code, detail string) {
	s.log.Warn("console refused a request", slog.String("code", code), slog.String("method", r.Method),
		slog.String("path", r.URL.Path), slog.String("host", r.Host))
	writeProblem(w, status, code, detail)
}

func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	b, _ := jsonwire.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{"about:blank", code, status, detail})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Serve listens on addr, a loopback host:port (port 0 picks one), and
// serves the console until ctx ends; ready gets the URL to open once it
// listens.
func Serve(ctx context.Context, addr string, o Options, ready func(url string)) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("console: --listen %q: %w", addr, err)
	}
	if !opsclient.IsLoopback(host) {
		return fmt.Errorf("console: --listen %s is not loopback: the console acts with your AWS credentials, so it serves this machine only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("console: listen on %s: %w", addr, err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	// The Host the browser sends is the name given (localhost stays
	// localhost), with the port bound.
	o.Addr = net.JoinHostPort(strings.Trim(host, "[]"), port)
	s, err := New(o)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	if ready != nil {
		ready(s.URL())
	}
	select {
	case err := <-done:
		return fmt.Errorf("console: %w", err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		return fmt.Errorf("console: shut down: %w", err)
	}
	return nil
}
