package statestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/workflow"
)

// The ledger is the code steps' idempotency ledger: a table of its own
// (Tables.Ledger), one item per step and idempotency key (LedgerKey), that
// says whether the step's try under that key is running (and whose lease
// holds it), done (with its output), rejected (with its fault) or undone
// (its effect undone, or refused before it ran). shared/codestep reads and
// writes it around a step's Do and Undo.
//
// Every write is conditional on what the writer saw, so two tries never
// both hold a key and a finished entry is never overwritten; see "DynamoDB
// condition expression CLI example"
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html):
// a failed condition writes nothing and, with
// ReturnValuesOnConditionCheckFailure, answers the item as it is. The undo's
// two writes are one TransactWriteItems, all or nothing; see
// "TransactWriteItems" in the DynamoDB API Reference
// (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html),
// whose ClientRequestToken (the Go SDK fills one in) makes a retry whose
// answer was lost succeed again for 10 minutes instead of failing its
// conditions.

// LedgerState is the state of a ledger entry.
type LedgerState string

// The states of a ledger entry.
const (
	// LedgerRunning: a try holds the key until its lease ends.
	LedgerRunning LedgerState = "running"
	// LedgerDone: the step succeeded; its output is replayed.
	LedgerDone LedgerState = "done"
	// LedgerRejected: the step failed for good; its fault is replayed.
	LedgerRejected LedgerState = "rejected"
	// LedgerUndone: the effect was undone, or refused before it ran (a
	// tombstone); a late try of the step is refused.
	LedgerUndone LedgerState = "undone"
)

// The ledger's attributes. The key is "k" and the TTL "expiresAt", as the
// stack declares them (LedgerTableInput, TimeToLiveInputs).
const (
	LedgerKeyAttr       = "k"
	LedgerExpiresAtAttr = "expiresAt"
	ledgerState         = "state"
	ledgerOwner         = "owner"
	ledgerLease         = "leaseUntil"
	ledgerOutput        = "output"
	ledgerFaultCode     = "faultCode"
	ledgerFaultMessage  = "faultMessage"
	ledgerUncertain     = "uncertain"
)

// MaxLedgerOutputBytes bounds an output the ledger keeps. A DynamoDB item
// holds at most 400 KB, names and values together; see "Constraints in
// Amazon DynamoDB", Items
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html)
// and "DynamoDB item sizes and formats"
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html).
// Besides the output an entry holds its key (a step name and a message's
// idempotency key, under 300 bytes), a fault (message's bounds, about
// 1 KB), an owner token and three numbers: ledgerFixedBytes covers them
// all. shared/codestep bounds an output far lower, by the step's own limit
// (workflow.Step.OutputLimit), before it writes.
const MaxLedgerOutputBytes = workflow.MaxItemBytes - ledgerFixedBytes

const ledgerFixedBytes = 4 << 10

// ErrLedgerOutputTooLarge is the refusal of an output over
// MaxLedgerOutputBytes.
var ErrLedgerOutputTooLarge = errors.New("the output does not fit in a ledger entry")

// LedgerKey is the ledger key of a step's idempotency key: the step first,
// so a code step's IAM policy can hold it to its own keys
// (dynamodb:LeadingKeys on "<step>#*").
func LedgerKey(step, idempotencyKey string) string { return step + "#" + idempotencyKey }

// LedgerEntry is one entry of the ledger.
type LedgerEntry struct {
	Key   string
	State LedgerState
	// Owner is the token of the try that claimed the entry last; it stays
	// on a finished entry, so a writer whose answer was lost knows its own
	// write.
	Owner string
	// LeaseUntil ends a running entry's claim: another try may take the
	// key over from then on.
	LeaseUntil time.Time
	// Output of a done entry; Fault of a rejected one.
	Output json.RawMessage
	Fault  *message.Fault
	// ExpiresAt is the entry's TTL (Unix seconds); a read takes an entry
	// past it for gone. Zero while its order may still try the key: an
	// entry gets its TTL only once its order ended for good (Expire), so
	// it outlives every try of its key, an operator's retry years later
	// included.
	ExpiresAt time.Time
	// TookOver, on the entry Begin claimed, says another try held the key
	// before this one and left no outcome (it died, or its ledger write
	// failed, after its step may have run), or that Begin cannot tell (its
	// own claim, whose answer was lost): what the step does now may follow
	// an effect of that try's, so a refusal is no proof that nothing was
	// applied.
	TookOver bool
}

