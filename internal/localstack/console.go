package localstack

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sasflow/sas/internal/console"
	"github.com/sasflow/sas/internal/dlq"
	"github.com/sasflow/sas/internal/opsclient"
)

// ConsoleOptions are the operators' console (`sasctl ui`) on this stack,
// as `sasctl --endpoint-url <API> ui --prefix <the queues'> --sqs-endpoint-url
// <fauxqs>` builds it: the API signed as the local operator, and the
// stack's dead-letter queues.
func (s *Stack) ConsoleOptions(region string) (console.Options, error) {
	api, err := opsclient.NewClient(s.APIURL, opsclient.Options{Region: region,
		Credentials: credentials.NewStaticCredentialsProvider(opsclient.LocalAccessKey, "not-checked", "")})
	if err != nil {
		return console.Options{}, err
	}
	prefix := s.QueuePrefix()
	return console.Options{Orders: api, Endpoint: s.APIURL, Queues: console.SQSQueues{Client: s.SQS, Scope: dlq.PrefixScope(prefix)},
		Scope: "prefix " + prefix}, nil
}

// QueuePrefix starts the name of every work queue of the stack, as `sasctl
// dlq --prefix` takes it.
func (s *Stack) QueuePrefix() string {
	return strings.TrimSuffix(s.Sys.SchedulerQueue.Name, "scheduler")
}
