package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sasflow/sas/shared/jsonwire"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/remote"
	"github.com/sasflow/sas/shared/step"
	"github.com/sasflow/sas/shared/trace"
)

// MaxResponseBytes caps a remote response read into memory.
const MaxResponseBytes = 1 << 20

// maxProblemBytes caps an error response; a problem body is small.
const maxProblemBytes = 64 << 10

// Fault codes of remote responses that carry none of their own.
const (
	CodeResponseTooLarge = "response_too_large"
	CodeBadResponse      = "bad_response"
)

// HTTPService performs a step on the remote service by the contract of
// shared/remote: POST {base}/v1/steps/{step} with an Idempotency-Key
// header; and undoes one: POST {base}/v1/steps/{step}/compensate under the
// compensation's own key.
type HTTPService struct {
	base   string
	client *http.Client
	// replicas, when the remote has more than one, are a service each.
	replicas []Service
}

var (
	_ Service     = (*HTTPService)(nil)
	_ step.Undoer = (*HTTPService)(nil)
	_ Endpointer  = (*HTTPService)(nil)
	_ Replicated  = (*HTTPService)(nil)
)

// NewHTTPService returns a service calling baseURL through client; see
// NewHTTPClient.
func NewHTTPService(baseURL string, client *http.Client) *HTTPService {
	return &HTTPService{base: strings.TrimRight(baseURL, "/"), client: client}
}

// NewReplicatedHTTPService returns a service whose remote has a replica at
// each of baseURLs (Config.Endpoints), all sharing one idempotency state:
// the Handler sends each try to the healthiest (Replicas). Its own Do and
// Undo, called outside a Handler, use the first.
func NewReplicatedHTTPService(baseURLs []string, client *http.Client) *HTTPService {
	if len(baseURLs) == 0 {
		return NewHTTPService("", client)
	}
	s := NewHTTPService(baseURLs[0], client)
	if len(baseURLs) > 1 {
		for _, u := range baseURLs {
			s.replicas = append(s.replicas, NewHTTPService(u, client))
		}
	}
	return s
}

// Replicas are a service per replica, none when there is one.
func (s *HTTPService) Replicas() []Service { return s.replicas }

// NewHTTPClient returns a client fit for the remote service: every phase of a
// call bounded by timeout (the per-try context usually ends it sooner), and
// redirects not followed, since a redirected POST would lose its body.
func NewHTTPClient(timeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: min(timeout, 5*time.Second), KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = min(timeout, 5*time.Second)
	t.ResponseHeaderTimeout = timeout
	t.MaxIdleConnsPerHost = maxConcurrency
	return &http.Client{
		Timeout:   timeout,
		Transport: t,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Endpoint is the URL the request is posted to; each has its own breaker, so
// a remote failing its undos does not stop its steps, nor the reverse.
func (s *HTTPService) Endpoint(req Request) string {
	if req.Action == message.Compensate {
		return s.base + remote.CompensatePath(req.Step)
	}
	return s.base + remote.StepPath(req.Step)
}

// Do posts the step and classifies the answer: 2xx is the output; 408, 429,
// 5xx, a 409 in_progress and network errors are transient; any other status
// is permanent (see Transient).
func (s *HTTPService) Do(ctx context.Context, req Request) (json.RawMessage, error) {
	body, err := jsonwire.Marshal(remote.StepRequest{OrderID: req.OrderID, Step: req.Step, Input: req.Input, Previous: req.Previous})
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("encode step request: %w", err))
	}
	// The body is a step's whatever req.Action says, so it goes to the
	// step's route; undos go through Undo.
	req.Action = message.Perform
	return s.post(ctx, s.Endpoint(req), req.IdempotencyKey, body)
}

// Undo posts the undo of the effect applied under req.EffectKey, under
// the compensation's own req.IdempotencyKey, and classifies the answer as Do
// does. A remote that finds nothing to undo answers 2xx all the same.
func (s *HTTPService) Undo(ctx context.Context, req Request) (json.RawMessage, error) {
	if req.EffectKey == "" {
		// The remote would refuse it with a 400 on every try.
		return nil, step.Permanent(fmt.Errorf("compensation of step %s: no effect key to undo", req.Step))
	}
	body, err := jsonwire.Marshal(remote.CompensateRequest{OrderID: req.OrderID, Step: req.Step, EffectKey: req.EffectKey,
		Input: req.Input, Previous: req.Previous})
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("encode compensation request: %w", err))
	}
	// Endpoint names the undo route only for a Compensate action; this is
	// one whatever the caller set.
	req.Action = message.Compensate
	out, err := s.post(ctx, s.Endpoint(req), req.IdempotencyKey, body)
	var re *RemoteError
	if errors.As(err, &re) && re.Status >= 200 && re.Status < 300 {
		// The undo happened; only its answer is unusable, and a replay
		// under the key would get the same. An undo's output is kept for
		// the record only, so the undo is done without it.
		return nil, nil
	}
	return out, err
}

