// Command infra is the AWS CDK app: `npx cdk synth` and `npx cdk deploy` run
// it from the repository root through cdk.json.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/sasflow/sas/infra/stack"
)

func main() {
	app := awscdk.NewApp(nil)
	cfg, err := stack.FromContext(func(key string) string {
		if v, ok := app.Node().TryGetContext(jsii.String(key)).(string); ok {
			return v
		}
		if v := app.Node().TryGetContext(jsii.String(key)); v != nil {
			return fmt.Sprint(v)
		}
		return ""
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The functions' code is packaged from the binaries as they are: refuse
	// binaries older than the code they were built from.
	// The code steps' functions are build/steps/<step>.
	if err := checkBinaries(cfg.CodeDir, append(stack.Functions(), cfg.CodeStepFolders()...), Sources); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Environment-agnostic: synth needs no credentials, and deploy targets
	// the account and region of the caller's credentials.
	// One stack per stage (sas:stage): SchedulerAgentSupervisor-dev, ...
	stack.New(app, stack.StackName(cfg.Stage), cfg, nil)
	stack.Check(app)
	app.Synth(nil)
}
