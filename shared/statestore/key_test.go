package statestore_test

import (
	"strings"
	"testing"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/statestore"
)

// TestKeySlot: a key's slot is the ID an older release gave the order it
// made with the key (pinned: those orders items must stay where their keys
// look), one per caller and key, and shaped like an order ID of version 8,
// which a new order's random ID (version 4) never is.
func TestKeySlot(t *testing.T) {
	t.Parallel()
	const owner = "arn:aws:iam::123456789012:user/client-a"
	if got, want := statestore.KeySlot(owner, "checkout-7731"), "fe9bd130-6085-8c92-b7cf-4a3e8a2d27fe"; got != want {
		t.Fatalf("KeySlot = %s, want the older release's order ID %s", got, want)
	}
	a, b := statestore.KeySlot(owner, "k1"), statestore.KeySlot(owner, "k2")
	// The same key from another caller has a slot of its own; the
	// separator keeps a pair from passing for another whose parts join the
	// same.
	c, d := statestore.KeySlot(owner+"x", "k1"), statestore.KeySlot(owner+"k", "1")
	if a == b || a == c || a == d || c == d || a != statestore.KeySlot(owner, "k1") {
		t.Fatalf("slots not distinct or not deterministic: %s %s %s %s", a, b, c, d)
	}
	for _, s := range []string{a, b, c, d} {
		if !message.ValidOrderID(s) || len(s) != 36 || s[14] != '8' || !strings.ContainsAny(s[19:20], "89ab") {
			t.Fatalf("%q is not a UUID of version 8", s)
		}
	}
}
