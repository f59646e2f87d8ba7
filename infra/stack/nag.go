package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Check applies cdk-nag's AwsSolutions rules to every construct under scope.
// An unsuppressed error fails `cdk synth`. The few findings the design
// accepts are suppressed where the resource is defined, each with its reason
// and the exact finding it covers.
func Check(scope awscdk.Stage) {
	awscdk.Aspects_Of(scope).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
}
