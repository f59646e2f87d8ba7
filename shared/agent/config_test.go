package agent_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sasflow/sas/internal/testkit/configtest"
	"github.com/sasflow/sas/shared/agent"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// deployed is the environment an agent Lambda is deployed with.
var deployed = map[string]string{
	"AGENT_STEP":         "reserve-inventory",
	"RESPONSE_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/123456789012/responses",
	"REMOTE_BASE_URLS":   "https://remote.example.com/api/",
	"REQUEST_QUEUE_URL":  "https://sqs.eu-west-1.amazonaws.com/123456789012/agent-reserve-inventory",
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	want := agent.Config{
		Step:             "reserve-inventory",
		ResponseQueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/responses",
		RemoteBaseURLs:   []string{"https://remote.example.com/api"},
		RemoteTimeout:    agent.DefaultRemoteTimeout,
		RetryBase:        agent.DefaultRetryBase,
		RetryMax:         agent.DefaultRetryMax,
		BreakerFailures:  agent.DefaultBreakerFailures,
		BreakerCooldown:  agent.DefaultBreakerCooldown,
		Concurrency:      agent.DefaultConcurrency,
		SafetyMargin:     agent.DefaultSafetyMargin,
		MaxReceiveCount:  topology.MaxReceiveCount,
		MaxOutputBytes:   workflow.Reference().Steps[0].OutputLimit(),
		RequestQueueURL:  "https://sqs.eu-west-1.amazonaws.com/123456789012/agent-reserve-inventory",
	}
	tuned := want
	tuned.RemoteTimeout, tuned.RetryBase, tuned.RetryMax = 2*time.Second, 50*time.Millisecond, time.Second
	tuned.BreakerFailures, tuned.BreakerCooldown, tuned.Concurrency, tuned.SafetyMargin = 7, 30*time.Second, 4, 250*time.Millisecond
	replicas := want
	replicas.RemoteBaseURLs = []string{"https://eu.remote.example.com/api", "https://us.remote.example.com"}
	single := want
	single.RemoteBaseURLs, single.RemoteBaseURL = nil, "https://remote.example.com/api"
	configtest.Loads(t, agent.LoadReferenceConfig, deployed, []configtest.Loaded[agent.Config]{
		{Name: "defaults", Want: want},
		{Name: "replicas", Set: []string{"REMOTE_BASE_URLS", " https://eu.remote.example.com/api/ , https://us.remote.example.com"}, Want: replicas},
		// A function configured outside the stack may still name one URL.
		{Name: "one URL by REMOTE_BASE_URL", Set: []string{"REMOTE_BASE_URLS", "", "REMOTE_BASE_URL", "https://remote.example.com/api/"}, Want: single},
		{Name: "every setting", Set: []string{
			"REMOTE_TIMEOUT", "2s", "RETRY_BASE", "50ms", "RETRY_MAX", "1s", "BREAKER_FAILURES", "7",
			"BREAKER_COOLDOWN", "30s", "AGENT_CONCURRENCY", "4", "SAFETY_MARGIN", "250ms",
		}, Want: tuned},
	})
	// DefaultConfig is the same tuning without the required three.
	d := agent.DefaultConfig()
	d.Step, d.ResponseQueueURL, d.RemoteBaseURLs, d.RequestQueueURL = want.Step, want.ResponseQueueURL, want.RemoteBaseURLs, want.RequestQueueURL
	if !reflect.DeepEqual(d, want) {
		t.Errorf("DefaultConfig = %+v\nwant %+v", d, want)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	t.Parallel()
	configtest.Refuses(t, agent.LoadReferenceConfig, deployed, []configtest.Refused{
		{
			Name: "all required missing",
			Set:  []string{"AGENT_STEP", "", "RESPONSE_QUEUE_URL", "", "REMOTE_BASE_URLS", "", "REQUEST_QUEUE_URL", ""},
			Want: []string{"AGENT_STEP is required", "RESPONSE_QUEUE_URL is required", "REMOTE_BASE_URLS is required", "REQUEST_QUEUE_URL is required"},
		},
		{Name: "a step outside the workflow", Set: []string{"AGENT_STEP", "ship-order"}, Want: []string{`AGENT_STEP="ship-order" is not a step of any deployed workflow version`}},
		{Name: "bad step", Set: []string{"AGENT_STEP", "Reserve_Inventory"}, Want: []string{"AGENT_STEP=\"Reserve_Inventory\" must match"}},
		{Name: "queue URL not http", Set: []string{"RESPONSE_QUEUE_URL", "sqs://q"}, Want: []string{"RESPONSE_QUEUE_URL=\"sqs://q\" is not an absolute http(s) URL"}},
		{Name: "relative remote", Set: []string{"REMOTE_BASE_URLS", "", "REMOTE_BASE_URL", "/remote"}, Want: []string{"REMOTE_BASE_URL=\"/remote\" is not an absolute"}},
		{Name: "remote with query", Set: []string{"REMOTE_BASE_URLS", "", "REMOTE_BASE_URL", "https://r.example.com/?a=1"}, Want: []string{"REMOTE_BASE_URL=\"https://r.example.com/?a=1\" must have no query, fragment or user info"}},
		{Name: "remote with user", Set: []string{"REMOTE_BASE_URLS", "", "REMOTE_BASE_URL", "https://u:p@r.example.com"}, Want: []string{"must have no query, fragment or user info"}},
		{Name: "both remote variables", Set: []string{"REMOTE_BASE_URL", "https://r.example.com"}, Want: []string{"REMOTE_BASE_URLS: set it or REMOTE_BASE_URL, not both"}},
		{Name: "a relative replica", Set: []string{"REMOTE_BASE_URLS", "https://a.example.com,/remote"}, Want: []string{`REMOTE_BASE_URLS="/remote" is not an absolute http(s) URL`}},
		{Name: "an empty replica", Set: []string{"REMOTE_BASE_URLS", "https://a.example.com,,https://b.example.com"}, Want: []string{`REMOTE_BASE_URLS="https://a.example.com,,https://b.example.com" has an empty entry`}},
		{Name: "a replica with a query", Set: []string{"REMOTE_BASE_URLS", "https://a.example.com,https://b.example.com/?k=1"}, Want: []string{`REMOTE_BASE_URLS="https://b.example.com/?k=1" must have no query, fragment or user info`}},
		{Name: "a replica twice", Set: []string{"REMOTE_BASE_URLS", "https://a.example.com/api,https://A.example.com/api/"}, Want: []string{`REMOTE_BASE_URLS="https://A.example.com/api" is listed twice`}},
		{Name: "too many replicas", Set: []string{"REMOTE_BASE_URLS", "https://a1.example.com,https://a2.example.com,https://a3.example.com,https://a4.example.com,https://a5.example.com,https://a6.example.com,https://a7.example.com,https://a8.example.com,https://a9.example.com"},
			Want: []string{"names 9 URLs, at most 8"}},
		{Name: "timeout not a duration", Set: []string{"REMOTE_TIMEOUT", "5"}, Want: []string{"REMOTE_TIMEOUT=\"5\" is not a duration"}},
		{Name: "timeout too long", Set: []string{"REMOTE_TIMEOUT", "16m"}, Want: []string{"REMOTE_TIMEOUT=16m0s must be within 10ms..15m0s"}},
		{Name: "retry max below base", Set: []string{"RETRY_BASE", "2s", "RETRY_MAX", "1s"}, Want: []string{"RETRY_MAX=1s must be at least RETRY_BASE=2s"}},
		{Name: "breaker failures zero", Set: []string{"BREAKER_FAILURES", "0"}, Want: []string{"BREAKER_FAILURES=0 must be within 1..1000"}},
		{Name: "breaker failures not int", Set: []string{"BREAKER_FAILURES", "many"}, Want: []string{"BREAKER_FAILURES=\"many\" is not an integer"}},
		{Name: "cooldown negative", Set: []string{"BREAKER_COOLDOWN", "-1s"}, Want: []string{"BREAKER_COOLDOWN=-1s must be within"}},
		{Name: "concurrency too high", Set: []string{"AGENT_CONCURRENCY", "101"}, Want: []string{"AGENT_CONCURRENCY=101 must be within 1..100"}},
		{Name: "margin too long", Set: []string{"SAFETY_MARGIN", "2m"}, Want: []string{"SAFETY_MARGIN=2m0s must be within 0s..1m0s"}},
		{Name: "alert topic not an ARN", Set: []string{"ALERT_TOPIC_ARN", "alerts"}, Want: []string{`ALERT_TOPIC_ARN="alerts" is not an SNS topic ARN`}},
		{Name: "receive count zero", Set: []string{"MAX_RECEIVE_COUNT", "0"}, Want: []string{"MAX_RECEIVE_COUNT=0 must be within 1..1000"}},
		{Name: "several at once", Set: []string{"AGENT_STEP", "", "AGENT_CONCURRENCY", "0"}, Want: []string{"AGENT_STEP is required", "AGENT_CONCURRENCY=0"}},
		// A parse error and a broken rule are both reported.
		{
			Name: "a parse error and a rule",
			Set:  []string{"AGENT_STEP", "ship-order", "REMOTE_TIMEOUT", "5", "RETRY_BASE", "2s", "RETRY_MAX", "1s"},
			Want: []string{`AGENT_STEP="ship-order" is not a step`, `REMOTE_TIMEOUT="5" is not a duration`, "RETRY_MAX=1s must be at least RETRY_BASE=2s"},
		},
	})
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*agent.Config)
		want   []string // every problem; none for a valid config
	}{
		{"good", func(*agent.Config) {}, nil},
		{"the defaults", func(c *agent.Config) {
			d := agent.DefaultConfig()
			d.Step, d.ResponseQueueURL, d.RequestQueueURL, d.RemoteBaseURL = c.Step, c.ResponseQueueURL, c.RequestQueueURL, c.RemoteBaseURL
			*c = d
		}, nil},
		{"output limit left to the workflow", func(c *agent.Config) { c.MaxOutputBytes = 0 }, nil},
		{"no step", func(c *agent.Config) { c.Step = "" }, []string{"Step is required"}},
		{"bad step", func(c *agent.Config) { c.Step = "Reserve" }, []string{`Step="Reserve" must match`}},
		{"no queues", func(c *agent.Config) { c.ResponseQueueURL, c.RequestQueueURL = "", "" }, []string{"ResponseQueueURL is required", "RequestQueueURL is required"}},
		{"queue not http", func(c *agent.Config) { c.RequestQueueURL = "sqs://q" }, []string{`RequestQueueURL="sqs://q" is not an absolute http(s) URL`}},
		{"no remote", func(c *agent.Config) { c.RemoteBaseURL = "" }, []string{"RemoteBaseURLs is required"}},
		{"remote with fragment", func(c *agent.Config) { c.RemoteBaseURL += "#x" }, []string{"must have no query, fragment or user info"}},
		{"replicas", func(c *agent.Config) {
			c.RemoteBaseURL, c.RemoteBaseURLs = "", []string{"https://a.example.com", "https://b.example.com"}
		}, nil},
		{"eight replicas", func(c *agent.Config) {
			c.RemoteBaseURL = ""
			for i := range agent.MaxReplicas {
				c.RemoteBaseURLs = append(c.RemoteBaseURLs, fmt.Sprintf("https://r%d.example.com", i))
			}
		}, nil},
		{"replicas and one URL", func(c *agent.Config) { c.RemoteBaseURLs = []string{"https://a.example.com"} },
			[]string{"RemoteBaseURLs: set it or RemoteBaseURL, not both"}},
		{"a replica twice", func(c *agent.Config) {
			c.RemoteBaseURL, c.RemoteBaseURLs = "", []string{"https://a.example.com", "https://a.example.com/"}
		}, []string{`RemoteBaseURLs="https://a.example.com/" is listed twice`}},
		{"a replica not http", func(c *agent.Config) {
			c.RemoteBaseURL, c.RemoteBaseURLs = "", []string{"ftp://a.example.com", "https://b.example.com"}
		}, []string{`RemoteBaseURLs="ftp://a.example.com" is not an absolute http(s) URL`}},
		{"zero timeout", func(c *agent.Config) { c.RemoteTimeout = 0 }, []string{"RemoteTimeout=0s must be within 10ms..15m0s"}},
		{"retry max below base", func(c *agent.Config) { c.RetryMax = c.RetryBase - time.Millisecond }, []string{"RetryMax=99ms must be at least RetryBase=100ms"}},
		{"no retry base", func(c *agent.Config) { c.RetryBase = 0 }, []string{"RetryBase=0s must be within 1ms..1m0s"}},
		{"no breaker failures", func(c *agent.Config) { c.BreakerFailures = 0 }, []string{"BreakerFailures=0 must be within 1..1000"}},
		{"negative cooldown", func(c *agent.Config) { c.BreakerCooldown = -1 }, []string{"BreakerCooldown=-1ns must be within"}},
		{"no concurrency", func(c *agent.Config) { c.Concurrency = 0 }, []string{"Concurrency=0 must be within 1..100"}},
		{"negative margin", func(c *agent.Config) { c.SafetyMargin = -1 }, []string{"SafetyMargin=-1ns must be within 0s..1m0s"}},
		{"no receive count", func(c *agent.Config) { c.MaxReceiveCount = 0 }, []string{"MaxReceiveCount=0 must be within 1..1000"}},
		{"an alert topic", func(c *agent.Config) { c.AlertTopicARN = "arn:aws:sns:eu-west-1:123456789012:alerts" }, nil},
		{"an alert topic that is a queue", func(c *agent.Config) { c.AlertTopicARN = "arn:aws:sqs:eu-west-1:123456789012:alerts" },
			[]string{`AlertTopicARN="arn:aws:sqs:eu-west-1:123456789012:alerts" is not an SNS topic ARN`}},
		{"output limit over a message", func(c *agent.Config) { c.MaxOutputBytes = workflow.MaxMessageBytes + 1 }, []string{"MaxOutputBytes="}},
		{"several at once", func(c *agent.Config) { c.Step, c.Concurrency, c.SafetyMargin = "", 0, time.Hour },
			[]string{"Step is required", "Concurrency=0", "SafetyMargin=1h0m0s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := testConfig()
			tt.mutate(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Errorf("Validate = %v", err)
				}
				return
			}
			configtest.Problems(t, "Validate", err, tt.want...)
		})
	}
}