// post sends one JSON request under key and classifies the answer.
func (s *HTTPService) post(ctx context.Context, endpoint, key string, body []byte) (json.RawMessage, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("build request for %s: %w", endpoint, err))
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set(remote.IdempotencyKeyHeader, key)
	// The order's trace, so the remote's own traces join it.
	if h, ok := trace.FromContext(ctx); ok {
		hreq.Header.Set(trace.HTTPHeader, h.String())
	}

	resp, err := s.client.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("remote call: %w", err)
	}
	defer resp.Body.Close()

	limit := int64(maxProblemBytes)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		limit = MaxResponseBytes
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("remote call: read %d response: %w", resp.StatusCode, err)
	}
	truncated := int64(len(raw)) > limit
	if truncated {
		raw = raw[:limit]
	}
	return decodeResponse(resp.StatusCode, resp.Header.Get("Retry-After"), raw, truncated)
}

// RemoteError is a non-2xx answer, or a 2xx answer the agent cannot use.
type RemoteError struct {
	Status  int
	Code    string
	Message string
	// Wait is the remote's Retry-After, zero when it sent none.
	Wait time.Duration
}

var _ step.Faulter = (*RemoteError)(nil)

func (e *RemoteError) Error() string {
	return fmt.Sprintf("remote answered %d %s: %s", e.Status, e.Code, e.Message)
}

// Fault returns the remote's code and message.
func (e *RemoteError) Fault() message.Fault { return message.Fault{Code: e.Code, Message: e.Message} }

// RetryAfter is the remote's Retry-After.
func (e *RemoteError) RetryAfter() time.Duration { return e.Wait }

// Transient reports whether an answer with status and problem code is worth
// retrying: 408, 429, 5xx, and a 409 whose code is remote.CodeInProgress
// (another call with the key is still at work, so the effect may yet be
// applied: asking again gets its result). Any other 409, such as
// remote.CodeCompensated (the key was undone) or idempotency_conflict (the
// key with another body), is as permanent as any other 4xx.
func Transient(status int, code string) bool {
	switch {
	case status == http.StatusConflict:
		return code == remote.CodeInProgress
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests:
		return true
	}
	return status >= 500
}

// inProgress reports whether err is the answer that another call with the
// key is still at work: the remote's 409 in_progress, or a Service's
// ErrInProgress.
func inProgress(err error) bool {
	var re *RemoteError
	return errors.Is(err, ErrInProgress) || errors.As(err, &re) && re.Status == http.StatusConflict && re.Code == remote.CodeInProgress
}

// decodeResponse turns a remote answer into the step's output or a
// classified error. The body is outside input: it is fuzzed.
func decodeResponse(status int, retryAfter string, body []byte, truncated bool) (json.RawMessage, error) {
	if status >= 200 && status < 300 {
		// A 2xx says the remote applied the step; one the agent cannot use
		// is a failure, but not a proof of nothing applied, and asking again
		// under the same key gets the same stored answer from an idempotent
		// service.
		switch {
		case truncated:
			return nil, step.Permanent(step.Uncertain(&RemoteError{Status: status, Code: CodeResponseTooLarge,
				Message: fmt.Sprintf("response exceeds %d bytes", MaxResponseBytes)}))
		case len(bytes.TrimSpace(body)) == 0:
			return nil, nil
		case !json.Valid(body):
			return nil, step.Permanent(step.Uncertain(&RemoteError{Status: status, Code: CodeBadResponse, Message: "response is not JSON"}))
		case !utf8.Valid(body):
			// JSON exchanged between systems is UTF-8 (RFC 8259, section
			// 8.1), and a message that is not would be refused downstream.
			return nil, step.Permanent(step.Uncertain(&RemoteError{Status: status, Code: CodeBadResponse, Message: "response is not UTF-8"}))
		}
		// Compacted as it will travel (jsonwire), so the output's size is
		// the same number in every message and in the record.
		out, err := jsonwire.Compact(body)
		if err != nil {
			return nil, step.Permanent(step.Uncertain(&RemoteError{Status: status, Code: CodeBadResponse, Message: err.Error()}))
		}
		return out, nil
	}
	code, msg := remote.ParseProblem(body)
	if code == "" {
		code = "http_" + strconv.Itoa(status)
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	e := &RemoteError{Status: status, Code: truncate(code, maxCodeBytes), Message: truncate(msg, maxMessageBytes)}
	if Transient(status, code) {
		e.Wait = parseRetryAfter(retryAfter)
		return nil, e
	}
	return nil, step.Permanent(e)
}

// parseRetryAfter reads a Retry-After in seconds; an HTTP date or anything
// odd is ignored and the backoff applies.
func parseRetryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, int(maxWait/time.Second))) * time.Second
}
