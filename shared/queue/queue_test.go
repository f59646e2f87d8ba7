package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// fakeClient answers with the functions a test sets; an unset one fails the
// test if called.
type fakeClient struct {
	t         *testing.T
	send      func(*sqs.SendMessageInput) (*sqs.SendMessageOutput, error)
	sendBatch func(*sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error)
}

func (f fakeClient) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if f.send == nil {
		f.t.Fatal("unexpected SendMessage")
	}
	return f.send(in)
}

func (f fakeClient) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if f.sendBatch == nil {
		f.t.Fatal("unexpected SendMessageBatch")
	}
	return f.sendBatch(in)
}

const testURL = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"

func TestSendDelay(t *testing.T) {
	tests := []struct {
		delay   time.Duration
		want    int32
		wantErr bool
	}{
		{0, 0, false},
		{time.Nanosecond, 1, false},
		{999 * time.Millisecond, 1, false},
		{time.Second, 1, false},
		{time.Second + time.Millisecond, 2, false},
		{MaxDelay - time.Millisecond, 900, false},
		{MaxDelay, 900, false},
		{MaxDelay + time.Nanosecond, 0, true},
		{-time.Nanosecond, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.delay.String(), func(t *testing.T) {
			var got *sqs.SendMessageInput
			s := NewSender(fakeClient{t: t, send: func(in *sqs.SendMessageInput) (*sqs.SendMessageOutput, error) {
				got = in
				return &sqs.SendMessageOutput{}, nil
			}})
			err := s.Send(context.Background(), testURL, "body", tc.delay)
			if tc.wantErr {
				if !errors.Is(err, ErrDelay) || !strings.Contains(err.Error(), testURL) {
					t.Fatalf("err = %v, want ErrDelay naming the queue", err)
				}
				if got != nil {
					t.Fatal("sent despite the invalid delay")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.DelaySeconds != tc.want || aws.ToString(got.QueueUrl) != testURL || aws.ToString(got.MessageBody) != "body" {
				t.Errorf("input = %+v, want DelaySeconds %d", got, tc.want)
			}
		})
	}
}

func TestSendWrapsError(t *testing.T) {
	boom := errors.New("boom")
	s := NewSender(fakeClient{t: t, send: func(*sqs.SendMessageInput) (*sqs.SendMessageOutput, error) { return nil, boom }})
	err := s.Send(context.Background(), testURL, "body", 0)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), testURL) {
		t.Fatalf("err = %v, want boom wrapped with the queue URL", err)
	}
}

func bodies(n int) []string {
	b := make([]string, n)
	for i := range b {
		b[i] = fmt.Sprintf("body-%d", i)
	}
	return b
}

// batchFake records every request and fails entries as fail says: a
// non-empty code fails that entry, and an error fails the whole request.
func batchFake(t *testing.T, calls *[][]types.SendMessageBatchRequestEntry, fail func(call int, id string) (code string, err error)) fakeClient {
	return fakeClient{t: t, sendBatch: func(in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		call := len(*calls)
		*calls = append(*calls, in.Entries)
		if aws.ToString(in.QueueUrl) != testURL {
			t.Errorf("QueueUrl = %q", aws.ToString(in.QueueUrl))
		}
		out := &sqs.SendMessageBatchOutput{}
		for _, e := range in.Entries {
			code, err := fail(call, aws.ToString(e.Id))
			if err != nil {
				return nil, err
			}
			switch code {
			case "":
				out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id})
			case "missing":
			default:
				out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String(code), Message: aws.String("bad " + aws.ToString(e.Id)), SenderFault: true})
			}
		}
		return out, nil
	}}
}

