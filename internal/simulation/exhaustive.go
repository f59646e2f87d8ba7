package simulation

import "fmt"

// The exhaustive search runs the smallest configuration in every way its
// choices allow, depth first and statelessly (each run starts afresh and
// replays a prefix of choices, then takes the first option of each new
// one): which of the events due at the same instant runs first, which
// visible message a poller takes, whether a stale receipt deletes, and
// where the budgeted faults strike. Times are not choices there: every
// call takes one millisecond and every wait its shortest value, so calls
// meet and are tried in every order.

// dfs is the Chooser of one run of the search.
type dfs struct {
	prefix []int
	made   [][2]int // each choice: how many options, which was taken
	// bound, when positive, is the most choices a run may take other than
	// the first option.
	bound int
}

func (d *dfs) Intn(n int) int {
	v := 0
	if i := len(d.made); i < len(d.prefix) {
		v = d.prefix[i]
	}
	d.made = append(d.made, [2]int{n, v})
	return v
}

// Chance and Float are not choices in the search (see faults.strike and
// World.float).
func (d *dfs) Chance(float64) bool { return false }
func (d *dfs) Float() float64      { return 0.5 }

// next is the prefix of the run after this one, or nil when the tree is
// done.
func (d *dfs) next() []int {
	off := make([]int, len(d.made)+1) // off[i]: choices before i not the first
	for i, m := range d.made {
		off[i+1] = off[i]
		if m[1] != 0 {
			off[i+1]++
		}
	}
	for i := len(d.made) - 1; i >= 0; i-- {
		if d.bound > 0 && off[i]+1 > d.bound {
			continue
		}
		if d.made[i][1]+1 < d.made[i][0] {
			p := make([]int, i+1)
			for j := range i {
				p[j] = d.made[j][1]
			}
			p[i] = d.made[i][1] + 1
			return p
		}
	}
	return nil
}

// Small is the smallest configuration: one order of the two-step
// workflow, the Scheduler in as many containers as run at once, the
// Supervisor's sweep and its fast path, at most Crashes Lambda deaths (at
// any port call, before it or after a write) and Copies duplicate
// deliveries of an SQS message.
type Small struct {
	Crashes, Copies int
	// Deviations, when positive, bounds the choices a run takes other
	// than the first option (a crash, a copy, an event run before another
	// due at the same instant, another message taken): the search is then
	// exhaustive within the bound. Most concurrency bugs need only a few
	// such deviations from a run that goes by the book (the observation
	// behind preemption-bounded search, Musuvathi and Qadeer, PLDI 2007).
	Deviations int
	// Limit bounds the runs; 0 means no bound.
	Limit int
}

// Search is what an exhaustive search explored.
type Search struct {
	Runs int
	// Complete: every run the configuration allows was explored.
	Complete bool
	// Longest is the most choices one run made.
	Longest    int
	Violations []string
	// Failing is the choices of the first failing run, for a replay.
	Failing []int
}

// Explore runs every interleaving of s (or the first s.Limit).
func Explore(s Small) (Search, error) {
	var out Search
	var prefix []int
	for {
		d := &dfs{prefix: prefix, bound: s.Deviations}
		res, err := Run(Config{Orders: 1, Mix: Mix{}, chooser: d, ref: "order-v1",
			budget: map[Fault]int{KillBefore: s.Crashes, Copy: s.Copies}})
		if err != nil {
			return out, err
		}
		out.Runs++
		out.Longest = max(out.Longest, len(d.made))
		if len(res.Violations) > 0 && out.Violations == nil {
			out.Violations = res.Violations
			for _, m := range d.made {
				out.Failing = append(out.Failing, m[1])
			}
		}
		if prefix = d.next(); prefix == nil {
			out.Complete = true
			return out, nil
		}
		if s.Limit > 0 && out.Runs >= s.Limit {
			return out, nil
		}
	}
}

func (s Search) String() string {
	return fmt.Sprintf("explored %d runs (complete %v, up to %d choices a run), %d violations", s.Runs, s.Complete, s.Longest, len(s.Violations))
}
