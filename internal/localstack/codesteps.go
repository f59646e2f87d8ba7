package localstack

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sasflow/sas/internal/stepgen"
	"github.com/sasflow/sas/steps"
)

// LocalAccount is the account ID the local stack names in the ARNs it
// gives code steps.
const LocalAccount = "000000000000"

// CodeStepEnv is the environment of every code step (steps.Manifests), as
// the stack would set it: each parameter a manifest declares gets a local
// value, <prefix>-<parameter in kebab case>, and a parameter whose name
// ends in Bucket names an S3 bucket, which is created on fauxqs (the local
// stack offers S3 buckets only: a step needing another resource gets its
// name and must find it).
func CodeStepEnv(ctx context.Context, cfg aws.Config, prefix, region string) (map[string]string, error) {
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	env := map[string]string{}
	names := make([]string, 0, len(steps.Manifests))
	for name := range steps.Manifests {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m, err := stepgen.Parse(name, steps.Manifests[name])
		if err != nil {
			return nil, fmt.Errorf("code step %s: %w", name, err)
		}
		values := map[string]string{stepgen.Partition: "aws", stepgen.Region: region, stepgen.AccountID: LocalAccount}
		for param := range m.Parameters {
			v := strings.ToLower(prefix + "-" + kebab(param))
			values[param] = v
			if strings.HasSuffix(param, "Bucket") {
				if err := createBucket(ctx, client, v); err != nil {
					return nil, fmt.Errorf("code step %s: parameter %s: %w", name, param, err)
				}
			}
		}
		for k, raw := range m.Environment {
			var b strings.Builder
			for _, p := range stepgen.Parts(raw) {
				if p.Ref == "" {
					b.WriteString(p.Literal)
				} else {
					b.WriteString(values[p.Ref])
				}
			}
			env[k] = b.String()
		}
	}
	return env, nil
}

var upper = regexp.MustCompile(`([a-z0-9])([A-Z])`)

// kebab turns ShipOrderBucket into ship-order-bucket.
func kebab(s string) string { return strings.ToLower(upper.ReplaceAllString(s, "$1-$2")) }

func createBucket(ctx context.Context, client *s3.Client, name string) error {
	_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	var owned *s3types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("create bucket %s: %w", name, err)
	}
	return nil
}
