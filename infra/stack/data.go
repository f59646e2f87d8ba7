package stack

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/shared/statestore"
)

// tables declares the orders and state tables from statestore's own
// CreateTable requests, the ones the local engines and tests use, so keys,
// indexes and streams cannot drift from the code. Names are left to CloudFormation.
func (b *builder) tables() []awsdynamodb.Table {
	ids := []string{"OrdersTable", "StateTable"}
	inputs := statestore.CreateTableInputs(statestore.Tables{Orders: "orders", State: "state"})
	if len(inputs) != len(ids) {
		panic(fmt.Sprintf("statestore declares %d tables, the stack knows %d", len(inputs), len(ids)))
	}
	out := make([]awsdynamodb.Table, len(inputs))
	for i, in := range inputs {
		attrs := map[string]awsdynamodb.AttributeType{}
		for _, a := range in.AttributeDefinitions {
			attrs[aws.ToString(a.AttributeName)] = attrType(a.AttributeType)
		}
		key := func(ks []types.KeySchemaElement, kt types.KeyType) *awsdynamodb.Attribute {
			for _, k := range ks {
				if k.KeyType == kt {
					name := aws.ToString(k.AttributeName)
					return &awsdynamodb.Attribute{Name: jsii.String(name), Type: attrs[name]}
				}
			}
			return nil
		}
		t := awsdynamodb.NewTable(b.stack, jsii.String(ids[i]), &awsdynamodb.TableProps{
			PartitionKey: key(in.KeySchema, types.KeyTypeHash),
			SortKey:      key(in.KeySchema, types.KeyTypeRange),
			BillingMode:  billing(in.BillingMode),
			Stream:       stream(in.StreamSpecification),
			PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
				PointInTimeRecoveryEnabled: jsii.Bool(true),
			},
			// Orders are the business record: neither a stack delete nor a
			// mistaken replacement may drop them.
			DeletionProtection: jsii.Bool(true),
			RemovalPolicy:      awscdk.RemovalPolicy_RETAIN,
		})
		for _, g := range in.GlobalSecondaryIndexes {
			props := &awsdynamodb.GlobalSecondaryIndexProps{
				IndexName:      g.IndexName,
				PartitionKey:   key(g.KeySchema, types.KeyTypeHash),
				SortKey:        key(g.KeySchema, types.KeyTypeRange),
				ProjectionType: projection(g.Projection.ProjectionType),
			}
			if len(g.Projection.NonKeyAttributes) > 0 {
				props.NonKeyAttributes = jsii.Strings(g.Projection.NonKeyAttributes...)
			}
			t.AddGlobalSecondaryIndex(props)
		}
		out[i] = t
	}
	return out
}

func attrType(t types.ScalarAttributeType) awsdynamodb.AttributeType {
	switch t {
	case types.ScalarAttributeTypeS:
		return awsdynamodb.AttributeType_STRING
	case types.ScalarAttributeTypeN:
		return awsdynamodb.AttributeType_NUMBER
	case types.ScalarAttributeTypeB:
		return awsdynamodb.AttributeType_BINARY
	}
	panic(fmt.Sprintf("statestore: unknown attribute type %q", t))
}

func billing(m types.BillingMode) awsdynamodb.BillingMode {
	if m == types.BillingModePayPerRequest {
		return awsdynamodb.BillingMode_PAY_PER_REQUEST
	}
	panic(fmt.Sprintf("statestore: billing mode %q; the stack deploys on-demand tables only", m))
}

// stream is the table's stream view, or "" (no stream) when the request
// declares none.
func stream(spec *types.StreamSpecification) awsdynamodb.StreamViewType {
	if spec == nil || !aws.ToBool(spec.StreamEnabled) {
		return ""
	}
	switch spec.StreamViewType {
	case types.StreamViewTypeNewImage:
		return awsdynamodb.StreamViewType_NEW_IMAGE
	case types.StreamViewTypeOldImage:
		return awsdynamodb.StreamViewType_OLD_IMAGE
	case types.StreamViewTypeNewAndOldImages:
		return awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES
	case types.StreamViewTypeKeysOnly:
		return awsdynamodb.StreamViewType_KEYS_ONLY
	}
	panic(fmt.Sprintf("statestore: unknown stream view %q", spec.StreamViewType))
}

func projection(p types.ProjectionType) awsdynamodb.ProjectionType {
	switch p {
	case types.ProjectionTypeAll:
		return awsdynamodb.ProjectionType_ALL
	case types.ProjectionTypeKeysOnly:
		return awsdynamodb.ProjectionType_KEYS_ONLY
	case types.ProjectionTypeInclude:
		return awsdynamodb.ProjectionType_INCLUDE
	}
	panic(fmt.Sprintf("statestore: unknown projection %q", p))
}
