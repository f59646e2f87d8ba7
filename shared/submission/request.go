package submission

import (
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// IdempotencyKeyHeader lets a client retry a POST safely.
const IdempotencyKeyHeader = "Idempotency-Key"

const maxIdempotencyKeyLen = 255

// readBody returns the raw body, undoing API Gateway's base64, within the cap.
func (h *Handler) readBody(req events.APIGatewayV2HTTPRequest) ([]byte, *Problem) {
	limit := h.cfg.MaxBodyBytes
	tooLarge := problem(http.StatusRequestEntityTooLarge, ProblemTooLarge,
		fmt.Sprintf("the body exceeds %d bytes", limit))
	if !req.IsBase64Encoded {
		if int64(len(req.Body)) > limit {
			return nil, &tooLarge
		}
		return []byte(req.Body), nil
	}
	// Refuse before decoding, so an oversized body costs no allocation.
	if int64(base64.StdEncoding.DecodedLen(len(req.Body))) > limit+2 {
		return nil, &tooLarge
	}
	b, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		p := problem(http.StatusBadRequest, ProblemMalformed, "the body is marked base64 but is not valid base64")
		return nil, &p
	}
	if int64(len(b)) > limit {
		return nil, &tooLarge
	}
	return b, nil
}

func checkContentType(headers map[string]string) (string, bool) {
	v, ok := header(headers, "Content-Type")
	if !ok || v == "" {
		return "Content-Type must be application/json", false
	}
	mt, params, err := mime.ParseMediaType(v)
	if err != nil || mt != contentTypeJSON {
		return "Content-Type must be application/json", false
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return "the only charset accepted is utf-8", false
	}
	return "", true
}

func idempotencyKey(headers map[string]string) (key string, ok bool, err error) {
	key, ok = header(headers, IdempotencyKeyHeader)
	if !ok {
		return "", false, nil
	}
	if len(key) < 1 || len(key) > maxIdempotencyKeyLen {
		return "", false, fmt.Errorf("%s must have 1..%d characters", IdempotencyKeyHeader, maxIdempotencyKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", false, fmt.Errorf("%s must be printable ASCII", IdempotencyKeyHeader)
		}
	}
	return key, true, nil
}

// header looks a header up case-insensitively: API Gateway lowercases
// names, but tests, proxies and local tooling may not.
func header(headers map[string]string, name string) (string, bool) {
	if v, ok := headers[strings.ToLower(name)]; ok {
		return v, true
	}
	for k, v := range headers {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}
