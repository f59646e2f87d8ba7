// Package shiporder is the ship-order code step: it writes the order's
// shipment to S3 as shipments/<orderId>.json, and its undo deletes it.
//
// The object's name comes from the order, and its bytes from the step's
// request alone, so a try that runs again (the window between an effect
// and its ledger write) writes the same object with the same bytes: the
// effect is idempotent without a conditional write.
package shiporder

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sasflow/sas/shared/jsonwire"
	"github.com/sasflow/sas/shared/step"
	"github.com/sasflow/sas/shared/workflow"
)

// Name is the step's name in the workflow catalog.
const Name = "ship-order"

// EnvBucket names the bucket the shipments are written to; the stack sets
// it from the ShipOrderBucket parameter (step.json).
const EnvBucket = "SHIPMENTS_BUCKET"

// PaymentStep is the step whose output the shipment carries, when the
// order's workflow has it before this one.
const PaymentStep = "charge-payment"

// Prefix is where the shipments are written in the bucket; the step's IAM
// statement (step.json) allows this prefix and nothing else.
const Prefix = "shipments/"

// Bucket is the port to the shipments' store: S3Bucket in AWS, a function
// type in unit tests.
type Bucket interface {
	// PutObject writes body under key, replacing what is there.
	PutObject(ctx context.Context, key string, body []byte) error
	// DeleteObject removes key; a missing key is no error.
	DeleteObject(ctx context.Context, key string) error
}

// Step ships orders into a Bucket.
type Step struct {
	bucket Bucket
}

var (
	_ step.Step   = (*Step)(nil)
	_ step.Undoer = (*Step)(nil)
)

// New builds the step from its environment: SHIPMENTS_BUCKET, and the S3
// client of env.AWS.
func New(_ context.Context, env step.Env) (step.Step, error) {
	name := env.Getenv(EnvBucket)
	if name == "" {
		return nil, fmt.Errorf("step %s: %s is not set", Name, EnvBucket)
	}
	client := s3.NewFromConfig(env.AWS, func(o *s3.Options) {
		// A configuration with an endpoint of its own is a local engine
		// (fauxqs), which serves buckets by path; AWS is addressed
		// virtual-hosted style, the SDK's default.
		o.UsePathStyle = env.AWS.BaseEndpoint != nil
	})
	return NewStep(S3Bucket{Client: client, Name: name}), nil
}

// NewStep is the step over bucket.
func NewStep(bucket Bucket) *Step { return &Step{bucket: bucket} }

// Shipment is the object written for an order.
type Shipment struct {
	OrderID        string          `json:"orderId"`
	Items          []workflow.Item `json:"items"`
	Payment        json.RawMessage `json:"payment,omitempty"`
	TrackingNumber string          `json:"trackingNumber"`
}

// Output is the step's output: where the shipment is and its tracking
// number, which later steps and the order's status show.
type Output struct {
	ShipmentKey    string `json:"shipmentKey"`
	TrackingNumber string `json:"trackingNumber"`
}

// Key is the object name of order id's shipment.
func Key(orderID string) string { return Prefix + orderID + ".json" }

// TrackingNumber derives the shipment's tracking number from the step's
// idempotency key, so every try of the step gives the same number.
func TrackingNumber(idempotencyKey string) string {
	sum := sha256.Sum256([]byte(idempotencyKey))
	return "TRK-" + strings.ToUpper(hex.EncodeToString(sum[:6]))
}

// Do writes the order's shipment.
func (s *Step) Do(ctx context.Context, req step.Request) (json.RawMessage, error) {
	var order workflow.Order
	if err := req.DecodeInput(&order); err != nil {
		return nil, err
	}
	if order.OrderID != req.OrderID {
		return nil, step.Reject("invalid_input", fmt.Sprintf("the input is order %q, the request order %q", order.OrderID, req.OrderID))
	}
	if len(order.Items) == 0 {
		return nil, step.Reject("invalid_input", "the order has no items to ship")
	}
	sh := Shipment{OrderID: req.OrderID, Items: order.Items, Payment: req.Previous[PaymentStep], TrackingNumber: TrackingNumber(req.IdempotencyKey)}
	body, err := jsonwire.Marshal(sh)
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("encode the shipment of order %s: %w", req.OrderID, err))
	}
	key := Key(req.OrderID)
	// An S3 error is transient: a missing bucket or a denied write is the
	// deployment's to fix, and the step is tried again until its budget
	// ends rather than failing the order for it.
	if err := s.bucket.PutObject(ctx, key, body); err != nil {
		return nil, fmt.Errorf("put the shipment of order %s: %w", req.OrderID, err)
	}
	out, err := jsonwire.Marshal(Output{ShipmentKey: key, TrackingNumber: sh.TrackingNumber})
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("encode the output of order %s: %w", req.OrderID, err))
	}
	return out, nil
}

// Undo deletes the order's shipment. Deleting a shipment that was never
// written succeeds, so an undo of a Do that never ran is harmless.
func (s *Step) Undo(ctx context.Context, req step.Request) (json.RawMessage, error) {
	key := Key(req.OrderID)
	if err := s.bucket.DeleteObject(ctx, key); err != nil {
		return nil, fmt.Errorf("delete the shipment of order %s: %w", req.OrderID, err)
	}
	out, err := jsonwire.Marshal(struct {
		Deleted string `json:"deleted"`
	}{key})
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("encode the undo's output of order %s: %w", req.OrderID, err))
	}
	return out, nil
}

// S3Bucket is the Bucket of an S3 bucket.
type S3Bucket struct {
	Client *s3.Client
	Name   string
}

var _ Bucket = S3Bucket{}

// PutObject writes body under key, as JSON.
func (b S3Bucket) PutObject(ctx context.Context, key string, body []byte) error {
	_, err := b.Client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(b.Name), Key: aws.String(key),
		Body: bytes.NewReader(body), ContentType: aws.String("application/json"),
	})
	if err != nil {
		return fmt.Errorf("s3 put %s/%s: %w", b.Name, key, err)
	}
	return nil
}

// DeleteObject removes key. S3 answers success for a key that does not
// exist ("If you delete an object that does not exist, Amazon S3 will
// return a success (not an error message)", AmazonS3.DeleteObject, AWS SDK
// for .NET reference,
// https://docs.aws.amazon.com/sdkfornet1/latest/apidocs/html/M_Amazon_S3_AmazonS3_DeleteObject.htm;
// DeleteObject, Amazon S3 API Reference,
// https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObject.html),
// so an undo tried twice, or of a shipment never written, succeeds.
func (b S3Bucket) DeleteObject(ctx context.Context, key string) error {
	if _, err := b.Client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.Name), Key: aws.String(key)}); err != nil {
		return fmt.Errorf("s3 delete %s/%s: %w", b.Name, key, err)
	}
	return nil
}
