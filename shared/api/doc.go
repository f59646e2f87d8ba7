// Package api is the wire contract of the orders API and of the status
// events: one Go type per JSON document, written by the server
// (shared/submission, shared/notifier) and read by the clients
// (internal/opsclient and cmd/sasctl; any Go client of the order events).
//
// The documents: Order (GET /orders/{id}, GET /ops/orders/{id}) with its
// StepHistory; Page of OrderSummary (GET /orders, GET /ops/orders);
// Accepted (the 202 of POST /orders and of retry and cancel); Workflows of
// WorkflowVersion (GET /ops/workflows); Problem (RFC
// 9457, every error answer); Event (order.event, one SNS message per change
// of an order's client status).
//
// The types say nothing about where their values come from: the servers
// build them from their records (submission's view of a state record,
// notifier.EventOf), and decide there what a client may see. The decoders
// here are the clients': they read outside input, bound its size and check
// what a client relies on. The golden documents in testdata pin every
// member's name, order and omission rule; the servers' tests check that
// what they write for a fixed record is those documents byte for byte.
// client-order.json and client-order-summary.json are what the client
// routes write of the same record (without the owner and the failures'
// texts), event.v1.json and event.v2.json the version 1 and 2 events DecodeEvent still reads.
//
// OpenAPI is the API's OpenAPI 3.1 document; shared/submission's
// conformance test holds the handler to it.
package api