// Live reports whether e is a running entry whose lease holds at now.
func (e LedgerEntry) Live(now time.Time) bool {
	return e.State == LedgerRunning && now.Before(e.LeaseUntil)
}

// Outcome is how a claimed try ended: done with Output, or rejected with
// Fault when Fault is set.
type Outcome struct {
	Output json.RawMessage
	Fault  *message.Fault
}

// LedgerPort is the ledger's contract. Store implements it on the ledger
// table, internal/testkit/memstore in memory, and
// internal/testkit/storetest's ledger cases hold both to it. Times are the
// store's: a lease has ended, and an entry is past its ExpiresAt, by the
// store's clock.
type LedgerPort interface {
	// Begin claims key for owner until leaseUntil when it is absent, past
	// its ExpiresAt, or running with its lease ended, and answers the
	// entry as written (without a TTL, and TookOver when it displaced an
	// entry) and true. Otherwise it answers the entry as it is, writing
	// nothing, and true only when owner holds it already (its own claim,
	// whose answer was lost; TookOver then, since Begin cannot tell what
	// that claim displaced).
	Begin(ctx context.Context, key, owner string, leaseUntil time.Time) (LedgerEntry, bool, error)
	// Entry reads an entry, strongly consistent; workflow.ErrNotFound when
	// it is absent or past its ExpiresAt.
	Entry(ctx context.Context, key string) (LedgerEntry, error)
	// Finish ends owner's claim of key with its outcome, done or
	// rejected; workflow.ErrStale when key is not running under owner,
	// unless owner already finished it with an outcome of the same state
	// (its own write, whose answer was lost), which is left as it is.
	Finish(ctx context.Context, key, owner string, out Outcome) error
	// Release ends owner's claim of key at once, so a later try runs the
	// step again: the entry stays, running with its lease ended, and the
	// try that claims it next takes it over (TookOver), since the try
	// that let it go may have applied the step before it failed. nil when
	// key is absent or already released, workflow.ErrStale when another
	// holds or finished it.
	Release(ctx context.Context, key, owner string) error
	// Tombstone marks key undone when it is absent, past its ExpiresAt,
	// rejected, undone, or running with its lease ended, and answers the
	// entry as written (without a TTL). Otherwise (done, or running under
	// a live lease) it answers the entry as it is with workflow.ErrStale.
	Tombstone(ctx context.Context, key string) (LedgerEntry, error)
	// FinishUndo, in one transaction, marks effectKey undone (it must be
	// done or undone) and ends owner's claim of undoKey done with output;
	// workflow.ErrStale when either condition fails.
	FinishUndo(ctx context.Context, effectKey, undoKey, owner string, output json.RawMessage) error
	// Expire gives key's entry the TTL at, once its order ended for good
	// and no try of the key can come any more; nil, writing nothing, when
	// key has no entry.
	Expire(ctx context.Context, key string, at time.Time) error
}

var _ LedgerPort = (*Store)(nil)

// CheckOutcome refuses an outcome the ledger cannot keep: an output over
// MaxLedgerOutputBytes (ErrLedgerOutputTooLarge), or a fault without a
// code.
func CheckOutcome(out Outcome) error {
	if len(out.Output) > MaxLedgerOutputBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrLedgerOutputTooLarge, len(out.Output), MaxLedgerOutputBytes)
	}
	if out.Fault != nil && out.Fault.Code == "" {
		return errors.New("a rejected entry needs a fault code")
	}
	return nil
}

// ledgerKey is the item key of key.
func ledgerKey(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{LedgerKeyAttr: str(key)}
}

