package statestore

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/workflow"
)

// TestTraceIsStoredCompactly: the record keeps the trace header without its
// field names, and reads it back as the header it was.
func TestTraceIsStoredCompactly(t *testing.T) {
	t.Parallel()
	const root = "1-6b02b8b1-4d2e6f8a0b1c3d5e7f9a1b2c"
	tests := []struct{ header, stored, read string }{
		{"Root=" + root + ";Sampled=1", root + ";1", "Root=" + root + ";Sampled=1"},
		{"Root=" + root + ";Sampled=0", root + ";0", "Root=" + root + ";Sampled=0"},
		{"Root=" + root, root, "Root=" + root},
		// A Parent is not the order's: the record never holds one.
		{"Root=" + root + ";Parent=1b2c3d4e5f6a7b8c;Sampled=1", root + ";1", "Root=" + root + ";Sampled=1"},
		{"", "", ""},
	}
	for _, tc := range tests {
		av, err := encodeState(workflow.State{OrderID: "o-1", Trace: tc.header})
		if err != nil {
			t.Fatal(err)
		}
		var stored string
		if v, ok := av["Trace"].(*types.AttributeValueMemberS); ok {
			stored = v.Value
		}
		if stored != tc.stored {
			t.Errorf("%q stored as %q, want %q", tc.header, stored, tc.stored)
		}
		s, err := DecodeState(av)
		if err != nil || s.Trace != tc.read {
			t.Errorf("%q read back as %q (%v), want %q", tc.header, s.Trace, err, tc.read)
		}
	}
	// A record written with the full header still reads.
	if got := expandTrace("Root=" + root + ";Sampled=1"); got != "Root="+root+";Sampled=1" {
		t.Errorf("a full header read as %q", got)
	}
}
