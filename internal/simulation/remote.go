package simulation

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/sasflow/sas/internal/localstack/remotesim"
	"github.com/sasflow/sas/shared/remote"
)

// remoteModel is the remote services the Agents call, with the contract of
// shared/remote and the local simulator (internal/localstack/remotesim),
// as an http.RoundTripper the Agents' real HTTP client calls, so their
// requests, answers and classification are the deployed ones:
//   - a step's effect is applied at most once per Idempotency-Key; a call
//     with a key that has a stored result replays it, and a call with the
//     key and another body is 409 idempotency_conflict;
//   - a compensation undoes the effect under its effectKey at most once per
//     key of its own; one that finds nothing applied leaves a tombstone, so
//     a late try of the step is refused 409 compensated;
//   - a rejection is remembered under its key, for steps and undos alike:
//     every later call with the key gets it again, and the key is never
//     applied (an operator's retry of it comes under a new key);
//   - an order under a hold (Hold) has its undos refused for good until
//     the operators lift it (Fix);
//   - while a call that hung is still working on a key (HangThenApply), a
//     step call with it is 409 in_progress and an undo of it 503;
//   - faults: 503, 422, hangs until the caller's timeout, applied then 503
//     or hung, applied later after a hang, 2xx bodies that are not JSON or
//     too large.
type remoteModel struct {
	w *World
	f *faults
	// timeout is the Agents' RemoteTimeout: a hang lasts until it.
	timeout    time.Duration
	results    map[string]remoteResult
	effects    map[string]int
	undos      map[string]int
	tombstones map[string]bool
	inProgress map[string]int
	calls      int
	// keyOrders remembers whose order each key's first call was, to catch a
	// key reused across orders.
	keyOrders map[string]string
	reused    []string
	// replicas are the hosts the Agents reach the services at, all in
	// front of this one state; outage is the Replica fault in force.
	replicas []string
	outage   replicaOutage
}

// replicaOutage is one replica at fault until a time.
type replicaOutage struct {
	host  string
	kind  replicaKind
	until time.Time
}

type replicaKind int

const (
	replicaRefused replicaKind = iota
	replicaDown
	replicaSlow
)

var replicaKinds = [...]string{"refusing connections", "down (503)", "slow"}

// atFault decides whether the call to host meets a replica at fault,
// starting an outage of one replica when the Replica fault strikes and
// none is in force.
func (m *remoteModel) atFault(host string) (replicaKind, bool) {
	now := m.w.now
	if !now.Before(m.outage.until) && len(m.replicas) > 1 && m.f.strike(Replica) {
		m.outage = replicaOutage{host: m.replicas[m.w.choose.Intn(len(m.replicas))], kind: replicaKind(m.w.choose.Intn(len(replicaKinds))),
			until: now.Add(m.w.delay(5*time.Second, time.Minute))}
		m.w.log.add(now, "remote", "replica "+replicaKinds[m.outage.kind]+" until "+m.outage.until.Format(time.TimeOnly), m.outage.host)
	}
	if host != m.outage.host || !now.Before(m.outage.until) {
		return 0, false
	}
	return m.outage.kind, true
}

type remoteResult struct {
	status  int
	body    []byte
	hash    string
	orderID string
	step    string
}

func newRemote(w *World, f *faults, timeout time.Duration) *remoteModel {
	return &remoteModel{w: w, f: f, timeout: timeout, results: map[string]remoteResult{}, effects: map[string]int{},
		undos: map[string]int{}, tombstones: map[string]bool{}, inProgress: map[string]int{}, keyOrders: map[string]string{}}
}

type answer struct {
	status int
	body   []byte
	// hang: the caller waits until its timeout and gets no answer.
	hang bool
}

func problem(status int, code, msg string) answer {
	b, _ := json.Marshal(remote.Problem{Code: code, Message: msg})
	return answer{status: status, body: b}
}

var unavailable = problem(http.StatusServiceUnavailable, "unavailable", "try again")

