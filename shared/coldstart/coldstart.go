// Package coldstart does the work every function's main shares once per
// Lambda container: a JSON logger, the validated configuration, and the AWS
// configuration the clients are built from. A function that cannot start
// exits with the reason logged, so the misconfiguration shows in CloudWatch
// at the first invocation.
package coldstart

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
)

// Load builds the logger, reads the configuration with load, and loads the
// AWS configuration; it exits the process on any failure.
func Load[C any](function string, load func(getenv func(string) string) (C, error)) (C, aws.Config, *slog.Logger) {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", function)
	cfg, err := load(os.Getenv)
	Check(log, "bad configuration", err)
	awsCfg, err := awsconfig.LoadDefaultConfig(context.Background())
	Check(log, "aws configuration", err)
	return cfg, awsCfg, log
}

// Check logs err and exits when it is not nil.
func Check(log *slog.Logger, what string, err error) {
	if err != nil {
		log.Error(what, "error", err)
		os.Exit(1)
	}
}
