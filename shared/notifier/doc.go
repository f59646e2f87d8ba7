// Package notifier publishes client status notifications: each committed
// change of an order's client-visible status (workflow.StatusOf), read from
// the state table's DynamoDB stream, becomes one message on the order-events
// SNS topic, numbered by the record's EventSeq. A stream batch's messages go
// out with PublishBatch, up to ten per request, since SNS bills a request,
// not a message.
package notifier