// RoundTrip serves one call. It runs in the Agent's invocation: the call's
// latency and hang are simulated time.
func (m *remoteModel) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	_ = req.Body.Close()
	key := req.Header.Get(remote.IdempotencyKeyHeader)
	undo := strings.HasSuffix(req.URL.Path, "/compensate")
	if kind, ok := m.atFault(req.URL.Host); ok {
		// The call never reaches the shared state.
		p := procOf(ctx)
		switch kind {
		case replicaRefused:
			if p != nil {
				p.suspend(time.Millisecond)
			}
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		case replicaDown:
			if p != nil {
				p.suspend(time.Millisecond)
			}
			return &http.Response{StatusCode: unavailable.status, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(bytes.NewReader(unavailable.body)), ContentLength: int64(len(unavailable.body)), Request: req}, nil
		default:
			if p != nil {
				p.suspend(m.timeout)
			}
			return nil, fmt.Errorf("remote call: %w", context.DeadlineExceeded)
		}
	}
	var a answer
	err = m.f.call(ctx, "remote."+map[bool]string{false: "step", true: "undo"}[undo], key, false, func() error {
		a = m.serve(key, undo, body)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if a.hang {
		if p := procOf(ctx); p != nil {
			p.suspend(m.timeout)
		}
		return nil, fmt.Errorf("remote call: %w", context.DeadlineExceeded)
	}
	return &http.Response{StatusCode: a.status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(a.body)), ContentLength: int64(len(a.body)), Request: req}, nil
}

// serve draws the call's fault and acts it out around its check-and-apply.
func (m *remoteModel) serve(key string, undo bool, body []byte) answer {
	m.calls++
	var sr struct {
		OrderID   string `json:"orderId"`
		Step      string `json:"step"`
		EffectKey string `json:"effectKey"`
	}
	if key == "" || json.Unmarshal(body, &sr) != nil {
		return problem(http.StatusBadRequest, "bad_request", "missing key or body")
	}
	if !undo {
		if first, ok := m.keyOrders[key]; ok && first != sr.OrderID {
			m.reused = append(m.reused, fmt.Sprintf("%s: order %s, first used by order %s", key, sr.OrderID, first))
		} else if !ok {
			m.keyOrders[key] = sr.OrderID
		}
	}
	route := "step\n"
	if undo {
		route = "compensate\n"
	}
	sum := sha256.Sum256(append([]byte(route), body...))
	hash := hex.EncodeToString(sum[:8])
	apply := func() answer {
		if res, ok := m.results[key]; ok {
			if res.hash != hash {
				return problem(http.StatusConflict, "idempotency_conflict", "the Idempotency-Key was used with another request body")
			}
			return answer{status: res.status, body: res.body}
		}
		if undo {
			return m.undo(key, hash, sr.OrderID, sr.Step, sr.EffectKey)
		}
		if m.tombstones[key] {
			return problem(http.StatusConflict, remote.CodeCompensated, "compensated before it was applied")
		}
		if m.inProgress[key] > 0 {
			return problem(http.StatusConflict, remote.CodeInProgress, "still in progress")
		}
		m.effects[key]++
		return m.store(key, hash, sr.OrderID, sr.Step, fmt.Sprintf(`{"confirmation":"%s-%d","orderId":%q}`, sr.Step, len(m.results), sr.OrderID))
	}
	// The contract: a rejection is remembered under its key, so a clean
	// one proves nothing was applied under the key, ever.
	refuse := func(code, msg string) answer {
		if res, ok := m.results[key]; ok {
			if res.hash != hash {
				return problem(http.StatusConflict, "idempotency_conflict", "the Idempotency-Key was used with another request body")
			}
			return answer{status: res.status, body: res.body}
		}
		a := problem(http.StatusUnprocessableEntity, code, msg)
		m.results[key] = remoteResult{status: a.status, body: a.body, hash: hash, orderID: sr.OrderID, step: sr.Step}
		return a
	}
	_, stored := m.results[key]
	if undo && !stored && m.f.held(sr.OrderID) {
		m.f.counts["remote-held-undo"]++
		return refuse("legal_hold", "the effect is under a legal hold")
	}
	switch m.draw(stored) {
	case remotesim.Transient:
		return unavailable
	case remotesim.Permanent:
		return refuse("rejected", "rejected")
	case remotesim.Hang:
		return answer{hang: true}
	case remotesim.HangThenApply:
		m.inProgress[key]++
		m.w.after(remotesim.DefaultInProgressFor+m.timeout, func() {
			m.inProgress[key]--
			a := apply()
			m.w.log.add(m.w.now, "remote", fmt.Sprintf("applied late %d", a.status), key)
		})
		return answer{hang: true}
	case remotesim.ApplyThenFail:
		apply()
		return unavailable
	case remotesim.ApplyThenHang:
		apply()
		return answer{hang: true}
	case remotesim.Garbage:
		if a := apply(); a.status != http.StatusOK {
			return a
		}
		m.restore(key, []byte("<html><body>502 Bad Gateway</body></html>"))
		return answer{status: http.StatusOK, body: m.results[key].body}
	case remotesim.Oversize:
		if a := apply(); a.status != http.StatusOK {
			return a
		}
		m.restore(key, []byte(`{"receipt":"`+strings.Repeat("x", remotesim.OversizeBytes)+`"}`))
		return answer{status: http.StatusOK, body: m.results[key].body}
	}
	return apply()
}

