package simulation

import (
	"fmt"
	"io"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options is a campaign: many seeds, each a run of PerSeed orders.
type Options struct {
	Orders    int
	PerSeed   int
	FirstSeed uint64
	Workers   int
	Mix       string
	// Replay runs FirstSeed alone, shrinks a failure and prints its log.
	Replay bool
	// Explore searches the smallest configuration exhaustively, within
	// Deviations.
	Explore    bool
	Deviations int
}

// Main runs a campaign and reports it on out; its last line is the
// summary. It returns the exit code: 1 when any invariant broke.
func Main(out io.Writer, o Options) (int, error) {
	if o.PerSeed <= 0 || o.Orders <= 0 {
		return 2, fmt.Errorf("orders %d and per-seed %d must be positive", o.Orders, o.PerSeed)
	}
	var mix Mix
	if o.Mix != "" {
		m, err := ParseMix(o.Mix)
		if err != nil {
			return 2, err
		}
		mix = m
	}
	if o.Explore {
		s := Small{Crashes: 1, Copies: 1, Deviations: o.Deviations}
		res, err := Explore(s)
		if err != nil {
			return 2, err
		}
		fmt.Fprintf(out, "explore: one order of two steps, %d crash, %d duplicate delivery, at most %d deviations a run: %s\n",
			s.Crashes, s.Copies, s.Deviations, res)
		for _, v := range res.Violations {
			fmt.Fprintf(out, "  %s\n", v)
		}
		if len(res.Violations) > 0 {
			return 1, nil
		}
		return 0, nil
	}
	if o.Replay {
		return replay(out, Config{Seed: o.FirstSeed, Orders: o.PerSeed, Mix: mix})
	}
	seeds := (o.Orders + o.PerSeed - 1) / o.PerSeed
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	cpu0 := cpuTime()
	wall0 := time.Now()
	results := make([]Result, seeds)
	errs := make([]error, seeds)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				results[i], errs[i] = Run(Config{Seed: o.FirstSeed + uint64(i), Orders: o.PerSeed, Mix: mix})
			}
		})
	}
	for i := range seeds {
		next <- i
	}
	close(next)
	wg.Wait()
	cpu := cpuTime() - cpu0
	wall := time.Since(wall0)
	orders, violations := 0, 0
	var code CodeStepReport
	var sweeps SweepReport
	for i, r := range results {
		if errs[i] != nil {
			return 2, fmt.Errorf("seed %d: %w", o.FirstSeed+uint64(i), errs[i])
		}
		orders += r.Orders
		code.add(r.CodeStep)
		sweeps.add(r.Sweeps)
		if len(r.Violations) == 0 {
			continue
		}
		violations += len(r.Violations)
		fmt.Fprintf(out, "seed %d broke %d invariants (faults %s):\n", r.Seed, len(r.Violations), r.Mix)
		for j, v := range r.Violations {
			if j == 5 {
				fmt.Fprintf(out, "  ... and %d more\n", len(r.Violations)-5)
				break
			}
			fmt.Fprintf(out, "  %s\n", v)
		}
		fmt.Fprintf(out, "  replay: %s\n", ReplayCommand(Config{Seed: r.Seed, Orders: r.Orders, Mix: r.Mix}))
	}
	rate := float64(orders) / cpu.Seconds()
	fmt.Fprintf(out, "sim: %d seeds of %d orders on %d workers: %.1f s CPU, %.1f s wall\n", seeds, o.PerSeed, workers, cpu.Seconds(), wall.Seconds())
	fmt.Fprintf(out, "sim: code steps: %s\n", code)
	fmt.Fprintf(out, "sim: supervisor: %s\n", sweeps)
	fmt.Fprintf(out, "sim orders=%d seeds=%d violations=%d orders_per_cpu_s=%.0f\n", orders, seeds, violations, rate)
	if violations > 0 {
		return 1, nil
	}
	return 0, nil
}

// ReplayCommand is the command that runs cfg again, event for event.
func ReplayCommand(cfg Config) string {
	return fmt.Sprintf("go run ./cmd/sim -replay -seed %d -per-seed %d -mix '%s'", cfg.Seed, cfg.Orders, cfg.Mix)
}

// replay runs one seed, and when it fails shrinks it and prints the event
// log around its first violation.
func replay(out io.Writer, cfg Config) (int, error) {
	cfg.Record = true
	res, err := Run(cfg)
	if err != nil {
		return 2, err
	}
	fmt.Fprintf(out, "seed %d, %d orders, faults %s: %d events, log %016x, %d violations\n",
		res.Seed, res.Orders, res.Mix, res.Events, res.Hash, len(res.Violations))
	if len(res.Violations) == 0 {
		fmt.Fprintf(out, "sim orders=%d seeds=1 violations=0 orders_per_cpu_s=0\n", res.Orders)
		return 0, nil
	}
	small, err := Shrink(cfg, res)
	if err != nil {
		return 2, err
	}
	fmt.Fprintf(out, "shrunk to %d orders, faults %s: %s\n", small.Orders, small.Mix, small.Violations[0])
	fmt.Fprintf(out, "replay the shrunk run: %s\n", ReplayCommand(Config{Seed: small.Seed, Orders: small.Orders, Mix: small.Mix}))
	for _, line := range Around(small, 80) {
		fmt.Fprintln(out, line)
	}
	fmt.Fprintf(out, "sim orders=%d seeds=1 violations=%d orders_per_cpu_s=0\n", res.Orders, len(res.Violations))
	return 1, nil
}

// kind is what a violation is, without the orders it names: two runs
// fail the same way when their first violations are of one kind.
func kind(v string) string {
	k, _, _ := strings.Cut(v, ":")
	return k
}

// Shrink looks for a smaller run of the same seed that fails the same
// way: fewer orders, then fewer kinds of fault. It returns the smallest
// it found (res itself when none).
func Shrink(cfg Config, res Result) (Result, error) {
	want := kind(res.Violations[0])
	best := res
	try := func(c Config) (bool, error) {
		c.Record = true
		r, err := Run(c)
		if err != nil {
			return false, err
		}
		for _, v := range r.Violations {
			if kind(v) == want {
				best = r
				return true, nil
			}
		}
		return false, nil
	}
	for n := best.Orders / 2; n >= 1; n /= 2 {
		c := cfg
		c.Orders, c.Mix = n, best.Mix
		ok, err := try(c)
		if err != nil {
			return best, err
		}
		if !ok {
			break
		}
	}
	for _, f := range AllFaults() {
		if best.Mix[f] == 0 {
			continue
		}
		m := Mix{}
		for k, v := range best.Mix {
			if k != f {
				m[k] = v
			}
		}
		c := cfg
		c.Orders, c.Mix = best.Orders, m
		if _, err := try(c); err != nil {
			return best, err
		}
	}
	return best, nil
}

var orderRef = regexp.MustCompile(`\bo[0-9]+\b`)

// Around is the event log of res around its first violation: the lines
// about the order it names, the last n of them.
func Around(res Result, n int) []string {
	if len(res.Violations) == 0 {
		return nil
	}
	id := orderRef.FindString(res.Violations[0])
	var lines []string
	for _, l := range res.Log {
		if id == "" || strings.Contains(l, " "+id+" ") || strings.HasSuffix(l, " "+id) || strings.Contains(l, " "+id+"/") {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// cpuTime is the CPU time the process used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
