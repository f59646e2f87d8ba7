// Package coldstart does the work every function's main shares once per
// Lambda container: a JSON logger, the validated configuration, and the AWS
// configuration the clients are built from. A function that cannot start
// exits with the reason logged, so the misconfiguration shows in CloudWatch
// at the first invocation.
package coldstart

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/sasflow/sas/shared/jsonwire"
)

// Load builds the logger, reads the configuration with load, and loads the
// AWS configuration; it exits the process on any failure.
func Load[C any](function string, load func(getenv func(string) string) (C, error)) (C, aws.Config, *slog.Logger) {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With(slog.String("function", function))
	cfg, err := load(os.Getenv)
	Check(log, "bad configuration", err)
	awsCfg, err := awsconfig.LoadDefaultConfig(context.Background())
	Check(log, "aws configuration", err)
	return cfg, awsCfg, log
}

// Check logs err and exits when it is not nil. It is for a function's init
// (before lambda.Start): under Lambda (AWS_LAMBDA_RUNTIME_API set) it first
// reports the failure to the Runtime API's /init/error, so the invocation
// that found the function broken names the reason, not only the exit.
func Check(log *slog.Logger, what string, err error) {
	if err != nil {
		log.Error(what, slog.Any("error", err))
		if api := os.Getenv("AWS_LAMBDA_RUNTIME_API"); api != "" {
			if rerr := reportInitError(api, what+": "+err.Error()); rerr != nil {
				log.Error("report init error", slog.Any("error", rerr))
			}
		}
		os.Exit(1)
	}
}

// InitErrorType is the error type a function that cannot start reports.
const InitErrorType = "Runtime.InitError"

// reportInitError posts message to the Runtime API at api (host:port), in
// the shape Lambda documents for POST /runtime/init/error.
func reportInitError(api, message string) error {
	body, err := jsonwire.Marshal(map[string]string{"errorMessage": message, "errorType": InitErrorType})
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+api+"/2018-06-01/runtime/init/error", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Lambda-Runtime-Function-Error-Type", InitErrorType)
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("init/error: %s", resp.Status)
	}
	return nil
}
