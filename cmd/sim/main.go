// Command sim runs the deterministic simulation (internal/simulation) over
// many seeds and prints what it found. Its last line is
//
//	sim orders=N seeds=S violations=V orders_per_cpu_s=R
//
// A failing seed is printed with the command that replays it, and with
// -replay the shrunk run's event log around the first violation.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"

	"github.com/sasflow/sas/internal/simulation"
)

func main() {
	var o simulation.Options
	flag.IntVar(&o.Orders, "orders", 1_000_000, "orders in all, over every seed")
	flag.IntVar(&o.PerSeed, "per-seed", 2000, "orders per seed")
	flag.Uint64Var(&o.FirstSeed, "seed", 1, "first seed; seeds run from it up")
	flag.IntVar(&o.Workers, "workers", 0, "seeds run at once (0: one per CPU)")
	flag.StringVar(&o.Mix, "mix", "", "the faults, as a seed prints them (default: each seed draws its own)")
	flag.BoolVar(&o.Replay, "replay", false, "run one seed (-seed, -per-seed, -mix), shrink a failure and print its event log")
	flag.BoolVar(&o.Explore, "explore", false, "search the smallest configuration exhaustively (one order of two steps, one crash, one duplicate delivery)")
	flag.IntVar(&o.Deviations, "deviations", 2, "with -explore: the most choices a run takes off the first option")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	memprofile := flag.String("memprofile", "", "write a heap profile at the run's end to this file (its alloc_space: every allocation of the run)")
	flag.Parse()
	// Each seed's world is small and short-lived: collecting it less often
	// is most of a run's time back (GOGC=800 halves a run's CPU time).
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(800)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sim:", err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "sim:", err)
			os.Exit(2)
		}
	}
	code, err := simulation.Main(os.Stdout, o)
	pprof.StopCPUProfile()
	if *memprofile != "" {
		if perr := writeHeap(*memprofile); perr != nil {
			fmt.Fprintln(os.Stderr, "sim:", perr)
			os.Exit(2)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sim:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
