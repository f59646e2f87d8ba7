package remotesim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/sasflow/sas/shared/jsonstrict"
)

// Fault is what the simulator does with one call instead of, or besides,
// serving it normally.
type Fault int

const (
	// None serves the call normally.
	None Fault = iota
	// Transient answers 503 without applying the effect.
	Transient
	// Permanent answers 422 {"code":"rejected"} without applying the effect.
	Permanent
	// Hang blocks until the caller gives up, without applying the effect.
	Hang
	// ApplyThenFail applies the effect, then answers 503: the effect happened
	// but the caller sees an error and must retry with the same key.
	ApplyThenFail
	// ApplyThenHang applies the effect, then blocks until the caller gives up
	// (the caller sees a timeout).
	ApplyThenHang
	// Oversize applies the effect and answers 200 with a body far over any
	// step's output limit; the key keeps that answer, so replays get it too.
	Oversize
	// Garbage applies the effect and answers 200 with a body that is not
	// JSON (a proxy's error page, say); the key keeps it too.
	Garbage
	// HangThenApply holds the key in progress past the caller's timeout and
	// applies the effect only afterwards, as a slow service still working
	// on a request its caller gave up on. Meanwhile a call with the key is
	// answered 409 in_progress (which the agent retries, and which proves
	// nothing either way), and an undo of it 503 in_progress until the
	// effect is settled.
	HangThenApply
)

var faultNames = map[Fault]string{
	None: "none", Transient: "transient", Permanent: "permanent", Hang: "hang",
	ApplyThenFail: "applyThenFail", ApplyThenHang: "applyThenHang",
	Oversize: "oversize", Garbage: "garbage", HangThenApply: "hangThenApply",
}

