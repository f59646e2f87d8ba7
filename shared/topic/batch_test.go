package topic_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/topic"
)

type batchFunc func(*sns.PublishBatchInput) (*sns.PublishBatchOutput, error)

func (f batchFunc) PublishBatch(_ context.Context, in *sns.PublishBatchInput, _ ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	return f(in)
}

// ok answers a request with every entry published.
func ok(in *sns.PublishBatchInput) *sns.PublishBatchOutput {
	out := &sns.PublishBatchOutput{}
	for _, e := range in.PublishBatchRequestEntries {
		out.Successful = append(out.Successful, types.PublishBatchResultEntry{Id: e.Id, MessageId: aws.String("m")})
	}
	return out
}

// bodies are n messages whose bodies are their index padded to size bytes.
func bodies(n, size int) []topic.Message {
	msgs := make([]topic.Message, n)
	for i := range msgs {
		b := strconv.Itoa(i)
		msgs[i] = topic.Message{Body: b + strings.Repeat(" ", max(0, size-len(b)))}
	}
	return msgs
}

func TestBatcherSplitsByCountAndSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msgs []topic.Message
		want []int // messages per request
	}{
		{"none", nil, nil},
		{"one", bodies(1, 10), []int{1}},
		{"ten", bodies(10, 10), []int{10}},
		{"twenty-five", bodies(25, 10), []int{10, 10, 5}},
		{"100 KiB each: two per request", bodies(5, 100<<10), []int{2, 2, 1}},
		{"exactly 256 KiB in two", bodies(4, 128<<10), []int{2, 2}},
		{"over the bound alone, for SNS to refuse", append(bodies(1, 10), bodies(1, topic.MaxBatchBytes+1)...), []int{1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []int
			var order []string
			b := topic.Batcher{ARN: "arn:aws:sns:eu-west-1:1:t", Client: batchFunc(func(in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
				got = append(got, len(in.PublishBatchRequestEntries))
				for i, e := range in.PublishBatchRequestEntries {
					if aws.ToString(e.Id) != strconv.Itoa(i) {
						t.Errorf("entry %d has Id %q, want its index", i, aws.ToString(e.Id))
					}
					order = append(order, strings.TrimSpace(aws.ToString(e.Message)))
				}
				return ok(in), nil
			})}
			if n, err := b.Publish(context.Background(), tc.msgs); n != len(tc.msgs) || err != nil {
				t.Fatalf("Publish = %d, %v; want %d, nil", n, err, len(tc.msgs))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("messages per request %v, want %v", got, tc.want)
			}
			for i, m := range tc.msgs {
				if i >= len(order) || order[i] != strings.TrimSpace(m.Body) {
					t.Fatalf("bodies in request order %v, want message %d at %d", order, i, i)
				}
			}
		})
	}
}

func TestBatcherReportsTheFirstMessageNotPublished(t *testing.T) {
	t.Parallel()
	boom := errors.New("throttled")
	failed := func(in *sns.PublishBatchInput, ids ...string) *sns.PublishBatchOutput {
		out := ok(in)
		for _, id := range ids {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: aws.String(id), Code: aws.String("KMSThrottling"), Message: aws.String("slow down")})
		}
		return out
	}
	tests := []struct {
		name      string
		second    func(*sns.PublishBatchInput) (*sns.PublishBatchOutput, error)
		wantN     int
		wantEntry bool // an *EntryError, else wantErr
		wantErr   error
	}{
		{"request fails", func(*sns.PublishBatchInput) (*sns.PublishBatchOutput, error) { return nil, boom }, 10, false, boom},
		{"entry fails", func(in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) { return failed(in, "8", "3"), nil }, 13, true, nil},
		{"entry unanswered", func(in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
			out := ok(in)
			out.Successful = out.Successful[1:]
			return out, nil
		}, 10, false, topic.ErrUnanswered},
		{"ids of another request ignored", func(in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
			return failed(in, "10", "x", "-1"), nil
		}, 25, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			b := topic.Batcher{ARN: "arn:aws:sns:eu-west-1:1:t", Client: batchFunc(func(in *sns.PublishBatchInput) (*sns.PublishBatchOutput, error) {
				calls++
				if calls == 2 {
					return tc.second(in)
				}
				return ok(in), nil
			})}
			n, err := b.Publish(context.Background(), bodies(25, 10))
			var entryErr *topic.EntryError
			switch {
			case n != tc.wantN:
				t.Errorf("Publish = %d, %v; want %d", n, err, tc.wantN)
			case tc.wantEntry && (!errors.As(err, &entryErr) || entryErr.Code != "KMSThrottling" || entryErr.SenderFault):
				t.Errorf("Publish error %v, want the entry's", err)
			case !tc.wantEntry && !errors.Is(err, tc.wantErr):
				t.Errorf("Publish error %v, want %v", err, tc.wantErr)
			}
			if wantCalls := map[bool]int{true: 2, false: 3}[err != nil]; calls != wantCalls {
				t.Errorf("%d requests, want %d", calls, wantCalls)
			}
		})
	}
}

// On the real engine: twelve messages in two requests reach a subscriber
// with their attributes; a message SNS refuses stops the publishing there.
func TestBatcherIntegration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sqsc := enginetest.SQS(t)
	arn, q := enginetest.CreateTopicToQueue(t, enginetest.SNS(t), sqsc, enginetest.UniqueName(t, "topic"))
	b := topic.Batcher{Client: enginetest.SNS(t), ARN: arn}
	msgs := make([]topic.Message, 12)
	for i := range msgs {
		msgs[i] = topic.Message{Body: `{"i":` + strconv.Itoa(i) + `}`, Strings: map[string]string{"clientId": "client-a"}, Numbers: map[string]int{"seq": i}}
	}
	if n, err := b.Publish(ctx, msgs); n != len(msgs) || err != nil {
		t.Fatalf("Publish = %d, %v", n, err)
	}
	seen := map[string]bool{}
	for _, m := range enginetest.ReceiveAll(ctx, t, sqsc, q.URL, len(msgs), 30*time.Second) {
		n := enginetest.DecodeNotification(t, aws.ToString(m.Body))
		seq := n.MessageAttributes["seq"]
		if n.Message != `{"i":`+seq.Value+`}` || seq.Type != "Number" || n.MessageAttributes["clientId"] != (enginetest.NotificationAttribute{Type: "String", Value: "client-a"}) {
			t.Errorf("notification %+v", n)
		}
		seen[n.Message] = true
	}
	if len(seen) != len(msgs) {
		t.Errorf("%d distinct messages, want %d", len(seen), len(msgs))
	}

	tooLong := []topic.Message{{Body: "first"}, {Body: strings.Repeat("x", topic.MaxBatchBytes+1)}, {Body: "never sent"}}
	if n, err := b.Publish(ctx, tooLong); n != 1 || err == nil {
		t.Fatalf("Publish of a message over the bound = %d, %v; want 1 and an error", n, err)
	}
	got := enginetest.ReceiveAll(ctx, t, sqsc, q.URL, 1, 30*time.Second)
	if n := enginetest.DecodeNotification(t, aws.ToString(got[0].Body)); n.Message != "first" {
		t.Errorf("received %q, want the first message", n.Message)
	}
	enginetest.AssertNoMessages(ctx, t, sqsc, q.URL, time.Second)
}
