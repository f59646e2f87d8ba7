package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sasflow/sas/internal/localstack"
	"github.com/sasflow/sas/shared/topology"
)

// recovery is `make recovery`: the local stack in the deployed timing,
// every Agent invocation killed, once with the Supervisor's fast path and
// once with its sweep alone; per order, CompleteBy → the Supervisor's
// decision and CompleteBy → the next claim. The last line is the fast
// path's decision latency.
func recovery(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("local recovery", flag.ContinueOnError)
	orders := fs.Int("orders", 40, "orders a run, each with its first step's Agent killed")
	spread := fs.Duration("spread", topology.SupervisorEvery, "submit the orders evenly over this long, so their deadlines fall at every phase of the Supervisor's schedule")
	ctx, logFile, done, err := measurement(fs, args)
	if err != nil {
		return err
	}
	defer done()

	o := localstack.DeployedOptions()
	fmt.Fprintf(out, "recovery: deployed timing: step budget %v, Supervisor %s, backoff %v, claim timeout %v; %d orders a run over %v, every Agent invocation killed\n",
		o.Workflows.Definitions[0].Steps[0].Budget, topology.SupervisorSchedule, o.Policy.BackoffBase, o.Policy.ClaimTimeout, *orders, *spread)
	type row struct {
		name string
		res  localstack.RecoveryResult
	}
	var rows []row
	for _, fast := range []bool{true, false} {
		name := "fast path on"
		if !fast {
			name = "sweep only"
		}
		fmt.Fprintf(out, "recovery: %s…\n", name)
		res, err := recoveryRun(ctx, o, !fast, *orders, *spread, logFile)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		rows = append(rows, row{name, res})
	}
	s := func(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }
	fmt.Fprintln(out)
	fmt.Fprintf(out, "%-14s %-34s %s\n", "", "CompleteBy → decision (s)", "CompleteBy → next claim (s)")
	fmt.Fprintf(out, "%-14s %-8s %-8s %-16s %-8s %-8s %s\n", "", "p50", "p99", "max", "p50", "p99", "max")
	for _, r := range rows {
		d, c := r.res.Decision, r.res.NextClaim
		fmt.Fprintf(out, "%-14s %-8s %-8s %-16s %-8s %-8s %s\n", r.name,
			s(localstack.Percentile(d, 50)), s(localstack.Percentile(d, 99)), s(localstack.Percentile(d, 100)),
			s(localstack.Percentile(c, 50)), s(localstack.Percentile(c, 99)), s(localstack.Percentile(c, 100)))
	}
	fmt.Fprintf(out, "(the next claim follows the decision after the policy's backoff, %v before jitter)\n", o.Policy.BackoffBase)
	d := rows[0].res.Decision
	fmt.Fprintf(out, "recovery schedule=%s p50_s=%s p99_s=%s max_s=%s\n", topology.SupervisorSchedule,
		s(localstack.Percentile(d, 50)), s(localstack.Percentile(d, 99)), s(localstack.Percentile(d, 100)))
	return nil
}

// recoveryRun starts a stack, runs one Recovery on it and stops it.
func recoveryRun(ctx context.Context, o localstack.Options, noFastPath bool, orders int, spread time.Duration, logs io.Writer) (localstack.RecoveryResult, error) {
	o.NoFastPath, o.Crash = noFastPath, 1
	o.Seed = uint64(time.Now().UnixNano()) % 1_000_000_000
	onEngines(&o)
	watch := &localstack.RecoveryWatch{Next: logs}
	o.Log = slog.New(slog.NewJSONHandler(watch, nil))
	st, err := localstack.Start(ctx, o)
	if err != nil {
		return localstack.RecoveryResult{}, err
	}
	defer st.Close()
	return localstack.Recovery{Stack: st, Watch: watch, Orders: orders, Spread: spread,
		Timeout: spread + o.Workflows.Definitions[0].Steps[0].Lease() + 2*topology.SupervisorEvery + o.Policy.BackoffMax}.Run(ctx)
}