func (f Fault) String() string {
	if n, ok := faultNames[f]; ok {
		return n
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Duration is a time.Duration written in JSON as a Go duration string
// ("250ms").
type Duration time.Duration

// MarshalJSON writes d as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"250ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Faults is the random fault injection in force. The probabilities of the
// exclusive faults (Transient, Permanent, Hang, ApplyThenFail,
// ApplyThenHang) add up to at most 1; latency is drawn independently and
// added before any of them.
type Faults struct {
	Transient     float64 `json:"transient"`
	Permanent     float64 `json:"permanent"`
	Hang          float64 `json:"hang"`
	ApplyThenFail float64 `json:"applyThenFail"`
	// ApplyThenHang applies the effect and then never answers: the caller
	// times out not knowing the effect happened.
	ApplyThenHang float64 `json:"applyThenHang"`
	// Oversize, Garbage and HangThenApply: see the Fault constants.
	Oversize      float64 `json:"oversize,omitempty"`
	Garbage       float64 `json:"garbage,omitempty"`
	HangThenApply float64 `json:"hangThenApply,omitempty"`
	// InProgressFor is how long a HangThenApply call keeps working after
	// its caller gave up; zero means DefaultInProgressFor.
	InProgressFor Duration `json:"inProgressFor,omitempty"`
	// Latency is the probability of a delay drawn from [LatencyMin, LatencyMax].
	Latency    float64  `json:"latency"`
	LatencyMin Duration `json:"latencyMin"`
	LatencyMax Duration `json:"latencyMax"`
	// RejectSteps are rejected permanently on every call that has no stored
	// result yet.
	RejectSteps []string `json:"rejectSteps,omitempty"`
	// RejectUndo are the steps whose compensations are rejected permanently,
	// as RejectSteps' calls are.
	RejectUndo []string `json:"rejectUndo,omitempty"`
	// HangSteps are the steps whose every call hangs until its caller
	// gives up, without effect: a remote that is down for those steps
	// only (a partner's maintenance window).
	HangSteps []string `json:"hangSteps,omitempty"`
	// Seed, when set, reseeds the random source so a run can be replayed.
	Seed *uint64 `json:"seed,omitempty"`
}

// DefaultInProgressFor is Faults.InProgressFor when unset: longer than an
// agent's backoff between tries, so a retry finds the key still in progress.
const DefaultInProgressFor = time.Second

// inProgressFor is InProgressFor with its default.
func (f Faults) inProgressFor() time.Duration {
	if f.InProgressFor == 0 {
		return DefaultInProgressFor
	}
	return time.Duration(f.InProgressFor)
}

// Limits of a fault configuration.
const (
	MaxLatency     = 5 * time.Minute
	maxRejectSteps = 100
	maxFaultsBytes = 64 << 10
)

// Validate checks the ranges.
func (f Faults) Validate() error {
	var errs []error
	probs := []struct {
		name string
		p    float64
	}{
		{"transient", f.Transient}, {"permanent", f.Permanent}, {"hang", f.Hang},
		{"applyThenFail", f.ApplyThenFail}, {"applyThenHang", f.ApplyThenHang}, {"latency", f.Latency},
		{"oversize", f.Oversize}, {"garbage", f.Garbage}, {"hangThenApply", f.HangThenApply},
	}
	for _, p := range probs {
		if math.IsNaN(p.p) || p.p < 0 || p.p > 1 {
			errs = append(errs, fmt.Errorf("%s probability %v must be within 0..1", p.name, p.p))
		}
	}
	if sum := f.exclusiveSum(); sum > 1+1e-9 {
		errs = append(errs, fmt.Errorf("transient+permanent+hang+applyThenFail+applyThenHang+oversize+garbage+hangThenApply = %v exceeds 1", sum))
	}
	if f.LatencyMin < 0 || f.LatencyMax < f.LatencyMin || time.Duration(f.LatencyMax) > MaxLatency {
		errs = append(errs, fmt.Errorf("latency range %v..%v must satisfy 0 <= min <= max <= %v",
			time.Duration(f.LatencyMin), time.Duration(f.LatencyMax), MaxLatency))
	}
	if f.InProgressFor < 0 || time.Duration(f.InProgressFor) > MaxLatency {
		errs = append(errs, fmt.Errorf("inProgressFor %v must be within 0..%v", time.Duration(f.InProgressFor), MaxLatency))
	}
	errs = append(errs, validSteps("rejectSteps", f.RejectSteps)...)
	errs = append(errs, validSteps("rejectUndo", f.RejectUndo)...)
	errs = append(errs, validSteps("hangSteps", f.HangSteps)...)
	return errors.Join(errs...)
}

// exclusive lists the faults of which a call draws at most one, with their
// probabilities.
func (f Faults) exclusive() []struct {
	p     float64
	fault Fault
} {
	return []struct {
		p     float64
		fault Fault
	}{
		{f.Transient, Transient}, {f.Permanent, Permanent}, {f.Hang, Hang}, {f.ApplyThenFail, ApplyThenFail},
		{f.ApplyThenHang, ApplyThenHang}, {f.Oversize, Oversize}, {f.Garbage, Garbage}, {f.HangThenApply, HangThenApply},
	}
}

func (f Faults) exclusiveSum() float64 {
	sum := 0.0
	for _, c := range f.exclusive() {
		sum += c.p
	}
	return sum
}

// validSteps checks a list of step names of the field name.
func validSteps(name string, steps []string) []error {
	var errs []error
	if len(steps) > maxRejectSteps {
		errs = append(errs, fmt.Errorf("%d %s exceed %d", len(steps), name, maxRejectSteps))
	}
	for _, s := range steps {
		if !stepPattern.MatchString(s) {
			errs = append(errs, fmt.Errorf("%s: %q is not a step name", name, s))
		}
	}
	return errs
}

// DecodeFaults reads a fault configuration strictly (POST /v1/faults).
func DecodeFaults(r io.Reader) (Faults, error) {
	var f Faults
	if err := decodeStrict(r, maxFaultsBytes, &f); err != nil {
		return Faults{}, err
	}
	if err := f.Validate(); err != nil {
		return Faults{}, err
	}
	return f, nil
}

// decodeStrict decodes exactly one JSON value with no unknown fields from at
// most limit bytes of r.
func decodeStrict(r io.Reader, limit int64, into any) error {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	if int64(len(b)) > limit {
		return fmt.Errorf("body exceeds %d bytes", limit)
	}
	if err := jsonstrict.Decode(b, into); err != nil {
		return fmt.Errorf("decode body: %w", err)
	}
	return nil
}
