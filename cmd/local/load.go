package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// load is `make load`: the local stack in the deployed timing with
// LoadCapacity's remote service, faults off. It first finds the capacity,
// the highest steady rate whose orders are all admitted and processed with
// p99 within twice the unloaded p99; then it offers 0.5×, 1×, 1.5×, 2× and
// 3× of it for a fixed time each and prints a table, with the 2× level's
// figures on a line of their own. Last comes the mixed run: 20% high, 50%
// normal and 30% low orders offered at 0.5×, 2× and 3× the capacity, a
// row per level and class; the last line is the high class's p99 and
// shed count at 2× and 3×.
func load(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("local load", flag.ContinueOnError)
	trial := fs.Duration("trial", 20*time.Second, "length of each capacity-search trial")
	level := fs.Duration("level", 30*time.Second, "length of each load level")
	admit := fs.Bool("admission", true, "the Submission's admission check; false admits every order, to see what it prevents")
	mixedOnly := fs.Bool("mixed-only", false, "after the capacity search, only the mixed run")
	ctx, logFile, done, err := measurement(fs, args)
	if err != nil {
		return err
	}
	defer done()

	c := localstack.LoadCapacity()
	o := localstack.LoadOptions(c)
	onEngines(&o)
	watch := &localstack.LoadWatch{Next: logFile}
	o.Log = slog.New(slog.NewJSONHandler(watch, nil))
	if !*admit {
		o.Capacity = nil
		fmt.Fprintln(out, "load: admission check OFF: every order is admitted")
	}
	model := c.OrdersPerSecond()
	fmt.Fprintf(out, "load: deployed timing (step budget %v + wait %v, Supervisor %s, fast path on), faults off\n",
		o.Workflows.Definitions[0].Steps[0].Budget, o.Workflows.Definitions[0].Steps[0].Wait, topology.SupervisorSchedule)
	fmt.Fprintf(out, "load: model: remote latency %v, %d calls at once an Agent (MaximumConcurrency %d) = %.0f orders/s\n",
		c.RemoteLatency, c.RemoteConcurrency, c.AgentMaxConcurrency(), model)
	if o.Capacity != nil {
		fmt.Fprintf(out, "load: the Submission sheds past %d queued requests an Agent (admit wait %v, depths read every %v)\n",
			c.Backlog(), c.AdmitWait, c.AdmitRefresh())
	}
	st, err := localstack.Start(ctx, o)
	if err != nil {
		return err
	}
	defer st.Close()
	drain := o.Workflows.Definitions[0].Steps[0].Lease() + topology.SupervisorEvery
	ld := localstack.Load{Stack: st, Watch: watch, Warm: 2 * time.Duration(len(o.Workflows.Definitions[0].Steps)) * c.RemoteLatency, Drain: drain}

	// The capacity: the unloaded p99 first, then rising rates until one
	// sheds, leaves an order unfinished, or misses the bound.
	unloaded, err := ld.Run(ctx, model/10, *trial)
	if err != nil {
		return err
	}
	bound := 2 * unloaded.P(99)
	fmt.Fprintf(out, "load: unloaded (%.1f/s): p50 %.2f s, p99 %.2f s; capacity = the highest rate with every order admitted and processed, p99 ≤ %.2f s\n",
		unloaded.Rate, unloaded.P(50).Seconds(), unloaded.P(99).Seconds(), bound.Seconds())
	capacity := 0.0
	for f := 0.5; f <= 1.5; f += 0.1 {
		rate := f * model
		r, err := ld.Run(ctx, rate, *trial)
		if err != nil {
			return err
		}
		ok := r.Shed == 0 && r.Failed == 0 && r.Unfinished == 0 && r.P(99) <= bound
		fmt.Fprintf(out, "load: trial %.1f/s: admitted %d of %d, p99 %.2f s, completed %.1f/s → %s\n",
			rate, r.Admitted, r.Offered, r.P(99).Seconds(), r.CompletedPerSecond, map[bool]string{true: "within", false: "over"}[ok])
		if !ok {
			break
		}
		capacity = rate
	}
	if capacity == 0 {
		return fmt.Errorf("no rate from %.1f/s up kept every order within %.2f s", model/2, bound.Seconds())
	}
	fmt.Fprintf(out, "load: capacity %.1f orders/s\n\n", capacity)

	if !*mixedOnly {
		var levels []localstack.LoadLevel
		for _, f := range []float64{0.5, 1, 1.5, 2, 3} {
			r, err := ld.Run(ctx, f*capacity, *level)
			if err != nil {
				return err
			}
			levels = append(levels, r)
		}
		localstack.LoadTable(out, capacity, levels)
		two := levels[3]
		fmt.Fprintf(out, "load capacity_per_s=%.1f goodput_ratio_2x=%.2f p99_2x_s=%.2f shed_2x=%d\n\n",
			capacity, two.CompletedPerSecond/capacity, two.P(99).Seconds(), two.Shed)
	}

	// The mixed run: the same stack, each order of a class.
	ld.Mix = localstack.MixedLoad()
	fmt.Fprintf(out, "load: mixed: of every ten orders %d high, %d normal, %d low\n",
		ld.Mix[workflow.PriorityHigh], ld.Mix[workflow.PriorityNormal], ld.Mix[workflow.PriorityLow])
	var mixed []localstack.LoadLevel
	for _, f := range []float64{0.5, 2, 3} {
		r, err := ld.Run(ctx, f*capacity, *level)
		if err != nil {
			return err
		}
		mixed = append(mixed, r)
	}
	localstack.MixedTable(out, capacity, mixed)
	high := func(l localstack.LoadLevel) localstack.ClassLevel { return *l.Classes[workflow.PriorityHigh] }
	fmt.Fprintf(out, "load_mixed capacity_per_s=%.1f p99_high_2x_s=%.2f shed_high_2x=%d p99_high_3x_s=%.2f shed_high_3x=%d\n",
		capacity, high(mixed[1]).P(99).Seconds(), high(mixed[1]).Shed, high(mixed[2]).P(99).Seconds(), high(mixed[2]).Shed)
	return nil
}
