package config

import (
	"strings"
	"testing"
	"time"
)

func TestReader(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"NAME": "x", "URL": "https://sqs.eu-west-1.amazonaws.com/1/q", "BADURL": "ftp://x",
		"N": "7", "NBAD": "seven", "NBIG": "1000", "D": "30s", "DBAD": "soon", "DBIG": "2h",
	}
	r := NewReader(func(k string) string { return env[k] })
	if got := r.String("NAME"); got != "x" {
		t.Errorf("String = %q", got)
	}
	if got := r.StringOr("UNSET", "def"); got != "def" {
		t.Errorf("StringOr = %q", got)
	}
	if got := r.URL("URL"); got != env["URL"] {
		t.Errorf("URL = %q", got)
	}
	if got := r.Int("N", 1, 0, 10); got != 7 {
		t.Errorf("Int = %d", got)
	}
	if got := r.Int("UNSET", 3, 0, 10); got != 3 {
		t.Errorf("Int default = %d", got)
	}
	if got := r.Duration("D", time.Second, 0, time.Hour); got != 30*time.Second {
		t.Errorf("Duration = %v", got)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("valid values reported %v", err)
	}
	r.String("MISSING")
	r.URL("BADURL")
	r.Int("NBAD", 0, 0, 10)
	r.Int("NBIG", 0, 0, 10)
	r.Duration("DBAD", 0, 0, time.Hour)
	r.Duration("DBIG", 0, 0, time.Hour)
	err := r.Err()
	for _, want := range []string{"MISSING is required", "BADURL", "NBAD", "NBIG=1000", "DBAD", "DBIG=2h0m0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
}
