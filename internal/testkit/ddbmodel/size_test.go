package ddbmodel

import "testing"

// TestNumberSize counts a number's size as DynamoDB does: one byte per two
// significant digits, leading and trailing zeros trimmed, and one more.
func TestNumberSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    string
		want int
	}{{"0", 1}, {"1", 2}, {"100", 2}, {"12", 2}, {"123", 3}, {"-0.0015", 2}, {"1.5e10", 2}, {"1774000000000", 3}, {"1774012345678", 8}, {"007", 2}} {
		if got := numberSize(tc.n); got != tc.want {
			t.Errorf("numberSize(%q) = %d, want %d", tc.n, got, tc.want)
		}
	}
}
