package agent

import (
	"errors"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sasflow/sas/shared/catalog"
	"github.com/sasflow/sas/shared/config"
	"github.com/sasflow/sas/shared/topology"
	"github.com/sasflow/sas/shared/workflow"
)

// Config configures an Agent Lambda. Validate holds every rule; LoadConfig
// reads it from the environment and applies the same rules.
type Config struct {
	// Step is the one step this agent performs; requests for another step
	// are poison (a wiring mistake).
	Step string
	// ResponseQueueURL is the Scheduler's response queue.
	ResponseQueueURL string
	// RemoteBaseURL is the remote service, without a trailing slash, when
	// it has one endpoint; RemoteBaseURLs, set instead, are the base URLs
	// of its replicas. Replicas must share one idempotency state (a key
	// applied through one is known to all), since each try goes to
	// whichever is healthiest. Endpoints is the list either way.
	RemoteBaseURL  string
	RemoteBaseURLs []string
	// RemoteTimeout bounds one try; the deadline may cut it shorter.
	RemoteTimeout time.Duration
	// RetryBase and RetryMax shape the full-jitter backoff between tries.
	RetryBase time.Duration
	RetryMax  time.Duration
	// BreakerFailures consecutive transient failures open the breaker for
	// BreakerCooldown.
	BreakerFailures int
	BreakerCooldown time.Duration
	// Concurrency bounds the records of a batch processed at once.
	Concurrency int
	// SafetyMargin is kept back from the deadline to send the reply.
	SafetyMargin time.Duration
	// AlertTopicARN, when set, is where a poison request's last receive is
	// reported (see WithAlerts); MaxReceiveCount is the queue's redrive
	// setting.
	AlertTopicARN   string
	MaxReceiveCount int
	// MaxOutputBytes is the step's output limit (workflow.Step.OutputLimit):
	// a larger output fails the step, uncertainly. Zero means
	// workflow.DefaultMaxOutputBytes.
	MaxOutputBytes int
	// RequestQueueURL is the queue the agent consumes; a request whose reply
	// could not be sent is brought back on it within seconds.
	RequestQueueURL string
	// Code says the step is Go code run in the agent's own process
	// (shared/codestep): it has no remote, so RemoteBaseURL and
	// RemoteBaseURLs stay empty, and RemoteTimeout bounds one try of the
	// code.
	Code bool
}

// Defaults and limits of the settings.
const (
	DefaultRemoteTimeout   = 5 * time.Second
	DefaultRetryBase       = 100 * time.Millisecond
	DefaultRetryMax        = 5 * time.Second
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 10 * time.Second
	DefaultConcurrency     = 10
	DefaultSafetyMargin    = 500 * time.Millisecond

	// A step's budget is at most 15m (a Lambda's limit), so no wait may be
	// longer.
	maxWait        = 15 * time.Minute
	maxConcurrency = 100
	maxFailures    = 1000
	// MaxReplicas bounds RemoteBaseURLs: every try ranks them all.
	MaxReplicas = 8
	// The same bounds the stack's sas:maxReceiveCount has.
	maxReceiveCount = 1000
)

// stepPattern is the step name shape of shared/message and shared/workflow.
var stepPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// DefaultConfig is the tuning LoadConfig gives when no optional variable is
// set; Step, the queues and RemoteBaseURL are left for the caller.
func DefaultConfig() Config {
	return Config{
		RemoteTimeout: DefaultRemoteTimeout, RetryBase: DefaultRetryBase, RetryMax: DefaultRetryMax,
		BreakerFailures: DefaultBreakerFailures, BreakerCooldown: DefaultBreakerCooldown,
		Concurrency: DefaultConcurrency, SafetyMargin: DefaultSafetyMargin,
		MaxReceiveCount: topology.MaxReceiveCount,
		MaxOutputBytes:  workflow.DefaultMaxOutputBytes,
	}
}