// Begin claims key for owner (LedgerPort.Begin) with one conditional
// UpdateItem that answers the item as it was, whether its condition held
// (ALL_OLD: was there an entry it took over?) or failed. A retry whose
// answer was lost finds the item running under owner: its own claim.
func (s *Store) Begin(ctx context.Context, key, owner string, leaseUntil time.Time) (LedgerEntry, bool, error) {
	now := s.clk.Now()
	e := newExpr()
	e.Set(ledgerState, str(string(LedgerRunning))).Set(ledgerOwner, str(owner)).Set(ledgerLease, millis(leaseUntil))
	e.Remove(ledgerOutput).Remove(ledgerFaultCode).Remove(ledgerFaultMessage).Remove(ledgerUncertain)
	setExpiry(e, time.Time{})
	cond := "attribute_not_exists(#k) OR #expiresAt <= :nowSec OR (#state = :running AND #leaseUntil <= :nowMs)"
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.tables.Ledger),
		Key:                                 ledgerKey(key),
		UpdateExpression:                    aws.String(e.update()),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            ledgerNames(e.names),
		ExpressionAttributeValues:           ledgerValues(e.values, now, LedgerRunning),
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		held, derr := decodeLedger(failed.Item)
		if derr != nil {
			return LedgerEntry{}, false, fmt.Errorf("begin %s: decode the entry: %w", key, derr)
		}
		own := held.State == LedgerRunning && held.Owner == owner
		held.TookOver = own
		return held, own, nil
	}
	if err != nil {
		return LedgerEntry{}, false, fmt.Errorf("begin %s in %s: %w", key, s.tables.Ledger, err)
	}
	written := LedgerEntry{Key: key, State: LedgerRunning, Owner: owner, LeaseUntil: fromMilli(leaseUntil.UnixMilli()),
		TookOver: len(out.Attributes) > 0}
	return written, true, nil
}

// Entry reads an entry with a strongly consistent read (LedgerPort.Entry).
func (s *Store) Entry(ctx context.Context, key string) (LedgerEntry, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.tables.Ledger), Key: ledgerKey(key), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return LedgerEntry{}, fmt.Errorf("get %s from %s: %w", key, s.tables.Ledger, err)
	}
	if len(out.Item) == 0 {
		return LedgerEntry{}, fmt.Errorf("get %s from %s: %w", key, s.tables.Ledger, workflow.ErrNotFound)
	}
	e, err := decodeLedger(out.Item)
	if err != nil {
		return LedgerEntry{}, fmt.Errorf("decode ledger entry %s: %w", key, err)
	}
	if s.expired(e.ExpiresAt) {
		return LedgerEntry{}, fmt.Errorf("get %s from %s: expired: %w", key, s.tables.Ledger, workflow.ErrNotFound)
	}
	return e, nil
}

// Finish ends owner's claim with its outcome (LedgerPort.Finish), keeping
// the owner on the entry: a retry whose answer was lost finds the entry
// finished as it meant, under its own token.
func (s *Store) Finish(ctx context.Context, key, owner string, out Outcome) error {
	if err := CheckOutcome(out); err != nil {
		return fmt.Errorf("finish %s: %w", key, err)
	}
	e := newExpr()
	outcomeOf(e, out)
	e.Is(ledgerState, str(string(LedgerRunning))).Is(ledgerOwner, str(owner))
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.tables.Ledger),
		Key:                                 ledgerKey(key),
		UpdateExpression:                    aws.String(e.update()),
		ConditionExpression:                 e.condition(),
		ExpressionAttributeNames:            e.names,
		ExpressionAttributeValues:           e.values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		if held, derr := decodeLedger(failed.Item); derr == nil && held.Owner == owner && held.State == outcomeState(out) {
			return nil
		}
		return fmt.Errorf("finish %s: %w", key, workflow.ErrStale)
	}
	if err != nil {
		return fmt.Errorf("finish %s in %s: %w", key, s.tables.Ledger, err)
	}
	return nil
}

// outcomeOf sets an outcome's state, output or fault, and ends the lease.
func outcomeOf(e *expr, out Outcome) {
	e.Set(ledgerState, str(string(outcomeState(out)))).Remove(ledgerLease)
	if out.Fault != nil {
		e.Set(ledgerFaultCode, str(out.Fault.Code))
		if out.Fault.Message != "" {
			e.Set(ledgerFaultMessage, str(out.Fault.Message))
		}
		if out.Fault.Uncertain {
			e.Set(ledgerUncertain, boolean(true))
		}
		return
	}
	if len(out.Output) > 0 {
		e.Set(ledgerOutput, str(string(out.Output)))
	}
}

func outcomeState(out Outcome) LedgerState {
	if out.Fault != nil {
		return LedgerRejected
	}
	return LedgerDone
}

