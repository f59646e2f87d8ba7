package enginetest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// MaxNameLen is the longest name UniqueName returns. SQS queue names may
// have 80 characters; the margin leaves room for "-dlq" and ".fifo".
const MaxNameLen = 64

// UniqueName returns a name for a table, queue or topic that no other test
// uses: prefix, the test's name and a random suffix, made of letters,
// digits, '-' and '_' (valid for DynamoDB, SQS and SNS) and at most
// MaxNameLen characters long.
func UniqueName(tb testing.TB, prefix string) string {
	tb.Helper()
	suffix := fmt.Sprintf("%010x", rand.Uint64()&(1<<40-1))
	base := sanitizeName(prefix)
	if t := sanitizeName(tb.Name()); t != "" {
		if base != "" {
			base += "-"
		}
		base += t
	}
	if budget := MaxNameLen - len(suffix) - 1; len(base) > budget {
		base = strings.TrimRight(base[:budget], "-_")
	}
	if base == "" {
		return "t-" + suffix
	}
	return base + "-" + suffix
}

// sanitizeName keeps [A-Za-z0-9_-], turns runs of anything else into one
// '-', and trims '-' at both ends.
func sanitizeName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		ok := r == '_' || r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')
		if !ok || r == '-' {
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = true
			continue
		}
		b.WriteRune(r)
		dash = false
	}
	return strings.TrimRight(b.String(), "-")
}
