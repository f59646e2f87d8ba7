package remotesim

import (
	"flag"
	"strings"
	"time"
)

// FaultFlags registers the fault-injection flags on fs, with defaults from
// def, and returns a function that reads them into a validated Faults once
// fs is parsed. cmd/remotesim and the local stack share them.
func FaultFlags(fs *flag.FlagSet, def Faults) func() (Faults, error) {
	f := def
	fs.Float64Var(&f.Transient, "transient", def.Transient, "probability a remote call answers 503 without effect")
	fs.Float64Var(&f.Permanent, "permanent", def.Permanent, "probability a remote call is rejected (422, permanent)")
	fs.Float64Var(&f.Hang, "hang", def.Hang, "probability a remote call hangs until the caller gives up")
	fs.Float64Var(&f.ApplyThenFail, "apply-then-fail", def.ApplyThenFail, "probability a remote call applies its effect, then answers 503")
	fs.Float64Var(&f.ApplyThenHang, "apply-then-hang", def.ApplyThenHang, "probability a remote call applies its effect, then never answers")
	fs.Float64Var(&f.Oversize, "oversize", def.Oversize, "probability a remote call applies its effect, then answers 200 with a body far over the step's output limit")
	fs.Float64Var(&f.Garbage, "garbage", def.Garbage, "probability a remote call applies its effect, then answers 200 with a body that is not JSON")
	fs.Float64Var(&f.HangThenApply, "hang-then-apply", def.HangThenApply, "probability a remote call holds its key in progress past the caller's timeout (other calls get 409), then applies")
	fs.Float64Var(&f.Latency, "latency", def.Latency, "probability of added latency on a remote call")
	latMin := fs.Duration("latency-min", time.Duration(def.LatencyMin), "least added latency")
	latMax := fs.Duration("latency-max", time.Duration(def.LatencyMax), "most added latency")
	reject := fs.String("reject-steps", strings.Join(def.RejectSteps, ","), "comma-separated steps the remote service always rejects")
	rejectUndo := fs.String("reject-undo", strings.Join(def.RejectUndo, ","), "comma-separated steps whose compensations the remote service always rejects")
	hangSteps := fs.String("hang-steps", strings.Join(def.HangSteps, ","), "comma-separated steps whose every call hangs until the caller gives up")
	return func() (Faults, error) {
		out := f
		out.LatencyMin, out.LatencyMax = Duration(*latMin), Duration(*latMax)
		out.RejectSteps = splitList(*reject)
		out.RejectUndo = splitList(*rejectUndo)
		out.HangSteps = splitList(*hangSteps)
		return out, out.Validate()
	}
}

// splitList splits a comma-separated flag; empty is nil.
func splitList(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}
