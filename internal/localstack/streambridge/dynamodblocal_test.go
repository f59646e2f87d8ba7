package streambridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// localGetRecords is a GetRecords answer as DynamoDB Local 3.3.0 sent it for
// an item with empty maps at the top, nested in a map and in a list.
const localGetRecords = `{"Records":[{"eventID":"f2879292","eventName":"INSERT","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"ddblocal",` +
	`"dynamodb":{"ApproximateCreationDateTime":1795350720.000,"Keys":{"pk":{"S":"k"}},` +
	`"NewImage":{"l2":{"L":[{"M":{"x":{"S":"y"}}},{}]},"pk":{"S":"k"},"m":{"M":{"inner":{"M":{"n":{"N":"42"}}},"empty":{}}},"e2":{}},` +
	`"SequenceNumber":"000000000000000000001","SizeBytes":53,"StreamViewType":"NEW_AND_OLD_IMAGES"}}],"NextShardIterator":"it|2"}`

func TestFixEmptyMaps(t *testing.T) {
	t.Parallel()
	fixed := fixEmptyMaps([]byte(localGetRecords))
	want := strings.NewReplacer(`,{}]`, `,{"M":{}}]`, `"empty":{}`, `"empty":{"M":{}}`, `"e2":{}`, `"e2":{"M":{}}`).Replace(localGetRecords)
	var got, wantDoc any
	if err := json.Unmarshal(fixed, &got); err != nil {
		t.Fatalf("fixed body does not parse: %v\n%s", err, fixed)
	}
	if err := json.Unmarshal([]byte(want), &wantDoc); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantDoc) {
		t.Errorf("fixed =\n%s\nwant\n%s", fixed, want)
	}
	if !bytes.Contains(fixed, []byte(`"ApproximateCreationDateTime":1795350720.000`)) {
		t.Errorf("number not kept as sent: %s", fixed)
	}

	unchanged := []string{
		`{"Records":[{"dynamodb":{"NewImage":{"m":{"M":{}}}}}],"NextShardIterator":"x"}`,
		`{"Records":[{"dynamodb":{"NewImage":{"s":{"S":"{}"}}}}]}`, // {} inside a string
		`{"Records":[],"Note":{}}`,                     // {} outside any image
		`{"Records":[{"dynamodb":{"NewImage":{"e":{}}`, // truncated: left for the SDK to reject
	}
	for _, body := range unchanged {
		if got := fixEmptyMaps([]byte(body)); string(got) != body {
			t.Errorf("fixEmptyMaps(%s) = %s, want it unchanged", body, got)
		}
	}
}

func TestForDynamoDBLocalClient(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		switch r.Header.Get("X-Amz-Target") {
		case "DynamoDBStreams_20120810.GetRecords":
			var in struct{ ShardIterator string }
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
				t.Errorf("decode request: %v", err)
			}
			if in.ShardIterator == "expired" {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ExpiredIteratorException","message":"too old {}"}`))
				return
			}
			_, _ = w.Write([]byte(localGetRecords))
		case "DynamoDBStreams_20120810.DescribeStream":
			_, _ = w.Write([]byte(`{"StreamDescription":{"StreamArn":"a","Shards":[{"ShardId":"s1"}],"KeySchema":[]}}`))
		default:
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	t.Cleanup(srv.Close)
	client := dynamodbstreams.New(dynamodbstreams.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("k", "s", ""),
		BaseEndpoint: aws.String(srv.URL),
	}, ForDynamoDBLocal)
	ctx := context.Background()

	out, err := client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String("it|1")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Records) != 1 || aws.ToString(out.NextShardIterator) != "it|2" {
		t.Fatalf("GetRecords = %+v", out)
	}
	image := out.Records[0].Dynamodb.NewImage
	isEmptyMap := func(v types.AttributeValue) bool {
		m, ok := v.(*types.AttributeValueMemberM)
		return ok && len(m.Value) == 0
	}
	if !isEmptyMap(image["e2"]) {
		t.Errorf("e2 = %#v, want an empty map", image["e2"])
	}
	if m, ok := image["m"].(*types.AttributeValueMemberM); !ok || !isEmptyMap(m.Value["empty"]) {
		t.Errorf("m = %#v, want m.empty an empty map", image["m"])
	} else if inner, ok := m.Value["inner"].(*types.AttributeValueMemberM); !ok || len(inner.Value) != 1 {
		t.Errorf("m.inner = %#v", m.Value["inner"])
	}
	if l, ok := image["l2"].(*types.AttributeValueMemberL); !ok || len(l.Value) != 2 || !isEmptyMap(l.Value[1]) {
		t.Errorf("l2 = %#v, want its second element an empty map", image["l2"])
	}
	// The converted image is what Lambda would give: no error, no nil.
	if _, err := ConvertItem(image); err != nil {
		t.Errorf("ConvertItem: %v", err)
	}

	var expired *types.ExpiredIteratorException
	if _, err := client.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String("expired")}); !errors.As(err, &expired) {
		t.Errorf("error answer: err = %v, want ExpiredIteratorException", err)
	}
	d, err := client.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String("a")})
	if err != nil || len(d.StreamDescription.Shards) != 1 {
		t.Errorf("DescribeStream = %+v, %v", d, err)
	}
}
