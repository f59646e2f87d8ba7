package api

// Problem is an RFC 9457 problem document: the body of every error answer
// of the API. RequestID and Errors are extension members: the request to
// quote in a support case, and each field a request got wrong.
type Problem struct {
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Status    int          `json:"status"`
	Detail    string       `json:"detail,omitempty"`
	RequestID string       `json:"requestId,omitempty"`
	Errors    []FieldError `json:"errors,omitempty"`
}

// FieldError names one offending field by its JSON path, such as
// items[0].quantity, or a query parameter by its name.
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// DecodeProblem reads an error answer as a problem document. ok is false
// when the body is not one: not JSON of this shape, larger than
// MaxDocumentBytes, or without any of type, title, status and detail, as
// the answers of API Gateway itself ({"message"}), which the caller reads
// its own way. Unknown members are ignored, as RFC 9457 asks.
func DecodeProblem(body []byte) (p Problem, ok bool) {
	if unmarshal(body, &p) != nil {
		return Problem{}, false
	}
	if p.Type == "" && p.Title == "" && p.Status == 0 && p.Detail == "" {
		return Problem{}, false
	}
	return p, true
}
