package step_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/sasflow/sas/shared/message"
	"github.com/sasflow/sas/shared/step"
)

// shipments is a stand-in for the store a step writes to: an object per
// name, so writing one twice under the same name is harmless.
type shipments struct {
	mu      sync.Mutex
	objects map[string]string
}

func (s *shipments) put(name, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[name] = body
}

func (s *shipments) remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, name) // removing what is not there is no error
}

// shipOrder ships an order: it writes the shipment under a name derived
// from the order, so a second run writes the same object again.
type shipOrder struct{ store *shipments }

type order struct {
	OrderID string `json:"orderId"`
}

type shipment struct {
	Key      string `json:"key"`
	Tracking string `json:"tracking"`
}

func (s shipOrder) Do(_ context.Context, req step.Request) (json.RawMessage, error) {
	var o order
	if err := req.DecodeInput(&o); err != nil {
		return nil, err // permanent: every try has the same input
	}
	key := "shipments/" + o.OrderID + ".json"
	s.store.put(key, req.IdempotencyKey)
	return step.Output(shipment{Key: key, Tracking: "T-" + req.IdempotencyKey})
}

// Undo deletes the shipment. It succeeds when there is nothing to delete:
// an undo may come for a step that never ran.
func (s shipOrder) Undo(_ context.Context, req step.Request) (json.RawMessage, error) {
	var sh shipment
	if out := req.Previous[req.Step]; len(out) > 0 {
		if err := json.Unmarshal(out, &sh); err != nil {
			return nil, step.Permanent(fmt.Errorf("read the shipment to undo: %w", err))
		}
	} else {
		sh.Key = "shipments/" + req.OrderID + ".json"
	}
	s.store.remove(sh.Key)
	return step.Output(map[string]bool{"deleted": true})
}

// A step's Do gets the order's input and answers its output.
func ExampleStep() {
	store := &shipments{objects: map[string]string{}}
	var s step.Step = shipOrder{store: store}
	req := step.Request{OrderID: "o-1", Step: "ship-order", IdempotencyKey: "o-1/ship-order",
		Input: json.RawMessage(`{"orderId":"o-1"}`)}
	out, err := s.Do(context.Background(), req)
	fmt.Println(string(out), err)
	// The same try again writes the same object: nothing new.
	_, _ = s.Do(context.Background(), req)
	fmt.Println(len(store.objects), "object")
	// Output:
	// {"key":"shipments/o-1.json","tracking":"T-o-1/ship-order"} <nil>
	// 1 object
}

// An undo gets its own key, the key of the effect it undoes, and the
// step's output among the previous ones.
func ExampleUndoer() {
	store := &shipments{objects: map[string]string{"shipments/o-1.json": "o-1/ship-order"}}
	var u step.Undoer = shipOrder{store: store}
	req := step.Request{OrderID: "o-1", Step: "ship-order", Action: message.Compensate,
		IdempotencyKey: "o-1/ship-order/undo", EffectKey: "o-1/ship-order",
		Previous: map[string]json.RawMessage{"ship-order": json.RawMessage(`{"key":"shipments/o-1.json"}`)}}
	out, err := u.Undo(context.Background(), req)
	fmt.Println(string(out), err, len(store.objects))
	// Undoing again, or what was never done, succeeds all the same.
	out, err = u.Undo(context.Background(), req)
	fmt.Println(string(out), err)
	// Output:
	// {"deleted":true} <nil> 0
	// {"deleted":true} <nil>
}

// Errors are transient unless marked: a permanent one fails the step, a
// Reject names its fault, an uncertain one says the effect may be applied.
func ExampleReject() {
	for _, err := range []error{
		errors.New("carrier API: 503"),
		step.Reject("no_address", "the order has no shipping address"),
		step.Permanent(errors.New("label template missing")),
		step.Uncertain(errors.New("carrier API: timeout after the request was sent")),
	} {
		fmt.Printf("permanent=%v uncertain=%v: %v\n", step.IsPermanent(err), step.IsUncertain(err), err)
	}
	// Output:
	// permanent=false uncertain=false: carrier API: 503
	// permanent=true uncertain=false: permanent: no_address: the order has no shipping address
	// permanent=true uncertain=false: permanent: label template missing
	// permanent=false uncertain=true: carrier API: timeout after the request was sent (the remote may have applied it)
}

// DecodeInput is strict: a member the step's type does not know is a
// permanent refusal, not a silent loss.
func ExampleRequest_DecodeInput() {
	var o order
	ok := step.Request{Step: "ship-order", Input: json.RawMessage(`{"orderId":"o-1"}`)}.DecodeInput(&o)
	fmt.Println(o.OrderID, ok)
	err := step.Request{Step: "ship-order", Input: json.RawMessage(`{"orderId":"o-2","giftWrap":true}`)}.DecodeInput(&o)
	fmt.Println(step.IsPermanent(err))
	// Output:
	// o-1 <nil>
	// true
}
