package stepgen_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sasflow/sas/internal/stepgen"
)

// withStatement is shipOrder with one more statement of actions on
// resources.
func withStatement(actions, resources []string) string {
	q := func(ss []string) string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = fmt.Sprintf("%q", s)
		}
		return "[" + strings.Join(out, ", ") + "]"
	}
	st := fmt.Sprintf(`{"actions": %s, "resources": %s}`, q(actions), q(resources))
	return strings.Replace(shipOrder, "\n  ]\n}", ",\n    "+st+"\n  ]\n}", 1)
}

// ARNs in the partition, region and account the stack deploys to.
const (
	s3ARN     = "arn:${AWS::Partition}:s3:::"
	tableARN  = "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/"
	queueARN  = "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:"
	fnARN     = "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:"
	logsARN   = "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:"
	roleARN   = "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/"
	stateName = "SchedulerAgentSupervisor-dev-StateTable1A2B3C4D-0123456789AB"
)

// TestParseRefusesWideningGrants: each rule on what a statement may grant,
// one manifest that breaks it, refused with the rule's own words.
func TestParseRefusesWideningGrants(t *testing.T) {
	t.Parallel()
	get := []string{"dynamodb:GetItem"}
	for name, tc := range map[string]struct {
		body, want string
	}{
		// ? is a wildcard of one character wherever a wildcard is read.
		"? in a resource path": {withStatement([]string{"s3:GetObject"}, []string{s3ARN + "${ShipOrderBucket}/shipments/order-?.json"}), "IAM reads ? as a wildcard"},
		"? for a bucket":       {withStatement([]string{"s3:GetObject"}, []string{s3ARN + "????????/shipments/*"}), "IAM reads ? as a wildcard"},
		"? for the account":    {withStatement(get, []string{"arn:${AWS::Partition}:dynamodb:${AWS::Region}:????????????:table/fixed-table"}), "IAM reads ? as a wildcard"},
		"? for the region":     {withStatement(get, []string{"arn:${AWS::Partition}:dynamodb:??-????-?:${AWS::AccountId}:table/fixed-table"}), "IAM reads ? as a wildcard"},
		"? in an action":       {withStatement([]string{"s3:GetObjec?"}, []string{s3ARN + "${ShipOrderBucket}/shipments/*"}), `action "s3:GetObjec?" is not one exact service:Action`},
		// The service, region and account are written out, or the pseudo
		// parameters; a parameter there would let the deploy choose them.
		"a parameter for the account": {withStatement(get, []string{"arn:${AWS::Partition}:dynamodb:${AWS::Region}:${ShipOrderBucket}:table/fixed-table"}), "must name its account as"},
		"a parameter for the region":  {withStatement(get, []string{"arn:${AWS::Partition}:dynamodb:${ShipOrderBucket}:${AWS::AccountId}:table/fixed-table"}), "must name its region as"},
		"a parameter for the service": {withStatement(get, []string{"arn:${AWS::Partition}:${ShipOrderBucket}:${AWS::Region}:${AWS::AccountId}:table/fixed-table"}), "must write its service out"},
		"no region's name":            {withStatement(get, []string{"arn:${AWS::Partition}:dynamodb:any:${AWS::AccountId}:table/fixed-table"}), "must name its region as"},
		// The stack's own resources, however they are named.
		"the stack's state table":         {withStatement(get, []string{tableARN + stateName}), "the stack's own"},
		"the stack's table in lower case": {withStatement(get, []string{tableARN + strings.ToLower(stateName)}), "the stack's own"},
		"the stack's table's index":       {withStatement([]string{"dynamodb:Query"}, []string{tableARN + stateName + "/index/*"}), "the stack's own"},
		"the stack's queue":               {withStatement([]string{"sqs:SendMessage"}, []string{queueARN + "SchedulerAgentSupervisor-dev-SchedulerQueue"}), "the stack's own"},
		"the stack's function":            {withStatement([]string{"lambda:InvokeFunction"}, []string{fnARN + "SchedulerAgentSupervisor-dev-Supervisor1A2B3C4D-0123456789AB"}), "the stack's own"},
		"the stack's role":                {withStatement([]string{"s3:GetObject"}, []string{roleARN + "SchedulerAgentSupervisor-dev-StepShipOrderRole1A2B-0123456789AB"}), "the stack's own"},
		"the stack's access log by a wildcard": {withStatement([]string{"logs:PutLogEvents"}, []string{logsARN + "/aws/vendedlogs/apigateway/*"}),
			"the stack's own"},
		"the stack's access log through a parameter": {withStatement([]string{"logs:PutLogEvents"}, []string{logsARN + "${ShipOrderBucket}/apigateway/*"}),
			"the stack's own"},
		"the stack's key":       {withStatement([]string{"s3:GetObject"}, []string{"arn:${AWS::Partition}:kms:${AWS::Region}:${AWS::AccountId}:key/1234abcd-12ab-34cd-56ef-1234567890ab"}), "the stack's own"},
		"the stack's API":       {withStatement([]string{"execute-api:Invoke"}, []string{"arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:a1b2c3d4e5/$default/POST/orders"}), "the stack's own"},
		"the CDK assets bucket": {withStatement([]string{"s3:PutObject"}, []string{s3ARN + "cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}/code.zip"}), "the stack's own"},
		"a parameter in a name": {withStatement(get, []string{tableARN + "orders-${ShipOrderBucket}"}), "whole name"},
		"the stack's name":      {withStatement(get, []string{tableARN + "${AWS::StackName}-StateTable"}), "${AWS::StackName}"},
		"the stack's ID":        {withStatement(get, []string{tableARN + "${AWS::StackId}"}), "${AWS::StackId}"},
		"a logical ID":          {withStatement(get, []string{tableARN + "${StateTable}"}), "${StateTable}"},
		"a policy variable":     {withStatement(get, []string{tableARN + "${aws:username}"}), "${aws:username}"},
		// Actions that grant more than themselves.
		"iam:PassRole":                                 {withStatement([]string{"iam:PassRole"}, []string{roleARN + "deploy"}), "escalate"},
		"iam:CreatePolicyVersion":                      {withStatement([]string{"iam:CreatePolicyVersion"}, []string{"arn:${AWS::Partition}:iam::${AWS::AccountId}:policy/p"}), "escalate"},
		"sts:AssumeRole":                               {withStatement([]string{"sts:AssumeRole"}, []string{roleARN + "deploy"}), "escalate"},
		"sts:AssumeRoleWithWebIdentity":                {withStatement([]string{"sts:AssumeRoleWithWebIdentity"}, []string{roleARN + "deploy"}), "escalate"},
		"lambda:UpdateFunctionCode":                    {withStatement([]string{"lambda:UpdateFunctionCode"}, []string{fnARN + "pricing"}), "escalate"},
		"lambda:updatefunctioncode":                    {withStatement([]string{"lambda:updatefunctioncode"}, []string{fnARN + "pricing"}), "escalate"},
		"lambda:UpdateFunctionConfiguration":           {withStatement([]string{"lambda:UpdateFunctionConfiguration"}, []string{fnARN + "pricing"}), "escalate"},
		"lambda:AddPermission":                         {withStatement([]string{"lambda:AddPermission"}, []string{fnARN + "pricing"}), "escalate"},
		"lambda:CreateFunction":                        {withStatement([]string{"lambda:CreateFunction"}, []string{fnARN + "pricing"}), "escalate"},
		"lambda:CreateEventSourceMapping":              {withStatement([]string{"lambda:CreateEventSourceMapping"}, []string{fnARN + "pricing"}), "escalate"},
		"kms:Decrypt":                                  {withStatement([]string{"kms:Decrypt"}, []string{s3ARN + "${ShipOrderBucket}"}), "escalate"},
		"cloudformation:UpdateStack":                   {withStatement([]string{"cloudformation:UpdateStack"}, []string{"arn:${AWS::Partition}:cloudformation:${AWS::Region}:${AWS::AccountId}:stack/other/x"}), "escalate"},
		"ssm:SendCommand":                              {withStatement([]string{"ssm:SendCommand"}, []string{"arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:document/d"}), "escalate"},
		"ssm:StartSession":                             {withStatement([]string{"ssm:StartSession"}, []string{"arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:document/d"}), "escalate"},
		"ec2:RunInstances":                             {withStatement([]string{"ec2:RunInstances"}, []string{"arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:instance/i-1"}), "escalate"},
		"ec2:AssociateIamInstanceProfile":              {withStatement([]string{"ec2:AssociateIamInstanceProfile"}, []string{"arn:${AWS::Partition}:ec2:${AWS::Region}:${AWS::AccountId}:instance/i-1"}), "escalate"},
		"glue:UpdateDevEndpoint":                       {withStatement([]string{"glue:UpdateDevEndpoint"}, []string{"arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:devEndpoint/e"}), "escalate"},
		"datapipeline:PutPipelineDefinition":           {withStatement([]string{"datapipeline:PutPipelineDefinition"}, []string{"arn:${AWS::Partition}:datapipeline:${AWS::Region}:${AWS::AccountId}:pipeline/p"}), "escalate"},
		"codestar:CreateProjectFromTemplate":           {withStatement([]string{"codestar:CreateProjectFromTemplate"}, []string{"arn:${AWS::Partition}:codestar:${AWS::Region}:${AWS::AccountId}:project/p"}), "escalate"},
		"sagemaker:CreatePresignedNotebookInstanceUrl": {withStatement([]string{"sagemaker:CreatePresignedNotebookInstanceUrl"}, []string{"arn:${AWS::Partition}:sagemaker:${AWS::Region}:${AWS::AccountId}:notebook-instance/n"}), "escalate"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := stepgen.Parse("ship-order", []byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestParseAcceptsNarrowGrants: what the rules leave a step, so they refuse
// no more than they mean to.
func TestParseAcceptsNarrowGrants(t *testing.T) {
	t.Parallel()
	for name, st := range map[string][2][]string{
		"another table's index":          {{"dynamodb:Query"}, {tableARN + "orders-archive/index/*"}},
		"a table by parameter":           {{"dynamodb:GetItem"}, {tableARN + "${ShipOrderBucket}"}},
		"a table's index by parameter":   {{"dynamodb:Query"}, {tableARN + "${ShipOrderBucket}/index/byDate"}},
		"a table whose name starts Sch":  {{"dynamodb:GetItem"}, {tableARN + "Schedules"}},
		"a bucket named for the account": {{"s3:GetObject"}, {s3ARN + "shipments-${AWS::AccountId}-${AWS::Region}/labels/*"}},
		"a queue of another account":     {{"sqs:SendMessage"}, {"arn:${AWS::Partition}:sqs:eu-west-1:123456789012:carrier-requests"}},
		"another function":               {{"lambda:InvokeFunction"}, {fnARN + "pricing"}},
		"another log group":              {{"logs:PutLogEvents"}, {logsARN + "/aws/lambda/pricing:*"}},
		"a secret by parameter":          {{"secretsmanager:GetSecretValue"}, {"arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:${ShipOrderBucket}"}},
		"a parameter of its own":         {{"ssm:GetParameter"}, {"arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/shipping/carrier"}},
		"a US GovCloud region":           {{"dynamodb:GetItem"}, {"arn:${AWS::Partition}:dynamodb:us-gov-west-1:${AWS::AccountId}:table/fixed-table"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := stepgen.Parse("ship-order", []byte(withStatement(st[0], st[1]))); err != nil {
				t.Fatal(err)
			}
		})
	}
}
