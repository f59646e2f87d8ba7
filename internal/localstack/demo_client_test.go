package localstack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The demo's client honours the admission check as a client of the API
// should: a 429 is no rejection; it waits the Retry-After and submits the
// order again under the same Idempotency-Key, and the 429 is counted.
func TestDemoClientResubmitsAShedOrderAfterItsRetryAfter(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var keys []string
	var at []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		keys, at = append(keys, r.Header.Get("Idempotency-Key")), append(at, time.Now())
		if len(keys) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"type":"https://sasflow.dev/problems/overloaded"}`))
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"orderId":"o-1"}`))
	}))
	t.Cleanup(srv.Close)
	d := Demo{Stack: &Stack{APIURL: srv.URL}, RunID: "t", shed: &atomic.Int64{}}
	id, status, err := d.post(context.Background(), srv.Client(), 7)
	if err != nil || status != http.StatusAccepted || id != "o-1" {
		t.Fatalf("post = %q, %d, %v; want o-1 accepted", id, status, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] != keys[1] || keys[0] == "" {
		t.Fatalf("Idempotency-Keys %q: want the same key twice", keys)
	}
	if waited := at[1].Sub(at[0]); waited < time.Second {
		t.Errorf("resubmitted after %v, before the Retry-After of 1s", waited)
	}
	if n := d.shed.Load(); n != 1 {
		t.Errorf("%d 429s counted, want 1", n)
	}
}

func TestRetryAfterIsTheHeadersSecondsAndATenthMoreAtMost(t *testing.T) {
	t.Parallel()
	for header, want := range map[string]time.Duration{"3": 3 * time.Second, " 2 ": 2 * time.Second, "": time.Second, "0": time.Second, "soon": time.Second} {
		if got := retryAfter(header); got < want || got > want+want/10 {
			t.Errorf("retryAfter(%q) = %v, want %v..%v", header, got, want, want+want/10)
		}
	}
}