func TestSendBatch(t *testing.T) {
	boom := errors.New("boom")
	never := func(int, string) (string, error) { return "", nil }
	tests := []struct {
		name       string
		n          int
		fail       func(call int, id string) (string, error)
		wantSizes  []int
		wantFailed []int
		wantInErr  []string
		wantIs     error
	}{
		{name: "none", n: 0, fail: never},
		{name: "one", n: 1, fail: never, wantSizes: []int{1}},
		{name: "exactly ten", n: 10, fail: never, wantSizes: []int{10}},
		{name: "chunks", n: 25, fail: never, wantSizes: []int{10, 10, 5}},
		{
			name: "entries fail", n: 25,
			fail: func(_ int, id string) (string, error) {
				if id == "3" || id == "17" {
					return "InvalidMessageContents", nil
				}
				return "", nil
			},
			wantSizes:  []int{10, 10, 5},
			wantFailed: []int{3, 17},
			wantInErr:  []string{"2 of 25", "#3 InvalidMessageContents: bad 3", "#17 InvalidMessageContents: bad 17"},
		},
		{
			name: "one request fails", n: 25,
			fail: func(call int, _ string) (string, error) {
				if call == 1 {
					return "", boom
				}
				return "", nil
			},
			wantSizes:  []int{10, 10, 5},
			wantFailed: []int{10, 11, 12, 13, 14, 15, 16, 17, 18, 19},
			wantInErr:  []string{"10 of 25", "#10-#19 boom"},
			wantIs:     boom,
		},
		{
			name: "entry missing from response", n: 3,
			fail: func(_ int, id string) (string, error) {
				if id == "1" {
					return "missing", nil
				}
				return "", nil
			},
			wantSizes:  []int{3},
			wantFailed: []int{1},
			wantInErr:  []string{"#1 no result"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls [][]types.SendMessageBatchRequestEntry
			in := bodies(tc.n)
			err := NewSender(batchFake(t, &calls, tc.fail)).SendBatch(context.Background(), testURL, Bodies(in...))

			var sizes []int
			var sent []string
			for _, c := range calls {
				sizes = append(sizes, len(c))
				for _, e := range c {
					if want := in[mustAtoi(t, aws.ToString(e.Id))]; aws.ToString(e.MessageBody) != want {
						t.Errorf("entry %s body = %q, want %q", aws.ToString(e.Id), aws.ToString(e.MessageBody), want)
					}
					sent = append(sent, aws.ToString(e.MessageBody))
				}
			}
			if !slices.Equal(sizes, tc.wantSizes) {
				t.Errorf("request sizes = %v, want %v", sizes, tc.wantSizes)
			}
			if !slices.Equal(sent, in) && tc.n > 0 {
				t.Errorf("sent %v, want %v in order", sent, in)
			}
			if tc.wantFailed == nil {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			var be *BatchError
			if !errors.As(err, &be) {
				t.Fatalf("err = %v, want *BatchError", err)
			}
			var failed []int
			for _, f := range be.Failures {
				failed = append(failed, f.Index)
			}
			if !slices.Equal(failed, tc.wantFailed) || be.Total != tc.n || be.QueueURL != testURL {
				t.Errorf("BatchError = %+v, want failures %v", be, tc.wantFailed)
			}
			for _, s := range append(tc.wantInErr, testURL) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.wantIs)
			}
		})
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("entry ID %q is not an index", s)
	}
	return n
}

// TestSendBatchDelays: each message keeps its own delay, rounded up to whole
// seconds; one SQS cannot honour fails alone, unsent, and the others go.
func TestSendBatchDelays(t *testing.T) {
	never := func(int, string) (string, error) { return "", nil }
	var calls [][]types.SendMessageBatchRequestEntry
	msgs := []Outgoing{
		{Body: "now"},
		{Body: "soon", Delay: 1500 * time.Millisecond},
		{Body: "too late", Delay: MaxDelay + time.Second},
		{Body: "last", Delay: MaxDelay},
	}
	err := NewSender(batchFake(t, &calls, never)).SendBatch(context.Background(), testURL, msgs)
	var be *BatchError
	if !errors.As(err, &be) || len(be.Failures) != 1 || be.Failures[0].Index != 2 || !errors.Is(err, ErrDelay) {
		t.Fatalf("err = %v, want message 2 refused with ErrDelay", err)
	}
	if len(calls) != 1 {
		t.Fatalf("%d requests, want 1", len(calls))
	}
	var got []string
	for _, e := range calls[0] {
		got = append(got, fmt.Sprintf("%s=%s/%d", aws.ToString(e.Id), aws.ToString(e.MessageBody), e.DelaySeconds))
	}
	if want := []string{"0=now/0", "1=soon/2", "3=last/900"}; !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
}