// draw picks a call's fault, none when the remote faults are off. A key
// with a stored result is never rejected: an idempotent service replays
// it.
func (m *remoteModel) draw(stored bool) remotesim.Fault {
	if !m.f.on || m.f.budget != nil {
		return remotesim.None
	}
	rate := m.f.mix[Remote]
	if rate == 0 {
		return remotesim.None
	}
	u := m.w.choose.Float()
	for _, c := range []struct {
		f remotesim.Fault
		p float64
	}{
		{remotesim.Transient, 0.10}, {remotesim.Permanent, 0.005}, {remotesim.Hang, 0.02}, {remotesim.ApplyThenFail, 0.03},
		{remotesim.ApplyThenHang, 0.02}, {remotesim.HangThenApply, 0.01}, {remotesim.Garbage, 0.003}, {remotesim.Oversize, 0.002},
	} {
		if u < c.p*rate {
			if c.f == remotesim.Permanent && stored {
				return remotesim.None
			}
			m.f.counts[Fault("remote-"+c.f.String())]++
			return c.f
		}
		u -= c.p * rate
	}
	return remotesim.None
}

func (m *remoteModel) store(key, hash, orderID, step, body string) answer {
	m.results[key] = remoteResult{status: http.StatusOK, body: []byte(body), hash: hash, orderID: orderID, step: step}
	return answer{status: http.StatusOK, body: []byte(body)}
}

func (m *remoteModel) restore(key string, body []byte) {
	r := m.results[key]
	r.body = body
	m.results[key] = r
}

func (m *remoteModel) undo(key, hash, orderID, step, effectKey string) answer {
	if effectKey == "" || effectKey == key {
		return problem(http.StatusBadRequest, "bad_request", "the compensation needs an effectKey other than its own key")
	}
	if m.inProgress[effectKey] > 0 {
		return problem(http.StatusServiceUnavailable, remote.CodeInProgress, "the effect is still in progress")
	}
	if m.effects[effectKey] > 0 && m.results[effectKey].status == http.StatusOK {
		if eff := m.results[effectKey]; eff.orderID != orderID || eff.step != step {
			return problem(http.StatusUnprocessableEntity, "effect_mismatch", "the effect belongs to another step")
		}
		m.undos[effectKey]++
		return m.store(key, hash, orderID, step, fmt.Sprintf(`{"orderId":%q,"undone":true}`, orderID))
	}
	m.tombstones[effectKey] = true
	return m.store(key, hash, orderID, step, fmt.Sprintf(`{"orderId":%q,"undone":false}`, orderID))
}
