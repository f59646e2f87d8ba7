package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document of the orders API: every route, its
// parameters, headers, bodies (as JSON Schema 2020-12), statuses, problem
// types, the SigV4 security scheme and examples. shared/submission's
// conformance test holds the handler to it, so the two cannot drift.
//
//go:embed openapi.json
var OpenAPI []byte
