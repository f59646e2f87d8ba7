package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Check applies cdk-nag's AwsSolutions and Serverless rules to every
// construct under scope. An unsuppressed error fails `cdk synth`. The few
// findings the design accepts are suppressed where the resource is defined,
// each with its reason and, where the rule names findings, the exact
// finding it covers.
func Check(scope awscdk.Stage) {
	props := &cdknag.NagPackProps{Verbose: jsii.Bool(true)}
	awscdk.Aspects_Of(scope).Add(cdknag.NewAwsSolutionsChecks(props), nil)
	awscdk.Aspects_Of(scope).Add(cdknag.NewServerlessChecks(props), nil)
}

// Serverless rules whose findings carry no finding ID: a suppression covers
// the rule on one resource. stack_test pins where each may be suppressed.
const (
	nagDLQRedrive      = "Serverless-SQSRedrivePolicy"
	nagLambdaDLQ       = "Serverless-LambdaDLQ"
	nagMappingFailures = "Serverless-LambdaEventSourceMappingDestination"
	nagAsyncFailures   = "Serverless-LambdaAsyncFailureDestination"
	nagScheduleDLQ     = "Serverless-EventBusDLQ"
	nagSubscriptionDLQ = "Serverless-SNSRedrivePolicy"
	nagLambdaTracing   = "Serverless-LambdaTracing"
)

// suppress records that the design accepts rule on c (and, with children,
// on what c creates beneath it, such as a function's SQS mappings).
func suppress(c constructs.IConstruct, rule, reason string, children bool) {
	cdknag.NagSuppressions_AddResourceSuppressions(c, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String(rule), Reason: jsii.String(reason),
	}}, jsii.Bool(children))
}

// Why a dead-letter queue has no dead-letter queue of its own.
const dlqIsTheEnd = "This queue is a dead-letter queue, the end of the line: what lands here stays for its retention " +
	"for an operator to read and redrive (sasctl dlq list / redrive), and its depth alarm pages on the first message."
