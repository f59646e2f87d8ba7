package remotesim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sasflow/sas/shared/clock"
	"github.com/sasflow/sas/shared/remote"
)

// ReplicaFault is what one replica does in front of the shared simulator:
// the replicas of a service (regional endpoints) share one Sim, its
// idempotency state, so a key applied through one is known to all, as the
// Agent's routing requires.
type ReplicaFault struct {
	// Down answers every call 503 without reaching the simulator.
	Down bool
	// Refuse closes the replica's listener and its connections: every call
	// fails to connect.
	Refuse bool
	// Slow delays every call this long before it reaches the simulator; a
	// caller that gives up first leaves nothing behind, as at a proxy whose
	// client went away.
	Slow time.Duration
	// Step, when set, limits Down and Slow to that step's calls (and
	// undos); a replica refusing connections refuses them all.
	Step string
}

// Healthy reports whether f does nothing.
func (f ReplicaFault) Healthy() bool { return !f.Down && !f.Refuse && f.Slow == 0 }

// String names the fault for logs and reports.
func (f ReplicaFault) String() string {
	var parts []string
	if f.Refuse {
		parts = append(parts, "refusing connections")
	}
	if f.Down {
		parts = append(parts, "down (503)")
	}
	if f.Slow > 0 {
		parts = append(parts, fmt.Sprintf("slow (+%v)", f.Slow))
	}
	if len(parts) == 0 {
		return "healthy"
	}
	s := strings.Join(parts, ", ")
	if f.Step != "" {
		s += " for " + f.Step
	}
	return s
}

// Replica is one endpoint of the simulated service: an HTTP server on its
// own loopback address that hands calls to the shared Sim, unless its fault
// says otherwise.
type Replica struct {
	sim   *Sim
	sleep func(ctx context.Context, d time.Duration) error

	mu    sync.Mutex
	addr  string
	srv   *http.Server
	fault ReplicaFault
	// calls counts the calls that reached this replica.
	calls int
}

// StartReplica serves sim on addr (loopback; port 0 picks one) as one of
// its replicas. Close stops it.
func StartReplica(sim *Sim, addr string) (*Replica, error) {
	if err := Loopback(addr); err != nil {
		return nil, err
	}
	r := &Replica{sim: sim, sleep: clock.Sleep}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	r.addr = ln.Addr().String()
	r.serveLocked(ln)
	return r, nil
}

// URL is the replica's base URL.
func (r *Replica) URL() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return "http://" + r.addr
}

// Calls is how many calls reached the replica while it was listening.
func (r *Replica) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// Fault is the fault in force.
func (r *Replica) Fault() ReplicaFault {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fault
}

// SetFault puts f in force: Refuse stops listening until a fault without
// it, which listens again on the same address.
func (r *Replica) SetFault(f ReplicaFault) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.fault
	r.fault = f
	switch {
	case f.Refuse && !was.Refuse:
		if r.srv != nil {
			_ = r.srv.Close()
			r.srv = nil
		}
	case !f.Refuse && was.Refuse:
		ln, err := net.Listen("tcp", r.addr)
		if err != nil {
			return fmt.Errorf("replica %s: listen again: %w", r.addr, err)
		}
		r.serveLocked(ln)
	}
	return nil
}

// Close stops the replica.
func (r *Replica) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		_ = r.srv.Close()
		r.srv = nil
	}
}

func (r *Replica) serveLocked(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 5 * time.Second}
	r.srv = srv
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = ln.Close()
		}
	}()
}

func (r *Replica) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.calls++
	f := r.fault
	r.mu.Unlock()
	// Only the service's routes: the simulator's own (faults, effects)
	// stay reachable for the run that drives it.
	if !strings.HasPrefix(req.URL.Path, "/v1/steps/") ||
		(f.Step != "" && req.URL.Path != remote.StepPath(f.Step) && req.URL.Path != remote.CompensatePath(f.Step)) {
		f = ReplicaFault{}
	}
	if f.Down {
		writeProblem(w, http.StatusServiceUnavailable, "replica_down", "this replica is down")
		return
	}
	if f.Slow > 0 {
		if err := r.sleep(req.Context(), f.Slow); err != nil {
			return
		}
	}
	r.sim.ServeHTTP(w, req)
}
