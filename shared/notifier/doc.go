// Package notifier publishes client status notifications: each committed
// change of an order's client-visible status (workflow.StatusOf), read from
// the state table's DynamoDB stream, becomes one message on the order-events
// SNS topic, numbered by the record's EventSeq.
package notifier
