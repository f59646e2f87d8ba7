package cost

// Prices is every unit price the model uses, in US dollars: us-east-1 (US
// East, N. Virginia), on-demand list prices, Lambda on arm64, the first
// price tier of every tiered price, and no free tier (a free tier says
// nothing about what an order costs). ListPrices is the one price list;
// tests and what-ifs pass a modified copy.
type Prices struct {
	// Checked is the day the prices were checked against their sources.
	Checked string
	Region  string

	DynamoDBWRUPerMillion float64
	DynamoDBRRUPerMillion float64

	LambdaRequestsPerMillion float64
	LambdaGBSecond           float64

	SQSRequestsPerMillion float64
	SNSRequestsPerMillion float64

	HTTPAPIRequestsPerMillion float64

	// S3PutPer1k prices S3 Standard's PUT, COPY, POST and LIST requests,
	// S3GetPer1k its GET, HEAD and every other request but DELETE, which
	// is free.
	S3PutPer1k float64
	S3GetPer1k float64

	LogsIngestionPerGB float64
	AlarmMonth         float64
	CustomMetricMonth  float64
	DashboardMonth     float64

	KMSRequestsPer10k float64
	KMSKeyMonth       float64

	XRayTracesRecordedPerMillion float64

	SFNStandardPer1kTransitions  float64
	SFNExpressRequestsPerMillion float64
	SFNExpressGBSecond           float64

	DurableOperationsPerMillion float64
	DurableWrittenPerGB         float64
	DurableRetainedPerGBMonth   float64
}

// GB is the gigabyte the per-GB prices are counted in: 2^30 bytes, the GB
// of AWS's billing (its S3 FAQ defines a GB so). If a page meant 10^9
// bytes, its per-GB costs here are 7% low; they are cents per million
// orders.
const GB = 1 << 30

// ListPrices returns the price list, checked on Prices.Checked: a copy, so
// a caller's what-if cannot change it for others.
func ListPrices() Prices { return listPrices }

// listPrices is the one price list. The comment on each price names the
// page it was read from.
var listPrices = Prices{
	Checked: "2026-11-26",
	Region:  "us-east-1",
	// https://aws.amazon.com/dynamodb/pricing/on-demand/ : on-demand
	// throughput was halved on 2024-11-01; us-east-1 is now $0.625 per
	// million write request units and $0.125 per million read request
	// units (the new rates restated by third-party write-ups of the cut).
	DynamoDBWRUPerMillion: 0.625,
	DynamoDBRRUPerMillion: 0.125,
	// https://aws.amazon.com/lambda/pricing/ : $0.20 per million
	// requests; Arm duration $0.0000133334 per GB-second for the first
	// 7.5 billion GB-seconds a month; duration rounded up to 1 ms.
	LambdaRequestsPerMillion: 0.20,
	LambdaGBSecond:           0.0000133334,
	// https://aws.amazon.com/sqs/pricing/ : standard queues $0.40 per
	// million requests (first 100 billion a month); each 64 KB chunk of
	// a request's payload is billed as one request.
	SQSRequestsPerMillion: 0.40,
	// https://aws.amazon.com/sns/pricing/ : standard topics $0.50 per
	// million publish requests, each 64 KB chunk of published data one
	// request. PublishBatch (up to 10 messages): the SNS Developer Guide,
	// https://docs.aws.amazon.com/sns/latest/dg/sns-batch-api-actions.html,
	// says batching cuts publish costs "by a factor of up to 10", i.e. a
	// batch is billed by the 64 KB chunks of its whole payload.
	// Deliveries to SQS queues (how clients subscribe) are not charged.
	SNSRequestsPerMillion: 0.50,
	// https://aws.amazon.com/api-gateway/pricing/ : HTTP APIs $1.00 per
	// million requests for the first 300 million a month.
	HTTPAPIRequestsPerMillion: 1.00,
	// https://aws.amazon.com/s3/pricing/ (Storage & requests, S3
	// Standard): $0.005 per 1,000 PUT, COPY, POST or LIST requests and
	// $0.0004 per 1,000 GET, SELECT and all other requests. The stored
	// copy of the AWS page shows its request price cells unrendered: the
	// two figures are restated by third-party write-ups of the page
	// ("S3 request fees explained", c3x.dev; "Amazon S3 Pricing
	// Explained", cloudburn.io, 2026-03-13). DELETE requests are free:
	// the S3 FAQs, https://aws.amazon.com/s3/faqs/ ("Amazon S3 doesn't
	// charge you for removing objects", "DELETE requests ... no charge").
	S3PutPer1k: 0.005,
	S3GetPer1k: 0.0004,
	// https://aws.amazon.com/cloudwatch/pricing/ : Logs ingestion $0.50
	// per GB (Standard class; Lambda logs are tiered since 2025-05-01,
	// and their first tier is the same $0.50), $0.10 per standard
	// resolution alarm metric a month, $0.30 per custom metric a month
	// (first 10,000), $3.00 per dashboard a month.
	LogsIngestionPerGB: 0.50,
	AlarmMonth:         0.10,
	CustomMetricMonth:  0.30,
	DashboardMonth:     3.00,
	// https://aws.amazon.com/kms/pricing/ : $1 per customer managed key
	// a month (prorated hourly), $0.03 per 10,000 symmetric requests.
	KMSRequestsPer10k: 0.03,
	KMSKeyMonth:       1.00,
	// https://aws.amazon.com/xray/pricing/ : $5.00 per million traces
	// recorded (the first 100,000 a month free, left out like every free
	// tier), however many segments a trace has.
	XRayTracesRecordedPerMillion: 5.00,
	// https://aws.amazon.com/step-functions/pricing/ : Standard $0.025
	// per 1,000 state transitions (retries count). Express $1.00 per
	// million requests plus duration at $0.06 per GB-hour for the first
	// 1,000 GB-hours ($0.0000166667 per GB-second), duration rounded up
	// to 100 ms and memory billed in 64 MB chunks.
	SFNStandardPer1kTransitions:  0.025,
	SFNExpressRequestsPerMillion: 1.00,
	SFNExpressGBSecond:           0.06 / 3600,
	// Lambda durable functions (launched 2025-12-02). The AWS page
	// (https://aws.amazon.com/lambda/pricing/, durable functions section)
	// could not be read directly: $8.00 per million durable operations
	// is quoted from a transcription of that page (api-evangelist
	// aws-lambda plans, read 2026-09-20); $0.25 per GB of data written
	// and $0.15 per GB-month of data retained come from "AWS Lambda
	// Durable Functions", The Candid Startup blog, 2026-01-12
	// (https://www.thecandidstartup.org/2026/01/12/aws-lambda-durable-functions.html),
	// which also gives the $8.00. Treat these three as second-hand.
	DurableOperationsPerMillion: 8.00,
	DurableWrittenPerGB:         0.25,
	DurableRetainedPerGBMonth:   0.15,
}

