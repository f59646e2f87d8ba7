package streambridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// ForDynamoDBLocal is an option for a dynamodbstreams client that reads
// DynamoDB Local:
//
//	dynamodbstreams.NewFromConfig(cfg, streambridge.ForDynamoDBLocal)
//
// DynamoDB Local writes an empty map in a stream record as {} instead of
// {"M":{}}. The SDK's deserializer (dynamodbstreams v1.46.6) reads such an
// untyped value as whatever value it read last in the same map or list, or
// as nil if it is the first: an image would silently carry a sibling's data
// where the item has an empty map. The option rewrites {} to {"M":{}} in
// GetRecords answers before the SDK reads them. AWS never sends {}, so the
// option changes nothing there.
func ForDynamoDBLocal(o *dynamodbstreams.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		// After OperationDeserializer in the list means called by it, so
		// the body is fixed before it reads it.
		return s.Deserialize.Insert(emptyMapFix{}, "OperationDeserializer", middleware.After)
	})
}

// emptyMapFix rewrites the body of successful GetRecords answers.
type emptyMapFix struct{}

func (emptyMapFix) ID() string { return "streambridge.EmptyMapFix" }

func (emptyMapFix) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleDeserialize(ctx, in)
	if err != nil || awsmiddleware.GetOperationName(ctx) != "GetRecords" {
		return out, md, err
	}
	resp, ok := out.RawResponse.(*smithyhttp.Response)
	if !ok || resp.StatusCode != 200 || resp.Body == nil {
		return out, md, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return out, md, fmt.Errorf("read GetRecords answer: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(fixEmptyMaps(body)))
	return out, md, nil
}

// fixEmptyMaps returns body with every {} attribute value in the records'
// Keys and images made {"M":{}}. A body it cannot parse is returned as it
// is, for the SDK to report.
func fixEmptyMaps(body []byte) []byte {
	if !bytes.Contains(body, []byte("{}")) {
		return body
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // keep numbers such as ApproximateCreationDateTime exactly
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return body
	}
	changed := false
	records, _ := doc["Records"].([]any)
	for _, r := range records {
		rec, _ := r.(map[string]any)
		change, _ := rec["dynamodb"].(map[string]any)
		for _, image := range []string{"Keys", "NewImage", "OldImage"} {
			item, _ := change[image].(map[string]any)
			for _, v := range item {
				changed = fixValue(v) || changed
			}
		}
	}
	if !changed {
		return body
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return body
	}
	return buf.Bytes()
}

// fixValue types an empty attribute value as an empty map, in place, and
// looks into maps and lists for more. It says whether it changed anything.
func fixValue(v any) bool {
	av, ok := v.(map[string]any)
	if !ok {
		return false
	}
	if len(av) == 0 {
		av["M"] = map[string]any{}
		return true
	}
	changed := false
	if m, ok := av["M"].(map[string]any); ok {
		for _, e := range m {
			changed = fixValue(e) || changed
		}
	}
	if l, ok := av["L"].([]any); ok {
		for _, e := range l {
			changed = fixValue(e) || changed
		}
	}
	return changed
}
