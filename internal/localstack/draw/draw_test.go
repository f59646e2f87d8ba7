package draw_test

import (
	"fmt"
	"testing"

	"github.com/sasflow/sas/internal/localstack/draw"
)

func TestUnitIsReplayableAndUniform(t *testing.T) {
	t.Parallel()
	if draw.Unit(1, "k", 0) != draw.Unit(1, "k", 0) {
		t.Fatal("same arguments, different numbers")
	}
	if draw.Unit(1, "k", 0) == draw.Unit(2, "k", 0) || draw.Unit(1, "k", 0) == draw.Unit(1, "k", 1) {
		t.Fatal("seed or n ignored")
	}
	// Ten buckets over 20,000 draws of similar keys: each near 2,000.
	var buckets [10]int
	for i := range 20000 {
		u := draw.Unit(7, fmt.Sprintf("order-%d", i), uint64(i%3))
		if u < 0 || u >= 1 {
			t.Fatalf("Unit = %v", u)
		}
		buckets[int(u*10)]++
	}
	for i, n := range buckets {
		if n < 1700 || n > 2300 {
			t.Errorf("bucket %d holds %d of 20000", i, n)
		}
	}
}
