package stack

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/topology"
)

// tables declares the orders and state tables from statestore's own
// CreateTable requests, the ones the local engines and tests use, so keys,
// indexes and streams cannot drift from the code. Names are left to CloudFormation.
func (b *builder) tables() []awsdynamodb.Table {
	ids := []string{"OrdersTable", "StateTable"}
	names := statestore.Tables{Orders: "orders", State: "state"}
	inputs := statestore.CreateTableInputs(names)
	if len(inputs) != len(ids) {
		panic(fmt.Sprintf("statestore declares %d tables, the stack knows %d", len(inputs), len(ids)))
	}
	// TTL is its own request in DynamoDB's API, and a table property here.
	ttl := map[string]*string{}
	for _, in := range statestore.TimeToLiveInputs(names) {
		if spec := in.TimeToLiveSpecification; spec != nil && aws.ToBool(spec.Enabled) {
			ttl[aws.ToString(in.TableName)] = spec.AttributeName
		}
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
			// DynamoDB deletes an item some time (typically days) after
			// this attribute's Unix seconds pass, without a write unit;
			// the store's reads ignore it from the second it passes.
			TimeToLiveAttribute: ttl[aws.ToString(in.TableName)],
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

// The statestore's DynamoDB API values and the CDK's names for them.
var (
	attrTypes = map[types.ScalarAttributeType]awsdynamodb.AttributeType{
		types.ScalarAttributeTypeS: awsdynamodb.AttributeType_STRING,
		types.ScalarAttributeTypeN: awsdynamodb.AttributeType_NUMBER,
		types.ScalarAttributeTypeB: awsdynamodb.AttributeType_BINARY,
	}
	streamViews = map[types.StreamViewType]awsdynamodb.StreamViewType{
		types.StreamViewTypeNewImage:        awsdynamodb.StreamViewType_NEW_IMAGE,
		types.StreamViewTypeOldImage:        awsdynamodb.StreamViewType_OLD_IMAGE,
		types.StreamViewTypeNewAndOldImages: awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
		types.StreamViewTypeKeysOnly:        awsdynamodb.StreamViewType_KEYS_ONLY,
	}
	projections = map[types.ProjectionType]awsdynamodb.ProjectionType{
		types.ProjectionTypeAll:      awsdynamodb.ProjectionType_ALL,
		types.ProjectionTypeKeysOnly: awsdynamodb.ProjectionType_KEYS_ONLY,
		types.ProjectionTypeInclude:  awsdynamodb.ProjectionType_INCLUDE,
	}
)

// cdkName translates v with names, and panics on a value the stack does not
// know: a statestore change the stack must learn before it can deploy.
func cdkName[K ~string, V any](names map[K]V, what string, v K) V {
	name, ok := names[v]
	if !ok {
		panic(fmt.Sprintf("statestore: unknown %s %q", what, v))
	}
	return name
}

func attrType(t types.ScalarAttributeType) awsdynamodb.AttributeType {
	return cdkName(attrTypes, "attribute type", t)
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
	return cdkName(streamViews, "stream view", spec.StreamViewType)
}

func projection(p types.ProjectionType) awsdynamodb.ProjectionType {
	return cdkName(projections, "projection", p)
}

// The ledger's schema, as the code steps' runtime (statestore's ledger)
// writes it: one item per step and idempotency key, partition key
// "<step>#<key>", expiring with the state table's retention.
const (
	LedgerKey = "k"
	LedgerTTL = "expiresAt"
)

// ledgerTable declares the code steps' idempotency ledger: on-demand like
// the state table, with its own TTL and no stream (nothing reads its
// changes, and the state table's stream, which feeds the Timer and the
// Notifier, carries none of them), point-in-time recovery and the same
// protection against a delete: a lost ledger would let a code step apply
// an effect again.
func (b *builder) ledgerTable() awsdynamodb.Table {
	return awsdynamodb.NewTable(b.stack, jsii.String(string(topology.LedgerTable)), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(LedgerKey), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(LedgerTTL),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(true),
		RemovalPolicy:      awscdk.RemovalPolicy_RETAIN,
	})
}
