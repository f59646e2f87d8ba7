// Package timer arms the Supervisor's fast path. It follows the state
// table's stream and, for every write that starts a new phase of a record
// the Supervisor watches (a claim, a hand-back, a requeue: a new Attempt or
// CompleteBy), sends a message.Deadline to the deadline queue, delayed until
// that CompleteBy. The Supervisor then looks at the record the moment its
// deadline passes instead of at its next scheduled sweep. A phase longer
// than SQS's longest delay (15 minutes) gets no Deadline: the sweep, which
// stays the backstop for every Deadline lost, handles it.
package timer
