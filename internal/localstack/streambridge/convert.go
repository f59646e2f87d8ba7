package streambridge

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// eventSource is what Lambda puts in every DynamoDB stream record.
const eventSource = "aws:dynamodb"

// ConvertRecord turns a record from GetRecords into the record Lambda hands
// a handler. EventSourceArn is streamARN, which GetRecords does not return;
// AWSRegion is the record's own awsRegion, as Lambda passes it on.
func ConvertRecord(r types.Record, streamARN string) (events.DynamoDBEventRecord, error) {
	out := events.DynamoDBEventRecord{
		AWSRegion:      aws.ToString(r.AwsRegion),
		EventID:        aws.ToString(r.EventID),
		EventName:      string(r.EventName),
		EventSource:    aws.ToString(r.EventSource),
		EventVersion:   aws.ToString(r.EventVersion),
		EventSourceArn: streamARN,
	}
	if out.EventSource == "" {
		out.EventSource = eventSource
	}
	if r.UserIdentity != nil {
		out.UserIdentity = &events.DynamoDBUserIdentity{
			Type:        aws.ToString(r.UserIdentity.Type),
			PrincipalID: aws.ToString(r.UserIdentity.PrincipalId),
		}
	}
	if d := r.Dynamodb; d != nil {
		c := &out.Change
		if d.ApproximateCreationDateTime != nil {
			c.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *d.ApproximateCreationDateTime}
		}
		c.SequenceNumber = aws.ToString(d.SequenceNumber)
		c.SizeBytes = aws.ToInt64(d.SizeBytes)
		c.StreamViewType = string(d.StreamViewType)
		var err error
		if c.Keys, err = ConvertItem(d.Keys); err != nil {
			return out, fmt.Errorf("record %s: Keys: %w", out.EventID, err)
		}
		if c.NewImage, err = ConvertItem(d.NewImage); err != nil {
			return out, fmt.Errorf("record %s: NewImage: %w", out.EventID, err)
		}
		if c.OldImage, err = ConvertItem(d.OldImage); err != nil {
			return out, fmt.Errorf("record %s: OldImage: %w", out.EventID, err)
		}
	}
	return out, nil
}

// ConvertItem converts every attribute of an item. A nil item stays nil,
// as an image that is absent from Lambda's JSON decodes to nil.
func ConvertItem(item map[string]types.AttributeValue) (map[string]events.DynamoDBAttributeValue, error) {
	if item == nil {
		return nil, nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(item))
	for _, name := range slices.Sorted(maps.Keys(item)) { // sorted: the same attribute is named in every error
		v, err := ConvertAttributeValue(item[name])
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

// ConvertAttributeValue converts one value of any type, recursively. Lists,
// maps and sets are never nil, as Lambda's JSON decoding makes them.
func ConvertAttributeValue(av types.AttributeValue) (events.DynamoDBAttributeValue, error) {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value), nil
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value), nil
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(nonNil(v.Value)), nil
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(nonNil(v.Value)), nil
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(nonNil(v.Value)), nil
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(nonNil(v.Value)), nil
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value), nil
	case *types.AttributeValueMemberNULL:
		return events.NewNullAttribute(), nil
	case *types.AttributeValueMemberM:
		m, err := ConvertItem(v.Value)
		if err != nil {
			return events.DynamoDBAttributeValue{}, err
		}
		return events.NewMapAttribute(nonNilMap(m)), nil
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			var err error
			if l[i], err = ConvertAttributeValue(e); err != nil {
				return events.DynamoDBAttributeValue{}, fmt.Errorf("list element %d: %w", i, err)
			}
		}
		return events.NewListAttribute(l), nil
	case *types.UnknownUnionMember:
		return events.DynamoDBAttributeValue{}, fmt.Errorf("unsupported attribute type %q", v.Tag)
	case nil:
		// What the SDK makes of DynamoDB Local's untyped empty map when it
		// comes first; ForDynamoDBLocal prevents it.
		return events.DynamoDBAttributeValue{}, errors.New("nil attribute value (from DynamoDB Local? read its streams with a client made with ForDynamoDBLocal)")
	default:
		return events.DynamoDBAttributeValue{}, fmt.Errorf("unsupported attribute value %T", av)
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func nonNilMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}
