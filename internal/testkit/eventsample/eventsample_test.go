package eventsample_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/internal/testkit/eventsample"
)

// samples maps every file in events/ to the aws-lambda-go type its function
// receives. A new sample must be added here, so it cannot sit in events/
// without a known type; Load decodes strictly, so a sample that drifts from
// its type fails too.
var samples = map[string]func(t *testing.T, name string){
	"submission-post-order.json": load[events.APIGatewayV2HTTPRequest],
	"submission-get-order.json":  load[events.APIGatewayV2HTTPRequest],
	"scheduler-schedule.json":    load[events.SQSEvent],
	"scheduler-agent-reply.json": load[events.SQSEvent],
	"agent-request.json":         load[events.SQSEvent],
	"supervisor-scheduled.json":  load[events.EventBridgeEvent],
	"notifier-stream.json":       load[events.DynamoDBEvent],
}

func load[T any](t *testing.T, name string) {
	t.Helper()
	eventsample.Load[T](t, name)
}

func TestEverySampleDecodesIntoItsType(t *testing.T) {
	t.Parallel()
	dir := eventsample.Dir(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && strings.EqualFold(filepath.Ext(e.Name()), ".json") {
			files = append(files, e.Name())
		}
	}
	if len(files) == 0 {
		t.Fatalf("no *.json samples in %s", dir)
	}
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			decode, ok := samples[name]
			if !ok {
				t.Fatalf("events/%s has no type in the samples table of this test; add it with the aws-lambda-go type its function receives", name)
			}
			decode(t, name)
		})
	}
	// A table entry without its file is a sample that was renamed or lost.
	for name := range samples {
		if !slices.Contains(files, name) {
			t.Errorf("the samples table names events/%s, which does not exist", name)
		}
	}
}
