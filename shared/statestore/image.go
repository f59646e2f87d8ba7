package statestore

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/workflow"
)

// DecodeImage reads a state record from a DynamoDB stream image as the
// Lambda event carries it. A well-formed image is read by the same written
// codec as GetItem results (readState), without a copy; any other is
// converted to the SDK's AttributeValues and decoded by DecodeState, so the
// two can never disagree on the schema (FuzzTheImageDecoderIsDecodeStates).
//
// It never panics, whatever the image holds: a zero DynamoDBAttributeValue,
// whose accessors panic, is reported as an error.
func DecodeImage(img map[string]events.DynamoDBAttributeValue) (workflow.State, error) {
	if len(img) == 0 {
		return workflow.State{}, errors.New("decode stream image: image is empty")
	}
	var it stateItem
	if readState[events.DynamoDBAttributeValue, imageValues](img, &it, true) {
		return it.state(), nil
	}
	return decodeConverted(img)
}

// ImageEventSeq reads an image's EventSeq straight from its attribute,
// without decoding the image, for a reader that drops the writes that left
// it alone: false unless the attribute is absent (0, as DecodeImage reads
// it) or a number the written codec reads.
func ImageEventSeq(img map[string]events.DynamoDBAttributeValue) (int, bool) {
	v, ok := img[eventSeqAttr]
	if !ok {
		return 0, true
	}
	n, isN := imageValues{}.num(v)
	if !isN {
		return 0, false
	}
	seq, err := strconv.Atoi(n)
	return seq, err == nil
}

// DecodeImageHead is DecodeImage without the record's steps: every other
// attribute, for a reader that compares an image's phase or sequence
// number (the Timer's old image, the Notifier's) and would decode the
// steps only to drop them. An image whose steps alone are odd still reads.
func DecodeImageHead(img map[string]events.DynamoDBAttributeValue) (workflow.State, error) {
	if len(img) == 0 {
		return workflow.State{}, errors.New("decode stream image: image is empty")
	}
	var it stateItem
	if readState[events.DynamoDBAttributeValue, imageValues](img, &it, false) {
		return it.state(), nil
	}
	head := make(map[string]events.DynamoDBAttributeValue, len(img))
	for name, v := range img {
		if name != "Steps" {
			head[name] = v
		}
	}
	return decodeConverted(head)
}

// decodeConverted is DecodeImage by way of the SDK's AttributeValues.
func decodeConverted(img map[string]events.DynamoDBAttributeValue) (workflow.State, error) {
	av, err := eachAttribute(img, toAttributeValue)
	if err != nil {
		return workflow.State{}, fmt.Errorf("decode stream image: %w", err)
	}
	return DecodeState(av)
}

// EncodeImage returns the stream image of a state record as the store
// writes it: for tests, samples and local tools that feed the event
// publisher without a real stream.
func EncodeImage(s workflow.State) (map[string]events.DynamoDBAttributeValue, error) {
	av, err := encodeState(s)
	if err != nil {
		return nil, fmt.Errorf("encode stream image of order %s: %w", s.OrderID, err)
	}
	img, err := eachAttribute(av, fromAttributeValue)
	if err != nil {
		return nil, fmt.Errorf("encode stream image of order %s: %w", s.OrderID, err)
	}
	return img, nil
}

// eachAttribute converts every attribute of an item, or of a map attribute,
// with conv, either way between stream images and AttributeValues.
func eachAttribute[F, T any](item map[string]F, conv func(F) (T, error)) (map[string]T, error) {
	out := make(map[string]T, len(item))
	for name, v := range item {
		c, err := conv(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", name, err)
		}
		out[name] = c
	}
	return out, nil
}

// eachElement converts every element of a list attribute with conv.
func eachElement[F, T any](list []F, conv func(F) (T, error)) ([]T, error) {
	out := make([]T, len(list))
	for i, v := range list {
		c, err := conv(v)
		if err != nil {
			return nil, fmt.Errorf("list element %d: %w", i, err)
		}
		out[i] = c
	}
	return out, nil
}

func toAttributeValue(v events.DynamoDBAttributeValue) (types.AttributeValue, error) {
	// The accessors panic when the value does not hold its declared type,
	// which only a zero DynamoDBAttributeValue (Binary without a value) can
	// do; it is not a valid attribute.
	if v.DataType() != events.DataTypeNull && v.IsNull() {
		return nil, fmt.Errorf("attribute of type %d has no value", v.DataType())
	}
	switch v.DataType() {
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}, nil
	case events.DataTypeList:
		l, err := eachElement(v.List(), toAttributeValue)
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case events.DataTypeMap:
		m, err := eachAttribute(v.Map(), toAttributeValue)
		if err != nil {
			return nil, fmt.Errorf("map: %w", err)
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}, nil
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}, nil
	}
	return nil, fmt.Errorf("unknown attribute type %d", v.DataType())
}

// fromAttributeValue is the inverse of toAttributeValue.
func fromAttributeValue(av types.AttributeValue) (events.DynamoDBAttributeValue, error) {
	switch v := av.(type) {
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value), nil
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value), nil
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(v.Value), nil
	case *types.AttributeValueMemberL:
		l, err := eachElement(v.Value, fromAttributeValue)
		if err != nil {
			return events.DynamoDBAttributeValue{}, err
		}
		return events.NewListAttribute(l), nil
	case *types.AttributeValueMemberM:
		m, err := eachAttribute(v.Value, fromAttributeValue)
		if err != nil {
			return events.DynamoDBAttributeValue{}, fmt.Errorf("map: %w", err)
		}
		return events.NewMapAttribute(m), nil
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value), nil
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value), nil
	case *types.AttributeValueMemberNULL:
		return events.NewNullAttribute(), nil
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value), nil
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value), nil
	}
	return events.DynamoDBAttributeValue{}, fmt.Errorf("unsupported attribute value %T", av)
}
