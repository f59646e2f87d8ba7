package simulation

import "math/rand/v2"

// random is the Chooser of a seeded run.
type random struct{ r *rand.Rand }

func newRandom(seed uint64) *random {
	return &random{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (c *random) Intn(n int) int        { return c.r.IntN(n) }
func (c *random) Chance(p float64) bool { return p > 0 && c.r.Float64() < p }
func (c *random) Float() float64        { return c.r.Float64() }