// Source names the page a group of prices was read from, for the printed
// assumptions. It names pages without linking them: the code comments in
// ListPrices carry the addresses.
type Source struct {
	Prices string
	Page   string
}

// Sources lists where ListPrices' prices come from.
func Sources() []Source {
	return []Source{
		{"DynamoDB on-demand: $0.625 per million WRU, $0.125 per million RRU (after the 2024-11-01 cut)", "Amazon DynamoDB pricing, on-demand capacity"},
		{"Lambda arm64: $0.20 per million requests, $0.0000133334 per GB-s, duration rounded up to 1 ms", "AWS Lambda pricing"},
		{"SQS standard: $0.40 per million requests, one request per 64 KB chunk", "Amazon SQS pricing"},
		{"SNS standard: $0.50 per million publishes, one per 64 KB chunk; PublishBatch billed by its whole payload (up to 10x cheaper)", "Amazon SNS pricing; SNS Developer Guide, message batching"},
		{"SNS reuses a KMS data key for up to 5 minutes", "SNS Developer Guide, key management (estimating AWS KMS costs)"},
		{"API Gateway HTTP API: $1.00 per million requests (first 300 million)", "Amazon API Gateway pricing"},
		{"S3 Standard: $0.005 per 1,000 PUT, COPY, POST, LIST requests, $0.0004 per 1,000 GET and other requests, DELETE free (request prices second-hand: the page's cells did not render)", "Amazon S3 pricing, requests; Amazon S3 FAQs"},
		{"CloudWatch: Logs $0.50 per GB ingested, alarm $0.10, custom metric $0.30, dashboard $3.00 a month", "Amazon CloudWatch pricing"},
		{"KMS: $1 per key a month, $0.03 per 10,000 requests", "AWS KMS pricing"},
		{"X-Ray: $5.00 per million traces recorded, the PutTraceSegments requests unpriced; Lambda's active tracing (priced as a lever) samples the first request a second and 5% of the rest and starts a linked trace per SQS-triggered invocation", "AWS X-Ray pricing; Lambda Developer Guide, tracing; X-Ray Developer Guide, tracing event-driven applications"},
		{"Lambda bills the init phase of custom runtimes (and, since 2025-08-01, every runtime); execution environments are kept \"for some time\" and replaced \"every few hours\"", "Lambda Developer Guide, execution environment lifecycle; AWS Compute Blog, INIT phase billing"},
		{"DynamoDB transactions: 2 WRU per KB of each item; an index update is one write of the entry (index writes in transactions: not documented)", "DynamoDB Developer Guide, transactions and global secondary indexes"},
		{"Lambda's SQS pollers: 5 concurrent long polls when idle, 2 without maximum concurrency; a batching window gathers records; DynamoDB stream shards polled 4 times a second and read free", "Lambda Developer Guide, SQS scaling and parameters, DynamoDB streams; DynamoDB Developer Guide, streams"},
		{"Step Functions: Standard $0.025 per 1,000 transitions; Express $1.00 per million requests, $0.06 per GB-hour, 100 ms and 64 MB rounding", "AWS Step Functions pricing"},
		{"Lambda durable functions: $8.00 per million operations, $0.25 per GB written, $0.15 per GB-month retained (second-hand)", "AWS Lambda pricing, as transcribed by third parties (The Candid Startup, 2026-01-12)"},
	}
}
