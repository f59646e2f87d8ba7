package localstack

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"

	"github.com/sasflow/sas/shared/message"
)

// SeededOrderIDs makes a demo's order IDs from its seed, the caller and
// the order's Idempotency-Key (Options.OrderIDs), so a seed replays the
// same orders: the remote simulator and the chaos injector draw their
// faults from the orders' idempotency keys, which name the orders. The
// deployed Submission gives every order a random ID instead, so that a key
// reused once forgotten never makes an order that shares anything with an
// earlier one; a demo never reuses a key. An order without a key gets a
// random ID here too.
func SeededOrderIDs(seed uint64) func(owner, key string) string {
	return func(owner, key string) string {
		var b [16]byte
		if key == "" {
			_, _ = rand.Read(b[:])
		} else {
			var s [8]byte
			binary.BigEndian.PutUint64(s[:], seed)
			sum := sha256.Sum256([]byte("sasflow/localstack/order-id\x00" + string(s[:]) + owner + "\x00" + key))
			copy(b[:], sum[:16])
		}
		return message.UUID(b, 4) // version 4: as the deployed IDs look
	}
}
