package streambridge

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

func TestConvertAttributeValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   types.AttributeValue
		want events.DynamoDBAttributeValue
		typ  events.DynamoDBDataType
	}{
		{"S", &types.AttributeValueMemberS{Value: "hé"}, events.NewStringAttribute("hé"), events.DataTypeString},
		{"empty S", &types.AttributeValueMemberS{}, events.NewStringAttribute(""), events.DataTypeString},
		{"N", &types.AttributeValueMemberN{Value: "-1.5e3"}, events.NewNumberAttribute("-1.5e3"), events.DataTypeNumber},
		{"B", &types.AttributeValueMemberB{Value: []byte{0, 1, 255}}, events.NewBinaryAttribute([]byte{0, 1, 255}), events.DataTypeBinary},
		{"empty B", &types.AttributeValueMemberB{}, events.NewBinaryAttribute([]byte{}), events.DataTypeBinary},
		{"SS", &types.AttributeValueMemberSS{Value: []string{"a", "b"}}, events.NewStringSetAttribute([]string{"a", "b"}), events.DataTypeStringSet},
		{"NS", &types.AttributeValueMemberNS{Value: []string{"1", "2.5"}}, events.NewNumberSetAttribute([]string{"1", "2.5"}), events.DataTypeNumberSet},
		{"BS", &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}}, events.NewBinarySetAttribute([][]byte{{1}, {2, 3}}), events.DataTypeBinarySet},
		{"BOOL true", &types.AttributeValueMemberBOOL{Value: true}, events.NewBooleanAttribute(true), events.DataTypeBoolean},
		{"BOOL false", &types.AttributeValueMemberBOOL{Value: false}, events.NewBooleanAttribute(false), events.DataTypeBoolean},
		{"NULL", &types.AttributeValueMemberNULL{Value: true}, events.NewNullAttribute(), events.DataTypeNull},
		{"empty L", &types.AttributeValueMemberL{}, events.NewListAttribute([]events.DynamoDBAttributeValue{}), events.DataTypeList},
		{"empty M", &types.AttributeValueMemberM{}, events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{}), events.DataTypeMap},
		{
			"L of every type",
			&types.AttributeValueMemberL{Value: []types.AttributeValue{
				&types.AttributeValueMemberS{Value: "s"},
				&types.AttributeValueMemberN{Value: "1"},
				&types.AttributeValueMemberB{Value: []byte("b")},
				&types.AttributeValueMemberSS{Value: []string{"x"}},
				&types.AttributeValueMemberNS{Value: []string{"2"}},
				&types.AttributeValueMemberBS{Value: [][]byte{[]byte("y")}},
				&types.AttributeValueMemberBOOL{Value: true},
				&types.AttributeValueMemberNULL{Value: true},
				&types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: "3"}}},
				&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}}},
			}},
			events.NewListAttribute([]events.DynamoDBAttributeValue{
				events.NewStringAttribute("s"),
				events.NewNumberAttribute("1"),
				events.NewBinaryAttribute([]byte("b")),
				events.NewStringSetAttribute([]string{"x"}),
				events.NewNumberSetAttribute([]string{"2"}),
				events.NewBinarySetAttribute([][]byte{[]byte("y")}),
				events.NewBooleanAttribute(true),
				events.NewNullAttribute(),
				events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewNumberAttribute("3")}),
				events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"k": events.NewStringAttribute("v")}),
			}),
			events.DataTypeList,
		},
		{
			"M nested three deep",
			&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"a": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
					"b": &types.AttributeValueMemberL{Value: []types.AttributeValue{
						&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
							"c":    &types.AttributeValueMemberBS{Value: [][]byte{{9}}},
							"null": &types.AttributeValueMemberNULL{Value: true},
						}},
					}},
					"flag": &types.AttributeValueMemberBOOL{Value: false},
				}},
				"n": &types.AttributeValueMemberN{Value: "0"},
			}},
			events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
				"a": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
					"b": events.NewListAttribute([]events.DynamoDBAttributeValue{
						events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
							"c":    events.NewBinarySetAttribute([][]byte{{9}}),
							"null": events.NewNullAttribute(),
						}),
					}),
					"flag": events.NewBooleanAttribute(false),
				}),
				"n": events.NewNumberAttribute("0"),
			}),
			events.DataTypeMap,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ConvertAttributeValue(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got.DataType() != tc.typ {
				t.Errorf("DataType = %v, want %v", got.DataType(), tc.typ)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v\nwant %#v", got, tc.want)
			}
			// The accessors must not panic on what we built.
			switch tc.typ {
			case events.DataTypeString:
				_ = got.String()
			case events.DataTypeList:
				if got.List() == nil {
					t.Error("List() is nil; Lambda's decoding never yields nil")
				}
			case events.DataTypeMap:
				if got.Map() == nil {
					t.Error("Map() is nil; Lambda's decoding never yields nil")
				}
			case events.DataTypeNull:
				if !got.IsNull() {
					t.Error("IsNull() = false")
				}
			}
		})
	}
}