// variables names the fields read from the environment, so LoadConfig
// reports a problem under the name the operator sets.
var variables = map[string]string{
	"Step":             topology.EnvAgentStep,
	"ResponseQueueURL": topology.EnvResponseQueueURL,
	"RemoteBaseURL":    topology.EnvRemoteBaseURL,
	"RemoteBaseURLs":   topology.EnvRemoteBaseURLs,
	"RemoteTimeout":    topology.EnvRemoteTimeout,
	"RetryBase":        topology.EnvRetryBase,
	"RetryMax":         topology.EnvRetryMax,
	"BreakerFailures":  topology.EnvBreakerFailures,
	"BreakerCooldown":  topology.EnvBreakerCooldown,
	"Concurrency":      topology.EnvAgentConcurrency,
	"SafetyMargin":     topology.EnvSafetyMargin,
	"AlertTopicARN":    topology.EnvAlertTopicARN,
	"MaxReceiveCount":  topology.EnvMaxReceiveCount,
	"RequestQueueURL":  topology.EnvRequestQueueURL,
}

// CodeVariables names the fields a code step's configuration reads
// (ReadConfig with code): the agent's, without the remote's.
func CodeVariables() map[string]string {
	names := maps.Clone(variables)
	delete(names, "RemoteBaseURL")
	delete(names, "RemoteBaseURLs")
	return names
}

// LoadConfig reads the agent's configuration from the environment and
// reports every problem at once: what does not parse, and what breaks a
// rule of Check, named by its variable.
func LoadConfig(getenv func(string) string) (Config, error) { return loadConfig(getenv, catalog.Read) }

// loadConfig is LoadConfig with the workflow catalog from workflows.
func loadConfig(getenv func(string) string, workflows catalog.Source) (Config, error) {
	return config.Load("agent config", getenv, variables, func(r *config.Reader) Config {
		return ReadConfig(r, workflows, false)
	})
}

// ReadConfig reads the agent's variables through r, for LoadConfig and for
// a code step's configuration (code: shared/codestep), which reads all but
// the remote's and sets Code.
func ReadConfig(r *config.Reader, workflows catalog.Source, code bool) Config {
	c := Config{
		Step:             r.String(topology.EnvAgentStep),
		ResponseQueueURL: r.String(topology.EnvResponseQueueURL),
		RemoteTimeout:    r.Duration(topology.EnvRemoteTimeout, DefaultRemoteTimeout),
		RetryBase:        r.Duration(topology.EnvRetryBase, DefaultRetryBase),
		RetryMax:         r.Duration(topology.EnvRetryMax, DefaultRetryMax),
		BreakerFailures:  r.Int(topology.EnvBreakerFailures, DefaultBreakerFailures),
		BreakerCooldown:  r.Duration(topology.EnvBreakerCooldown, DefaultBreakerCooldown),
		Concurrency:      r.Int(topology.EnvAgentConcurrency, DefaultConcurrency),
		SafetyMargin:     r.Duration(topology.EnvSafetyMargin, DefaultSafetyMargin),
		AlertTopicARN:    r.String(topology.EnvAlertTopicARN),
		MaxReceiveCount:  r.Int(topology.EnvMaxReceiveCount, topology.MaxReceiveCount),
		RequestQueueURL:  r.String(topology.EnvRequestQueueURL),
		MaxOutputBytes:   workflow.DefaultMaxOutputBytes,
		Code:             code,
	}
	if !code {
		c.RemoteBaseURL = strings.TrimRight(r.String(topology.EnvRemoteBaseURL), "/")
		c.RemoteBaseURLs = splitURLs(r.String(topology.EnvRemoteBaseURLs))
	}
	// One Agent serves its step in every live workflow version of the
	// deployed catalog: the step must be in one of them, and its output
	// limit is the largest of theirs, not a setting of its own, so the
	// agent never refuses what an order's version allows (the Scheduler
	// applies the order's own version's limit when it commits). Code that
	// builds a Config for other workflows sets MaxOutputBytes itself.
	if cat := workflows(r); stepPattern.MatchString(c.Step) && len(cat.Definitions) > 0 {
		if step, ok := cat.Agent(c.Step); !ok {
			r.Fail(topology.EnvAgentStep, "AGENT_STEP=%q is not a step of any deployed workflow version (%s)", c.Step, strings.Join(cat.AgentNames(), ", "))
		} else {
			c.MaxOutputBytes = step.OutputLimit()
		}
	}
	return c
}

