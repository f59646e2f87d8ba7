package statestore_test

import (
	"errors"
	"testing"

	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

func FuzzDecodeCursor(f *testing.F) {
	f.Add("eyJzIjoiRXJyb3IiLCJvIjoiYS0xIiwiYyI6MTJ9")
	f.Add("")
	f.Add("e30")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := statestore.DecodeCursor(s)
		if err != nil {
			if !errors.Is(err, statestore.ErrBadCursor) {
				t.Fatalf("error %v does not wrap ErrBadCursor", err)
			}
			return
		}
		if _, ok := workflow.ParseProcessState(c.State); !ok || c.OrderID == "" || c.ChangedAt < 0 {
			t.Fatalf("accepted an invalid cursor %+v", c)
		}
	})
}
