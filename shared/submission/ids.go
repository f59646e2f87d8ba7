package submission

import (
	"crypto/rand"

	"github.com/sasflow/sas/shared/message"
)

// randomOrderID returns a random UUID version 4.
func randomOrderID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails; it crashes instead.
	return message.UUID(b, 4)
}
