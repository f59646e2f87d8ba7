package agent

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sasflow/sas/shared/actor"
	"github.com/sasflow/sas/shared/alert"
	"github.com/sasflow/sas/shared/queue"
)

// The SQS adapter is the reply sender the Handler expects.
var _ ReplySender = (*queue.Sender)(nil)

// NewFromConfig builds the Handler of a deployed Agent around svc, with
// its AWS adapters: replies and redeliveries over SQS (cfg.RequestQueueURL)
// and, when cfg.AlertTopicARN is set, alerts on SNS. Every Agent function
// (the HTTP Agent and each code step, shared/codestep.Main) is wired by
// it, so they cannot drift apart.
func NewFromConfig(cfg Config, svc Service, awsCfg aws.Config, deps actor.Deps) (*Handler, error) {
	sqsc := sqs.NewFromConfig(awsCfg)
	opts := []Option{WithRedelivery(queue.NewRedeliverer(sqsc, cfg.RequestQueueURL))}
	if cfg.AlertTopicARN != "" {
		opts = append(opts, WithAlerts(alert.NewPublisher(sns.NewFromConfig(awsCfg), cfg.AlertTopicARN)))
	}
	return New(cfg, svc, queue.NewSender(sqsc), deps, opts...)
}