// LoadConfig applies Validate's rules: a value it refuses from the
// environment, Validate refuses when code sets it.
func TestLoadConfigAppliesValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		variable string
		value    string
		set      func(*agent.Config) // the same value, set in code
		want     string              // how Validate names the problem
	}{
		{"concurrency", "AGENT_CONCURRENCY", "101", func(c *agent.Config) { c.Concurrency = 101 }, "Concurrency=101"},
		{"receive count", "MAX_RECEIVE_COUNT", "1001", func(c *agent.Config) { c.MaxReceiveCount = 1001 }, "MaxReceiveCount=1001"},
		{"cooldown", "BREAKER_COOLDOWN", "1ms", func(c *agent.Config) { c.BreakerCooldown = time.Millisecond }, "BreakerCooldown=1ms"},
		{"remote", "REMOTE_BASE_URLS", "https://r.example.com/?a=1", func(c *agent.Config) { c.RemoteBaseURLs = []string{"https://r.example.com/?a=1"} }, "RemoteBaseURLs="},
	}
	good, err := agent.LoadReferenceConfig(configtest.Env(deployed))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := agent.LoadReferenceConfig(configtest.Env(deployed, tt.variable, tt.value)); err == nil || !strings.Contains(err.Error(), tt.variable+"=") {
				t.Errorf("LoadConfig = %v, want an error about %s", err, tt.variable)
			}
			c := good
			tt.set(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want an error about %s", err, tt.want)
			}
		})
	}
}