// Release ends owner's claim (LedgerPort.Release) with a conditional
// UpdateItem that sets its lease to the epoch: ended for every clock. A
// retry whose answer was lost does the same again.
func (s *Store) Release(ctx context.Context, key, owner string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.tables.Ledger),
		Key:                                 ledgerKey(key),
		UpdateExpression:                    aws.String("SET #lease = :ended"),
		ConditionExpression:                 aws.String("#state = :running AND #owner = :owner"),
		ExpressionAttributeNames:            map[string]string{"#state": ledgerState, "#owner": ledgerOwner, "#lease": ledgerLease},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":running": str(string(LedgerRunning)), ":owner": str(owner), ":ended": num64(0)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		if len(failed.Item) == 0 {
			return nil
		}
		return fmt.Errorf("release %s: %w", key, workflow.ErrStale)
	}
	if err != nil {
		return fmt.Errorf("release %s in %s: %w", key, s.tables.Ledger, err)
	}
	return nil
}

// Tombstone marks key undone where no effect is on record
// (LedgerPort.Tombstone): one conditional UpdateItem, which creates the
// entry when it is absent.
func (s *Store) Tombstone(ctx context.Context, key string) (LedgerEntry, error) {
	now := s.clk.Now()
	e := newExpr()
	e.Set(ledgerState, str(string(LedgerUndone)))
	e.Remove(ledgerOwner).Remove(ledgerLease).Remove(ledgerOutput).Remove(ledgerFaultCode).Remove(ledgerFaultMessage).Remove(ledgerUncertain)
	setExpiry(e, time.Time{})
	cond := "attribute_not_exists(#k) OR #expiresAt <= :nowSec OR #state IN (:rejected, :undone) OR (#state = :running AND #leaseUntil <= :nowMs)"
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.tables.Ledger),
		Key:                                 ledgerKey(key),
		UpdateExpression:                    aws.String(e.update()),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            ledgerNames(e.names),
		ExpressionAttributeValues:           ledgerValues(e.values, now, LedgerRunning, LedgerRejected, LedgerUndone),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		held, derr := decodeLedger(failed.Item)
		if derr != nil {
			return LedgerEntry{}, fmt.Errorf("tombstone %s: decode the entry: %w", key, derr)
		}
		return held, fmt.Errorf("tombstone %s, %s: %w", key, held.State, workflow.ErrStale)
	}
	if err != nil {
		return LedgerEntry{}, fmt.Errorf("tombstone %s in %s: %w", key, s.tables.Ledger, err)
	}
	return decodeLedger(out.Attributes)
}

// FinishUndo marks the effect undone and ends the undo's claim done, in one
// transaction (LedgerPort.FinishUndo). The two items are distinct keys of
// one table, as a transaction requires. A retry whose answer was lost
// carries the same ClientRequestToken and succeeds again; past the
// token's 10 minutes, a canceled transaction that finds both items as it
// meant them is taken for its own too.
func (s *Store) FinishUndo(ctx context.Context, effectKey, undoKey, owner string, output json.RawMessage) error {
	if err := CheckOutcome(Outcome{Output: output}); err != nil {
		return fmt.Errorf("finish the undo %s: %w", undoKey, err)
	}
	u := newExpr()
	outcomeOf(u, Outcome{Output: output})
	u.Is(ledgerState, str(string(LedgerRunning))).Is(ledgerOwner, str(owner))
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{
			TableName:                 aws.String(s.tables.Ledger),
			Key:                       ledgerKey(effectKey),
			UpdateExpression:          aws.String("SET #state = :undone REMOVE #lease, #output"),
			ConditionExpression:       aws.String("#state IN (:done, :undone)"),
			ExpressionAttributeNames:  map[string]string{"#state": ledgerState, "#lease": ledgerLease, "#output": ledgerOutput},
			ExpressionAttributeValues: map[string]types.AttributeValue{":done": str(string(LedgerDone)), ":undone": str(string(LedgerUndone))},
		}},
		{Update: &types.Update{
			TableName:                 aws.String(s.tables.Ledger),
			Key:                       ledgerKey(undoKey),
			UpdateExpression:          aws.String(u.update()),
			ConditionExpression:       u.condition(),
			ExpressionAttributeNames:  u.names,
			ExpressionAttributeValues: u.values,
		}},
	}})
	var canceled *types.TransactionCanceledException
	if errors.As(err, &canceled) && conditionFailed(canceled) {
		if undo, gerr := s.Entry(ctx, undoKey); gerr == nil && undo.State == LedgerDone && undo.Owner == owner {
			if effect, gerr := s.Entry(ctx, effectKey); gerr == nil && effect.State == LedgerUndone {
				return nil
			}
		}
		return fmt.Errorf("finish the undo %s of %s: %w", undoKey, effectKey, workflow.ErrStale)
	}
	if err != nil {
		return fmt.Errorf("finish the undo %s of %s in %s: %w", undoKey, effectKey, s.tables.Ledger, err)
	}
	return nil
}

