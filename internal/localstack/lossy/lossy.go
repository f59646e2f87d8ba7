// Package lossy is an HTTP transport that loses answers: the engine acts on
// a request, and the caller never hears. Tests use it to check that a write
// whose answer was lost is recognized, and the chaos run to strike it at
// random.
package lossy

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// Transport is an HTTP transport that delivers every request to the
// engine and, for the requests Lose picks, throws the engine's answer away
// and reports a reset connection instead: the write committed, but its caller
// never heard. The SDK's retryer then sends the same request again, as it
// does in AWS when a response is lost on the way back.
type Transport struct {
	// Next carries the requests; http.DefaultTransport when nil.
	Next http.RoundTripper
	// Lose sees the API operation (the X-Amz-Target header, for example
	// "DynamoDB_20120810.UpdateItem") and the request body, and says
	// whether to lose the answer.
	Lose func(target string, body []byte) bool

	mu   sync.Mutex
	lost int
}

// Lost counts the answers thrown away.
func (l *Transport) Lost() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// RoundTrip implements http.RoundTripper.
func (l *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	next := l.Next
	if next == nil {
		next = http.DefaultTransport
	}
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := next.RoundTrip(r)
	if err != nil || !l.Lose(r.Header.Get("X-Amz-Target"), body) {
		return resp, err
	}
	// The engine has acted on the request; only the answer is lost.
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	l.mu.Lock()
	l.lost++
	l.mu.Unlock()
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

// First returns a Lose func that loses the answer of the first n
// requests for target, then none.
func First(target string, n int) func(string, []byte) bool {
	var mu sync.Mutex
	return func(t string, _ []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		if t != target || n == 0 {
			return false
		}
		n--
		return true
	}
}