// The variables LoadConfig reads are the ones shared/topology's descriptor
// lists for the actor.
func TestVariablesAreTheDescriptors(t *testing.T) {
	t.Parallel()
	configtest.ReadsExactly(t, "agent", agent.Variables, topology.Describe(topology.Agent).Env)
}

// TestReplicasNamingOneServerTwice: two base URLs that name one endpoint
// (case, a default port, a trailing slash, percent-encoding, dot segments,
// an IP address's spelling) are one replica listed twice, refused, whether
// set in code or in REMOTE_BASE_URLS; two that name different endpoints
// are two replicas. Endpoints, which the breakers are keyed by and the
// endpoint log attribute is read from (Host), gives the one spelling.
func TestReplicasNamingOneServerTwice(t *testing.T) {
	t.Parallel()
	same := [][2]string{
		{"https://r.example.com", "https://R.Example.COM"},
		{"https://r.example.com", "HTTPS://r.example.com"},
		{"https://r.example.com", "https://r.example.com:443"},
		{"https://r.example.com", "https://r.example.com:0443/"},
		{"https://r.example.com", "https://r.example.com:"},
		{"http://r.example.com/api", "http://r.example.com:80/api/"},
		{"https://r.example.com/api", "https://r.example.com/api//"},
		{"https://r.example.com/a~b", "https://r.example.com/a%7Eb"},
		{"https://r.example.com/api%2Fv1", "https://r.example.com/api%2fv1"},
		{"https://r.example.com/v1/api", "https://r.example.com/v1/./api"},
		{"https://r.example.com/api", "https://r.example.com/v1/../api"},
		{"https://[::1]:8443", "https://[0:0:0::1]:8443"},
		{"https://[::1]", "https://[::1]:443"},
		{"https://127.0.0.1", "https://127.0.0.1:443/"},
	}
	distinct := [][2]string{
		{"https://r.example.com", "http://r.example.com"},
		{"https://r.example.com", "https://r.example.com:8443"},
		{"https://r.example.com", "http://r.example.com:443"},
		{"https://r.example.com/api", "https://r.example.com/API"},
		{"https://r.example.com/api", "https://r.example.com/api/v2"},
		{"https://r.example.com/api/v1", "https://r.example.com/api%2Fv1"},
		// A name with its root's dot is absolute; without it, a resolver
		// may try its search domains first.
		{"https://r", "https://r."},
		{"https://[::1]", "https://127.0.0.1"},
	}
	for _, pair := range same {
		t.Run("same "+pair[0]+" "+pair[1], func(t *testing.T) {
			t.Parallel()
			c := testConfig()
			c.RemoteBaseURL, c.RemoteBaseURLs = "", pair[:]
			configtest.Problems(t, "Validate", c.Validate(), fmt.Sprintf("RemoteBaseURLs=%q is listed twice", pair[1]))
			_, err := agent.LoadReferenceConfig(configtest.Env(deployed, "REMOTE_BASE_URLS", pair[0]+","+pair[1]))
			if err == nil || !strings.Contains(err.Error(), "REMOTE_BASE_URLS=") || !strings.Contains(err.Error(), "is listed twice") {
				t.Errorf("LoadConfig = %v, want %s listed twice", err, pair[1])
			}
			one, other := agent.Config{RemoteBaseURL: pair[0]}.Endpoints(), agent.Config{RemoteBaseURL: pair[1]}.Endpoints()
			if !reflect.DeepEqual(one, other) || agent.Host(one[0]) != agent.Host(other[0]) {
				t.Errorf("endpoints %q and %q, hosts %q and %q", one, other, agent.Host(one[0]), agent.Host(other[0]))
			}
		})
	}
	for _, pair := range distinct {
		t.Run("distinct "+pair[0]+" "+pair[1], func(t *testing.T) {
			t.Parallel()
			c := testConfig()
			c.RemoteBaseURL, c.RemoteBaseURLs = "", pair[:]
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate = %v", err)
			}
			if eps := c.Endpoints(); len(eps) != 2 || eps[0] == eps[1] {
				t.Errorf("endpoints %q", eps)
			}
		})
	}
	// The one spelling, as the breakers and the logs see it.
	c := agent.Config{RemoteBaseURLs: []string{"HTTPS://Eu.Remote.Example.com:443/v1/./api/", "http://[0:0::1]:80", "https://r.example.com:8443/a%7e%2f"}}
	if want := []string{"https://eu.remote.example.com/v1/api", "http://[::1]", "https://r.example.com:8443/a~%2F"}; !reflect.DeepEqual(c.Endpoints(), want) {
		t.Errorf("Endpoints = %q, want %q", c.Endpoints(), want)
	}
	if h := agent.Host(c.Endpoints()[0]); h != "eu.remote.example.com" {
		t.Errorf("the endpoint attribute of %s is %q", c.RemoteBaseURLs[0], h)
	}
}

