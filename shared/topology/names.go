package topology

import (
	"fmt"
	"net/url"
	"strings"
)

// The deployed names, in one place: the stack (infra/) names its stack and
// queues with these, and the operators' CLI (sasctl dlq) finds a stage's
// queues by them, so the two cannot drift apart.

// DefaultStage is the stage cdk.json and make deploy default to.
const DefaultStage = "dev"

// StackNamePrefix is the start of every stage's stack name.
const StackNamePrefix = "SchedulerAgentSupervisor"

// StackName is the CloudFormation stack of stage.
func StackName(stage string) string { return StackNamePrefix + "-" + stage }

// QueueName is the physical name of the work queue id (SchedulerQueue,
// ReserveInventoryQueue, ...) in the stack named stackName. An id has no
// hyphen, so QueueID can tell the stack's queues from those of a stage
// whose name merely starts the same ("dev" and "dev-2").
func QueueName(stackName, id string) string { return stackName + "-" + id }

// QueueID is the inverse of QueueName: the id of the work queue named name
// in the stack named stackName, and whether name is one.
func QueueID(stackName, name string) (string, bool) {
	id, ok := strings.CutPrefix(name, stackName+"-")
	if !ok || id == "" || strings.ContainsFunc(id, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) {
		return "", false
	}
	return id, true
}

// ParseAgentQueues reads the AGENT_QUEUE_URLS the stack gives the
// Scheduler and the Submission: "step=url,step=url".
func ParseAgentQueues(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	queues := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		step, queueURL, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || step == "" || queueURL == "" {
			return nil, fmt.Errorf("%q is not step=url", pair)
		}
		if _, dup := queues[step]; dup {
			return nil, fmt.Errorf("step %q named twice", step)
		}
		if u, err := url.Parse(queueURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("step %q: %q is not an absolute http(s) URL", step, queueURL)
		}
		queues[step] = queueURL
	}
	return queues, nil
}

// ParseSenders reads step=id pairs separated by commas (REPLY_SENDERS): each
// step's Agent's IAM role unique ID, as SQS names a sender (SenderId, before
// its ":session"). An ID is letters and digits, as IAM writes unique IDs
// ("IAM identifiers", Unique identifiers,
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-unique-ids),
// or the 12 digits an emulator without IAM stamps.
func ParseSenders(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	senders := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		step, id, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || step == "" || id == "" {
			return nil, fmt.Errorf("%q is not step=id", pair)
		}
		if _, dup := senders[step]; dup {
			return nil, fmt.Errorf("step %q named twice", step)
		}
		if len(id) > 128 || strings.IndexFunc(id, func(r rune) bool { return !('A' <= r && r <= 'Z' || '0' <= r && r <= '9') }) >= 0 {
			return nil, fmt.Errorf("step %q: %q is not an IAM unique ID", step, id)
		}
		senders[step] = id
	}
	return senders, nil
}
