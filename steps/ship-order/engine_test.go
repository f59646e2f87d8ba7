package shiporder_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sasflow/sas/internal/testkit/enginetest"
	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/step"
	shiporder "github.com/sasflow/sas/steps/ship-order"
)

func TestMain(m *testing.M) { enginetest.Main(m) }

// The step as New builds it, on the S3 fauxqs serves: Do writes the
// shipment, a second Do the same bytes, Undo deletes it, and a second Undo
// of the missing object succeeds, as S3's DeleteObject does.
func TestShipOrderOnS3(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := enginetest.S3(t)
	// S3 bucket names: lower case, digits and -, at most 63 characters.
	bucket := strings.ToLower(strings.ReplaceAll(enginetest.UniqueName(t, "ship"), "_", "-"))
	bucket = strings.TrimRight(bucket[:min(len(bucket), 63)], "-")
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	st, err := shiporder.New(ctx, step.Env{
		Getenv: func(name string) string { return map[string]string{shiporder.EnvBucket: bucket}[name] },
		AWS:    enginetest.AWSConfig(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	get := func() (string, error) {
		out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(shiporder.Key(orderID))})
		if err != nil {
			return "", err
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		return string(b), err
	}

	if _, err := st.Do(ctx, request()); err != nil {
		t.Fatal(err)
	}
	first, err := get()
	if err != nil {
		t.Fatal(err)
	}
	again := request()
	again.Attempt = 2
	if _, err := st.Do(ctx, again); err != nil {
		t.Fatal(err)
	}
	if second, err := get(); err != nil || second != first {
		t.Fatalf("after a second Do: %q (%v), want %q", second, err, first)
	}

	undo := request()
	undo.Action, undo.IdempotencyKey, undo.EffectKey = message.Compensate, orderID+":2:compensate", request().IdempotencyKey
	u, ok := st.(step.Undoer)
	if !ok {
		t.Fatal("ship-order has no undo")
	}
	for range 2 {
		if _, err := u.Undo(ctx, undo); err != nil {
			t.Fatal(err)
		}
		var missing *types.NoSuchKey
		if body, err := get(); !errors.As(err, &missing) {
			t.Fatalf("after Undo the shipment reads %q (%v), want NoSuchKey", body, err)
		}
	}
}
