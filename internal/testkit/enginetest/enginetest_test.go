package enginetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sasflow/sas/internal/testkit/await"
)

func TestMain(m *testing.M) { Main(m) }

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{3,64}$`)

func TestUniqueName(t *testing.T) {
	tests := []struct {
		name, prefix string
	}{
		{"plain", "orders"},
		{"empty prefix", ""},
		{"odd prefix", "ställ/ning: ?*"},
		{"long " + strings.Repeat("x", 200), strings.Repeat("p", 100)},
		{"slashes/and spaces/é", "q"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := UniqueName(t, tc.prefix), UniqueName(t, tc.prefix)
			for _, n := range []string{a, b} {
				if !validName.MatchString(n) {
					t.Errorf("UniqueName(%q) = %q: not 3..64 of [A-Za-z0-9_-]", tc.prefix, n)
				}
				if len(n+"-dlq") > 80 {
					t.Errorf("UniqueName(%q) = %q leaves no room for -dlq", tc.prefix, n)
				}
			}
			if a == b {
				t.Errorf("UniqueName returned %q twice", a)
			}
		})
	}
}

// TestStartEngines covers the path taken when the environment names no
// engines, even when it does.
func TestStartEngines(t *testing.T) {
	e, err := startEngines(true, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range e.procs {
			if err := p.stop(); err != nil {
				t.Error(err)
			}
		}
	})
	ctx := context.Background()
	if err := dynamoDBReady(ctx, e.dynamoDB); err != nil {
		t.Errorf("DynamoDB Local at %s: %v", e.dynamoDB, err)
	}
	if err := fauxqsReady(ctx, e.aws); err != nil {
		t.Errorf("fauxqs at %s: %v", e.aws, err)
	}
	for _, p := range e.procs {
		if err := p.stop(); err != nil {
			t.Fatal(err)
		}
		if !p.exited() {
			t.Errorf("%s still running after stop", p.name)
		}
	}
}

func TestDynamoDBListTables(t *testing.T) {
	t.Parallel()
	if _, err := DynamoDB(t).ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatal(err)
	}
}

// TestDynamoDBLocalFeatures pins down what the state store relies on, so an
// engine upgrade that drops it fails here first.
func TestDynamoDBLocalFeatures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := DynamoDB(t)
	table := createTable(t, db)
	put := func(id, state string) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(table),
			Item: map[string]ddbtypes.AttributeValue{
				"pk":    &ddbtypes.AttributeValueMemberS{Value: id},
				"state": &ddbtypes.AttributeValueMemberS{Value: state},
			},
			ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
		})
		return err
	}
	if err := put("o1", "Pending"); err != nil {
		t.Fatal(err)
	}

	t.Run("condition failure returns old item", func(t *testing.T) {
		err := put("o1", "Running")
		var ccf *ddbtypes.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			t.Fatalf("err = %v, want ConditionalCheckFailedException", err)
		}
		if got := stringAttr(ccf.Item, "state"); got != "Pending" {
			t.Errorf("old item state = %q, want Pending (item %v)", got, ccf.Item)
		}
	})

	t.Run("transaction cancellation reasons", func(t *testing.T) {
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
			{Put: &ddbtypes.Put{
				TableName: aws.String(table),
				Item:      map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "o2"}, "state": &ddbtypes.AttributeValueMemberS{Value: "Pending"}},
			}},
			{Update: &ddbtypes.Update{
				TableName:                           aws.String(table),
				Key:                                 map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "o1"}},
				UpdateExpression:                    aws.String("SET #s = :new"),
				ConditionExpression:                 aws.String("#s = :want"),
				ExpressionAttributeNames:            map[string]string{"#s": "state"},
				ExpressionAttributeValues:           map[string]ddbtypes.AttributeValue{":new": &ddbtypes.AttributeValueMemberS{Value: "Done"}, ":want": &ddbtypes.AttributeValueMemberS{Value: "Running"}},
				ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
			}},
		}})
		var tce *ddbtypes.TransactionCanceledException
		if !errors.As(err, &tce) {
			t.Fatalf("err = %v, want TransactionCanceledException", err)
		}
		if len(tce.CancellationReasons) != 2 {
			t.Fatalf("CancellationReasons = %+v, want 2", tce.CancellationReasons)
		}
		if c := aws.ToString(tce.CancellationReasons[0].Code); c != "None" {
			t.Errorf("reason[0] = %q, want None", c)
		}
		r := tce.CancellationReasons[1]
		if c := aws.ToString(r.Code); c != "ConditionalCheckFailed" {
			t.Errorf("reason[1] = %q, want ConditionalCheckFailed", c)
		}
		if got := stringAttr(r.Item, "state"); got != "Pending" {
			t.Errorf("reason[1] item state = %q, want Pending", got)
		}
		if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "o2"}}}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("GSI query sees the write at once", func(t *testing.T) {
		out, err := db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(table),
			IndexName:                 aws.String("by-state"),
			KeyConditionExpression:    aws.String("#s = :s"),
			ExpressionAttributeNames:  map[string]string{"#s": "state"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":s": &ddbtypes.AttributeValueMemberS{Value: "Pending"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Items) != 1 || stringAttr(out.Items[0], "pk") != "o1" {
			t.Errorf("GSI items = %v, want o1 alone", out.Items)
		}
	})

	t.Run("shared across keys and regions", func(t *testing.T) {
		other := DynamoDB(t, func(o *dynamodb.Options) {
			o.Region = "eu-west-1"
			o.Credentials = credentials.NewStaticCredentialsProvider("other", "other", "")
		})
		if _, err := other.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}); err != nil {
			t.Errorf("table not visible to another key and region (is -sharedDb set?): %v", err)
		}
	})
}

func createTable(t *testing.T, db *dynamodb.Client) string {
	t.Helper()
	ctx := context.Background()
	name := UniqueName(t, "tbl")
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("state"), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		GlobalSecondaryIndexes: []ddbtypes.GlobalSecondaryIndex{{
			IndexName:  aws.String("by-state"),
			KeySchema:  []ddbtypes.KeySchemaElement{{AttributeName: aws.String("state"), KeyType: ddbtypes.KeyTypeHash}},
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeAll},
		}},
	})
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
			t.Logf("delete table %s: %v", name, err)
		}
	})
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if s := out.Table.TableStatus; s != ddbtypes.TableStatusActive {
		t.Errorf("new table is %s, want ACTIVE at once", s)
	}
	if s := out.Table.GlobalSecondaryIndexes[0].IndexStatus; s != ddbtypes.IndexStatusActive {
		t.Errorf("new GSI is %s, want ACTIVE at once", s)
	}
	return name
}

func stringAttr(item map[string]ddbtypes.AttributeValue, name string) string {
	if s, ok := item[name].(*ddbtypes.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func TestQueueRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := SQS(t)
	q := CreateQueue(t, c, UniqueName(t, "q"), QueueOptions{VisibilityTimeout: 5 * time.Second})
	if !strings.HasSuffix(q.ARN, ":"+q.Name) || q.DLQURL != "" {
		t.Errorf("queue = %+v", q)
	}
	// The SDK checks MD5OfMessageBody and MD5OfMessageAttributes of both the
	// send and the receive, so this also proves fauxqs computes them right.
	sent, err := c.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(q.URL),
		MessageBody: aws.String(`{"hello":"wörld"}`),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			"kind": {DataType: aws.String("String"), StringValue: aws.String("schedule")},
			"n":    {DataType: aws.String("Number"), StringValue: aws.String("7")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	msgs := ReceiveAll(ctx, t, c, q.URL, 1, 10*time.Second)
	m := msgs[0]
	if aws.ToString(m.MessageId) != aws.ToString(sent.MessageId) || aws.ToString(m.Body) != `{"hello":"wörld"}` {
		t.Errorf("received %+v", m)
	}
	if got := aws.ToString(m.MessageAttributes["kind"].StringValue); got != "schedule" {
		t.Errorf("kind attribute = %q", got)
	}
	if got := m.Attributes["ApproximateReceiveCount"]; got != "1" {
		t.Errorf("ApproximateReceiveCount = %q, want 1", got)
	}
	if _, err := strconv.ParseInt(m.Attributes["SentTimestamp"], 10, 64); err != nil {
		t.Errorf("SentTimestamp = %q: %v", m.Attributes["SentTimestamp"], err)
	}
	AssertNoMessages(ctx, t, c, q.URL, time.Second)
}

func TestQueueDelaySeconds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := SQS(t)
	q := CreateQueue(t, c, UniqueName(t, "q"), QueueOptions{})
	for _, d := range []int32{900, 1} {
		if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(strconv.Itoa(int(d))), DelaySeconds: d}); err != nil {
			t.Fatal(err)
		}
	}
	// The 900 s message stays delayed for the whole test, so this count is
	// not a race with the clock.
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(q.URL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := attrs.Attributes["ApproximateNumberOfMessagesDelayed"]; n == "0" || n == "" {
		t.Errorf("ApproximateNumberOfMessagesDelayed = %q, want 1 or 2", n)
	}
	msgs := ReceiveAll(ctx, t, c, q.URL, 1, 15*time.Second)
	if got := aws.ToString(msgs[0].Body); got != "1" {
		t.Errorf("first message out = %q, want the 1 s one", got)
	}
}

func TestQueueRedriveToDLQ(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := SQS(t)
	const maxReceives = 2
	q := CreateQueue(t, c, UniqueName(t, "q"), QueueOptions{VisibilityTimeout: time.Second, MaxReceiveCount: maxReceives})
	if q.DLQURL == "" || !strings.HasSuffix(q.DLQARN, ":"+q.Name+"-dlq") {
		t.Fatalf("queue = %+v, want a DLQ", q)
	}
	sent, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String("poison")})
	if err != nil {
		t.Fatal(err)
	}

	// Receive without deleting until the message either comes back more
	// often than allowed (a failure) or shows up on the DLQ.
	receives := 0
	deadline := time.Now().Add(30 * time.Second)
	await.Until(t, 30*time.Second, "the message on the DLQ", func() (bool, error) {
		msgs, err := receive(ctx, c, q.URL, 10, deadline)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			receives++
			if got := m.Attributes["ApproximateReceiveCount"]; got != strconv.Itoa(receives) {
				t.Errorf("receive %d: ApproximateReceiveCount = %q", receives, got)
			}
		}
		if receives > maxReceives {
			t.Fatalf("message delivered %d times, want at most %d", receives, maxReceives)
		}
		dead, err := receive(ctx, c, q.DLQURL, 10, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(dead) > 0 {
			if aws.ToString(dead[0].MessageId) != aws.ToString(sent.MessageId) || aws.ToString(dead[0].Body) != "poison" {
				t.Errorf("DLQ message = %+v", dead[0])
			}
			return true, nil
		}
		return false, fmt.Errorf("not on the DLQ after %d receives", receives)
	})
	if receives != maxReceives {
		t.Errorf("message delivered %d times before redrive, want %d", receives, maxReceives)
	}
}

func TestTopicToQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	snsc, sqsc := SNS(t), SQS(t)
	topic, q := CreateTopicToQueue(t, snsc, sqsc, UniqueName(t, "alerts"))
	if _, err := snsc.Publish(ctx, &sns.PublishInput{
		TopicArn: aws.String(topic),
		Subject:  aws.String("Order o1 failed"),
		Message:  aws.String("line one\nline two"),
		MessageAttributes: map[string]snstypes.MessageAttributeValue{
			"kind": {DataType: aws.String("String"), StringValue: aws.String("retries-exhausted")},
		},
	}); err != nil {
		t.Fatal(err)
	}
	msgs := ReceiveAll(ctx, t, sqsc, q.URL, 1, 10*time.Second)
	n := DecodeNotification(t, aws.ToString(msgs[0].Body))
	if n.TopicARN != topic || n.Subject != "Order o1 failed" || n.Message != "line one\nline two" {
		t.Errorf("notification = %+v", n)
	}
	if a := n.MessageAttributes["kind"]; a.Type != "String" || a.Value != "retries-exhausted" {
		t.Errorf("kind attribute = %+v", a)
	}
	if n.Timestamp.IsZero() {
		t.Error("notification has no Timestamp")
	}
}

func TestEndpointsFromEnvironment(t *testing.T) {
	// Not parallel: it sets the environment.
	t.Setenv(EnvDynamoDB, "http://127.0.0.1:1")
	t.Setenv(EnvAWS, "http://127.0.0.1:2")
	d, a := Endpoints(t)
	if d != os.Getenv(EnvDynamoDB) || a != os.Getenv(EnvAWS) {
		t.Errorf("Endpoints = %q, %q", d, a)
	}
}
