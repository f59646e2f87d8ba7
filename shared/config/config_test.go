package config

import (
	"errors"
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

func TestRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		apply func(r *Rules)
		want  []string // substrings of the joined error; none means valid
	}{
		{"valid", func(r *Rules) {
			r.Required("Name", "x")
			r.URL("QueueURL", "https://sqs.eu-west-1.amazonaws.com/1/q")
			r.Within("Timeout", time.Second, 0, time.Minute)
			r.Count("N", 3, 1, 5)
			r.Tables("Orders", "orders-1", "State", "state-1")
			r.TopicARN("Topic", "arn:aws:sns:eu-west-1:123456789012:alerts")
			r.Add(nil)
		}, nil},
		{"missing values are named by variable", func(r *Rules) {
			r.Required("Name", "")
			r.URL("QueueURL", "")
			r.TopicARN("Topic", "")
		}, []string{"NAME is required", "QUEUE_URL is required", "Topic is required"}},
		{"bounds", func(r *Rules) {
			r.Within("Timeout", 2*time.Hour, 0, time.Minute)
			r.Count("N", 9, 1, 5)
		}, []string{"Timeout=2h0m0s must be within 0s..1m0s", "N=9 must be within 1..5"}},
		{"shapes", func(r *Rules) {
			r.URL("QueueURL", "ftp://x")
			r.Table("Orders", "a b")
			r.TopicARN("Topic", "arn:aws:sqs:eu-west-1:1:q")
		}, []string{`QUEUE_URL="ftp://x" is not an absolute http(s) URL`, `Orders="a b" is not a DynamoDB table name`, "is not an SNS topic ARN"}},
		{"one table for both", func(r *Rules) { r.Tables("Orders", "t-1", "State", "t-1") },
			[]string{`Orders and State must differ, both are "t-1"`}},
		{"another validator's problems", func(r *Rules) { r.Add(errors.New("workflow: no steps")) },
			[]string{"workflow: no steps"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &Rules{Names: map[string]string{"Name": "NAME", "QueueURL": "QUEUE_URL"}}
			tc.apply(r)
			err := r.Err("test config")
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("valid values reported %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), "test config: ") {
				t.Fatalf("Err = %v, want problems prefixed with what was validated", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