// splitURLs reads a comma-separated list of base URLs, each without its
// trailing slash; empty entries stay, for Check to refuse. An empty value is
// no list.
func splitURLs(v string) []string {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	parts := strings.Split(v, ",")
	for i, p := range parts {
		parts[i] = strings.TrimRight(strings.TrimSpace(p), "/")
	}
	return parts
}

// Endpoints are the base URLs of the remote's replicas, RemoteBaseURLs or
// RemoteBaseURL alone, each in its one spelling (BaseURL): what the
// breakers are keyed by and the logs name. One that is no base URL, which
// Validate refuses, stays as it is.
func (c Config) Endpoints() []string {
	urls := c.RemoteBaseURLs
	if len(urls) == 0 {
		if c.RemoteBaseURL == "" {
			return nil
		}
		urls = []string{c.RemoteBaseURL}
	}
	out := make([]string, len(urls))
	for i, v := range urls {
		out[i] = v
		if n, err := BaseURL(v); err == nil {
			out[i] = n
		}
	}
	return out
}

// checkRemote requires one source of base URLs, 1..MaxReplicas of them,
// each a base URL, none twice.
func (c Config) checkRemote(r *config.Rules) {
	switch {
	case len(c.RemoteBaseURLs) > 0 && c.RemoteBaseURL != "":
		// Two sources would leave the operator guessing which one is used.
		r.Problem("RemoteBaseURLs", "set it or %s, not both", r.Name("RemoteBaseURL"))
		return
	case len(c.RemoteBaseURLs) == 0 && c.RemoteBaseURL != "":
		checkBaseURL(r, "RemoteBaseURL", c.RemoteBaseURL)
		return
	case len(c.RemoteBaseURLs) == 0:
		r.Required("RemoteBaseURLs", "")
		return
	case len(c.RemoteBaseURLs) > MaxReplicas:
		r.Bad("RemoteBaseURLs", strings.Join(c.RemoteBaseURLs, ","), "names %d URLs, at most %d", len(c.RemoteBaseURLs), MaxReplicas)
	}
	seen := map[string]bool{}
	for _, v := range c.RemoteBaseURLs {
		if v == "" {
			r.Bad("RemoteBaseURLs", strings.Join(c.RemoteBaseURLs, ","), "has an empty entry")
			continue
		}
		k := checkBaseURL(r, "RemoteBaseURLs", v)
		if k == "" {
			continue
		}
		// The same replica twice, however spelled, would get two breakers
		// and twice the share of the tries, and hide that the list has one
		// endpoint fewer than meant.
		if seen[k] {
			r.Bad("RemoteBaseURLs", v, "is listed twice (as %s)", k)
		}
		seen[k] = true
	}
}

// checkBaseURL requires an absolute http(s) URL that paths can be appended
// to, and returns its one spelling (BaseURL), or "".
func checkBaseURL(r *config.Rules, field, v string) string {
	u := r.URL(field, v)
	if u == nil {
		return ""
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil {
		// Paths are appended to it, and user info would be a secret in the
		// configuration.
		r.Bad(field, v, "must have no query, fragment or user info")
		return ""
	}
	n, err := BaseURL(v)
	if err != nil {
		r.Bad(field, v, "%v", err)
		return ""
	}
	return n
}

// defaultPorts are the ports a scheme's URLs mean when they name none.
var defaultPorts = map[string]string{"http": "80", "https": "443"}

// BaseURL is the one spelling of the http(s) base URL v, the same for
// every spelling that names the same endpoint (RFC 3986, section 6.2.2):
// the scheme and host in lower case, an IP address in its canonical form,
// the scheme's default port (and a port's leading zeros) dropped, the
// path's percent-encodings in upper case and decoded where they encode a
// letter, a digit or -._~, its dot segments removed and its trailing
// slashes dropped. The path is otherwise kept, case and all. A host must be
// ASCII, an internationalized one written as its A-label (xn--...), so that
// it has one spelling too; a name with its root's dot (r.example.com.) is
// not the name without it, which a resolver may look up under its search
// domains first.
func BaseURL(v string) (string, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return "", errors.New("is not an absolute http(s) URL")
	}
	host := u.Hostname()
	if strings.ContainsFunc(host, func(r rune) bool { return r > unicode.MaxASCII }) {
		return "", errors.New("must name its host in ASCII: an internationalized name as its A-label (xn--...)")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.String() // its zone, an interface's name, keeps its case
	} else {
		host = strings.ToLower(host)
	}
	port := u.Port()
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n > 65535 {
			return "", errors.New("has a port out of range")
		}
		port = strconv.Itoa(n)
	}
	// An IPv6 address's zone is escaped in a URL (RFC 6874).
	host = strings.Replace(host, "%", "%25", 1)
	hostport := host
	if strings.Contains(host, ":") {
		hostport = "[" + host + "]"
	}
	if port != "" && port != defaultPorts[u.Scheme] {
		hostport = net.JoinHostPort(host, port)
	}
	return u.Scheme + "://" + hostport + strings.TrimRight(removeDotSegments(normalizeEscapes(u.EscapedPath())), "/"), nil
}