// Expire gives key's entry its TTL (LedgerPort.Expire) with one UpdateItem
// conditional on the entry's existence, so an absent key stays absent. It
// is the one write that sets a TTL: an entry lives as long as its order
// may try its key.
func (s *Store) Expire(ctx context.Context, key string, at time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.tables.Ledger),
		Key:                       ledgerKey(key),
		UpdateExpression:          aws.String("SET #exp = :exp"),
		ConditionExpression:       aws.String("attribute_exists(#k)"),
		ExpressionAttributeNames:  map[string]string{"#k": LedgerKeyAttr, "#exp": LedgerExpiresAtAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":exp": num64(unixSeconds(at))},
	})
	var failed *types.ConditionalCheckFailedException
	if errors.As(err, &failed) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("expire %s in %s: %w", key, s.tables.Ledger, err)
	}
	return nil
}

// conditionFailed reports whether a canceled transaction failed a
// condition (rather than a conflict, or throttling, which are worth a
// retry).
func conditionFailed(c *types.TransactionCanceledException) bool {
	for _, r := range c.CancellationReasons {
		if aws.ToString(r.Code) == "ConditionalCheckFailed" {
			return true
		}
	}
	return false
}

// setExpiry sets an entry's TTL, or removes it for the zero time.
func setExpiry(e *expr, at time.Time) {
	if at.IsZero() {
		e.Remove(LedgerExpiresAtAttr)
		return
	}
	e.Set(LedgerExpiresAtAttr, num64(unixSeconds(at)))
}

// ledgerNames adds the names the conditions of Begin and Tombstone use to
// those of their update.
func ledgerNames(names map[string]string) map[string]string {
	// The placeholders are expr's own ("#" and the name), so a name the
	// update names too has one placeholder.
	for _, n := range []string{LedgerKeyAttr, LedgerExpiresAtAttr, ledgerState, ledgerLease} {
		ph := "#" + n
		names[ph] = n
	}
	return names
}

// ledgerValues adds the values the conditions of Begin and Tombstone use:
// now, in the TTL's seconds and the lease's milliseconds, and the states
// named, as ":<state>" (DynamoDB refuses a value no expression uses).
func ledgerValues(values map[string]types.AttributeValue, now time.Time, states ...LedgerState) map[string]types.AttributeValue {
	values[":nowSec"] = num64(now.Unix())
	values[":nowMs"] = millis(now)
	for _, st := range states {
		values[":"+string(st)] = str(string(st))
	}
	return values
}

// decodeLedger reads a ledger item.
func decodeLedger(item map[string]types.AttributeValue) (LedgerEntry, error) {
	var e LedgerEntry
	s := func(name string) string {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	n := func(name string) (int64, error) {
		v, ok := item[name].(*types.AttributeValueMemberN)
		if !ok {
			return 0, nil
		}
		return strconv.ParseInt(v.Value, 10, 64)
	}
	e.Key, e.State, e.Owner = s(LedgerKeyAttr), LedgerState(s(ledgerState)), s(ledgerOwner)
	if e.Key == "" {
		return LedgerEntry{}, errors.New("no key")
	}
	switch e.State {
	case LedgerRunning, LedgerDone, LedgerRejected, LedgerUndone:
	default:
		return LedgerEntry{}, fmt.Errorf("unknown state %q", e.State)
	}
	lease, err := n(ledgerLease)
	if err != nil {
		return LedgerEntry{}, fmt.Errorf("%s: %w", ledgerLease, err)
	}
	exp, err := n(LedgerExpiresAtAttr)
	if err != nil {
		return LedgerEntry{}, fmt.Errorf("%s: %w", LedgerExpiresAtAttr, err)
	}
	e.LeaseUntil, e.ExpiresAt = fromMilli(lease), fromSeconds(exp)
	if out := s(ledgerOutput); out != "" {
		e.Output = json.RawMessage(out)
	}
	if code := s(ledgerFaultCode); code != "" {
		u, _ := item[ledgerUncertain].(*types.AttributeValueMemberBOOL)
		e.Fault = &message.Fault{Code: code, Message: s(ledgerFaultMessage), Uncertain: u != nil && u.Value}
	}
	return e, nil
}
