// Command cost measures what an order costs: it runs orders of three
// scenarios (happy path, one retried step, compensated) through the real
// handlers on the local engines with every AWS request metered
// (internal/localstack/costrun), prices them at us-east-1 list prices at two
// traffic levels (internal/cost), compares the same workflow on Step
// Functions and Lambda durable functions, and ends with one line:
//
//	cost usd_per_million=X wru_per_order=Y sfn_standard_usd_per_million=Z usd_per_million_1m_month=W fixed_usd_per_month=F
//
//	scripts/engines.sh run -- go run ./cmd/cost -orders 200
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sasflow/sas/internal/cost"
	"github.com/sasflow/sas/internal/localstack/costrun"
	"github.com/sasflow/sas/shared/topology"
)

func main() {
	orders := flag.Int("orders", 200, "orders per scenario")
	latency := flag.Duration("remote-latency", 100*time.Millisecond, "assumed latency of one remote call (the local remote answers at once)")
	sweep := flag.Bool("sweep", false, "instead, measure the read units of one Supervisor sweep over 100 in-flight records with 1,000 and then 100,000 finished records in the table (takes minutes)")
	flag.Parse()
	if *sweep {
		if err := measureSweep(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "cost:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(context.Background(), *orders, *latency); err != nil {
		fmt.Fprintln(os.Stderr, "cost:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, orders int, latency time.Duration) error {
	ddb, aws := os.Getenv("SAS_TEST_DYNAMODB_ENDPOINT"), os.Getenv("SAS_TEST_AWS_ENDPOINT")
	if ddb == "" || aws == "" {
		return fmt.Errorf("set SAS_TEST_DYNAMODB_ENDPOINT and SAS_TEST_AWS_ENDPOINT (scripts/engines.sh run -- ... does)")
	}
	var runs []cost.Usage
	for _, sc := range []costrun.Scenario{costrun.Happy, costrun.Retried, costrun.Compensated} {
		fmt.Fprintf(os.Stderr, "cost: %d orders, %s\n", orders, sc)
		u, err := costrun.Run(ctx, costrun.Options{DynamoDBURL: ddb, AWSURL: aws, Orders: orders, Scenario: sc})
		if err != nil {
			return fmt.Errorf("%s: %w", sc, err)
		}
		runs = append(runs, u)
	}
	a := cost.DefaultAssumptions()
	a.RemoteLatency = latency
	a.MemoryMB = topology.MemoryMB()
	return cost.Render(os.Stdout, runs, cost.ListPrices(), a, cost.DefaultFixed())
}

func measureSweep(ctx context.Context) error {
	reads, err := costrun.Sweep(ctx, os.Getenv("SAS_TEST_DYNAMODB_ENDPOINT"), 100, []int{1000, 100000})
	if err != nil {
		return err
	}
	for _, r := range reads {
		fmt.Printf("sweep in_flight=%d terminal=%d rru=%.1f\n", r.InFlight, r.Terminal, r.RRU)
	}
	fmt.Printf("sweep rru_ratio=%.2f\n", reads[1].RRU/reads[0].RRU)
	return nil
}
