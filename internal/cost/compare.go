package cost

import (
	"fmt"
	"math"
)

// Comparison is the same workflow (Assumptions.Steps tasks, each one call
// to the remote service or the step's own effect; the same client status
// events; the order record the client routes read) priced from another
// service's published price formula, at the reference rate.
type Comparison struct {
	Name string
	// Source names the price pages the formula comes from.
	Source string
	Lines  []Line
}

// Total is the comparison's dollars per million orders.
func (c Comparison) Total() float64 { return total(c.Lines) }

// Compare prices the alternatives. u is the happy path: its Agent's
// handler time per record stands for each task's own work, to which the
// assumed remote latency is added.
func Compare(u Usage, p Prices, a Assumptions) []Comparison {
	task := taskSeconds(u, a)
	comps := []Comparison{
		StepFunctionsStandard(task, p, a),
		StepFunctionsExpress(task, p, a),
		DurableFunction(task, p, a),
	}
	// A step's own effect (the code step's S3 object) costs the same
	// whoever runs it.
	for _, l := range s3Lines(u, p) {
		if l.PerOrder == 0 {
			continue
		}
		for i := range comps {
			comps[i].Lines = append(comps[i].Lines, l)
		}
	}
	return comps
}

// taskSeconds is one task's duration: the Agent's measured work for one
// record plus one remote call.
func taskSeconds(u Usage, a Assumptions) float64 {
	work := 0.0
	if n := u.Records[Agent]; n > 0 {
		work = u.HandlerTime[Agent].Seconds() / float64(n)
	}
	return work + a.RemoteLatency.Seconds()
}

// StepFunctionsStandard is a Standard state machine started by the HTTP
// API's StartExecution integration, with two Task states that each invoke
// a Lambda function (at the Agent's memory) that calls the remote and
// waits for it. The first task also writes the order record.
func StepFunctionsStandard(task float64, p Prices, a Assumptions) Comparison {
	lines := []Line{line("Step Functions", "Standard state transitions (one per step executed)", "transitions",
		float64(a.SFNStandardTransitions), p.SFNStandardPer1kTransitions*1000)}
	lines = append(lines, taskLambdas(task, p, a)...)
	return Comparison{
		Name:   "Step Functions Standard",
		Source: "AWS Step Functions pricing (Standard: per state transition); Lambda, API Gateway, DynamoDB, SNS pricing",
		Lines:  append(lines, workflowExtras(p, a)...),
	}
}

// StepFunctionsExpress is the same state machine as an Express workflow:
// one request, and a duration of at least the two tasks (their remote
// calls and work), rounded up to 100 ms, at 64 MB.
func StepFunctionsExpress(task float64, p Prices, a Assumptions) Comparison {
	duration := math.Ceil(float64(a.Steps)*task*10-1e-6) / 10
	gbs := duration * float64(a.ExpressMemoryMB) / 1024
	lines := []Line{
		line("Step Functions", "Express requests", "requests", 1, p.SFNExpressRequestsPerMillion),
		line("Step Functions", fmt.Sprintf("Express duration (%.1f s at %d MB)", duration, a.ExpressMemoryMB), "GB-s", gbs, p.SFNExpressGBSecond*1e6),
	}
	lines = append(lines, taskLambdas(task, p, a)...)
	return Comparison{
		Name:   "Step Functions Express",
		Source: "AWS Step Functions pricing (Express: requests + duration); Lambda, API Gateway, DynamoDB, SNS pricing",
		Lines:  append(lines, workflowExtras(p, a)...),
	}
}

// DurableFunction is one Lambda durable function, invoked through the HTTP
// API, that runs both steps as checkpointed steps in one invocation: it
// waits on the remote inside each step, so it is billed for the wait.
func DurableFunction(task float64, p Prices, a Assumptions) Comparison {
	ops := float64(a.DurableOperations)
	written := ops * float64(a.DurableBytesPerOperation) / GB
	retained := written * float64(a.DurableRetentionDays) / 30
	gbs := billedSeconds(float64(a.Steps)*task) * a.memoryGB(Agent)
	lines := []Line{
		line("Lambda durable", fmt.Sprintf("operations (start + %d steps)", a.Steps), "operations", ops, p.DurableOperationsPerMillion),
		line("Lambda durable", fmt.Sprintf("data written (%d B an operation)", a.DurableBytesPerOperation), "GB", written, p.DurableWrittenPerGB*1e6),
		line("Lambda durable", fmt.Sprintf("data retained (%d days)", a.DurableRetentionDays), "GB-month", retained, p.DurableRetainedPerGBMonth*1e6),
		line("Lambda", "requests: 1 invocation", "requests", 1, p.LambdaRequestsPerMillion),
		line("Lambda", fmt.Sprintf("duration: %d steps, %.0f ms", a.Steps, billedSeconds(float64(a.Steps)*task)*1000), "GB-s", gbs, p.LambdaGBSecond*1e6),
	}
	return Comparison{
		Name:   "Lambda durable functions",
		Source: "AWS Lambda pricing, durable functions (second-hand: see sources); Lambda, API Gateway, DynamoDB, SNS pricing",
		Lines:  append(lines, workflowExtras(p, a)...),
	}
}

// taskLambdas are the task functions a state machine invokes, one a step.
func taskLambdas(task float64, p Prices, a Assumptions) []Line {
	billed := billedSeconds(task)
	return []Line{
		line("Lambda", fmt.Sprintf("requests: %d task functions", a.Steps), "requests", float64(a.Steps), p.LambdaRequestsPerMillion),
		line("Lambda", fmt.Sprintf("duration: %d tasks × %.0f ms", a.Steps, billed*1000), "GB-s", float64(a.Steps)*billed*a.memoryGB(Agent), p.LambdaGBSecond*1e6),
	}
}

// workflowExtras is what every alternative needs besides its orchestration:
// the API request, the order record, the client status events.
func workflowExtras(p Prices, a Assumptions) []Line {
	return []Line{
		line("API Gateway", "HTTP API request (starts the workflow)", "requests", 1, p.HTTPAPIRequestsPerMillion),
		line("DynamoDB", "WRU order record + ByOwner index entry", "WRU", a.OrderRecordWRU, p.DynamoDBWRUPerMillion),
		line("SNS", "status events published from the tasks", "requests", float64(a.StatusEvents), p.SNSRequestsPerMillion),
	}
}