// normalizeEscapes writes each percent-encoding of the escaped path p in
// upper case, and decodes those of unreserved characters (RFC 3986,
// section 6.2.2.2).
func normalizeEscapes(p string) string {
	var sb strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' || i+2 >= len(p) {
			sb.WriteByte(p[i])
			continue
		}
		b, err := strconv.ParseUint(p[i+1:i+3], 16, 8)
		if err != nil {
			sb.WriteByte(p[i])
			continue
		}
		if c := byte(b); c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			sb.WriteByte(c)
		} else {
			sb.WriteString(strings.ToUpper(p[i : i+3]))
		}
		i += 2
	}
	return sb.String()
}

// removeDotSegments removes the . and .. segments of the absolute path p
// (RFC 3986, section 5.2.4); a .. above the root stays at the root.
func removeDotSegments(p string) string {
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch {
		case i > 0 && s == ".":
		case i > 0 && s == "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
			continue
		}
		if last {
			out = append(out, "")
		}
	}
	return strings.Join(out, "/")
}

// Validate checks every rule of the configuration and reports every
// problem at once. New calls it, and LoadConfig applies the same rules.
func (c Config) Validate() error { return config.Validate("agent config", c) }

// Check records what breaks the rules in r.
func (c Config) Check(r *config.Rules) {
	if r.Required("Step", c.Step) && !stepPattern.MatchString(c.Step) {
		r.Bad("Step", c.Step, "must match %s", stepPattern)
	}
	r.URL("ResponseQueueURL", c.ResponseQueueURL)
	r.URL("RequestQueueURL", c.RequestQueueURL)
	if c.Code {
		// The step runs in this process; a remote would be a wiring
		// mistake.
		if len(c.Endpoints()) > 0 {
			r.Problem("RemoteBaseURL", "must be empty for a code step, which has no remote")
		}
	} else {
		c.checkRemote(r)
	}
	r.Within("RemoteTimeout", c.RemoteTimeout, 10*time.Millisecond, maxWait)
	r.Within("RetryBase", c.RetryBase, time.Millisecond, time.Minute)
	r.Within("RetryMax", c.RetryMax, time.Millisecond, maxWait)
	if c.RetryMax < c.RetryBase {
		r.Bad("RetryMax", c.RetryMax, "must be at least %s=%v", r.Name("RetryBase"), c.RetryBase)
	}
	r.Count("BreakerFailures", c.BreakerFailures, 1, maxFailures)
	r.Within("BreakerCooldown", c.BreakerCooldown, 10*time.Millisecond, maxWait)
	r.Count("Concurrency", c.Concurrency, 1, maxConcurrency)
	r.Within("SafetyMargin", c.SafetyMargin, 0, time.Minute)
	r.Count("MaxReceiveCount", c.MaxReceiveCount, 1, maxReceiveCount)
	// Optional: without it a poison request still goes to the DLQ, whose
	// alarm pages; with a malformed one every alert would fail.
	if c.AlertTopicARN != "" {
		r.TopicARN("AlertTopicARN", c.AlertTopicARN)
	}
	// Zero stands for workflow.DefaultMaxOutputBytes.
	r.Count("MaxOutputBytes", c.MaxOutputBytes, 0, workflow.MaxMessageBytes)
}
