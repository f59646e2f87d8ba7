package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReader(t *testing.T) {
	t.Parallel()
	env := map[string]string{"NAME": "x", "N": "7", "NBAD": "seven", "D": "30s", "DBAD": "soon"}
	r := NewReader(func(k string) string { return env[k] })
	if got := r.String("NAME"); got != "x" {
		t.Errorf("String = %q", got)
	}
	if got := r.String("UNSET"); got != "" {
		t.Errorf("String of an unset variable = %q", got)
	}
	if got := r.Int("N", 1); got != 7 {
		t.Errorf("Int = %d", got)
	}
	if got := r.Int("UNSET", 3); got != 3 {
		t.Errorf("Int default = %d", got)
	}
	if got := r.Duration("D", time.Second); got != 30*time.Second {
		t.Errorf("Duration = %v", got)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("valid values reported %v", err)
	}
	// What does not parse is reported and keeps its default.
	if got := r.Int("NBAD", 4); got != 4 {
		t.Errorf("Int of a bad value = %d, want the default", got)
	}
	if got := r.Duration("DBAD", time.Minute); got != time.Minute {
		t.Errorf("Duration of a bad value = %v, want the default", got)
	}
	err := r.Err()
	for _, want := range []string{`NBAD="seven" is not an integer`, `DBAD="soon" is not a duration`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
}

// A variable the Reader reported is not reported again by a rule: one line
// about each problem.
func TestLoadReportsAVariableOnce(t *testing.T) {
	t.Parallel()
	env := map[string]string{"N": "many"}
	_, err := Load("test config", func(k string) string { return env[k] }, map[string]string{"N": "N"},
		func(r *Reader) counted { return counted{N: r.Int("N", 0)} })
	if err == nil || strings.Count(err.Error(), "N=") != 1 || !strings.Contains(err.Error(), `N="many" is not an integer`) {
		t.Fatalf("Load = %v, want the parse error alone", err)
	}
	if err := Validate("test config", counted{N: 0}); err == nil || !strings.Contains(err.Error(), "test config: N=0 must be within 1..5") {
		t.Fatalf("Validate = %v, want the rule", err)
	}
}

// counted is a Config with one rule.
type counted struct{ N int }

func (c counted) Check(r *Rules) { r.Count("N", c.N, 1, 5) }

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
