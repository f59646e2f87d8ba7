// Package jsonwire writes the JSON the system puts on its wires: the queue
// messages, the API's answers, the status events, the requests to the
// remote services. A value from outside, such as a step's output, travels
// and is stored as the bytes it came as, so the size checked where it
// enters the system is the size it has in every later message (SQS counts a
// body's bytes) and in the state record (DynamoDB counts a string's UTF-8
// bytes: "DynamoDB item sizes and formats",
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html).
//
// It is encoding/json with two differences:
//
//   - No HTML escaping. encoding/json's default writes <, > and & (and, in a
//     json.RawMessage, U+2028 and U+2029) as six-byte escapes, so that JSON
//     pasted into an HTML page cannot end a script element. Nothing the
//     system writes is embedded in HTML, and the API's answers carry
//     X-Content-Type-Options: nosniff, so a browser does not render them as
//     a page either. U+2028 and U+2029 are valid in JSON text (RFC 8259,
//     section 7). A Go string's are still escaped, as encoding/json always
//     does; where the system bounds such strings by size (an order's
//     input), it measures them encoded.
//   - U+FFFE and U+FFFF are written as \ufffe and \uffff, which mean the
//     same in a JSON string, the only place valid JSON can hold them: SQS
//     does not carry them (a message body may hold #x9, #xA, #xD, #x20 to
//     #xD7FF, #xE000 to #xFFFD and #x10000 to #x10FFFF: "SendMessage",
//     Amazon SQS API Reference,
//     https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html,
//     which replaces any other character with U+FFFD; fauxqs refuses the
//     message instead). Every other character SQS refuses cannot stand in
//     valid UTF-8 JSON: controls are escaped inside strings, and surrogates
//     are not UTF-8.
//
// fauxqs, the local SQS engine, also refuses characters over U+FFFF, which
// SQS takes; the system writes them as they are, as AWS documents.
package jsonwire

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without HTML escaping, with U+FFFE and U+FFFF
// escaped (see the package doc).
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	// Encode ends the value with a newline, which Marshal does not write.
	return escapeNoncharacters(bytes.TrimSuffix(b.Bytes(), []byte{'\n'})), nil
}

// Compact returns the JSON value in src without insignificant space and
// with U+FFFE and U+FFFF escaped: the bytes Marshal writes for it as a
// json.RawMessage, so a value from outside is measured as it will travel.
func Compact(src []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, src); err != nil {
		return nil, err
	}
	return escapeNoncharacters(b.Bytes()), nil
}

// The UTF-8 encodings of U+FFFE and U+FFFF, and their JSON escapes. No
// other character's encoding contains them: 0xEF only ever starts one.
var (
	uFFFE, escFFFE = []byte("\uFFFE"), []byte(`\ufffe`)
	uFFFF, escFFFF = []byte("\uFFFF"), []byte(`\uffff`)
)

func escapeNoncharacters(b []byte) []byte {
	if !bytes.Contains(b, uFFFE) && !bytes.Contains(b, uFFFF) {
		return b
	}
	return bytes.ReplaceAll(bytes.ReplaceAll(b, uFFFE, escFFFE), uFFFF, escFFFF)
}