func TestConvertAttributeValueErrors(t *testing.T) {
	t.Parallel()
	unknown := &types.UnknownUnionMember{Tag: "XYZ"}
	tests := []struct {
		name string
		in   types.AttributeValue
		want []string
	}{
		{"unknown member", unknown, []string{`"XYZ"`}},
		{"nil", nil, []string{"nil attribute value"}},
		{"in list", &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{}, unknown}}, []string{"list element 1", "XYZ"}},
		{"in map", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"ok": &types.AttributeValueMemberS{}, "bad": unknown}}, []string{`attribute "bad"`, "XYZ"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ConvertAttributeValue(tc.in)
			if err == nil {
				t.Fatal("err = nil")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

func TestConvertRecord(t *testing.T) {
	t.Parallel()
	created := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	const arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/state/stream/2024-05-06T07:00:00.000"
	in := types.Record{
		AwsRegion:    aws.String("eu-west-1"),
		EventID:      aws.String("ev-1"),
		EventName:    types.OperationTypeModify,
		EventSource:  aws.String("aws:dynamodb"),
		EventVersion: aws.String("1.1"),
		UserIdentity: &types.Identity{Type: aws.String("Service"), PrincipalId: aws.String("dynamodb.amazonaws.com")},
		Dynamodb: &types.StreamRecord{
			ApproximateCreationDateTime: &created,
			Keys:                        map[string]types.AttributeValue{"OrderID": &types.AttributeValueMemberS{Value: "o1"}},
			NewImage: map[string]types.AttributeValue{
				"OrderID": &types.AttributeValueMemberS{Value: "o1"},
				"Seq":     &types.AttributeValueMemberN{Value: "2"},
			},
			OldImage: map[string]types.AttributeValue{
				"OrderID": &types.AttributeValueMemberS{Value: "o1"},
				"Seq":     &types.AttributeValueMemberN{Value: "1"},
			},
			SequenceNumber: aws.String("000000000000000000042"),
			SizeBytes:      aws.Int64(57),
			StreamViewType: types.StreamViewTypeNewAndOldImages,
		},
	}
	got, err := ConvertRecord(in, arn)
	if err != nil {
		t.Fatal(err)
	}
	want := events.DynamoDBEventRecord{
		AWSRegion:      "eu-west-1",
		EventID:        "ev-1",
		EventName:      "MODIFY",
		EventSource:    "aws:dynamodb",
		EventVersion:   "1.1",
		EventSourceArn: arn,
		UserIdentity:   &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"},
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: created},
			Keys:                        map[string]events.DynamoDBAttributeValue{"OrderID": events.NewStringAttribute("o1")},
			NewImage: map[string]events.DynamoDBAttributeValue{
				"OrderID": events.NewStringAttribute("o1"),
				"Seq":     events.NewNumberAttribute("2"),
			},
			OldImage: map[string]events.DynamoDBAttributeValue{
				"OrderID": events.NewStringAttribute("o1"),
				"Seq":     events.NewNumberAttribute("1"),
			},
			SequenceNumber: "000000000000000000042",
			SizeBytes:      57,
			StreamViewType: "NEW_AND_OLD_IMAGES",
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}

	// An INSERT has no old image and a REMOVE no new one: they stay nil, as
	// Lambda's decoding of the absent field leaves them.
	insert := in
	insert.EventName, insert.EventSource, insert.UserIdentity = types.OperationTypeInsert, nil, nil
	d := *in.Dynamodb
	d.OldImage = nil
	insert.Dynamodb = &d
	got, err = ConvertRecord(insert, arn)
	if err != nil {
		t.Fatal(err)
	}
	if got.EventName != "INSERT" || got.Change.OldImage != nil || got.Change.NewImage == nil || got.UserIdentity != nil || got.EventSource != "aws:dynamodb" {
		t.Errorf("insert = %+v", got)
	}

	bad := in
	d = *in.Dynamodb
	d.NewImage = map[string]types.AttributeValue{"x": &types.UnknownUnionMember{Tag: "Q"}}
	bad.Dynamodb = &d
	if _, err := ConvertRecord(bad, arn); err == nil || !strings.Contains(err.Error(), "ev-1: NewImage: attribute \"x\"") {
		t.Errorf("bad record err = %v", err)
	}
}