// A host is written in ASCII (an internationalized one as its A-label), so
// it has one spelling; a port out of range is no port.
func TestReplicaHostsHaveOneSpelling(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"https://bücher.example", "https://b%C3%BCcher.example", "https://r.example.com:65536"} {
		c := testConfig()
		c.RemoteBaseURL, c.RemoteBaseURLs = "", []string{"https://xn--bcher-kva.example", v}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("RemoteBaseURLs=%q", v)) {
			t.Errorf("%s: Validate = %v", v, err)
		}
	}
	if err := (agent.Config{RemoteBaseURL: "https://xn--bcher-kva.example"}).Validate(); err != nil && strings.Contains(err.Error(), "RemoteBaseURL=") {
		t.Errorf("an A-label refused: %v", err)
	}
}

// BaseURL's spelling is a base URL whose spelling is itself, with the same
// host for the logs.
func FuzzBaseURL(f *testing.F) {
	for _, v := range []string{"https://R.Example.COM:443/api/", "http://r:80/v1/./a/../b//", "https://[0:0::1]:8443/a%7e%2f",
		"https://[fe80::1%25eth0]", "https://r.example.com.", "https://bücher.example", "https://r:/x", "https://r.example.com/%zz"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, err := agent.BaseURL(v)
		if err != nil {
			return
		}
		again, err := agent.BaseURL(n)
		if err != nil || again != n {
			t.Fatalf("BaseURL(%q) = %q, whose own is %q (%v)", v, n, again, err)
		}
		if strings.HasSuffix(n, "/") || agent.Host(n) != agent.Host(again) {
			t.Fatalf("BaseURL(%q) = %q", v, n)
		}
	})
}
