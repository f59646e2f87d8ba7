package submission

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
)

// idNamespace separates our derivation from any other SHA-256 of the same
// input; bump the version to change the mapping without colliding with the
// old. Version 1 hashed the key alone, so two clients sending the same key
// met on one order; orders made then keep their IDs.
const idNamespace = "sasflow/submission/order-id/v2\x00"

// OrderIDForKey derives the order ID for an Idempotency-Key sent by owner
// (see Principal): a retry with the same key by the same caller lands on the
// same order, so the conditional write in CreateOrder is what detects it,
// while another caller's same key makes an order of its own. The result is
// UUID-shaped (version 8, RFC 9562's custom-hash version) so derived and
// random IDs look alike.
func OrderIDForKey(owner, key string) string {
	// An owner is printable ASCII (Principal), so the NUL between the two
	// keeps (owner, key) pairs apart.
	sum := sha256.Sum256([]byte(idNamespace + owner + "\x00" + key))
	return formatUUID(sum[:16], 8)
}

// randomOrderID returns a random UUID version 4.
func randomOrderID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails; it crashes instead.
	return formatUUID(b[:], 4)
}

func formatUUID(b []byte, version byte) string {
	b[6] = b[6]&0x0f | version<<4
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:16])
	return string(s[:])
}
